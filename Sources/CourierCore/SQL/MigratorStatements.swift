/// The migrator's statements.
enum MigratorStatements {
    /// Session advisory lock: a second `courier migrate` waits here until the first is done.
    static let lock = "SELECT pg_advisory_lock($1::bigint)"

    /// Releases the lock taken by `lock`.
    static let unlock = "SELECT pg_advisory_unlock($1::bigint)"

    /// The bookkeeping table must exist before the first file runs; 0001 repeats it with
    /// IF NOT EXISTS so the file also stands alone under psql.
    static let bootstrap = """
        CREATE SCHEMA IF NOT EXISTS courier;
        CREATE TABLE IF NOT EXISTS courier.schema_migrations (
            version    integer PRIMARY KEY,
            name       text NOT NULL,
            checksum   text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        """

    /// Versions already applied with their file names and checksums.
    static let listApplied = "SELECT version, name, checksum FROM courier.schema_migrations ORDER BY version"

    /// SHA-256 of a file's text, computed by the server so the core needs no crypto library.
    static let checksum = "SELECT encode(sha256(convert_to($1::text, 'UTF8')), 'hex')"

    /// Records an applied file, in the same transaction as the file itself.
    static let record = "INSERT INTO courier.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"

    /// Whether the bookkeeping table exists (false: the database was never migrated).
    static let hasMigrationsTable = "SELECT to_regclass('courier.schema_migrations') IS NOT NULL"

    /// The highest applied version (NULL when the table is empty).
    static let appliedVersion = "SELECT max(version) FROM courier.schema_migrations"
}

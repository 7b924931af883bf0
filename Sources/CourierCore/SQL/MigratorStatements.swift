/// The migrator's statements.
enum MigratorStatements {
    /// Session advisory lock on a key: a second `courier migrate` waits here until the first is
    /// done.
    static let lock = Statement<Int64>("SELECT pg_advisory_lock($1::bigint)") { [$0] }

    /// Releases the lock taken by `lock`.
    static let unlock = Statement<Int64>("SELECT pg_advisory_unlock($1::bigint)") { [$0] }

    /// The bookkeeping table must exist before the first file runs; 0001 repeats it with
    /// IF NOT EXISTS so the file also stands alone under psql.
    static let bootstrap = Statement<Void>("""
        CREATE SCHEMA IF NOT EXISTS courier;
        CREATE TABLE IF NOT EXISTS courier.schema_migrations (
            version    integer PRIMARY KEY,
            name       text NOT NULL,
            checksum   text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
        """)

    /// Versions already applied with their file names and checksums.
    static let listApplied = Statement<Void>(
        "SELECT version, name, checksum FROM courier.schema_migrations ORDER BY version")

    /// SHA-256 of a file's text, computed by the server so the core needs no crypto library.
    static let checksum = Statement<String>("SELECT encode(sha256(convert_to($1::text, 'UTF8')), 'hex')") { [$0] }

    /// Records an applied file with its checksum, in the same transaction as the file itself.
    static let record = Statement<(migration: Migration, checksum: String)>(
        "INSERT INTO courier.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"
    ) { [$0.migration.version, $0.migration.fileName, $0.checksum] }

    /// Whether the bookkeeping table exists (false: the database was never migrated).
    static let hasMigrationsTable = Statement<Void>("SELECT to_regclass('courier.schema_migrations') IS NOT NULL")

    /// The highest applied version (NULL when the table is empty).
    static let appliedVersion = Statement<Void>("SELECT max(version) FROM courier.schema_migrations")
}

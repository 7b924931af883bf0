/// The files of `Migrations/`, compiled into the binary so `courier migrate` works from any
/// directory. A new file must be added here and as `.embedInCode` in Package.swift; a test
/// compares this list with the folder.
public enum EmbeddedMigrations {
    /// Every migration, in version order.
    public static let all: [Migration] = [
        Migration(fileName: "0001_init.sql", bytes: PackageResources._001_init_sql),
    ]
}

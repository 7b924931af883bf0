import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory for one `courier bench` run's throwaway cluster (its `TMPDIR`), open to
/// everyone: as root the cluster belongs to `postgres`, which must reach its directory.
func benchTemporaryDirectory() throws -> URL {
    let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
    chmod(temporary.path, 0o755)
    return temporary
}

import Foundation

/// A file in the temporary directory (`TMPDIR`, else /tmp) that a command owns for as long as
/// it runs: the demo's console password, the benchmark's worker log and secrets key.
///
/// It is removed by `remove()` (or when the value goes away), and by `SignalCleanup` when the
/// command is interrupted, so neither a normal exit, nor an error, nor Ctrl-C leaves it behind.
package final class TemporaryFile {
    /// Its path: the temporary directory, then `name`.
    package let path: String
    private var cleanupKey: Int?

    /// Reserves `NSTemporaryDirectory() + name`; the file itself is made by whoever writes it.
    ///
    /// - Parameter name: a name the command makes unique, e.g. with its process id.
    package init(_ name: String) {
        let path = NSTemporaryDirectory() + name
        self.path = path
        cleanupKey = SignalCleanup.shared.add { try? FileManager.default.removeItem(atPath: path) }
    }

    deinit { remove() }

    /// Deletes the file if it exists. Safe to call twice.
    package func remove() {
        guard let cleanupKey else { return }
        self.cleanupKey = nil
        SignalCleanup.shared.remove(cleanupKey)
        try? FileManager.default.removeItem(atPath: path)
    }
}

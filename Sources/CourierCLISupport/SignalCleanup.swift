import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Undoes what a command started (a throwaway cluster, a worker process) when the command is
/// interrupted with Ctrl-C or stopped with SIGTERM, so `courier demo` and `courier bench` never
/// leave a PostgreSQL server or a worker behind. Normal exits clean up through `defer`.
package final class SignalCleanup: @unchecked Sendable {
    package static let shared = SignalCleanup()

    private let lock = NSLock()
    private var actions: [Int: () -> Void] = [:]
    private var nextKey = 0
    private var sources: [any DispatchSourceSignal] = []
    private var cleaning = false

    private init() {}

    /// Runs `action` if the process is interrupted before `remove` is called with the key.
    package func add(_ action: @escaping () -> Void) -> Int {
        lock.withLock {
            installIfNeeded()
            nextKey += 1
            actions[nextKey] = action
            return nextKey
        }
    }

    /// Forgets an action (its owner cleaned up normally).
    package func remove(_ key: Int) {
        _ = lock.withLock { actions.removeValue(forKey: key) }
    }

    /// Whether an interruption is being cleaned up: the command's own failures that follow
    /// (a connection closed under it) are not worth reporting.
    package var isCleaning: Bool { lock.withLock { cleaning } }

    /// Called before the process exits normally: while a cleanup runs, waits for it to end
    /// the process itself, so the exit cannot cut it short.
    package func waitIfCleaning() {
        while isCleaning { sleep(1) }
    }

    private func installIfNeeded() {
        guard sources.isEmpty else { return }
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [weak self] in self?.run(signalNumber) }
            source.resume()
            sources.append(source)
        }
    }

    private func run(_ signalNumber: Int32) {
        let pending = lock.withLock { () -> [() -> Void] in
            cleaning = true
            defer { actions.removeAll() }
            return actions.sorted { $0.key > $1.key }.map(\.value)
        }
        FileHandle.standardError.write(Data("\ninterrupted: cleaning up\n".utf8))
        pending.forEach { $0() }
        exit(128 + signalNumber)
    }
}

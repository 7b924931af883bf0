import Dispatch
import Foundation

/// Cuts off requests whose deadline passed: one Dispatch timer for a whole transport checks
/// every registered request a few times a second and calls the cancel of each one that is due.
///
/// Registering is a dictionary insert under a lock. A timer per request (a scheduled task on
/// an event loop, or a sleeping child task) costs a cross-thread wake-up or a task each time,
/// which showed as a third of a busy worker's CPU; a deadline needs no sub-second precision.
final class DeadlineWatch: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [Int: (deadline: UInt64, cancel: @Sendable () -> Void)] = [:]
    private var nextToken = 0
    private let timer: any DispatchSourceTimer
    /// How often due requests are looked for (nanoseconds).
    let resolution: UInt64

    /// Creates a watch that looks for due requests every `resolution` seconds (default 0.1).
    init(resolution: Double = 0.1) {
        self.resolution = UInt64(resolution * 1e9)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "courier.request-deadlines"))
        timer.schedule(deadline: .now() + resolution, repeating: resolution, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Calls `cancel` once `seconds` have passed, unless `remove` is called first.
    func add(after seconds: Double, cancel: @escaping @Sendable () -> Void) -> Int {
        let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, seconds) * 1e9)
        return lock.withLock {
            nextToken &+= 1
            entries[nextToken] = (deadline, cancel)
            return nextToken
        }
    }

    /// Forgets a request that finished.
    func remove(_ token: Int) {
        lock.withLock { _ = entries.removeValue(forKey: token) }
    }

    private func fire() {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = lock.withLock { () -> [@Sendable () -> Void] in
            guard !entries.isEmpty else { return [] }
            var out: [@Sendable () -> Void] = []
            for (token, entry) in entries where entry.deadline <= now {
                out.append(entry.cancel)
                entries[token] = nil
            }
            return out
        }
        due.forEach { $0() }
    }
}

extension DeadlineWatch {
    /// Runs `operation` and cancels it when `timeout` has passed, throwing a
    /// ``TransportError/Kind/readTimeout``: one deadline over connecting, TLS, the response head
    /// and the body excerpt (AsyncHTTPClient's own deadline ends at the response head, and its
    /// read timeout is reset by every byte, so neither stops a trickling body). The cut-off
    /// comes within the watch's resolution after the deadline.
    func run<T: Sendable>(
        within timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let work = Task { try await operation() }
        let expired = ExpiryFlag()
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let token = add(after: seconds) {
            expired.set()
            work.cancel()
        }
        defer { remove(token) }
        do {
            return try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
        } catch {
            guard expired.isSet else { throw error }
            throw TransportError(
                kind: .readTimeout,
                message: "no complete response within \(timeout) (connect, TLS, head and body excerpt)")
        }
    }

    /// Set once by the deadline watch, read by the request that it cut off.
    private final class ExpiryFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }
}

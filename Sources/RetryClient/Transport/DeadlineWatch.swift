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

/// What a request's deadline does when it passes: marks the request expired and runs the stop
/// of the step it is waiting in (ending a wait for a connection, closing the connection of an
/// exchange), so the request needs no task of its own that the deadline could cancel.
final class RequestCutoff: @unchecked Sendable {
    private let lock = NSLock()
    private var expired = false
    private var stop: (@Sendable () -> Void)?

    /// Whether the deadline has passed.
    var isExpired: Bool { lock.withLock { expired } }

    /// Runs `body`; if the deadline passes meanwhile (or has already), runs `stop` once.
    func during<T>(_ stop: @escaping @Sendable () -> Void, _ body: () async throws -> T) async throws -> T {
        let late = lock.withLock { () -> Bool in
            if expired { return true }
            self.stop = stop
            return false
        }
        if late { stop() }
        defer { lock.withLock { self.stop = nil } }
        return try await body()
    }

    /// The deadline passed.
    func fire() {
        let stop = lock.withLock { () -> (@Sendable () -> Void)? in
            expired = true
            defer { self.stop = nil }
            return self.stop
        }
        stop?()
    }
}

extension DeadlineWatch {
    /// Runs `operation` in the calling task, one deadline of `timeout` over it: when it passes,
    /// `operation`'s ``RequestCutoff`` stops the step it is in, and the error that step ends
    /// with becomes a ``TransportError/Kind/readTimeout``. An operation must check
    /// ``RequestCutoff/isExpired`` before each step and wrap each wait in
    /// ``RequestCutoff/during(_:_:)``. Unlike ``run(within:_:)`` it starts no task: a delivery
    /// stays on one task from claim to outcome.
    func cutOff<T: Sendable>(
        within timeout: Duration, _ operation: (RequestCutoff) async throws -> T
    ) async throws -> T {
        let cutoff = RequestCutoff()
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let token = add(after: seconds) { cutoff.fire() }
        defer { remove(token) }
        do {
            return try await operation(cutoff)
        } catch {
            guard cutoff.isExpired else { throw error }
            throw TransportError(
                kind: .readTimeout,
                message: "no complete response within \(timeout) (connect, TLS, head and body excerpt)")
        }
    }

    /// Runs `operation` and cancels it when `timeout` has passed, throwing a
    /// ``TransportError/Kind/readTimeout``: one deadline over connecting, TLS, the response head
    /// and the body excerpt (AsyncHTTPClient's own deadline ends at the response head, and its
    /// read timeout is reset by every byte, so neither stops a trickling body). The cut-off
    /// comes within the watch's resolution after the deadline.
    func run<T: Sendable>(
        within timeout: Duration, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        // For an operation that only stops when its task is cancelled: the task is the step.
        try await cutOff(within: timeout) { cutoff in
            let work = Task { try await operation() }
            return try await cutoff.during({ work.cancel() }) {
                try await withTaskCancellationHandler {
                    try await work.value
                } onCancel: {
                    work.cancel()
                }
            }
        }
    }
}

import Dispatch
import Foundation
import NIOCore

/// A connection of the pool: a channel whose pipeline ends in an ``HTTPExchangeHandler``.
final class PooledConnection: Sendable {
    let id: Int
    let channel: any Channel
    /// The pipeline's last handler, used on the channel's event loop only.
    private let handler: NIOLoopBound<HTTPExchangeHandler>

    init(id: Int, channel: any Channel, handler: NIOLoopBound<HTTPExchangeHandler>) {
        self.id = id
        self.channel = channel
        self.handler = handler
    }

    /// Hands `exchange` to the connection's handler on its event loop, which writes the request
    /// and replies with the answer, or at once with a failure when the connection is already
    /// closed.
    func start(_ exchange: HTTPExchange) {
        let loop = channel.eventLoop
        if loop.inEventLoop {
            handler.value.begin(exchange)
        } else {
            let handler = self.handler
            loop.execute { handler.value.begin(exchange) }
        }
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// The shell around ``ConnectionPoolState``: it keeps the channels, opens connections with
/// `connect`, parks waiting requests, closes what the state says to close, and closes idle
/// connections past their timeout from one Dispatch timer.
final class ConnectionPool: @unchecked Sendable {
    /// A connection handed out for one request; give it back with ``release(_:reusable:)``.
    struct Lease {
        let connection: PooledConnection
        /// Whether it carried a request before (and so may have been closed by its server).
        let reused: Bool
    }

    private typealias Continuation = CheckedContinuation<ConnectionPoolState.Grant, any Error>
    typealias Connect = @Sendable (_ key: PoolKey, _ id: Int, _ timeout: Duration) async throws -> PooledConnection

    private let lock = NSLock()
    // Guarded by `lock`.
    private var state: ConnectionPoolState
    private var connections: [Int: PooledConnection] = [:]
    private var waiters: [Int: Continuation] = [:]
    private var pendingGrants: [Int: ConnectionPoolState.Grant] = [:]
    private var cancelledWaiters: Set<Int> = []
    private var nextWaiter = 0

    private let connect: Connect
    private let timer: any DispatchSourceTimer

    init(limits: ConnectionPoolState.Limits, connect: @escaping Connect) {
        state = ConnectionPoolState(limits: limits)
        self.connect = connect
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "courier.connection-pool"))
        timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(200))
        timer.setEventHandler { [weak self] in self?.expireIdle() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Connections open or being opened, and the idle ones among them (for tests and metrics).
    var counts: (open: Int, idle: Int, waiting: Int) {
        lock.withLock { (state.openCount, state.idleCount, state.waitingCount) }
    }

    /// Idle connections closed to make room under the budget, since the pool began.
    var evictions: Int { lock.withLock { state.evictions } }

    /// A connection for `key`: an idle one unless `allowReuse` is false, else a new one
    /// (opened within `connectTimeout`), waiting while the budget is taken by busy connections.
    /// Cancelling the calling task ends the wait.
    /// A passing `cutoff` ends the wait too (a connection being opened is bounded by
    /// `connectTimeout`).
    func lease(
        _ key: PoolKey, allowReuse: Bool, connectTimeout: Duration, cutoff: RequestCutoff? = nil
    ) async throws -> Lease {
        let grant = try await grant(for: key, allowReuse: allowReuse, cutoff: cutoff)
        switch grant {
        case .reuse(let id):
            guard let connection = lock.withLock({ connections[id] }) else {
                // Closed between the grant and now: its place is free again; ask afresh.
                return try await lease(key, allowReuse: allowReuse, connectTimeout: connectTimeout, cutoff: cutoff)
            }
            return Lease(connection: connection, reused: true)
        case .create(let id):
            do {
                try Task.checkCancellation()
                let connection = try await connect(key, id, connectTimeout)
                let kept: Bool = lock.withLock {
                    guard state.key(of: id) != nil else { return false }
                    connections[id] = connection
                    return true
                }
                guard kept else {
                    // The pool was shut down while connecting.
                    connection.close()
                    throw TransportError(kind: .other, message: "the transport is shut down")
                }
                connection.channel.closeFuture.whenComplete { [weak self] _ in self?.closed(id) }
                return Lease(connection: connection, reused: false)
            } catch {
                closed(id)
                throw error
            }
        }
    }

    /// Gives a connection back: kept for reuse when `reusable`, else closed.
    func release(_ lease: Lease, reusable: Bool) {
        let id = lease.connection.id
        apply { state in state.release(id, reusable: reusable && lease.connection.channel.isActive, now: Self.now()) }
    }

    /// Closes every idle connection and fails every waiting request; busy connections close
    /// when released. Later leases fail.
    func shutdown() -> [any Channel] {
        let (channels, failed) = lock.withLock { () -> ([any Channel], [Continuation]) in
            let (close, waiting) = state.shutdown()
            let channels = close.compactMap { connections.removeValue(forKey: $0)?.channel }
            let failed = waiting.compactMap { waiter -> Continuation? in
                if let continuation = waiters.removeValue(forKey: waiter) { return continuation }
                cancelledWaiters.insert(waiter)
                return nil
            }
            return (channels, failed)
        }
        timer.cancel()
        for waiter in failed { waiter.resume(throwing: TransportError(kind: .other, message: "the transport is shut down")) }
        for channel in channels { channel.close(promise: nil) }
        return channels
    }

    // MARK: private

    private func grant(
        for key: PoolKey, allowReuse: Bool, cutoff: RequestCutoff?
    ) async throws -> ConnectionPoolState.Grant {
        let (waiter, acquired, closing) = try lock.withLock {
            () throws -> (Int, ConnectionPoolState.Acquired, [PooledConnection]) in
            guard !state.isShutDown else { throw TransportError(kind: .other, message: "the transport is shut down") }
            nextWaiter += 1
            let acquired = state.acquire(key, waiter: nextWaiter, allowReuse: allowReuse, now: Self.now())
            return (nextWaiter, acquired, acquired.close.compactMap { connections.removeValue(forKey: $0) })
        }
        closing.forEach { $0.close() }
        if let grant = acquired.grant { return grant }
        let wait = { [self] () async throws -> ConnectionPoolState.Grant in
            try await withCheckedThrowingContinuation { continuation in
                let early: Result<ConnectionPoolState.Grant, any Error>? = lock.withLock {
                    if cancelledWaiters.remove(waiter) != nil { return .failure(CancellationError()) }
                    if let grant = pendingGrants.removeValue(forKey: waiter) { return .success(grant) }
                    waiters[waiter] = continuation
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        }
        return try await withTaskCancellationHandler {
            guard let cutoff else { return try await wait() }
            return try await cutoff.during({ [weak self] in self?.giveUp(waiter) }, wait)
        } onCancel: {
            giveUp(waiter)
        }
    }

    /// Ends the wait of `waiter` (its deadline passed, or its task was cancelled): it throws
    /// `CancellationError`, and a grant made for it goes to the next. Nothing happens once the
    /// waiter was granted and resumed, so a second call (deadline and cancellation both) is
    /// harmless.
    private func giveUp(_ waiter: Int) {
        var continuation: Continuation?
        apply { state in
            if let registered = waiters.removeValue(forKey: waiter) {
                continuation = registered
            } else if let grant = pendingGrants.removeValue(forKey: waiter) {
                // Granted before it parked: it finds this mark when it does.
                cancelledWaiters.insert(waiter)
                return Self.giveBack(grant, state: &state)
            } else if state.isWaiting(waiter) {
                // Not parked yet and not granted.
                cancelledWaiters.insert(waiter)
            }
            return state.cancel(waiter: waiter, now: Self.now())
        }
        continuation?.resume(throwing: CancellationError())
    }

    private func closed(_ id: Int) {
        apply { state in state.closed(id, now: Self.now()) }
    }

    private func expireIdle() {
        apply { state in state.expire(now: Self.now()) }
    }

    /// Runs a change of the state under the lock, then closes and grants what it decided. A
    /// grant for a waiter not yet parked is kept for it; one for a waiter that gave up is given
    /// back, which may grant another.
    private func apply(_ change: (inout ConnectionPoolState) -> ConnectionPoolState.Changes) {
        let (closing, granted) = lock.withLock { () -> ([PooledConnection], [(Continuation, ConnectionPoolState.Grant)]) in
            let first = change(&state)
            // The common case, a connection back to idle with nobody waiting: nothing to hand
            // out or close, and no arrays made for it.
            if first.close.isEmpty && first.granted.isEmpty { return ([], []) }
            var work = [first]
            var closing: [PooledConnection] = []
            var granted: [(Continuation, ConnectionPoolState.Grant)] = []
            while let changes = work.popLast() {
                closing += changes.close.compactMap { connections.removeValue(forKey: $0) }
                for (waiter, grant) in changes.granted {
                    if let continuation = waiters.removeValue(forKey: waiter) {
                        granted.append((continuation, grant))
                    } else if cancelledWaiters.contains(waiter) {
                        work.append(Self.giveBack(grant, state: &state))
                    } else {
                        pendingGrants[waiter] = grant
                    }
                }
            }
            return (closing, granted)
        }
        closing.forEach { $0.close() }
        for (continuation, grant) in granted { continuation.resume(returning: grant) }
    }

    private static func giveBack(
        _ grant: ConnectionPoolState.Grant, state: inout ConnectionPoolState
    ) -> ConnectionPoolState.Changes {
        switch grant {
        case .reuse(let id): return state.release(id, reusable: true, now: now())
        case .create(let id): return state.closed(id, now: now())
        }
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}

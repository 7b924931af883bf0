import Foundation

/// The rule of the body budget: bytes of request bodies one worker process holds at once.
///
/// Requests are served first come, first served: a request waits while an earlier one waits,
/// so a large body is not passed over forever by small ones. A request larger than the whole
/// budget is granted when nothing else is held, so no body waits for ever. Pure state, driven
/// by ``BodyBudget``.
struct BodyBudgetState {
    /// The bytes that may be held at once.
    let capacity: Int
    /// The bytes held now.
    private(set) var used = 0
    /// Requests not yet granted, oldest first.
    private(set) var waiting: [(id: Int, bytes: Int)] = []

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Asks for `bytes` under `id`: true when granted at once, false when it waits.
    mutating func request(id: Int, bytes: Int) -> Bool {
        if waiting.isEmpty, fits(bytes) {
            used += bytes
            return true
        }
        waiting.append((id, bytes))
        return false
    }

    /// Gives back `bytes` a granted request held; returns the waiting requests granted now.
    mutating func release(bytes: Int) -> [Int] {
        used = max(0, used - bytes)
        return grantWaiting()
    }

    /// Withdraws a waiting request (its task was cancelled); returns the requests this lets
    /// through, or nil when `id` was not waiting.
    mutating func withdraw(id: Int) -> [Int]? {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return nil }
        waiting.remove(at: index)
        return grantWaiting()
    }

    private func fits(_ bytes: Int) -> Bool { used == 0 || used + bytes <= capacity }

    private mutating func grantWaiting() -> [Int] {
        var granted: [Int] = []
        while let first = waiting.first, fits(first.bytes) {
            waiting.removeFirst()
            used += first.bytes
            granted.append(first.id)
        }
        return granted
    }
}

/// Bytes of request bodies in flight in a worker process: a delivery whose body the claim left
/// in PostgreSQL waits here before the body is read, and gives the bytes back when the
/// delivery ends. Thread-safe; a waiting task that is cancelled stops waiting.
final class BodyBudget: @unchecked Sendable {
    private let lock = NSLock()
    private var state: BodyBudgetState
    private var nextID = 0
    private var continuations: [Int: CheckedContinuation<Void, any Error>] = [:]
    /// Requests whose task was cancelled before they reached the state.
    private var cancelledEarly: Set<Int> = []
    /// Requests that reached the state and have not returned yet.
    private var entered: Set<Int> = []

    /// A budget of `bytes`.
    init(bytes: Int) { state = BodyBudgetState(capacity: bytes) }

    /// The bytes held now.
    var used: Int { lock.withLock { state.used } }

    /// Waits until `bytes` fit, then holds them; give them back with ``release(_:)``.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while it waits (nothing held).
    func acquire(_ bytes: Int) async throws {
        let id = lock.withLock { () -> Int in
            nextID += 1
            return nextID
        }
        defer {
            lock.withLock {
                entered.remove(id)
                cancelledEarly.remove(id)
            }
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted = lock.withLock { () -> Bool? in
                    if cancelledEarly.contains(id) { return nil }
                    entered.insert(id)
                    if state.request(id: id, bytes: bytes) { return true }
                    continuations[id] = continuation
                    return false
                }
                switch granted {
                case nil: continuation.resume(throwing: CancellationError())
                case true?: continuation.resume()
                case false?: break
                }
            }
        } onCancel: {
            let (cancelled, granted) = lock.withLock {
                () -> (CheckedContinuation<Void, any Error>?, [CheckedContinuation<Void, any Error>]) in
                guard entered.contains(id) else {
                    cancelledEarly.insert(id)
                    return (nil, [])
                }
                guard let waiting = continuations.removeValue(forKey: id),
                    let next = state.withdraw(id: id)
                else { return (nil, []) }
                return (waiting, next.compactMap { continuations.removeValue(forKey: $0) })
            }
            cancelled?.resume(throwing: CancellationError())
            granted.forEach { $0.resume() }
        }
    }

    /// Gives back `bytes` taken with ``acquire(_:)``.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let granted = lock.withLock { state.release(bytes: bytes).compactMap { continuations.removeValue(forKey: $0) } }
        granted.forEach { $0.resume() }
    }
}

import CourierCore
import Foundation
import ServiceLifecycle

/// The live updates of the queue page: ONE reader per process reads the queue counts every
/// `interval` while at least one browser listens, and hands the same snapshot to every open
/// `/events` stream. A hundred open tabs cost the database what one does; none costs nothing.
final class LiveFeed: Service, @unchecked Sendable {
    private let database: WebDatabase
    private let interval: Duration
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<String>.Continuation] = [:]
    private var reader: Task<Void, Never>?
    private var latest: String?
    private var stopped = false
    /// Database reads made so far (what the tests count).
    let reads = LockedCounter()

    init(database: WebDatabase, interval: Duration) {
        self.database = database
        self.interval = interval
    }

    /// A stream of server-sent events (`event: queues` with a JSON snapshot), starting with
    /// the latest snapshot when there is one. It ends when the feed stops; the caller ends its
    /// subscription by dropping the stream.
    func subscribe() -> AsyncStream<String> {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(2))
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        lock.withLock {
            if stopped {
                continuation.finish()
                return
            }
            subscribers[id] = continuation
            if let latest { continuation.yield(latest) }
            if reader == nil {
                reader = Task { [weak self] in await self?.readLoop() }
            }
        }
        return stream
    }

    /// Subscribers now listening.
    var subscriberCount: Int { lock.withLock { subscribers.count } }

    private func unsubscribe(_ id: UUID) {
        let task: Task<Void, Never>? = lock.withLock {
            subscribers[id] = nil
            guard subscribers.isEmpty, let reader else { return nil }
            self.reader = nil
            latest = nil
            return reader
        }
        task?.cancel()
    }

    private func readLoop() async {
        while !Task.isCancelled {
            let event: String
            do {
                let queues = try await database.run { try WebStore(connection: $0).queueOverview() }
                event = Self.event(queues)
            } catch {
                // The page keeps its last numbers; the next read may succeed.
                event = "event: problem\ndata: the database did not answer\n\n"
            }
            _ = reads.increment()
            lock.withLock {
                guard !Task.isCancelled else { return }
                latest = event
                for continuation in subscribers.values { continuation.yield(event) }
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// One `queues` event: per queue its counts, paused flag and lag, as JSON.
    static func event(_ queues: [QueueOverview]) -> String {
        let items: [[String: Any]] = queues.map { queue in
            [
                "name": queue.name, "paused": queue.paused,
                "pending": queue.jobs[.pending] ?? 0, "running": queue.jobs[.running] ?? 0,
                "retrying": queue.jobs[.retrying] ?? 0, "dead": queue.jobs[.dead] ?? 0,
                "succeeded": queue.jobs[.succeeded] ?? 0, "lag": PageFormat.age(queue.lag.seconds),
            ]
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["queues": items], options: [.sortedKeys])) ?? Data()
        return "event: queues\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
    }

    /// Ends every stream and the reader.
    func stop() {
        let (continuations, task): ([AsyncStream<String>.Continuation], Task<Void, Never>?) = lock.withLock {
            stopped = true
            defer {
                subscribers.removeAll()
                reader = nil
            }
            return (Array(subscribers.values), reader)
        }
        task?.cancel()
        continuations.forEach { $0.finish() }
    }

    /// As a service: waits for the graceful shutdown, then ends the streams so the server's
    /// shutdown does not wait on them.
    func run() async throws {
        try? await gracefulShutdown()
        stop()
    }
}

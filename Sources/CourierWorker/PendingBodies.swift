import CourierCore
import Dispatch
import Foundation
import Postgres

/// Brings the bodies a claim left in PostgreSQL (those larger than
/// `Defaults.inlineBodyBytes`) to their deliveries, within the process's body budget.
///
/// A claim of 100 jobs with 1 MiB bodies would otherwise hold 100 MiB at once, and twice that
/// as the text PostgreSQL sends. Here a delivery first waits for its body's bytes in the
/// ``BodyBudget``, then reads the body alone on this process's body connection (its own serial
/// queue, opened on first use: libpq calls block and never run inside a task), and gives the
/// bytes back when the delivery ends.
final class PendingBodies: @unchecked Sendable {
    private let budget: BodyBudget
    private let metrics: WorkerMetrics
    private let connect: @Sendable () throws -> PostgresConnection
    private let workerID: String
    private let queue = DispatchQueue(label: "courier.bodies")
    // Only touched on `queue`.
    private var connection: PostgresConnection?

    init(
        budgetBytes: Int, workerID: String, metrics: WorkerMetrics,
        connect: @escaping @Sendable () throws -> PostgresConnection
    ) {
        budget = BodyBudget(bytes: budgetBytes)
        self.metrics = metrics
        self.workerID = workerID
        self.connect = connect
    }

    /// What ``prepare(_:)`` gives a delivery: the job with its body and the budget bytes it
    /// holds, or the outcome to record instead of sending.
    enum Prepared {
        case ready(ClaimedJob, holding: Int)
        case failed(Delivery)
    }

    /// Waits for room in the budget and reads `job`'s body. The caller gives the bytes held
    /// back with ``release(_:)`` when the delivery ends.
    func prepare(_ job: ClaimedJob) async -> Prepared {
        let bytes = job.bodySize
        metrics.bodyWaiting.increment()
        do {
            try await budget.acquire(bytes)
            metrics.bodyWaiting.decrement()
            metrics.bodyBytesHeld.increment(by: Double(bytes))
        } catch {
            metrics.bodyWaiting.decrement()
            return .failed(
                .failure(.interrupted, error: "interrupted: the worker stopped before the request body was read"))
        }
        do {
            guard let body = try await load(job) else {
                release(bytes)
                return .failed(
                    .failure(
                        .interrupted,
                        error: "interrupted: the job was no longer this worker's to deliver when its body was read"))
            }
            var ready = job
            ready.body = body
            return .ready(ready, holding: bytes)
        } catch {
            release(bytes)
            return .failed(
                .failure(
                    .interrupted,
                    error: "interrupted: could not read the request body from PostgreSQL: \(ClaimLoop.loggable(error))"))
        }
    }

    /// Gives back `bytes` a delivery held (0: it held none).
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        budget.release(bytes)
        metrics.bodyBytesHeld.decrement(by: Double(bytes))
    }

    /// Reads `job`'s body on the body connection; nil when the job is no longer this worker's.
    private func load(_ job: ClaimedJob) async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { [self] in continuation.resume(with: Result { try loadNow(job) }) }
        }
    }

    /// Runs on `queue`. A broken connection is opened again once before the error is given up.
    private func loadNow(_ job: ClaimedJob) throws -> [UInt8]? {
        var tries = 0
        while true {
            tries += 1
            do {
                if connection == nil || connection?.isOpen == false {
                    connection?.close()
                    connection = try connect()
                }
                return try JobStore(connection: connection!, workerID: workerID).loadBody(of: job)
            } catch let error as PostgresError where error.isConnectionError {
                connection?.close()
                connection = nil
                if tries >= 2 { throw error }
            }
        }
    }

    /// Closes the body connection (the pool is stopping).
    func close() {
        queue.sync {
            connection?.close()
            connection = nil
        }
    }
}

import CourierCore
import Foundation
import ServiceLifecycle

/// Samples the highest attempt id every `interval` for the queue page's deliveries-per-minute
/// chart (`DeliveryRate`): one index probe per interval per console process, whatever the
/// traffic and however many tabs are open.
final class DeliverySampler: Service, @unchecked Sendable {
    private let database: WebDatabase
    private let interval: Duration
    private let lock = NSLock()
    private var rate = DeliveryRate()

    init(database: WebDatabase, interval: Duration) {
        self.database = database
        self.interval = interval
    }

    /// Deliveries per minute over the last hour, oldest first (nil where no samples cover).
    func perMinute(now: Date = Date()) -> [Double?] {
        lock.withLock { rate.perMinute(now: now) }
    }

    /// As a service: samples until the graceful shutdown.
    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if let highWater = try? await self.database.run({ try WebStore(connection: $0).attemptsHighWater() }) {
                    self.lock.withLock { self.rate.record(Date(), highWater: highWater) }
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }
}

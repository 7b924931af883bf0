import CourierWorker
import XCTest

/// `WorkerConfiguration.validate()`: every setting out of its range is refused, naming it,
/// instead of being raised to its floor without a word.
final class WorkerConfigurationTests: XCTestCase {
    func testTheDefaultsAreValid() throws {
        XCTAssertNoThrow(try WorkerConfiguration().validate())
    }

    /// The default worker claims up to 200 jobs with 400 slots: a full claim still fits while
    /// the one before it is in flight, and one host (cap 200) holds at most half the slots.
    func testTheDefaultWorkerFitsTwoFullClaimsAndGivesOneHostHalfItsSlots() {
        let configuration = WorkerConfiguration()
        XCTAssertEqual(configuration.concurrency, 400)
        XCTAssertEqual(configuration.batchSize, 200)
        XCTAssertGreaterThanOrEqual(configuration.concurrency, 2 * configuration.batchSize)
        XCTAssertEqual(configuration.perHostLimit * 2, configuration.concurrency)
    }

    func testEachSettingOutOfItsRangeIsRefusedByName() {
        let cases: [(String, (inout WorkerConfiguration) -> Void)] = [
            ("workerID", { $0.workerID = "" }),
            ("queues", { $0.queues = [] }),
            ("concurrency", { $0.concurrency = 0 }),
            ("loops", { $0.loops = -1 }),
            ("batchSize", { $0.batchSize = 0 }),
            ("perHostLimit", { $0.perHostLimit = 0 }),
            ("pollInterval", { $0.pollInterval = .milliseconds(9) }),
            ("leaseDuration", { $0.leaseDuration = .milliseconds(999) }),
            ("leaseDuration", { $0.leaseDuration = .seconds(24 * 3600 + 1) }),
            ("heartbeatInterval", { $0.heartbeatInterval = $0.leaseDuration }),
            ("heartbeatInterval", { $0.heartbeatInterval = .zero }),
            ("capDeferral", { $0.capDeferral = .milliseconds(-1) }),
            ("maintenanceInterval", { $0.maintenanceInterval = .zero }),
            ("retention", { $0.retention = .seconds(-1) }),
            ("retentionCancelled", { $0.retentionCancelled = .seconds(-1) }),
            ("retentionDead", { $0.retentionDead = .seconds(-1) }),
            ("gracePeriod", { $0.gracePeriod = .seconds(-1) }),
            ("shutdownGiveUp", { $0.shutdownGiveUp = .seconds(-1) }),
            ("listenerPing", { $0.listenerPing = .zero }),
        ]
        for (field, change) in cases {
            var configuration = WorkerConfiguration()
            change(&configuration)
            XCTAssertThrowsError(try configuration.validate(), field) { error in
                XCTAssertEqual((error as? WorkerConfigurationError)?.field, field)
            }
        }
    }

    func testTheEdgesOfEachRangeAreAccepted() throws {
        var configuration = WorkerConfiguration(
            concurrency: 1, loops: 1, batchSize: 1, pollInterval: .milliseconds(10), leaseDuration: .seconds(24 * 3600),
            heartbeatInterval: .seconds(24 * 3600 - 1), perHostLimit: 1, capDeferral: .zero, retention: .zero,
            gracePeriod: .zero)
        configuration.shutdownGiveUp = .zero
        XCTAssertNoThrow(try configuration.validate())
        configuration.leaseDuration = .seconds(1)
        configuration.heartbeatInterval = .milliseconds(250)
        XCTAssertNoThrow(try configuration.validate())
    }

    func testTheMessageNamesTheSettingTheRangeAndTheValue() {
        var configuration = WorkerConfiguration()
        configuration.pollInterval = .milliseconds(5)
        XCTAssertThrowsError(try configuration.validate()) { error in
            XCTAssertEqual("\(error)", "pollInterval must be at least 10ms, got 0.005 seconds")
        }
    }
}

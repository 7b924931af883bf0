import CourierSink
import CourierTesting
import CourierWorker
import Foundation
import Logging
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// What worker integration tests share: a database, a queue of their own, the sinks, pools,
/// deliverers and worker processes they started, all stopped after each test.
class WorkerTestCase: XCTestCase {
    var url: String!
    var probe: JobsProbe!
    var queue: String!
    let log = SinkLog()
    var sinks: [HTTPSink] = []
    var pools: [WorkerPool] = []
    var deliverers: [HTTPDeliverer] = []
    var processes: [Process] = []
    /// True when the test created `url` for itself and drops it afterwards.
    var ownsDatabase = false

    /// Starts a `courier worker` process on this test's queue (private targets allowed, polling
    /// every 100 ms) with `extra` flags; returns it with its stderr.
    func startWorkerProcess(_ extra: [String] = []) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments =
            [
                "worker", "--database-url", url, "--queues", queue, "--allow-private-targets", "--poll-interval", "100ms",
                "--log-level", "error",
            ] + extra
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        processes.append(process)
        return (process, errors)
    }

    /// Starts an in-process worker on this test's queue (16 slots, polling every 100 ms), with
    /// `change` applied to its configuration; private targets are allowed unless told otherwise.
    @discardableResult
    func startPool(
        allowPrivateTargets: Bool = true, requestTimeout: Duration = .seconds(10),
        _ change: (inout WorkerConfiguration) -> Void = { _ in }
    ) throws -> WorkerPool {
        var http = HTTPDelivererConfiguration()
        http.allowPrivateTargets = allowPrivateTargets
        http.totalTimeout = requestTimeout
        var logger = Logger(label: "test.worker")
        logger.logLevel = .warning
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        deliverers.append(deliverer)
        var configuration = WorkerConfiguration(
            workerID: "test-\(queue!)", queues: [queue], concurrency: 16, pollInterval: .milliseconds(100))
        change(&configuration)
        let pool = WorkerPool(databaseURL: url, configuration: configuration, deliverer: deliverer, logger: logger)
        try pool.start()
        pools.append(pool)
        return pool
    }

    /// The command that runs `pg_ctl` for the test cluster (`COURIER_TEST_PGCTL`, exported by
    /// scripts/with-postgres), for the tests that stop or restart the server. Like
    /// `TestDatabase.serverURL()` for the database: without it a test is skipped loudly on a
    /// developer's machine and fails under `CI=true`.
    func pgctl() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if let command = environment["COURIER_TEST_PGCTL"], !command.isEmpty { return command }
        let message = "COURIER_TEST_PGCTL is not set: run the tests through scripts/test to stop and start the server"
        if environment["CI"] == "true" {
            throw MissingPrerequisite(description: message + " (CI=true: a missing prerequisite is a failure)")
        }
        print("warning: SKIPPING outage test: \(message)")
        throw XCTSkip(message)
    }

    /// Polls `condition` every 50 ms until it holds or `timeout` seconds pass; returns whether it held.
    func waitFor(_ timeout: Double, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }

    override func tearDown() async throws {
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        pools.forEach { $0.shutdown() }
        deliverers.forEach { $0.shutdown() }
        for sink in sinks { await sink.shutdown() }
        try? probe?.forgetDestinations()
        probe?.close()
        if ownsDatabase, let url { TestDatabase.drop(url) }
    }
}

/// Holds async callers until `open()`: a sink that must not answer before the test says so.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Returns once the gate is open.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let openAlready = lock.withLock { () -> Bool in
                if isOpen { return true }
                waiting.append(continuation)
                return false
            }
            if openAlready { continuation.resume() }
        }
    }

    /// Lets every caller through, now and later.
    func open() {
        let released = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            isOpen = true
            defer { waiting = [] }
            return waiting
        }
        released.forEach { $0.resume() }
    }
}

/// A test prerequisite missing under `CI=true`: thrown, it fails the test with its message.
struct MissingPrerequisite: Error, CustomStringConvertible {
    let description: String
}

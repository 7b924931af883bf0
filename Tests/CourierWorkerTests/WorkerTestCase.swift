import CourierSink
import CourierTesting
import CourierWorker
import Foundation
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

import ArgumentParser
import CourierCore
import CourierSink
import CourierWeb
import CourierWorker
import Foundation
import Logging
import Postgres
import CourierCLISupport

/// `courier demo`: the whole story on a throwaway cluster, with no configuration.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole story on a throwaway PostgreSQL cluster and a local HTTP sink.",
        discussion: """
            Starts a temporary PostgreSQL cluster from the installed server binaries, migrates it,
            starts an HTTP sink on 127.0.0.1 (one endpoint succeeds, one fails twice then succeeds,
            one always answers 400), enqueues deliveries, runs a worker until every job settles,
            prints what happened, and removes everything. With --web it then serves the web console
            (courier web) on 127.0.0.1:8080 over the demo's database until Ctrl-C.

            Example:
              courier demo
              courier demo --web
            """
    )

    @Option(name: .customLong("timeout"), help: "Give up if jobs have not settled after this long (default 60s).")
    var timeout: String = "60s"

    @Flag(
        name: .customLong("web"),
        help: "Afterwards serve the web console on 127.0.0.1:8080 over the demo's database until Ctrl-C.")
    var web = false

    func run() throws {
        let limit = try parseDuration(timeout, flag: "--timeout")
        print("Starting a throwaway PostgreSQL cluster...")
        let cluster = try ThrowawayCluster()
        defer { cluster.stop() }
        let connection = try PostgresConnection(cluster.url)
        defer { connection.close() }
        try Migrator(logger: Logger(label: "courier.demo", factory: { _ in SwiftLogNoOpLogHandler() })).migrate(connection)

        let attemptsSeen = AttemptCounter()
        let sink = try blockingAwait {
            try await HTTPSink.start { request in
                let job = request.header("courier-job-id") ?? "?"
                switch request.path {
                case "/flaky":
                    // Fails the first two attempts of each job, then succeeds.
                    let n = attemptsSeen.next(job)
                    return n <= 2
                        ? .respond(status: 503, body: Array("busy, try again\n".utf8))
                        : .respond(status: 200, body: Array("ok\n".utf8))
                case "/reject":
                    return .respond(status: 400, body: Array(#"{"error":"unknown event type"}"#.utf8))
                default:
                    return .respond(status: 200, body: Array("ok\n".utf8))
                }
            }
        }
        defer { _ = try? blockingAwait { await sink.shutdown() } }
        print("HTTP sink listening on \(sink.baseURL)")

        let queue = "demo"
        let deliveries: [(path: String, event: String)] = [
            ("/orders", "order.created"), ("/orders", "order.paid"), ("/invoices", "invoice.sent"),
            ("/flaky", "payment.retried"), ("/flaky", "refund.issued"), ("/reject", "unknown.event"),
        ]
        for delivery in deliveries {
            try connection.run(
                DemoStatements.enqueue,
                .init(url: sink.baseURL + delivery.path, payload: #"{"type":"\#(delivery.event)"}"#, queue: queue,
                      maxAttempts: 5, retrySchedule: [.milliseconds(500), .seconds(1)]))
        }
        print("Enqueued \(deliveries.count) deliveries; running a worker until they settle...\n")

        var logger = Logger(label: "courier.demo")
        logger.logLevel = .error
        var http = HTTPDelivererConfiguration()
        http.allowPrivateTargets = true
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        defer { deliverer.shutdown() }
        let pool = WorkerPool(
            databaseURL: cluster.url,
            configuration: WorkerConfiguration(workerID: "demo-worker", queues: [queue], concurrency: 8, pollInterval: .milliseconds(100)),
            deliverer: deliverer, logger: logger)
        try pool.start()
        let deadline = Date().addingTimeInterval(limit.inSeconds)
        var unsettled = deliveries.count
        while Date() < deadline {
            unsettled = try connection.run(DemoStatements.unsettledCount, queue)[0].decode(0)
            if unsettled == 0 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        pool.shutdown()

        let rows = try connection.run(DemoStatements.summary, queue).rows
        var table = [["JOB", "URL", "STATE", "ATTEMPTS", "LAST STATUS", "LAST ERROR"]]
        var counts: [String: Int] = [:]
        for row in rows {
            let state: String = try row.decode(2)
            counts[state, default: 0] += 1
            let url: String = try row.decode(1)
            table.append([
                String(try row.decode(0, as: Int.self)), url.replacingOccurrences(of: sink.baseURL, with: ""), state,
                String(try row.decode(3, as: Int.self)), (try row.decode(4, as: Int?.self)).map(String.init) ?? "-",
                (try row.decode(5, as: String?.self)).map { String($0.prefix(48)) } ?? "",
            ])
        }
        print(TextTable.render(table))
        let retried = try rows.filter { try $0.decode(3, as: Int.self) > 1 }.count
        print(
            "\nSummary: \(counts["succeeded", default: 0]) succeeded (\(retried) after retries), "
                + "\(counts["dead", default: 0]) dead, \(unsettled) unsettled.")
        if web { try serveConsole(cluster.url) }
        print("Cleaned up the cluster and the sink.")
        if unsettled > 0 { throw CLIError("\(unsettled) jobs had not settled after \(timeout)") }
    }
}

extension DemoCommand {
    /// Serves the console over the demo's database until Ctrl-C. The password is random and
    /// written to a file only its owner may read; it is never printed.
    private func serveConsole(_ url: String) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("courier-demo-web-\(getpid()).password")
        let secret = (0..<3).map { _ in UUID().uuidString.prefix(8).lowercased() }.joined(separator: "-")
        guard FileManager.default.createFile(
            atPath: file.path, contents: Data((secret + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else { throw CLIError("cannot write \(file.path)") }
        defer { try? FileManager.default.removeItem(at: file) }
        var configuration = WebConfiguration(databaseURL: url, password: try WebPassword(fileContents: secret))
        configuration.port = 8080
        print("""

            Web console: http://127.0.0.1:8080 (log in with any name and the password in \(file.path)).
            Ctrl-C stops it and removes the cluster.
            """)
        var logger = Logger(label: "courier.demo.web")
        logger.logLevel = .warning
        let settings = configuration
        let log = logger
        try blockingAwait { try await WebServer.run(settings, logger: log) }
    }
}

/// Counts requests per job id, for the sink's "fail twice, then succeed" endpoint.
final class AttemptCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [String: Int] = [:]

    func next(_ key: String) -> Int {
        lock.withLock {
            seen[key, default: 0] += 1
            return seen[key]!
        }
    }
}

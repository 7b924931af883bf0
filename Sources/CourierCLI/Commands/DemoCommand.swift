import ArgumentParser
import CourierCore
import CourierMetrics
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
            Starts a temporary PostgreSQL cluster from the installed server binaries,
            migrates it, prints its URL, starts an HTTP sink on 127.0.0.1 (one endpoint
            succeeds, one fails twice then succeeds, one answers 400), enqueues
            deliveries, runs a worker until every job settles, prints what happened, and
            removes everything.

            --keep leaves the cluster running until Ctrl-C, so that other courier
            commands can explore it (paste the printed export line). --web serves the
            web console (courier web) over the demo's database until Ctrl-C.

            Examples:
              courier demo
              courier demo --keep --web
              courier demo --web --web-address 127.0.0.1:8081
            """
    )

    @Option(name: .customLong("timeout"), help: "Give up if jobs have not settled after this long.")
    var timeout: String = "60s"

    @Flag(name: .customLong("keep"), help: "Keep the cluster running until Ctrl-C, to explore it.")
    var keep = false

    @Flag(name: .customLong("web"), help: "Serve the web console over the demo's database until Ctrl-C.")
    var web = false

    @Option(
        name: .customLong("web-address"),
        help: ArgumentHelp("Where the console listens (implies --web).", valueName: "host:port"))
    var webAddress: String = "127.0.0.1:8080"

    /// Whether the console is served: `--web`, or an address given for it.
    private var serveWeb: Bool { web || webAddress != "127.0.0.1:8080" }

    func run() throws {
        let limit = try parseDuration(timeout, flag: "--timeout")
        guard let listen = MetricsServer.parseAddress(webAddress) else {
            throw CLIError.usage("--web-address: \(webAddress.debugDescription) is not HOST:PORT (e.g. 127.0.0.1:8081)")
        }
        // A busy console port is known before anything starts, and stops the demo in one line.
        if serveWeb && !Self.canListen(host: listen.host, port: listen.port) {
            throw Self.addressInUse(webAddress)
        }
        print("Starting a throwaway PostgreSQL cluster...")
        let cluster = try ThrowawayCluster()
        defer { cluster.stop() }
        print("Database: \(cluster.url)")
        print("  export COURIER_DATABASE_URL=\(cluster.url)")
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
        if serveWeb {
            try serveConsole(cluster.url, host: listen.host, port: listen.port)
        } else if keep {
            print("""

                The cluster keeps running for other courier commands; try:
                  export COURIER_DATABASE_URL=\(cluster.url)
                  courier stats
                  courier jobs list --queue demo
                  courier dead list
                Ctrl-C stops it and removes the cluster.
                """)
            Self.waitForInterrupt()
        }
        print("Cleaned up the cluster and the sink.")
        if unsettled > 0 { throw CLIError("\(Output.counted(unsettled, "jobs")) had not settled after \(timeout)") }
    }
}

extension DemoCommand {
    /// Serves the console over the demo's database until Ctrl-C. The password is random and
    /// written to a file only its owner may read; it is never printed.
    private func serveConsole(_ url: String, host: String, port: Int) throws {
        let file = TemporaryFile("courier-demo-web-\(getpid()).password")
        defer { file.remove() }
        let secret = (0..<3).map { _ in UUID().uuidString.prefix(8).lowercased() }.joined(separator: "-")
        guard FileManager.default.createFile(
            atPath: file.path, contents: Data((secret + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else { throw CLIError("cannot write \(file.path)") }
        var configuration = WebConfiguration(databaseURL: url, password: try WebPassword(fileContents: secret))
        configuration.host = host
        configuration.port = port
        var logger = Logger(label: "courier.demo.web")
        logger.logLevel = .warning
        let settings = configuration
        let log = logger
        let server: RunningWebServer
        do {
            server = try blockingAwait { try await WebServer.start(settings, logger: log) }
        } catch {
            throw Self.addressInUse(webAddress, reason: "\(error)")
        }
        defer { _ = try? blockingAwait { await server.stop() } }
        let shown = host.contains(":") ? "[\(host)]" : host
        print("""

            Web console: http://\(shown):\(server.port) (log in with any name and the password in \(file.path)).
            Try also, in another shell:
              export COURIER_DATABASE_URL=\(url)
              courier stats
              courier jobs list --queue demo
            Ctrl-C stops it and removes the cluster.
            """)
        Self.waitForInterrupt()
    }

    /// Blocks until Ctrl-C or SIGTERM, whose handler (`SignalCleanup`) stops the cluster,
    /// runs the other cleanups and ends the process.
    private static func waitForInterrupt() -> Never {
        _ = SignalCleanup.shared.add { print("Stopping: removing the throwaway cluster and everything the demo started.") }
        while true { sleep(3600) }
    }

    /// The one line for a console address another program holds (exit code 2).
    static func addressInUse(_ address: String, reason: String = "address already in use") -> CLIError {
        let why = reason.contains("in use") ? "address already in use" : Redaction.message(reason)
        return CLIError.usage(
            "the web console cannot listen on \(address) (\(why)); choose another with --web-address HOST:PORT")
    }

    /// Whether a TCP socket can listen on `host:port` now, with the `SO_REUSEADDR` the
    /// console's own socket uses (so only another listener makes it false).
    static func canListen(host: String, port: Int) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else { return true }
        defer { freeaddrinfo(found) }
        let descriptor = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        return bind(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 && listen(descriptor, 1) == 0
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

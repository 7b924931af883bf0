import ArgumentParser
import CourierCore
import CourierSecrets
import CourierMetrics
import CourierWorker
import Foundation
import Logging
import Postgres
import CourierCLISupport

/// `courier worker`: runs the worker pool until SIGTERM/SIGINT.
struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Claim due jobs and deliver them, until SIGTERM or SIGINT.",
        discussion: """
            Every flag can also come from the environment (COURIER_<FLAG>, e.g.
            COURIER_CONCURRENCY=200), which is how deploy/courier-worker.service
            configures it; a flag wins over the environment. Runs under systemd with
            Type=notify (READY=1, WATCHDOG=1, STOPPING=1).

            Each attempt is a span exported over OTLP/HTTP when the standard OpenTelemetry
            environment asks for it (OTEL_EXPORTER_OTLP_ENDPOINT, or
            OTEL_TRACES_EXPORTER=otlp; OTEL_SDK_DISABLED=true turns it off). Off by default.

            Examples:
              courier worker
              courier worker --queues billing,emails --concurrency 200 --metrics-port 9464
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Comma-separated queues to work (default: all).")
    var queues: String?

    @Option(help: "Deliveries in flight at once in this process (default \(Defaults.concurrency)).")
    var concurrency: Int?

    @Option(help: "Claim loops, each with its own database connection (default 1).")
    var loops: Int?

    @Option(name: .customLong("batch-size"), help: "The most jobs one claim takes (default \(Defaults.batchSize)).")
    var batchSize: Int?

    @Option(name: .customLong("per-host-limit"), help: "Requests in flight to one host at once across all workers, for hosts without their own cap (`courier destinations set`) (default \(Defaults.perHostLimit)).")
    var perHostLimit: Int?

    @Option(name: .customLong("poll-interval"), help: "Claim at least this often without a notification (default 1s).")
    var pollInterval: String?

    @Option(help: "Lease of a running job, extended by heartbeat (default 60s).")
    var lease: String?

    @Option(name: .customLong("grace-period"), help: "Time in-flight deliveries get after SIGTERM (default 25s).")
    var gracePeriod: String?

    @Option(help: "Delete succeeded jobs older than this, where the queue sets no --keep-succeeded (default 7d).")
    var retention: String?

    @Option(name: .customLong("retention-cancelled"), help: "The same for cancelled jobs (default 7d).")
    var retentionCancelled: String?

    @Option(name: .customLong("retention-dead"), help: "The same for dead jobs (default 30d).")
    var retentionDead: String?

    @Option(
        name: .customLong("endpoint-disable-after"),
        help: "Disable a webhook endpoint when every delivery failed for this long, where it sets nothing itself; 0 never (default 5d).")
    var endpointDisableAfter: String?

    @Option(
        name: .customLong("endpoint-disable-dead"),
        help: "Disable a webhook endpoint after this many deliveries in a row went dead, where it sets nothing itself; 0 never (default 100).")
    var endpointDisableDead: Int?

    @Option(
        name: .customLong("body-budget"),
        help: "Bytes of request bodies over 64 KiB held at once; larger bodies wait in PostgreSQL for room, e.g. 64MiB (default 64MiB).")
    var bodyBudget: String?

    @Option(name: .customLong("request-timeout"), help: "Total timeout of one request (default 30s).")
    var requestTimeout: String?

    @Option(name: .customLong("connect-timeout"), help: "Connect timeout of one request (default 10s).")
    var connectTimeout: String?

    @Option(
        name: .customLong("max-connections"),
        help: "Connections to receivers open at once over all hosts, idle or busy; past it an idle one is closed to make room (default \(Defaults.maximumConnections)).")
    var maxConnections: Int?

    @Flag(name: .customLong("allow-private-targets"), help: "Allow deliveries to private, loopback and link-local addresses.")
    var allowPrivateTargets = false

    @Option(
        name: .customLong("resolve"),
        help: "NAME=ADDRESS: answer DNS for NAME (or *.SUFFIX) with ADDRESS, like curl --resolve (repeatable).")
    var resolve: [String] = []

    @Option(
        name: .customLong("tls-ca-file"),
        help: "PEM file of certificate authorities to trust besides the system's, for receivers with a private CA.")
    var tlsCAFile: String?

    @Option(name: .customLong("metrics-port"), help: "Serve Prometheus metrics on 127.0.0.1:<port>/metrics.")
    var metricsPort: Int?

    @Option(
        name: .customLong("metrics-address"),
        help: "Serve Prometheus metrics on HOST:PORT/metrics (e.g. 0.0.0.0:9464 for a scraper on another host).")
    var metricsAddress: String?

    @OptionGroup var secrets: SecretsKeyOptions

    @OptionGroup var logging: LogOptions

    @Option(name: .customLong("summary-interval"), help: "How often to log an info summary of outcomes (default 1m).")
    var summaryInterval: String?

    @Option(name: .customLong("worker-id"), help: "Worker id written to locked_by (default hostname:pid).")
    var workerID: String?

    func run() throws {
        let env = ProcessInfo.processInfo.environment
        func value(_ flag: String?, _ name: String) -> String? { flag ?? env["COURIER_\(name)"] }
        func integer(_ flag: Int?, _ name: String, _ option: String, minimum: Int = 1) throws -> Int? {
            if let flag {
                guard flag >= minimum else { throw CLIError.usage("--\(option) must be at least \(minimum), got \(flag)") }
                return flag
            }
            guard let text = env["COURIER_\(name)"] else { return nil }
            guard let parsed = Int(text), parsed >= minimum else {
                throw CLIError.usage("COURIER_\(name) must be an integer of at least \(minimum), got \(text.debugDescription)")
            }
            return parsed
        }
        /// Where each setting came from, for errors: the flag, or the variable that set it.
        var sources: [String: String] = [:]
        func duration(_ flag: String?, _ name: String, _ option: String, field: String) throws -> Duration? {
            guard let text = value(flag, name) else { return nil }
            let source = flag == nil ? "COURIER_\(name)" : "--\(option)"
            sources[field] = source
            guard let seconds = DurationParser.seconds(text) else {
                throw CLIError.usage(DurationParser.message(text, flag: source))
            }
            return .seconds(seconds)
        }

        var config = WorkerConfiguration()
        if let id = value(workerID, "WORKER_ID") { config.workerID = id }
        if let list = value(queues, "QUEUES") {
            let names = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !names.isEmpty else { throw CLIError.usage("--queues needs at least one queue name") }
            config.queues = names
        }
        if let v = try integer(concurrency, "CONCURRENCY", "concurrency") { config.concurrency = v }
        if let v = try integer(loops, "LOOPS", "loops") { config.loops = v }
        if let v = try integer(batchSize, "BATCH_SIZE", "batch-size") { config.batchSize = v }
        if let v = try integer(perHostLimit, "PER_HOST_LIMIT", "per-host-limit") { config.perHostLimit = v }
        if let v = try duration(pollInterval, "POLL_INTERVAL", "poll-interval", field: "pollInterval") {
            config.pollInterval = v
        }
        if let v = try duration(lease, "LEASE", "lease", field: "leaseDuration") {
            config.leaseDuration = v
            config.heartbeatInterval = v / 4
            sources["heartbeatInterval"] = sources["leaseDuration"]
        }
        if let v = try duration(gracePeriod, "GRACE_PERIOD", "grace-period", field: "gracePeriod") { config.gracePeriod = v }
        if let v = try duration(retention, "RETENTION", "retention", field: "retention") { config.retention = v }
        if let v = try duration(
            retentionCancelled, "RETENTION_CANCELLED", "retention-cancelled", field: "retentionCancelled")
        {
            config.retentionCancelled = v
        }
        if let v = try duration(retentionDead, "RETENTION_DEAD", "retention-dead", field: "retentionDead") {
            config.retentionDead = v
        }
        if value(endpointDisableAfter, "ENDPOINT_DISABLE_AFTER") == "0" {
            config.endpointDisable.window = .zero
        } else if let v = try duration(
            endpointDisableAfter, "ENDPOINT_DISABLE_AFTER", "endpoint-disable-after", field: "endpointDisableAfter")
        {
            config.endpointDisable.window = v
        }
        if let v = try integer(endpointDisableDead, "ENDPOINT_DISABLE_DEAD", "endpoint-disable-dead", minimum: 0) {
            config.endpointDisable.deadInARow = v
        }
        if let text = value(bodyBudget, "BODY_BUDGET") {
            guard let bytes = ByteSizeParser.bytes(text), bytes >= 1 else {
                throw CLIError.usage(
                    "\(bodyBudget == nil ? "COURIER_BODY_BUDGET" : "--body-budget"): \(text.debugDescription) is not a size (e.g. 64MiB, 512KiB, 1048576)")
            }
            config.bodyBudget = bytes
        }
        do {
            try config.validate()
        } catch let error as WorkerConfigurationError {
            // Integers were checked against their minimum as they were read; what is left are
            // durations, each named by the flag or variable that set it.
            let source = sources[error.field] ?? error.field
            throw CLIError.usage("\(source) \(error.range), got \(Output.duration(Self.seconds(error.field, config)))")
        }
        var http = HTTPDelivererConfiguration()
        if let v = try duration(requestTimeout, "REQUEST_TIMEOUT", "request-timeout", field: "totalTimeout") {
            http.totalTimeout = v
        }
        if let v = try duration(connectTimeout, "CONNECT_TIMEOUT", "connect-timeout", field: "connectTimeout") {
            http.connectTimeout = v
        }
        let secretsKey = try secrets.loadIfSet()
        http.secretsKey = secretsKey
        http.allowPrivateTargets = allowPrivateTargets || env["COURIER_ALLOW_PRIVATE_TARGETS"] == "true"
        http.maximumConnectionsPerHost = config.perHostLimit
        if let v = try integer(maxConnections, "MAX_CONNECTIONS", "max-connections") { http.maximumConnections = v }
        if !resolve.isEmpty {
            let entries = try resolve.map { text -> OverrideResolver.Entry in
                guard let entry = OverrideResolver.Entry(text) else {
                    throw CLIError.usage("--resolve: \(text.debugDescription) is not NAME=ADDRESS (e.g. *.localhost=127.0.0.1)")
                }
                return entry
            }
            http.resolver = OverrideResolver(entries: entries)
        }
        if let file = value(tlsCAFile, "TLS_CA_FILE") {
            http.trustedCAFile = file
            if let problem = HTTPDeliverer.tlsProblem(http) {
                throw CLIError.usage("\(tlsCAFile == nil ? "COURIER_TLS_CA_FILE" : "--tls-ca-file"): \(problem)")
            }
        }
        let (parsedLevel, format) = try logging.resolve(prefix: "COURIER_", environment: env)
        let port = try integer(metricsPort, "METRICS_PORT", "metrics-port")
        var metricsAt: (host: String, port: Int)? = port.map { ("127.0.0.1", $0) }
        if let text = value(metricsAddress, "METRICS_ADDRESS") {
            guard let parsed = MetricsServer.parseAddress(text) else {
                throw CLIError.usage("--metrics-address: \(text.debugDescription) is not HOST:PORT (e.g. 127.0.0.1:9464)")
            }
            // The address wins: a per-instance address (a templated unit's own environment file)
            // overrides a port set for every instance.
            metricsAt = parsed
        }

        let summary =
            try duration(summaryInterval, "SUMMARY_INTERVAL", "summary-interval", field: "summaryInterval")
            ?? .seconds(60)
        guard summary >= .seconds(1) else {
            throw CLIError.usage("\(sources["summaryInterval"] ?? "--summary-interval") must be at least 1s, got \(Output.duration(summary.inSeconds))")
        }
        LoggingSystem.bootstrap { label in StderrLogHandler(label: label, format: format) }
        var logger = Logger(label: "courier.worker")
        logger.logLevel = parsedLevel
        let metricsServer = try metricsAt.map { try MetricsServer.start(host: $0.host, port: $0.port, help: WorkerMetrics.help) }
        defer { metricsServer?.stop() }

        // Spans only when the OTEL_* environment asks for them; otherwise no span work at all.
        var tracing: WorkerTracing?
        if WorkerTracing.isRequested(by: env) {
            if let problem = WorkerTracing.problem(in: env) { throw CLIError.usage(problem) }
            do {
                tracing = try WorkerTracing(logger: logger)
            } catch {
                throw CLIError.usage("the OTEL_* tracing settings: \(error)")
            }
        }
        // Deferred first, so it runs last: the spans of the final deliveries are flushed.
        defer { tracing?.shutdown() }
        http.tracer = tracing?.tracer
        let fitted = OpenFileLimit.apply(connections: http.maximumConnections)
        http.maximumConnections = fitted.connections
        switch fitted.note {
        case let note? where note.isWarning: logger.warning("\(note.message)")
        case let note?: logger.info("\(note.message)")
        case nil: break
        }
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        defer { deliverer.shutdown() }
        let pool = WorkerPool(
            databaseURL: database.resolvedURL, configuration: config, deliverer: deliverer, secretsKey: secretsKey,
            logger: logger)
        do {
            try WorkerService(pool: pool, logger: logger, summaryInterval: summary).run()
        } catch let error as WorkerStartError {
            throw CLIError(error.description, exitCode: .schemaMismatch)
        } catch let error as SecretsKeyStartError {
            throw CLIError.usage(error.description)
        } catch let error as PostgresError {
            throw CLIError(error.message)
        }
    }

    /// The value of a duration setting of `config` in seconds, for the error line.
    private static func seconds(_ field: String, _ config: WorkerConfiguration) -> Double {
        let values: [String: Duration] = [
            "pollInterval": config.pollInterval, "leaseDuration": config.leaseDuration,
            "heartbeatInterval": config.heartbeatInterval, "gracePeriod": config.gracePeriod,
            "retention": config.retention, "retentionCancelled": config.retentionCancelled,
            "retentionDead": config.retentionDead, "endpointDisableAfter": config.endpointDisable.window,
        ]
        return values[field]?.inSeconds ?? 0
    }
}

import Dispatch
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// The worker's span exporter: a tracer from swift-otel that sends spans over OTLP/HTTP, and
/// the background service that batches and exports them, for the worker's life.
///
/// Only a tracing backend is made (`OTel.makeTracingBackend`): nothing is bootstrapped, so the
/// worker's own logging and its swift-metrics for Prometheus stay as they are, and the tracer is
/// handed to ``HTTPDeliverer`` rather than installed globally. swift-otel reads its settings
/// from the standard `OTEL_*` variables (endpoint, protocol `http/protobuf` or `http/json`,
/// batch delays, service name, sampler).
public final class WorkerTracing: Sendable {
    /// The tracer for ``HTTPDelivererConfiguration/tracer``.
    public let tracer: any Tracer
    private let group: ServiceGroup
    private let running: Task<Void, Never>

    /// True when the standard environment asks for traces: an OTLP endpoint is set
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or
    /// `OTEL_TRACES_EXPORTER=otlp`, and `OTEL_SDK_DISABLED` is not `true`. Anything else
    /// (`OTEL_TRACES_EXPORTER=none` included) leaves tracing off.
    public static func isRequested(by environment: [String: String]) -> Bool {
        func set(_ name: String) -> Bool { !(environment[name] ?? "").isEmpty }
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        if let exporter = environment["OTEL_TRACES_EXPORTER"], !exporter.isEmpty {
            return exporter.lowercased() == "otlp"
        }
        return set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    }

    /// Why the environment's tracing settings cannot work in this build, or nil: gRPC export
    /// is not built in (swift-otel's trait `OTLPGRPC`), and swift-otel stops the process when
    /// asked for it, so the worker refuses it first.
    public static func problem(in environment: [String: String]) -> String? {
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            guard let value = environment[name], !value.isEmpty else { continue }
            guard value.lowercased() != "grpc" else {
                return "\(name)=grpc: this worker exports spans over OTLP/HTTP only; use http/protobuf or http/json"
            }
            return nil
        }
        return nil
    }

    /// Makes the tracer and starts exporting; call ``shutdown()`` when the worker stops.
    ///
    /// - Parameters:
    ///   - serviceName: `service.name` of the spans unless `OTEL_SERVICE_NAME` says otherwise.
    ///   - logger: where swift-otel reports export failures.
    public init(serviceName: String = "courier-worker", logger: Logger) throws {
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.enabled = true
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.propagators = [.traceContext]
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        tracer = backend.factory
        let group = ServiceGroup(services: [backend.service], gracefulShutdownSignals: [], logger: logger)
        self.group = group
        running = Task {
            do {
                try await group.run()
            } catch {
                logger.error("span export stopped", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Stops exporting after the spans already ended are sent (the batch processor flushes on
    /// shutdown). Blocks until then; call it from a thread outside Swift's concurrency pool.
    public func shutdown() {
        let done = DispatchSemaphore(value: 0)
        Task { [group, running] in
            await group.triggerGracefulShutdown()
            await running.value
            done.signal()
        }
        done.wait()
    }
}

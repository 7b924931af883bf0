import CourierSink
import Metrics
import Prometheus

/// Serves the process's swift-metrics as Prometheus text on `127.0.0.1:<port>/metrics`.
final class MetricsServer: Sendable {
    private let sink: HTTPSink

    private init(sink: HTTPSink) { self.sink = sink }

    /// Bootstraps swift-metrics with a Prometheus registry and starts serving it.
    static func start(port: Int) throws -> MetricsServer {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let sink = try blockingAwait {
            try await HTTPSink.start(host: "127.0.0.1", port: port) { request in
                guard request.path == "/metrics" else { return .respond(status: 404, body: Array("not found\n".utf8)) }
                return .respond(
                    status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")], body: registry.emitToBuffer())
            }
        }
        return MetricsServer(sink: sink)
    }

    /// Stops serving.
    func stop() {
        let sink = self.sink
        _ = try? blockingAwait { await sink.shutdown() }
    }
}

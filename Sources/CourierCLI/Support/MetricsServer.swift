import CourierSink
import CourierWorker
import CoreMetrics
import Metrics
import Prometheus

/// Serves the process's swift-metrics as Prometheus text on `<host>:<port>/metrics`, every
/// series with its `# HELP` line (`WorkerMetrics.help`).
final class MetricsServer: Sendable {
    private let sink: HTTPSink

    private init(sink: HTTPSink) { self.sink = sink }

    /// Bootstraps swift-metrics with a Prometheus registry and starts serving it.
    static func start(host: String = "127.0.0.1", port: Int) throws -> MetricsServer {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(HelpfulPrometheusFactory(registry: registry, help: WorkerMetrics.help))
        let sink = try blockingAwait {
            try await HTTPSink.start(host: host, port: port) { request in
                guard request.path == "/metrics" else { return .respond(status: 404, body: Array("not found\n".utf8)) }
                return .respond(
                    status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")], body: registry.emitToBuffer())
            }
        }
        return MetricsServer(sink: sink)
    }

    /// Parses `--metrics-address`: `HOST:PORT` (`[v6]:PORT` for IPv6) or a bare port on
    /// 127.0.0.1; nil when it is neither.
    static func parseAddress(_ text: String) -> (host: String, port: Int)? {
        if let port = Int(text) { return (1...65_535).contains(port) ? ("127.0.0.1", port) : nil }
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else {
            return nil
        }
        return (host, port)
    }

    /// Stops serving.
    func stop() {
        let sink = self.sink
        _ = try? blockingAwait { await sink.shutdown() }
    }
}

/// A swift-metrics factory on a Prometheus registry that gives every metric its help text.
/// (swift-prometheus's own factory registers every metric without one.)
struct HelpfulPrometheusFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    let help: [String: String]

    private func text(_ label: String) -> String { help[label] ?? "" }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: text(label))
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: text(label))
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(name: label, labels: dimensions, help: text(label)) }
        return registry.makeValueHistogram(
            name: label, labels: dimensions, buckets: [0.001, 0.01, 0.1, 1, 10, 100, 1000, 10_000], help: text(label))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(name: label, labels: dimensions, help: text(label))
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            name: label, labels: dimensions,
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
                      .seconds(30)],
            help: text(label))
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}

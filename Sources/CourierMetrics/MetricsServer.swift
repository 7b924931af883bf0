import CoreMetrics
import Metrics
import Prometheus

/// Serves the process's swift-metrics as Prometheus text on `<host>:<port>/metrics`, every
/// series with its `# HELP` line.
public final class MetricsServer: Sendable {
    private let endpoint: MetricsEndpoint

    /// The port it listens on.
    public var port: Int { endpoint.port }

    private init(endpoint: MetricsEndpoint) { self.endpoint = endpoint }

    /// Bootstraps swift-metrics with a Prometheus registry whose series carry `help` (metric
    /// name → text), and starts serving it. Call once per process: swift-metrics can be
    /// bootstrapped only once.
    public static func start(host: String = "127.0.0.1", port: Int, help: [String: String]) throws -> MetricsServer {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(HelpfulPrometheusFactory(registry: registry, help: help))
        let endpoint = try MetricsEndpoint.start(host: host, port: port) { registry.emitToBuffer() }
        return MetricsServer(endpoint: endpoint)
    }

    /// Parses `--metrics-address`: `HOST:PORT` (`[v6]:PORT` for IPv6) or a bare port on
    /// 127.0.0.1; nil when it is neither.
    public static func parseAddress(_ text: String) -> (host: String, port: Int)? {
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
    public func stop() {
        endpoint.shutdown()
    }
}

/// A swift-metrics factory on a Prometheus registry that gives every metric its help text.
/// (swift-prometheus's own factory registers every metric without one.)
public struct HelpfulPrometheusFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    let help: [String: String]

    /// A factory registering on `registry`, with `help` (metric name → text) for the help lines.
    public init(registry: PrometheusCollectorRegistry, help: [String: String]) {
        self.registry = registry
        self.help = help
    }

    /// The series' name as it is (the label is already a full Prometheus name, unit included)
    /// and its help line.
    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: help[label] ?? "")
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(
            descriptor: descriptor(label), labels: dimensions, buckets: [0.001, 0.01, 0.1, 1, 10, 100, 1000, 10_000])
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            descriptor: descriptor(label), labels: dimensions,
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
                      .seconds(30)])
    }

    public func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    public func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    public func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}

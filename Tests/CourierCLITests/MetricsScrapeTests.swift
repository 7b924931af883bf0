import CourierSink
import CourierTesting
import Foundation
import XCTest

@testable import CourierCLI
@testable import CourierMetrics
@testable import CourierCLISupport
@testable import CourierBench

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The worker's Prometheus endpoint, scraped while it works and read by Prometheus's own text
/// parser (python3-prometheus-client, installed by scripts/test).
final class MetricsScrapeTests: CLITestCase {
    /// What the parser made of the text: every family with its help and type, and the labels
    /// and value of every sample.
    private struct Parsed: Decodable {
        struct Family: Decodable {
            var name: String
            var type: String
            var help: String
            var samples: [Sample]
        }
        struct Sample: Decodable {
            var name: String
            var labels: [String: String]
            var value: Double
        }
        var families: [Family]
    }

    private static let parser = """
        import json, sys
        from prometheus_client.parser import text_string_to_metric_families
        families = [{"name": f.name, "type": f.type, "help": f.documentation,
                     "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]}
                    for f in text_string_to_metric_families(sys.stdin.read())]
        print(json.dumps({"families": families}))
        """

    private func parse(_ text: String) throws -> Parsed {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.parser]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waitForExit(process)
        XCTAssertEqual(process.terminationStatus, 0, "the Prometheus parser refused the text: \(problem)")
        return try JSONDecoder().decode(Parsed.self, from: data)
    }

    private func scrape(_ port: Int) -> String? {
        BenchMetrics.get(port: port, path: "/metrics")
    }

    /// A real worker on `queue` serving its metrics on a free port, with `extra` flags.
    private func startWorker(queue: String, _ extra: [String] = []) throws -> (Process, Int) {
        let port = try ThrowawayCluster.freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = [
            "worker", "--database-url", databaseURL, "--queues", queue, "--allow-private-targets",
            "--poll-interval", "100ms", "--log-level", "error", "--metrics-address", "127.0.0.1:\(port)",
        ] + extra
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return (process, port)
    }

    func testEveryMetricHasHelpAndDeliveriesCarryQueueOutcomeAndStatusClass() async throws {
        let sink = try await HTTPSink.start { request in
            request.path == "/bad" ? .respond(status: 404) : .respond(status: 200)
        }
        defer { Task { await sink.shutdown() } }
        for path in ["/ok", "/ok", "/bad"] {
            _ = try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'scraped')", [sink.baseURL + path])
        }
        // One disabled webhook endpoint: the fleet-wide gauge counts it.
        _ = try connection.query("""
            INSERT INTO courier.endpoints (url, event_types, disabled_at, disabled_reason)
            VALUES ('https://gone.example/hook', '{*}', now(), 'the customer left')
            """)
        let (process, port) = try startWorker(queue: "scraped")
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        var parsed: Parsed?
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let text = scrape(port), text.contains("status_class=\"4xx\""), text.contains("courier_endpoints_disabled") {
                parsed = try parse(text)
                break
            }
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        let families = try XCTUnwrap(parsed, "no scrape showed the three deliveries").families
        for family in families {
            XCTAssertFalse(family.help.isEmpty, "\(family.name) has no # HELP")
        }
        let deliveries = try XCTUnwrap(families.first { $0.name == "courier_deliveries" })
        XCTAssertEqual(deliveries.type, "counter")
        let byLabels = Dictionary(
            deliveries.samples.filter { $0.name == "courier_deliveries_total" }
                .map { ("\($0.labels["queue"] ?? "")/\($0.labels["outcome"] ?? "")/\($0.labels["status_class"] ?? "")", $0.value) },
            uniquingKeysWith: +)
        XCTAssertEqual(byLabels["scraped/succeeded/2xx"], 2)
        XCTAssertEqual(byLabels["scraped/dead/4xx"], 1)
        let claims = try XCTUnwrap(families.first { $0.name == "courier_claims" })
        XCTAssertGreaterThan(claims.samples.first?.value ?? 0, 0)
        let claimed = try XCTUnwrap(families.first { $0.name == "courier_jobs_claimed" })
        XCTAssertEqual(claimed.samples.first { $0.labels["queue"] == "scraped" }?.value, 3)
        XCTAssertNotNil(families.first { $0.name == "courier_deliveries_in_flight" })
        // The maintenance pass's fleet-wide gauges (once missing: their first reading never came due).
        XCTAssertEqual(families.first { $0.name == "courier_endpoints_disabled" }?.samples.first?.value, 1)
        for gauge in ["courier_destinations_breaker_open", "courier_destinations_disabled", "courier_destinations_running"] {
            XCTAssertEqual(families.first { $0.name == gauge }?.samples.first?.value, 0, gauge)
        }
    }

    /// The connection gauges and the evictions counter, from a worker whose budget of one
    /// connection serves two hosts taking turns: each job after the first closes the other
    /// host's idle connection.
    func testConnectionMetricsShowTheBudgetAndItsEvictions() async throws {
        let sink = try await HTTPSink.start { _ in .respond(status: 200) }
        defer { Task { await sink.shutdown() } }
        for host in ["a", "b", "a", "b"] {
            _ = try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'pooled')",
                ["http://\(host).localhost:\(sink.port)/"])
        }
        let (process, port) = try startWorker(
            queue: "pooled", ["--resolve", "*.localhost=127.0.0.1", "--concurrency", "1", "--max-connections", "1"])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // The gauges are read every maintenance pass (5 s): wait for one after the four jobs.
        func value(_ families: [Parsed.Family], _ name: String) -> Double? {
            families.first { $0.name == name }?.samples.first?.value
        }
        var families: [Parsed.Family] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let text = scrape(port) {
                families = try parse(text).families
                if value(families, "courier_http_connections_evicted") == 3 { break }
            }
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        let delivered = try connection.query(
            "SELECT count(*) FROM courier.jobs WHERE queue = 'pooled' AND state = 'succeeded'")[0].decode(0, as: Int.self)
        XCTAssertEqual(delivered, 4)
        XCTAssertEqual(value(families, "courier_http_connections_evicted"), 3, "\(families.map(\.name))")
        XCTAssertEqual(families.first { $0.name == "courier_http_connections_evicted" }?.type, "counter")
        XCTAssertEqual(value(families, "courier_http_connections_open"), 1)
        XCTAssertEqual(value(families, "courier_http_connections_idle"), 1)
        XCTAssertEqual(value(families, "courier_http_connections_waiting"), 0)
        for name in ["courier_http_connections_open", "courier_http_connections_idle", "courier_http_connections_waiting"] {
            XCTAssertFalse(families.first { $0.name == name }?.help.isEmpty ?? true, "\(name) has no # HELP")
        }
    }

    func testMetricsAddressIsParsedOrRefusedInOneLine() throws {
        XCTAssertEqual(MetricsServer.parseAddress("0.0.0.0:9464")?.host, "0.0.0.0")
        XCTAssertEqual(MetricsServer.parseAddress("9464")?.host, "127.0.0.1")
        XCTAssertEqual(MetricsServer.parseAddress("[::1]:9464")?.host, "::1")
        XCTAssertNil(MetricsServer.parseAddress("localhost"))
        XCTAssertNil(MetricsServer.parseAddress("127.0.0.1:70000"))
        assertFails(try courier("worker", "--metrics-address", "nowhere"), code: 2, mentioning: "--metrics-address")
    }
}

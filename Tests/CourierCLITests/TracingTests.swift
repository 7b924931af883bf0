import CourierSink
import CourierTesting
import Foundation
import XCTest

@testable import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// Trace context through the queue, end to end: the real `courier worker` delivers to one
/// loopback sink and, when the OTEL_* environment asks, exports its spans over OTLP/HTTP (JSON)
/// to another that stands in for a collector.
final class TracingTests: CLITestCase {
    /// The producer's context: trace id, parent id (its span), sampled.
    private static let traceID = "0af7651916cd43dd8448eb211c80319c"
    private static let producerSpanID = "b7ad6b7169203331"
    private static let producer = "00-\(traceID)-\(producerSpanID)-01"
    private static let failingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    private static let failing = "00-\(failingTraceID)-00f067aa0ba902b7-01"

    /// What the sinks saw, appended from their event loops.
    private final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [SinkRequest] = []
        func append(_ request: SinkRequest) { lock.withLock { values.append(request) } }
        var all: [SinkRequest] { lock.withLock { values } }
    }

    /// One exported span as OTLP/JSON has it (ids in hex or base64, numbers maybe as strings).
    private struct ExportedSpan {
        var traceID: String
        var spanID: String
        var parentSpanID: String
        var name: String
        var kind: Int
        var statusCode: Int
        var statusMessage: String?
        var attributes: [String: String]
    }

    /// A receiver that records every request: 500 for `/fail`, 200 for anything else.
    private func startReceiver() async throws -> (HTTPSink, Seen) {
        let received = Seen()
        let sink = try await HTTPSink.start { request in
            received.append(request)
            return request.path == "/fail" ? .respond(status: 500) : .respond(status: 200)
        }
        return (sink, received)
    }

    /// A stand-in for an OTLP/HTTP collector: records every export and accepts it.
    private func startCollector() async throws -> (HTTPSink, Seen) {
        let exported = Seen()
        let sink = try await HTTPSink.start { request in
            exported.append(request)
            return .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
        }
        return (sink, exported)
    }

    /// ``startReceiver()`` and ``startCollector()``.
    private func startReceiverAndCollector() async throws -> (HTTPSink, Seen, HTTPSink, Seen) {
        let (receiver, received) = try await startReceiver()
        let (collector, exported) = try await startCollector()
        return (receiver, received, collector, exported)
    }

    private static func shutdown(_ sinks: HTTPSink...) async {
        for sink in sinks { await sink.shutdown() }
    }

    private func startWorker(environment extra: [String: String], queue: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = [
            "worker", "--database-url", databaseURL, "--queues", queue, "--allow-private-targets",
            "--poll-interval", "100ms", "--log-level", "error",
        ]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OTEL_") }
        environment.merge(extra) { $1 }
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    private func stop(_ process: Process) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    private func waitFor(_ what: String, seconds: Double = 20, _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        XCTFail("timed out waiting for \(what)")
    }

    /// A 16- or 8-byte id as lower-case hex, from hex or base64 (SwiftProtobuf's JSON for bytes).
    private static func hexID(_ value: Any?) -> String {
        guard let text = value as? String, !text.isEmpty else { return "" }
        if text.count == 32 || text.count == 16, text.allSatisfy(\.isHexDigit) { return text.lowercased() }
        guard let data = Data(base64Encoded: text) else { return text }
        return data.map { String(format: "%02x", $0) }.joined()
    }

    private static func number(_ value: Any?) -> Int {
        if let int = value as? Int { return int }
        if let text = value as? String { return Int(text) ?? -1 }
        return 0
    }

    private static func spans(_ requests: [SinkRequest]) throws -> [ExportedSpan] {
        var spans: [ExportedSpan] = []
        for request in requests where request.path == "/v1/traces" {
            let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            for resource in root["resourceSpans"] as? [[String: Any]] ?? [] {
                for scope in resource["scopeSpans"] as? [[String: Any]] ?? [] {
                    for span in scope["spans"] as? [[String: Any]] ?? [] {
                        var attributes: [String: String] = [:]
                        for attribute in span["attributes"] as? [[String: Any]] ?? [] {
                            guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any]
                            else { continue }
                            if let text = value["stringValue"] as? String {
                                attributes[key] = text
                            } else if let int = value["intValue"] {
                                attributes[key] = "\(number(int))"
                            }
                        }
                        let status = span["status"] as? [String: Any] ?? [:]
                        spans.append(
                            ExportedSpan(
                                traceID: hexID(span["traceId"]), spanID: hexID(span["spanId"]),
                                parentSpanID: hexID(span["parentSpanId"]), name: span["name"] as? String ?? "",
                                kind: number(span["kind"]), statusCode: number(status["code"]),
                                statusMessage: status["message"] as? String, attributes: attributes))
                    }
                }
            }
        }
        return spans
    }

    func testEachAttemptIsASpanUnderTheProducersTraceAndTheReceiverContinuesIt() async throws {
        let (receiver, received, collector, exported) = try await startReceiverAndCollector()
        defer { Task { await Self.shutdown(receiver, collector) } }
        let okID: Int = try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'traced', traceparent => $2)",
            [receiver.baseURL + "/ok", Self.producer])[0].decode(0)
        try connection.simpleQuery("BEGIN; SET LOCAL courier.traceparent = '\(Self.failing)'")
        try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'traced', max_attempts => 1)",
            [receiver.baseURL + "/fail"])
        try connection.simpleQuery("COMMIT")

        let worker = try startWorker(
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.baseURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "courier-test-worker",
            ], queue: "traced")
        defer { stop(worker) }
        try await waitFor("both deliveries and their spans") {
            let spans = try Self.spans(exported.all)
            return received.all.count == 2 && spans.count >= 2
        }
        stop(worker)

        let ok = try XCTUnwrap(received.all.first { $0.path == "/ok" })
        let header = try XCTUnwrap(ok.header("traceparent"), "the receiver got no traceparent")
        let parts = header.split(separator: "-").map(String.init)
        XCTAssertEqual(parts.count, 4, header)
        XCTAssertEqual(parts.first, "00")
        XCTAssertEqual(parts.dropFirst().first, Self.traceID, "the receiver's trace is the producer's")
        let workerSpanID = parts.count == 4 ? parts[2] : ""
        XCTAssertNotEqual(workerSpanID, Self.producerSpanID, "the header names the worker's span, not the producer's")
        XCTAssertEqual(ok.headers.filter { $0.0.lowercased() == "traceparent" }.count, 1)

        let spans = try Self.spans(exported.all)
        let span = try XCTUnwrap(spans.first { $0.traceID == Self.traceID }, "no span of the producer's trace: \(spans)")
        XCTAssertEqual(span.spanID, workerSpanID)
        XCTAssertEqual(span.parentSpanID, Self.producerSpanID)
        XCTAssertEqual(span.name, "courier.deliver")
        XCTAssertEqual(span.kind, 3, "SPAN_KIND_CLIENT")
        XCTAssertNotEqual(span.statusCode, 2, "a delivered attempt is no error")
        XCTAssertEqual(span.attributes["courier.queue"], "traced")
        XCTAssertEqual(span.attributes["courier.job.id"], String(okID))
        XCTAssertEqual(span.attributes["courier.attempt"], "1")
        XCTAssertEqual(span.attributes["server.address"], "127.0.0.1")
        XCTAssertEqual(span.attributes["http.request.method"], "POST")
        XCTAssertEqual(span.attributes["http.response.status_code"], "200")
        XCTAssertEqual(span.attributes["courier.outcome"], "succeed")

        let failed = try XCTUnwrap(spans.first { $0.traceID == Self.failingTraceID }, "no span of the failing job")
        XCTAssertEqual(failed.parentSpanID, "00f067aa0ba902b7")
        XCTAssertEqual(failed.statusCode, 2, "STATUS_CODE_ERROR")
        XCTAssertTrue(failed.statusMessage?.hasPrefix("HTTP 500") == true, "\(failed.statusMessage ?? "no message")")
        XCTAssertEqual(failed.attributes["http.response.status_code"], "500")
        XCTAssertEqual(failed.attributes["courier.outcome"], "retryLater")
        let failedHeader = try XCTUnwrap(received.all.first { $0.path == "/fail" }?.header("traceparent"))
        XCTAssertEqual(failedHeader, "00-\(Self.failingTraceID)-\(failed.spanID)-01")
    }

    func testSpansEndedBeforeSIGTERMAreSentBeforeTheWorkerExits() async throws {
        let (receiver, received, collector, exported) = try await startReceiverAndCollector()
        defer { Task { await Self.shutdown(receiver, collector) } }
        try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'flushed', traceparent => $2)",
            [receiver.baseURL + "/ok", Self.producer])
        // A batch delay far beyond the test: only the shutdown can send the span.
        let worker = try startWorker(
            environment: [
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.baseURL + "/v1/traces",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BSP_SCHEDULE_DELAY": "600000",
            ], queue: "flushed")
        defer { stop(worker) }
        try await waitFor("the delivery") { received.all.count == 1 }
        try await Task.sleep(nanoseconds: 300_000_000)
        XCTAssertEqual(try Self.spans(exported.all).count, 0, "exported before the batch delay")
        stop(worker)
        XCTAssertEqual(worker.terminationReason, .exit, "the worker was killed, not stopped")
        let spans = try Self.spans(exported.all)
        XCTAssertEqual(spans.map(\.traceID), [Self.traceID])
    }

    func testWithoutOTELTheReceiverGetsTheStoredTraceparentUnchanged() async throws {
        let (receiver, received) = try await startReceiver()
        defer { Task { await receiver.shutdown() } }
        let own = "00-11111111111111111111111111111111-2222222222222222-01"
        try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'untraced', traceparent => $2)",
            [receiver.baseURL + "/stored", Self.producer])
        // A traceparent the job's own headers set is the producer's choice and is kept.
        try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', headers => $2::jsonb, queue => 'untraced', traceparent => $3)",
            [receiver.baseURL + "/own", "{\"traceparent\": \"\(own)\"}", Self.producer])
        try connection.query(
            "SELECT courier.enqueue(url => $1, payload => '{}', queue => 'untraced')", [receiver.baseURL + "/none"])
        // A row written around courier.enqueue with a value that is no traceparent: never sent.
        try connection.query(
            """
            INSERT INTO courier.jobs (queue, method, url, headers, body, traceparent)
            VALUES ('untraced', 'POST', $1, '{}', NULL, 'not a trace context')
            """, [receiver.baseURL + "/hand-written"])

        let worker = try startWorker(environment: [:], queue: "untraced")
        defer { stop(worker) }
        try await waitFor("four deliveries") { received.all.count == 4 }
        stop(worker)

        let byPath = Dictionary(received.all.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(byPath["/stored"]?.header("traceparent"), Self.producer)
        XCTAssertEqual(byPath["/own"]?.header("traceparent"), own)
        XCTAssertEqual(byPath["/own"]?.headers.filter { $0.0.lowercased() == "traceparent" }.count, 1)
        XCTAssertNil(byPath["/none"]?.header("traceparent"))
        XCTAssertNil(byPath["/hand-written"]?.header("traceparent"))
    }
}

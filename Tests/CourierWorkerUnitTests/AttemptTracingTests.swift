import CourierCore
import XCTest

@testable import CourierWorker

/// When the worker traces, and which stored values it trusts as a trace context.
final class AttemptTracingTests: XCTestCase {
    func testTracingIsOnlyForTheStandardVariablesThatAskForIt() {
        let cases: [([String: String], Bool)] = [
            ([:], false),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"], true),
            (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"], true),
            (["OTEL_TRACES_EXPORTER": "otlp"], true),
            (["OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"], false),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": ""], false),
            (["OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"], false),
            (["OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"], false),
            (["OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"], true),
            (["OTEL_SERVICE_NAME": "x"], false),
        ]
        for (environment, expected) in cases {
            XCTAssertEqual(WorkerTracing.isRequested(by: environment), expected, "\(environment)")
        }
    }

    func testGRPCExportIsRefusedInOneLineSinceItIsNotBuiltIn() {
        let cases: [([String: String], String?)] = [
            ([:], nil),
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"], nil),
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"], nil),
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
            (["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "GRPC"], "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"),
            // The traces' own setting wins over the general one.
            (["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], nil),
            (["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
        ]
        for (environment, expected) in cases {
            let problem = WorkerTracing.problem(in: environment)
            XCTAssertEqual(problem?.hasPrefix(expected ?? "-"), expected.map { _ in true }, "\(environment): \(problem ?? "nil")")
            XCTAssertFalse(problem?.contains("\n") ?? false)
        }
    }

    func testOnlyAW3CTraceparentIsForwarded() {
        let cases: [(String, Bool)] = [
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true),
            ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true),
            ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false),
            ("00-00000000000000000000000000000000-b7ad6b7169203331-01", false),
            ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false),
            ("00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", false),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ", false),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333\r\n", false),
            ("00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0\u{e9}", false),
            ("", false),
        ]
        for (value, valid) in cases {
            XCTAssertEqual(AttemptTracing.isValid(value), valid, value.debugDescription)
            let job = ClaimedJob(
                id: 1, queue: "q", method: "POST", url: "https://a.example/", headers: [], body: nil, attempt: 1,
                maxAttempts: 1, schedule: .standardWebhooks, signingSecret: nil, queueMaxInFlight: nil,
                traceparent: value)
            XCTAssertEqual(AttemptTracing.forwarded(job), valid ? value : nil, value.debugDescription)
        }
    }
}

import CourierCore
import CourierSecrets
import CourierSink
import CourierTesting
import CourierWorker
import Foundation
import Logging
import Postgres
import XCTest

/// Webhook endpoints end to end: `courier.publish` in PostgreSQL, a worker pool, and a receiver
/// on 127.0.0.1 that checks every signature with the Standard Webhooks reference library
/// (Python `standardwebhooks`). Each test has a database of its own: a worker refuses to start
/// without the key of the secrets it finds, so endpoints must not leak into other tests.
final class WebhookDeliveryTests: XCTestCase {
    private var url: String!
    private var connection: PostgresConnection!
    private var store: WebhookStore!
    private var sink: HTTPSink!
    private let log = SinkLog()
    private var pool: WorkerPool?
    private var deliverers: [HTTPDeliverer] = []
    private let key = try! SecretsKey(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) })
    private let tenant = "acme"

    override func setUp() async throws {
        url = try TestDatabase.create(label: "webhooks")
        connection = try PostgresConnection(url)
        store = WebhookStore(connection: connection)
        let log = self.log
        sink = try await HTTPSink.start { request in
            _ = log.record(request, key: request.header("webhook-id") ?? "?")
            return request.path == "/fail" ? .respond(status: 500) : .respond(status: 204)
        }
    }

    override func tearDown() async throws {
        pool?.shutdown()
        deliverers.forEach { $0.shutdown() }
        await sink?.shutdown()
        connection?.close()
        if let url { TestDatabase.drop(url) }
    }

    private func makePool(key: SecretsKey?) -> WorkerPool {
        var http = HTTPDelivererConfiguration()
        http.allowPrivateTargets = true
        http.totalTimeout = .seconds(5)
        http.secretsKey = key
        var logger = Logger(label: "test.webhooks")
        logger.logLevel = .warning
        let deliverer = HTTPDeliverer(configuration: http, logger: logger)
        deliverers.append(deliverer)
        return WorkerPool(
            databaseURL: url,
            configuration: WorkerConfiguration(workerID: "webhooks-test", concurrency: 16, pollInterval: .milliseconds(50)),
            deliverer: deliverer, secretsKey: key, logger: logger)
    }

    private func startPool() throws {
        let pool = makePool(key: key)
        try pool.start()
        self.pool = pool
    }

    /// Adds an endpoint whose first secret is `secret`; returns its id.
    private func addEndpoint(path: String, secret: String, patterns: [String] = ["*"]) throws -> Int64 {
        try store.addEndpoint(
            NewEndpoint(url: sink.baseURL + path, eventTypes: patterns, tenant: tenant),
            seal: { key.seal(secret, endpointID: $0) })
    }

    private func waitForRequests(_ count: Int, webhookID: String) throws -> [SinkRequest] {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let seen = log.all.filter { $0.header("webhook-id") == webhookID }
            if seen.count >= count { return seen }
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTFail("\(count) request(s) with webhook-id \(webhookID) did not arrive; saw \(log.all.count) in all")
        return log.all.filter { $0.header("webhook-id") == webhookID }
    }

    func testSignaturesVerifyWithTheReferenceLibraryThroughARotation() throws {
        let verifier = try StandardWebhooksVerifier()
        let first = SecretsKey.newWebhookSecret()
        let endpoint = try addEndpoint(path: "/hook", secret: first)
        let other = try addEndpoint(path: "/other", secret: SecretsKey.newWebhookSecret(), patterns: ["order.*"])
        try startPool()

        // One message fans out to both endpoints; each signs with its own secret.
        let message = try store.publish(eventType: "order.paid", payload: #"{"order": 7, "name": "Zoë"}"#, tenant: tenant)
        XCTAssertEqual(message.endpoints, 2)
        let requests = try waitForRequests(2, webhookID: "msg_\(message.messageID)")
        let atEndpoint = try XCTUnwrap(requests.first { $0.path == "/hook" })
        XCTAssertTrue(try verifier.verifies(atEndpoint, secret: first))
        let atOther = try XCTUnwrap(requests.first { $0.path == "/other" })
        XCTAssertFalse(try verifier.verifies(atOther, secret: first), "another endpoint's secret does not verify")
        let body = try JSONSerialization.jsonObject(with: Data(atEndpoint.body)) as? [String: Any]
        XCTAssertEqual(body?["type"] as? String, "order.paid")
        XCTAssertEqual((body?["data"] as? [String: Any])?["name"] as? String, "Zoë")
        _ = other

        // Rotation with a grace: both the old and the new secret verify.
        let second = SecretsKey.newWebhookSecret()
        _ = try store.rotateSecret(endpoint, grace: .seconds(3600), seal: { key.seal(second, endpointID: $0) })
        let during = try store.publish(eventType: "invoice.paid", payload: "{}", tenant: tenant)
        let duringRequest = try XCTUnwrap(try waitForRequests(1, webhookID: "msg_\(during.messageID)").first)
        XCTAssertEqual(duringRequest.header("webhook-signature")?.split(separator: " ").count, 2)
        XCTAssertTrue(try verifier.verifies(duringRequest, secret: first))
        XCTAssertTrue(try verifier.verifies(duringRequest, secret: second))

        // After the grace (time moved on by hand): only the new one.
        try connection.query(
            "UPDATE courier.endpoint_secrets SET expires_at = now() - interval '1 second' WHERE endpoint_id = $1 AND expires_at IS NOT NULL",
            [endpoint])
        let after = try store.publish(eventType: "invoice.paid", payload: "{}", tenant: tenant)
        let afterRequest = try XCTUnwrap(try waitForRequests(1, webhookID: "msg_\(after.messageID)").first)
        XCTAssertEqual(afterRequest.header("webhook-signature")?.split(separator: " ").count, 1)
        XCTAssertFalse(try verifier.verifies(afterRequest, secret: first))
        XCTAssertTrue(try verifier.verifies(afterRequest, secret: second))

        // A re-send reaches the receiver with the same webhook-id, signed afresh.
        let resent = try store.resend(messageID: message.messageID, endpointID: endpoint)
        XCTAssertEqual(resent.count, 1)
        let again = try waitForRequests(3, webhookID: "msg_\(message.messageID)").filter { $0.path == "/hook" }
        XCTAssertEqual(again.count, 2)
        XCTAssertEqual(again[1].body, again[0].body, "the receiver gets the same bytes again")
        XCTAssertTrue(try verifier.verifies(again[1], secret: second))
    }

    func testAFailedEndpointIsRecoveredWithTheSameWebhookID() throws {
        let secret = SecretsKey.newWebhookSecret()
        let endpoint = try addEndpoint(path: "/fail", secret: secret)
        try connection.query("INSERT INTO courier.queues (name, max_attempts) VALUES ('webhooks', 1)")
        try startPool()
        let message = try store.publish(eventType: "order.paid", payload: "{}", tenant: tenant)
        _ = try waitForRequests(1, webhookID: "msg_\(message.messageID)")
        let probe = try JobsProbe(url: url)
        defer { probe.close() }
        XCTAssertTrue(try probe.waitUntilSettled(queue: "webhooks", timeout: .seconds(10)))
        let recovered = try store.recover(endpointID: endpoint, since: Date().addingTimeInterval(-60))
        XCTAssertEqual(recovered.map(\.messageID), [message.messageID])
        let both = try waitForRequests(2, webhookID: "msg_\(message.messageID)")
        XCTAssertEqual(both.count, 2)
        let detail = try XCTUnwrap(try store.message(message.messageID))
        XCTAssertEqual(detail.deliveries.count, 2)
        XCTAssertEqual(detail.deliveries[1].resentFrom, detail.deliveries[0].jobID)
    }

    func testAWorkerWithoutTheKeyOrWithAnotherKeyRefusesToStart() throws {
        // No endpoint secrets yet: a worker without a key starts.
        let plain = makePool(key: nil)
        try plain.start()
        plain.shutdown()

        _ = try addEndpoint(path: "/hook", secret: SecretsKey.newWebhookSecret())
        XCTAssertThrowsError(try makePool(key: nil).start()) { error in
            XCTAssertTrue("\(error)".contains("COURIER_SECRETS_KEY_FILE"), "\(error)")
        }
        let wrong = try SecretsKey(bytes: [UInt8](repeating: 7, count: 32))
        XCTAssertThrowsError(try makePool(key: wrong).start()) { error in
            XCTAssertTrue("\(error)".contains("not the key the secrets were sealed with"), "\(error)")
        }

        // The same through `courier worker`: exit 2, one line naming the setting.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-key-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let wrongFile = directory.appendingPathComponent("wrong.key").path
        try Data((Data([UInt8](repeating: 7, count: 32)).base64EncodedString() + "\n").utf8).write(to: URL(fileURLWithPath: wrongFile))
        let shortFile = directory.appendingPathComponent("short.key").path
        try Data("c2hvcnQ=\n".utf8).write(to: URL(fileURLWithPath: shortFile))
        let cases: [([String], [String: String], String)] = [
            ([], [:], "COURIER_SECRETS_KEY_FILE"),
            (["--secrets-key-file", wrongFile], [:], "not the key the secrets were sealed with"),
            ([], ["COURIER_SECRETS_KEY_FILE": directory.appendingPathComponent("missing").path], "(No such file or directory) (from COURIER_SECRETS_KEY_FILE)"),
            (["--secrets-key-file", shortFile], [:], "must hold 32 bytes in base64, got 5 (make one with: openssl rand -base64 32) (from --secrets-key-file)"),
        ]
        for (arguments, environment, fragment) in cases {
            let result = try CourierRunner.run(
                ["worker", "--allow-private-targets"] + arguments, databaseURL: url, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments) \(environment): \(result.stderr)")
            XCTAssertEqual(result.stderrLines.count, 1, result.stderr)
            XCTAssertTrue(result.stderr.contains(fragment), "\(fragment) not in \(result.stderr)")
        }
    }

    func testADumpOfTheDatabaseHoldsNoSecretInClear() throws {
        let secret = SecretsKey.newWebhookSecret()
        let endpoint = try addEndpoint(path: "/hook", secret: secret)
        let rotated = SecretsKey.newWebhookSecret()
        _ = try store.rotateSecret(endpoint, grace: .seconds(60), seal: { key.seal(rotated, endpointID: $0) })
        let pgDump = try XCTUnwrap(
            (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?.sorted().reversed()
                .map { "/usr/lib/postgresql/\($0)/bin/pg_dump" }.first { FileManager.default.isExecutableFile(atPath: $0) },
            "pg_dump not found")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("courier-dump-\(UUID().uuidString).sql")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pgDump)
        process.arguments = ["--data-only", "--inserts", "--file", output.path, "--dbname", url]
        try process.run()
        waitForExit(process)
        XCTAssertEqual(process.terminationStatus, 0)
        let dump = try String(contentsOf: output, encoding: .utf8)
        XCTAssertTrue(dump.contains("endpoint_secrets"), "the dump holds the secrets table")
        for plain in [secret, rotated] {
            let encoded = String(plain.dropFirst("whsec_".count))
            XCTAssertFalse(dump.contains(encoded), "a secret is in the dump in clear")
            let raw = try XCTUnwrap(Data(base64Encoded: encoded))
            XCTAssertFalse(dump.contains(raw.map { String(format: "%02x", $0) }.joined()), "a secret's bytes are in the dump")
        }
        XCTAssertFalse(dump.contains("whsec_"))
    }
}

/// Runs the Standard Webhooks reference library (Python `standardwebhooks`) over a request the
/// receiver got. Missing: the test fails under `CI=true` and is skipped loudly elsewhere.
struct StandardWebhooksVerifier {
    private let python: String

    init() throws {
        let candidates = ["/usr/bin/env"]
        python = candidates[0]
        let check = Process()
        check.executableURL = URL(fileURLWithPath: python)
        check.arguments = ["python3", "-c", "import standardwebhooks"]
        check.standardError = FileHandle.nullDevice
        try check.run()
        waitForExit(check)
        if check.terminationStatus != 0 {
            let message = "the Python package standardwebhooks is missing (python3 -m pip install standardwebhooks)"
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                throw MissingPrerequisite(description: message + " (CI=true: a missing prerequisite is a failure)")
            }
            print("warning: SKIPPING signature check with the reference library: \(message)")
            throw XCTSkip(message)
        }
    }

    /// True when the library accepts the request's signature for `secret`.
    func verifies(_ request: SinkRequest, secret: String) throws -> Bool {
        let script = """
            import json, sys
            from standardwebhooks.webhooks import Webhook, WebhookVerificationError
            given = json.loads(sys.stdin.read())
            try:
                Webhook(given["secret"]).verify(bytes.fromhex(given["body"]), given["headers"])
                print("ok")
            except WebhookVerificationError as error:
                print("refused: %s" % error)
            """
        let input: [String: Any] = [
            "secret": secret, "body": request.body.map { String(format: "%02x", $0) }.joined(),
            "headers": [
                "webhook-id": request.header("webhook-id") ?? "", "webhook-timestamp": request.header("webhook-timestamp") ?? "",
                "webhook-signature": request.header("webhook-signature") ?? "",
            ],
        ]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["python3", "-c", script]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        stdin.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: input))
        try stdin.fileHandleForWriting.close()
        let answer = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waitForExit(process)
        guard process.terminationStatus == 0 else { throw MissingPrerequisite(description: "the verifier failed: \(answer)") }
        return answer.trimmingCharacters(in: .whitespacesAndNewlines) == "ok"
    }
}

import CourierSecrets
import CourierSink
import CourierTesting
import Foundation
import Postgres
import RetryClient
import XCTest

/// `courier endpoints`, `courier publish` and `courier messages` through the real binary
/// against a real database, with a secrets key file of the test's own.
final class WebhookCommandTests: CLITestCase {
    private var directory: URL!
    private var keyPath = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-webhooks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var random = SystemRandomNumberGenerator()
        let key = Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
        keyPath = try write("secrets.key", key + "\n")
    }

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
        super.tearDown()
    }

    private func write(_ name: String, _ contents: String) throws -> String {
        let path = directory.appendingPathComponent(name).path
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(contents.utf8)), path)
        return path
    }

    /// Runs `courier` with `COURIER_SECRETS_KEY_FILE` set to the test's key, or cleared (the
    /// runner inherits the test process's environment, which must not supply one).
    private func run(_ arguments: String..., key: Bool = true, stdin: Data? = nil) throws -> CommandResult {
        try CourierRunner.run(
            arguments, databaseURL: databaseURL, stdin: stdin,
            environment: ["COURIER_SECRETS_KEY_FILE": key ? keyPath : ""])
    }

    private func ok(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) -> CommandResult {
        XCTAssertEqual(result.status, 0, "stderr: \(result.stderr) stdout: \(result.stdout)", file: file, line: line)
        XCTAssertEqual(result.stderr, "", file: file, line: line)
        return result
    }

    private func object(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(try ok(result, file: file, line: line).json() as? [String: Any], result.stdout, file: file, line: line)
    }

    private func int(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }

    /// Adds an endpoint with `--json` and returns its id and secret.
    private func add(
        url: String = "https://hooks.acme.example/in", events: String = "invoice.*,order.paid", tenant: String? = "acme",
        _ extra: [String] = []
    ) throws -> (id: Int64, secret: String) {
        var arguments = ["endpoints", "add", "--url", url, "--events", events, "--json"] + extra
        if let tenant { arguments += ["--tenant", tenant] }
        let result = try CourierRunner.run(
            arguments, databaseURL: databaseURL, environment: ["COURIER_SECRETS_KEY_FILE": keyPath])
        let json = try object(result)
        return (try XCTUnwrap(int(json["id"])), try XCTUnwrap(json["secret"] as? String))
    }

    private func sealedSecrets(_ endpoint: Int64) throws -> [[UInt8]] {
        try connection.query(
            "SELECT sealed FROM courier.endpoint_secrets WHERE endpoint_id = $1 ORDER BY id", [endpoint]
        ).rows.map { try $0.decode(0, as: [UInt8].self) }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    private var endpointCount: Int { get throws { try count("SELECT count(*) FROM courier.endpoints") } }
    private var secretCount: Int { get throws { try count("SELECT count(*) FROM courier.endpoint_secrets") } }

    // MARK: Secrets

    func testAddPrintsTheIDAndTheSecretOnceAndStoresItOnlySealed() throws {
        let (id, secret) = try add()
        XCTAssertTrue(secret.hasPrefix("whsec_"), secret)
        XCTAssertEqual(Data(base64Encoded: String(secret.dropFirst(6)))?.count, 32)
        XCTAssertEqual(
            try connection.query("SELECT tenant, url, event_types::text FROM courier.endpoints WHERE id = $1", [id]).rows
                .map { [try $0.decode(0, as: String.self), try $0.decode(1, as: String.self), try $0.decode(2, as: String.self)] },
            [["acme", "https://hooks.acme.example/in", "{invoice.*,order.paid}"]])

        // What the database holds is sealed: neither the secret's text nor its key bytes are in
        // it, and only the key file (for this endpoint) opens it.
        let sealed = try sealedSecrets(id)
        XCTAssertEqual(sealed.count, 1)
        let keyBytes = Array(Data(base64Encoded: String(secret.dropFirst(6)))!)
        for needle in [Array(secret.utf8), Array(secret.dropFirst(6).utf8), keyBytes] {
            XCTAssertFalse(Self.contains(sealed[0], needle))
        }
        let key = try SecretsKey.load(path: keyPath)
        XCTAssertEqual(try key.open(sealed[0], endpointID: id), secret)
        XCTAssertThrowsError(try key.open(sealed[0], endpointID: id + 1))

        // Human output: the id, the secret once, and that it is shown only now.
        let human = ok(try run("endpoints", "add", "--url", "https://ops.example/hook", "--events", "*"))
        let lines = human.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].hasPrefix("Endpoint ") && lines[0].contains(" added"), human.stdout)
        XCTAssertEqual(lines.filter { $0.hasPrefix("Secret: whsec_") }.count, 1, human.stdout)
        XCTAssertEqual(human.stdout.components(separatedBy: "whsec_").count, 2, human.stdout)
        XCTAssertTrue(human.stdout.contains("shown only now"), human.stdout)

        // Nothing else ever prints a secret.
        for arguments in [
            ["endpoints"], ["endpoints", "list"], ["endpoints", "list", "--json"], ["endpoints", "show", "\(id)"],
            ["endpoints", "show", "\(id)", "--json"], ["endpoints", "list", "--tenant", "acme"],
        ] {
            let result = ok(try CourierRunner.run(
                arguments, databaseURL: databaseURL, environment: ["COURIER_SECRETS_KEY_FILE": keyPath]))
            XCTAssertFalse(result.stdout.contains("whsec_"), "\(arguments): \(result.stdout)")
            XCTAssertFalse(result.stdout.contains(String(secret.dropFirst(6))), "\(arguments)")
        }
        let shown = try object(try run("endpoints", "show", "\(id)", "--json"))
        XCTAssertEqual(int(shown["valid_secrets"]), 1)
        XCTAssertTrue(shown["retiring_until"] is NSNull)
        XCTAssertEqual(shown["event_types"] as? [String], ["invoice.*", "order.paid"])
    }

    func testAddWithoutAKeyIsAUsageErrorNamingTheSettingAndWritesNothing() throws {
        let result = try run("endpoints", "add", "--url", "https://hooks.acme.example/in", "--events", "*", key: false)
        assertFails(result, code: 2, mentioning: "COURIER_SECRETS_KEY_FILE")
        XCTAssertEqual(try endpointCount, 0)
        XCTAssertEqual(try secretCount, 0)
        assertFails(try run("endpoints", "rotate-secret", "1", key: false), code: 2, mentioning: "COURIER_SECRETS_KEY_FILE")
    }

    func testKeyFilesThatAreMissingNotBase64OrNotThirtyTwoBytesAreOneUsageLine() throws {
        let missing = directory.appendingPathComponent("nowhere.key").path
        let notBase64 = try write("text.key", "this is not base64 !!!\n")
        let short = try write("short.key", Data(repeating: 7, count: 16).base64EncodedString() + "\n")
        let cases: [(path: String, fragment: String)] = [
            (missing, "No such file"), (notBase64, "base64"), (short, "32 bytes"),
        ]
        for (path, fragment) in cases {
            let viaEnvironment = try CourierRunner.run(
                ["endpoints", "add", "--url", "https://hooks.acme.example/in", "--events", "*"], databaseURL: databaseURL,
                environment: ["COURIER_SECRETS_KEY_FILE": path])
            assertFails(viaEnvironment, code: 2, mentioning: fragment)
            XCTAssertTrue(viaEnvironment.stderr.contains("COURIER_SECRETS_KEY_FILE"), viaEnvironment.stderr)
            let viaFlag = try run(
                "endpoints", "add", "--url", "https://hooks.acme.example/in", "--events", "*", "--secrets-key-file", path,
                key: false)
            assertFails(viaFlag, code: 2, mentioning: fragment)
            XCTAssertTrue(viaFlag.stderr.contains("--secrets-key-file"), viaFlag.stderr)
        }
        XCTAssertEqual(try endpointCount, 0)
        XCTAssertEqual(try secretCount, 0)
    }

    // MARK: Validation

    func testInvalidInputIsAUsageErrorAndWritesNothing() throws {
        let url = "https://hooks.acme.example/in"
        let cases: [(arguments: [String], fragment: String)] = [
            (["--url", url, "--events", "invoice..paid"], "event_types"),
            (["--url", url, "--events", "invoice.*.paid"], "event_types"),
            (["--url", url, "--events", "*", "--filter", "{plan: pro"], "--filter is not JSON"),
            (["--url", url, "--events", "*", "--filter", "[1, 2]"], "--filter must be a JSON object"),
            (["--url", url, "--events", "*", "--header", "X-Token s3cr3t-value"], "--header"),
            (["--url", url, "--events", "*", "--header", ": value"], "the name is empty"),
            (["--url", url, "--events", "*", "--header", "webhook-id: mine"], "set by Courier"),
            (["--url", "ftp://hooks.acme.example/in", "--events", "*"], "url"),
            (["--url", url, "--events", "*", "--rate-limit", "0"], "rate_limit"),
            (["--url", url, "--events", "*", "--tenant", ""], "tenant"),
        ]
        for (arguments, fragment) in cases {
            let result = try CourierRunner.run(
                ["endpoints", "add"] + arguments, databaseURL: databaseURL,
                environment: ["COURIER_SECRETS_KEY_FILE": keyPath])
            assertFails(result, code: 2, mentioning: fragment)
            XCTAssertFalse(result.stderr.contains("s3cr3t-value"), result.stderr)
        }
        XCTAssertEqual(try endpointCount, 0)
        XCTAssertEqual(try secretCount, 0)

        // '' is a valid list of no events.
        let (quiet, _) = try add(events: "")
        XCTAssertEqual(try count("SELECT cardinality(event_types) FROM courier.endpoints WHERE id = $1", [quiet]), 0)
        assertFails(try run("endpoints", "show", "seven"), code: 2, mentioning: "not an endpoint id")
        assertFails(try run("messages", "show", "0"), code: 2, mentioning: "not a message id")
    }

    func testUnknownEndpointsAndMessagesExitThree() throws {
        let commands: [[String]] = [
            ["endpoints", "show", "999"], ["endpoints", "update", "999", "--url", "https://x.example/"],
            ["endpoints", "disable", "999"], ["endpoints", "enable", "999"], ["endpoints", "delete", "999"],
            ["endpoints", "rotate-secret", "999"], ["endpoints", "recover", "999", "--since", "1h"],
            ["endpoints", "test", "999"], ["messages", "show", "999"], ["messages", "resend", "999"],
        ]
        for arguments in commands {
            let result = try CourierRunner.run(
                arguments, databaseURL: databaseURL, environment: ["COURIER_SECRETS_KEY_FILE": keyPath])
            assertFails(result, code: 3, mentioning: "999")
        }
        let message = try object(try run("publish", "--type", "order.paid", "--data", "{}", "--json"))
        assertFails(
            try run("messages", "resend", "\(int(message["id"])!)", "--endpoint", "999"), code: 3, mentioning: "no endpoint 999")
    }

    // MARK: Publish and messages

    func testPublishFansOutAndMessagesShowTheDeliveries() throws {
        let (invoices, _) = try add(url: "https://hooks.acme.example/invoices", events: "invoice.*")
        let (orders, _) = try add(url: "https://hooks.acme.example/orders", events: "order.*")
        _ = try add(url: "https://hooks.other.example/all", events: "*", tenant: "other")

        let published = ok(try run(
            "publish", "--type", "invoice.paid", "--tenant", "acme", "--data", #"{"invoice":"in_42","amount":1200}"#))
        let id = try XCTUnwrap(Int64(
            published.stdout.split(separator: " ").dropFirst(2).first.map(String.init) ?? ""), published.stdout)
        XCTAssertEqual(published.stdout, "Published message \(id) (msg_\(id)) to 1 endpoint.\n")
        let job = try connection.query(
            "SELECT id, endpoint_id, headers->>'webhook-id' FROM courier.jobs WHERE message_id = $1", [id]).rows
        XCTAssertEqual(job.count, 1)
        XCTAssertEqual(try job[0].decode(1, as: Int64.self), invoices)
        XCTAssertEqual(try job[0].decode(2, as: String.self), "msg_\(id)")
        let jobID = try job[0].decode(0, as: Int64.self)

        // JSON, an idempotency key used twice, stdin, a message nobody wants.
        let first = try object(try run(
            "publish", "--type", "order.paid", "--tenant", "acme", "--data", "-", "--idempotency-key", "order-7", "--json",
            stdin: Data(#"{"order":7}"#.utf8)))
        XCTAssertEqual(first["webhook_id"] as? String, "msg_\(int(first["id"])!)")
        XCTAssertEqual(int(first["endpoints"]), 1)
        XCTAssertEqual(first["duplicate"] as? Bool, false)
        let again = try object(try run(
            "publish", "--type", "order.paid", "--tenant", "acme", "--data", #"{"order":8}"#, "--idempotency-key",
            "order-7", "--json"))
        XCTAssertEqual(int(again["id"]), int(first["id"]))
        XCTAssertEqual(again["duplicate"] as? Bool, true)
        let againHuman = ok(try run(
            "publish", "--type", "order.paid", "--tenant", "acme", "--data", "{}", "--idempotency-key", "order-7"))
        XCTAssertTrue(againHuman.stdout.contains("already published as message \(int(first["id"])!); nothing new was sent"))
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE endpoint_id = $1", [orders]), 1)
        let nobody = ok(try run("publish", "--type", "shipment.sent", "--tenant", "acme", "--data", "[1,2]"))
        XCTAssertTrue(nobody.stdout.contains("matched no endpoint; the message is kept"), nobody.stdout)

        assertFails(try run("publish", "--type", "x", "--data", "{nope"), code: 2, mentioning: "--data is not JSON")
        assertFails(try run("publish", "--type", "not a type", "--data", "{}"), code: 2, mentioning: "event_type")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.messages"), 3)

        // messages show: the payload and the delivery.
        let show = ok(try run("messages", "show", "\(id)"))
        XCTAssertTrue(show.stdout.contains("Message \(id) (msg_\(id))  invoice.paid  tenant acme"), show.stdout)
        XCTAssertTrue(show.stdout.contains(#""invoice" : "in_42""#) || show.stdout.contains(#""invoice": "in_42""#), show.stdout)
        for column in ["JOB", "ENDPOINT", "URL", "STATE", "ATTEMPT", "LAST STATUS", "LAST ERROR", "RESENT FROM"] {
            XCTAssertTrue(show.stdout.contains(column), column)
        }
        XCTAssertTrue(show.stdout.contains("\(jobID)  ") && show.stdout.contains("https://hooks.acme.example/invoices"))
        let detail = try object(try run("messages", "show", "\(id)", "--json"))
        XCTAssertEqual((detail["payload"] as? [String: Any])?["invoice"] as? String, "in_42")
        let deliveries = try XCTUnwrap(detail["deliveries"] as? [[String: Any]])
        XCTAssertEqual(deliveries.map { int($0["job_id"]) }, [jobID])
        XCTAssertEqual(deliveries.first?["state"] as? String, "pending")

        // messages list, filtered and paged.
        let listed = try XCTUnwrap(try ok(try run("messages", "list", "--tenant", "acme", "--json")).json() as? [[String: Any]])
        XCTAssertEqual(listed.count, 3)
        XCTAssertEqual(listed.map { int($0["id"])! }, listed.map { int($0["id"])! }.sorted(by: >))
        let invoicesOnly = try XCTUnwrap(
            try ok(try run("messages", "list", "--type", "invoice.paid", "--json")).json() as? [[String: Any]])
        XCTAssertEqual(invoicesOnly.map { int($0["id"]) }, [id])
        let page = ok(try run("messages", "list", "--limit", "1"))
        XCTAssertTrue(page.stdout.contains("--before"), page.stdout)
        let table = ok(try run("messages"))
        XCTAssertTrue(table.stdout.contains("invoice.paid") && table.stdout.contains("1 waiting"), table.stdout)
    }

    func testResendAndRecoverWriteDeliveriesWithTheSameWebhookID() throws {
        let (endpoint, _) = try add(url: "https://hooks.acme.example/in", events: "order.*")
        let (other, _) = try add(url: "https://hooks.other.example/in", events: "*", tenant: "other")
        let message = try XCTUnwrap(int(try object(try run(
            "publish", "--type", "order.paid", "--tenant", "acme", "--data", "{}", "--json"))["id"]))
        let original: Int64 = try connection.query("SELECT id FROM courier.jobs WHERE message_id = $1", [message])[0].decode(0)

        let resent = try object(try run("messages", "resend", "\(message)", "--json"))
        let delivery = try XCTUnwrap((resent["deliveries"] as? [[String: Any]])?.first)
        let newJob = try XCTUnwrap(int(delivery["job_id"]))
        XCTAssertEqual(int(delivery["resent_from"]), original)
        let row = try connection.query(
            "SELECT headers->>'webhook-id', resent_from, endpoint_id FROM courier.jobs WHERE id = $1", [newJob])[0]
        XCTAssertEqual(try row.decode(0, as: String.self), "msg_\(message)")
        XCTAssertEqual(try row.decode(1, as: Int64.self), original)
        XCTAssertEqual(try row.decode(2, as: Int64.self), endpoint)
        let human = ok(try run("messages", "resend", "\(message)", "--endpoint", "\(endpoint)"))
        XCTAssertTrue(human.stdout.hasPrefix("Re-sent message \(message) (msg_\(message)) as 1 delivery: jobs "), human.stdout)

        // Refusals: another tenant's endpoint, a disabled one.
        assertFails(try run("messages", "resend", "\(message)", "--endpoint", "\(other)"), code: 1, mentioning: "belongs to")
        _ = ok(try run("endpoints", "disable", "\(endpoint)"))
        assertFails(try run("messages", "resend", "\(message)", "--endpoint", "\(endpoint)"), code: 1, mentioning: "disabled")
        assertFails(try run("endpoints", "recover", "\(endpoint)", "--since", "1h"), code: 1, mentioning: "disabled")
        _ = ok(try run("endpoints", "enable", "\(endpoint)"))

        // Recover: a second message whose only delivery went dead is re-sent; the first, whose
        // latest delivery is waiting, is not.
        let second = try XCTUnwrap(int(try object(try run(
            "publish", "--type", "order.shipped", "--tenant", "acme", "--data", "{}", "--json"))["id"]))
        let dead: Int64 = try connection.query(
            """
            UPDATE courier.jobs SET state = 'dead', attempt = 1, finished_at = now(), last_error = 'HTTP 503'
            WHERE message_id = $1 RETURNING id
            """, [second])[0].decode(0)
        let nothing = ok(try run("endpoints", "recover", "\(endpoint)", "--since", "2099-01-01T00:00:00Z"))
        XCTAssertTrue(nothing.stdout.hasPrefix("Nothing to re-send"), nothing.stdout)
        let recovered = try object(try run("endpoints", "recover", "\(endpoint)", "--since", "1h", "--json"))
        XCTAssertEqual(int(recovered["resent"]), 1)
        let again = try XCTUnwrap((recovered["deliveries"] as? [[String: Any]])?.first)
        XCTAssertEqual(int(again["message_id"]), second)
        XCTAssertEqual(int(again["resent_from"]), dead)
        let recoveredRow = try connection.query(
            "SELECT headers->>'webhook-id', resent_from FROM courier.jobs WHERE id = $1", [int(again["job_id"])!])[0]
        XCTAssertEqual(try recoveredRow.decode(0, as: String.self), "msg_\(second)")
        XCTAssertEqual(try recoveredRow.decode(1, as: Int64.self), dead)
        let show = ok(try run("messages", "show", "\(second)"))
        XCTAssertTrue(show.stdout.contains("HTTP 503"), show.stdout)
        assertFails(try run("endpoints", "recover", "\(endpoint)", "--since", "soon"), code: 2, mentioning: "--since")
    }

    // MARK: Endpoint life

    func testRotateSecretPrintsANewSecretAndBothSign() throws {
        let (id, first) = try add()
        let rotated = try object(try run("endpoints", "rotate-secret", "\(id)", "--json"))
        let second = try XCTUnwrap(rotated["secret"] as? String)
        XCTAssertTrue(second.hasPrefix("whsec_"))
        XCTAssertNotEqual(second, first)
        XCTAssertEqual(int(rotated["id"]), id)
        let expires = try XCTUnwrap(rotated["previous_expires_at"] as? String)
        let expiry = try XCTUnwrap(ISO8601DateFormatter.withFractionalSeconds.date(from: expires), expires)
        XCTAssertEqual(expiry.timeIntervalSinceNow, 86_400, accuracy: 120)
        XCTAssertEqual(
            try count(
                "SELECT count(*) FROM courier.endpoint_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())",
                [id]), 2)
        let key = try SecretsKey.load(path: keyPath)
        XCTAssertEqual(Set(try sealedSecrets(id).map { try key.open($0, endpointID: id) }), [first, second])
        let show = ok(try run("endpoints", "show", "\(id)"))
        XCTAssertTrue(show.stdout.contains("2 secrets sign; the previous one until"), show.stdout)
        XCTAssertFalse(show.stdout.contains("whsec_"))

        let now = ok(try run("endpoints", "rotate-secret", "\(id)", "--grace", "0s"))
        XCTAssertEqual(now.stdout.components(separatedBy: "Secret: whsec_").count, 2, now.stdout)
        XCTAssertTrue(now.stdout.contains("The previous secret no longer signs."), now.stdout)
        assertFails(try run("endpoints", "rotate-secret", "\(id)", "--grace", "1"), code: 2, mentioning: "--grace")
        assertFails(try run("endpoints", "rotate-secret", "\(id)", "--grace", "90d"), code: 2, mentioning: "--grace")
    }

    func testUpdateDisableEnableAndDelete() throws {
        let (id, _) = try add()
        assertFails(try run("endpoints", "update", "\(id)"), code: 2, mentioning: "nothing to change")
        assertFails(
            try run("endpoints", "update", "\(id)", "--filter", "{}", "--no-filter"), code: 2, mentioning: "not both")
        assertFails(try run("endpoints", "update", "\(id)", "--events", "bad pattern"), code: 2, mentioning: "event_types")
        assertFails(try run("endpoints", "update", "\(id)", "--filter", "nope"), code: 2, mentioning: "--filter")
        let updated = try object(try run(
            "endpoints", "update", "\(id)", "--url", "https://hooks.acme.example/v2", "--events", "order.*",
            "--filter", #"{"region":"eu"}"#, "--header", "X-Team: billing", "--header", "Authorization: Bearer tok3n-value",
            "--rate-limit", "5", "--ordered", "--description", "Acme's receiver", "--json"))
        XCTAssertEqual(updated["url"] as? String, "https://hooks.acme.example/v2")
        XCTAssertEqual(updated["event_types"] as? [String], ["order.*"])
        XCTAssertEqual((updated["payload_filter"] as? [String: Any])?["region"] as? String, "eu")
        XCTAssertEqual((updated["rate_limit"] as? NSNumber)?.doubleValue, 5)
        XCTAssertEqual(updated["ordered"] as? Bool, true)
        XCTAssertFalse(ok(try run("endpoints", "show", "\(id)")).stdout.contains("tok3n-value"))
        XCTAssertFalse(ok(try run("endpoints", "show", "\(id)", "--json")).stdout.contains("tok3n-value"))
        let show = ok(try run("endpoints", "show", "\(id)"))
        for fragment in ["X-Team: billing", "rate limit   5/s", "order.*", #"{"region": "eu"}"#, "Acme's receiver"] {
            XCTAssertTrue(show.stdout.contains(fragment), "\(fragment) not in \(show.stdout)")
        }
        _ = ok(try run(
            "endpoints", "update", "\(id)", "--no-filter", "--no-headers", "--no-rate-limit", "--unordered"))
        let row = try connection.query(
            "SELECT payload_filter IS NULL, headers = '{}', rate_limit IS NULL, ordered FROM courier.endpoints WHERE id = $1",
            [id])[0]
        XCTAssertEqual(
            [try row.decode(0, as: Bool.self), try row.decode(1, as: Bool.self), try row.decode(2, as: Bool.self),
             try row.decode(3, as: Bool.self)], [true, true, true, false])

        // Disabled: no new messages; the reason shows in the list; a second disable keeps it.
        let disabled = ok(try run("endpoints", "disable", "\(id)", "--reason", "customer asked to pause"))
        XCTAssertTrue(disabled.stdout.contains("disabled"), disabled.stdout)
        XCTAssertTrue(ok(try run("endpoints", "disable", "\(id)")).stdout.contains("disabled already"))
        let list = ok(try run("endpoints", "list"))
        XCTAssertTrue(list.stdout.contains("disabled: customer asked to pause"), list.stdout)
        for column in ["ID", "TENANT", "URL", "EVENTS", "QUEUE", "STATE", "HEALTH", "RECENT", "LAST SUCCESS"] {
            XCTAssertTrue(list.stdout.contains(column), column)
        }
        let skipped = try object(try run("publish", "--type", "order.paid", "--tenant", "acme", "--data", "{}", "--json"))
        XCTAssertEqual(int(skipped["endpoints"]), 0)
        let enabled = try object(try run("endpoints", "enable", "\(id)", "--json"))
        XCTAssertEqual(enabled["changed"] as? Bool, true)
        let sent = try object(try run("publish", "--type", "order.paid", "--tenant", "acme", "--data", "{}", "--json"))
        XCTAssertEqual(int(sent["endpoints"]), 1)
        let listed = try XCTUnwrap(try ok(try run("endpoints", "list", "--json")).json() as? [[String: Any]])
        XCTAssertEqual((listed.first?["recent"] as? [String: Any]).flatMap { int($0["waiting"]) }, 1)
        XCTAssertTrue(ok(try run("endpoints", "list")).stdout.contains("1 waiting"))

        // Delete: its waiting delivery is cancelled, its secrets go, its history stays.
        let deleted = ok(try run("endpoints", "delete", "\(id)"))
        XCTAssertEqual(deleted.stdout, "Endpoint \(id) deleted; 1 waiting delivery cancelled.\n")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.jobs WHERE endpoint_id = $1 AND state = 'cancelled'", [id]), 1)
        XCTAssertEqual(try endpointCount, 0)
        XCTAssertEqual(try secretCount, 0)
        assertFails(try run("endpoints", "show", "\(id)"), code: 3, mentioning: "no endpoint \(id)")
        XCTAssertTrue(ok(try run("endpoints", "list")).stdout.contains("No endpoints yet"))
    }

    func testEndpointsShowTheirHealthAndTheirAutoDisableSettings() throws {
        let (id, _) = try add()
        assertFails(
            try run("endpoints", "update", "\(id)", "--disable-after", "soon"), code: 2, mentioning: "--disable-after")
        assertFails(
            try run("endpoints", "update", "\(id)", "--disable-after-dead=-1"), code: 2, mentioning: "whole number of at least 0")
        XCTAssertEqual(try count("SELECT count(*) FROM courier.endpoints WHERE id = $1 AND disable_after IS NULL", [id]), 1)
        let shown = ok(try run("endpoints", "show", "\(id)"))
        XCTAssertTrue(shown.stdout.contains("health       ok"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("auto-disable after failing for the workers' --endpoint-disable-after"), shown.stdout)
        let updated = try object(try run(
            "endpoints", "update", "\(id)", "--disable-after", "2d", "--disable-after-dead", "0", "--json"))
        let settings = try XCTUnwrap(updated["health"] as? [String: Any])
        XCTAssertEqual((settings["disable_after_seconds"] as? NSNumber)?.doubleValue, 172_800)
        XCTAssertEqual(int(settings["disable_after_dead"]), 0)
        XCTAssertTrue(
            ok(try run("endpoints", "show", "\(id)")).stdout.contains("auto-disable after failing for 2d; never for dead deliveries"))
        // Its breaker opened (as outcomes would open it): the list and show say so.
        try connection.query(
            """
            UPDATE courier.endpoint_health
            SET failure_streak = 10, opened_at = now(), probe_at = now() + interval '30 seconds',
                failing_since = now() - interval '1 hour', dead_streak = 2
            WHERE endpoint_id = $1
            """, [id])
        let list = ok(try run("endpoints", "list"))
        XCTAssertTrue(list.stdout.contains("HEALTH"), list.stdout)
        XCTAssertTrue(list.stdout.contains("breaker open"), list.stdout)
        let health = try XCTUnwrap(
            (try XCTUnwrap(try ok(try run("endpoints", "list", "--json")).json() as? [[String: Any]]).first?["health"])
                as? [String: Any])
        XCTAssertEqual(health["breaker_open"] as? Bool, true)
        XCTAssertEqual(int(health["failure_streak"]), 10)
        XCTAssertEqual(int(health["dead_streak"]), 2)
        XCTAssertNotNil(health["failing_since"] as? String)
        let show = ok(try run("endpoints", "show", "\(id)")).stdout
        XCTAssertTrue(show.contains("breaker open, probe "), show)
        XCTAssertTrue(show.contains("2 dead in a row; failing since "), show)
        _ = ok(try run("endpoints", "update", "\(id)", "--disable-after", "default", "--disable-after-dead", "default"))
        XCTAssertEqual(
            try count(
                "SELECT count(*) FROM courier.endpoints WHERE id = $1 AND disable_after IS NULL AND disable_after_dead IS NULL",
                [id]), 1)
    }

    // MARK: Test pings

    func testEndpointTestSendsASignedPingAndPrintsTheAnswer() async throws {
        let received = Received()
        let sink = try await HTTPSink.start(immediate: { request in
            received.append(request)
            return request.path == "/fail"
                ? .respond(status: 500, body: Array("try later".utf8))
                : .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"ok":true}"#.utf8))
        })
        defer { Task { await sink.shutdown() } }
        let (id, secret) = try add(url: sink.baseURL + "/hook", ["--header", "X-Team: billing"])

        // Loopback is refused unless allowed, as by the worker; nothing is sent.
        let refused = try run("endpoints", "test", "\(id)")
        assertFails(refused, code: 1, mentioning: "refused private target")
        XCTAssertTrue(refused.stderr.contains("--allow-private-targets"), refused.stderr)
        XCTAssertEqual(received.all.count, 0)

        let result = ok(try run("endpoints", "test", "\(id)", "--allow-private-targets"))
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.hasPrefix("HTTP 200 OK in ") == true && lines.first?.hasSuffix(" ms") == true, result.stdout)
        XCTAssertTrue(result.stdout.contains(#"Response: {"ok":true}"#), result.stdout)
        let request = try XCTUnwrap(received.all.last)
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.path, "/hook")
        XCTAssertEqual(request.header("X-Team"), "billing")
        XCTAssertEqual(request.header("Content-Type"), "application/json")
        let webhookID = try XCTUnwrap(request.header("webhook-id"))
        XCTAssertTrue(webhookID.hasPrefix("ping_"), webhookID)
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        XCTAssertEqual(body["type"] as? String, "courier.ping")
        XCTAssertEqual(int((body["data"] as? [String: Any])?["endpoint_id"]), id)
        XCTAssertNotNil(ISO8601DateFormatter.withFractionalSeconds.date(from: body["timestamp"] as? String ?? ""))
        let timestamp = try XCTUnwrap(Int64(request.header("webhook-timestamp") ?? ""))
        XCTAssertEqual(
            request.header("webhook-signature"),
            try StandardWebhookSigner.sign(secret: secret, id: webhookID, timestamp: timestamp, body: request.body))

        // After a rotation both secrets sign; --json has the answer's fields.
        let rotated = try XCTUnwrap(try object(try run("endpoints", "rotate-secret", "\(id)", "--json"))["secret"] as? String)
        let json = try object(try run("endpoints", "test", "\(id)", "--allow-private-targets", "--json"))
        XCTAssertEqual(int(json["status"]), 200)
        XCTAssertNotNil(int(json["duration_ms"]))
        XCTAssertTrue(json["error"] is NSNull)
        XCTAssertEqual(json["response_excerpt"] as? String, #"{"ok":true}"#)
        let signed = try XCTUnwrap(received.all.last)
        let signedID = try XCTUnwrap(signed.header("webhook-id"))
        XCTAssertEqual(json["webhook_id"] as? String, signedID)
        XCTAssertNotEqual(signedID, webhookID)
        let signedAt = try XCTUnwrap(Int64(signed.header("webhook-timestamp") ?? ""))
        let signatures = Set((signed.header("webhook-signature") ?? "").split(separator: " ").map(String.init))
        XCTAssertEqual(signatures, Set(try [secret, rotated].map {
            try StandardWebhookSigner.sign(secret: $0, id: signedID, timestamp: signedAt, body: signed.body)
        }))

        // A receiver that fails: its answer, and one error line.
        _ = ok(try run("endpoints", "update", "\(id)", "--url", sink.baseURL + "/fail"))
        let failed = try run("endpoints", "test", "\(id)", "--allow-private-targets")
        assertFails(failed, code: 1, mentioning: "HTTP 500")
        XCTAssertTrue(failed.stdout.hasPrefix("HTTP 500 Internal Server Error in "), failed.stdout)
        XCTAssertTrue(failed.stdout.contains("Response: try later"), failed.stdout)

        // A ping writes nothing.
        XCTAssertEqual(try jobCount, 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.messages"), 0)
        XCTAssertEqual(try count("SELECT count(*) FROM courier.attempts"), 0)
    }

    func testEndpointTestToARefusedPortIsOneErrorLine() throws {
        let (id, _) = try add(url: "http://127.0.0.1:9/hook")
        let result = try run("endpoints", "test", "\(id)", "--allow-private-targets", "--timeout", "5s")
        assertFails(result, code: 1, mentioning: "connection refused")
        XCTAssertEqual(result.stdout, "")
        let json = try run("endpoints", "test", "\(id)", "--allow-private-targets", "--json")
        XCTAssertEqual(json.status, 1, json.stderr)
        XCTAssertEqual(json.stderrLines.count, 1, json.stderr)
        let answer = try XCTUnwrap(try json.json() as? [String: Any])
        XCTAssertTrue(answer["status"] is NSNull)
        XCTAssertEqual(answer["error"] as? String, "connection refused")
        assertFails(
            try run("endpoints", "test", "\(id)", "--allow-private-targets", key: false), code: 2,
            mentioning: "COURIER_SECRETS_KEY_FILE")
        assertFails(try run("endpoints", "test", "\(id)", "--timeout", "0s"), code: 2, mentioning: "--timeout")
    }
}

/// The requests a sink received, from its event loop to the test.
private final class Received: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [SinkRequest] = []

    func append(_ request: SinkRequest) { lock.withLock { requests.append(request) } }

    var all: [SinkRequest] { lock.withLock { requests } }
}

extension ISO8601DateFormatter {
    fileprivate static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

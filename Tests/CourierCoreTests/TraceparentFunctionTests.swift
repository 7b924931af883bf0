import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// The producer's trace context through `courier.enqueue`, `courier.enqueue_raw` and
/// `courier.publish`: the `traceparent` argument, or else `SET LOCAL courier.traceparent`.
final class TraceparentFunctionTests: XCTestCase {
    private var connection: PostgresConnection!

    private static let producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    private static let other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"

    /// The three calls, each writing its job (or, for publish, one delivery) to the same place.
    private static let calls: [(name: String, sql: String)] = [
        ("enqueue", "SELECT courier.enqueue(url => 'https://a.example/in', payload => '{}'"),
        ("enqueue_raw", "SELECT courier.enqueue_raw(url => 'https://a.example/in', body => NULL"),
        ("publish", "SELECT courier.publish(event_type => 'trace.tested', payload => '{}'"),
    ]

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "traceparent"))
        try connection.simpleQuery(
            "TRUNCATE courier.jobs CASCADE; TRUNCATE courier.queues; TRUNCATE courier.messages, courier.endpoints CASCADE")
        try connection.query("INSERT INTO courier.endpoints (url, event_types) VALUES ('https://a.example/in', '{trace.*}')")
    }

    override func tearDown() {
        connection?.close()
    }

    private func storedTraceparents() throws -> [String?] {
        try connection.query("SELECT traceparent FROM courier.jobs ORDER BY id").rows.map { try $0.decode(0, as: String?.self) }
    }

    private func jobCount() throws -> Int {
        try connection.query("SELECT count(*) FROM courier.jobs")[0].decode(0)
    }

    func testTheArgumentIsStoredOnTheJob() throws {
        for call in Self.calls {
            try connection.simpleQuery("TRUNCATE courier.jobs CASCADE")
            try connection.query(call.sql + ", traceparent => $1)", [Self.producer])
            XCTAssertEqual(try storedTraceparents(), [Self.producer], call.name)
        }
    }

    func testSetLocalIsStoredWhenTheCallHasNoArgumentAndTheArgumentWins() throws {
        for call in Self.calls {
            try connection.simpleQuery("TRUNCATE courier.jobs CASCADE")
            try connection.simpleQuery("BEGIN; SET LOCAL courier.traceparent = '\(Self.producer)'")
            try connection.query(call.sql + ")")
            try connection.query(call.sql + ", traceparent => $1)", [Self.other])
            try connection.simpleQuery("COMMIT")
            XCTAssertEqual(try storedTraceparents(), [Self.producer, Self.other], call.name)
            // SET LOCAL ended with the transaction.
            try connection.query(call.sql + ")")
            XCTAssertEqual(try storedTraceparents().last, .some(nil), call.name)
        }
    }

    func testNullOrEmptyMeansNone() throws {
        for call in Self.calls {
            try connection.simpleQuery("TRUNCATE courier.jobs CASCADE")
            try connection.query(call.sql + ")")
            try connection.query(call.sql + ", traceparent => NULL)")
            try connection.query(call.sql + ", traceparent => '')")
            try connection.simpleQuery("BEGIN; SET LOCAL courier.traceparent = ''")
            try connection.query(call.sql + ")")
            try connection.simpleQuery("COMMIT")
            XCTAssertEqual(try storedTraceparents(), [nil, nil, nil, nil], call.name)
        }
    }

    func testAMalformedTraceparentIsRefusedInOneLineAndWritesNothing() throws {
        let bad = [
            "nope",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-Injected: 1",
            String(repeating: "0", count: 100_000),
        ]
        for call in Self.calls {
            for value in bad {
                for viaSetting in [false, true] {
                    let label = "\(call.name) \(viaSetting ? "SET LOCAL" : "argument") \(value.prefix(60).debugDescription)"
                    try connection.simpleQuery("BEGIN")
                    if viaSetting {
                        try connection.query("SELECT set_config('courier.traceparent', $1, true)", [value])
                    }
                    XCTAssertThrowsError(
                        try viaSetting
                            ? connection.query(call.sql + ")")
                            : connection.query(call.sql + ", traceparent => $1)", [value]),
                        label
                    ) { error in
                        let pgError = error as? PostgresError
                        XCTAssertEqual(pgError?.sqlState, "22023", label)
                        let message = pgError?.message ?? ""
                        XCTAssertTrue(
                            message.hasPrefix(
                                "traceparent must be a W3C trace context, 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"),
                            "\(label): \(message)")
                        XCTAssertFalse(message.contains("\n") || message.contains("\r"), label)
                        XCTAssertLessThan(message.utf8.count, 300, label)
                    }
                    try connection.simpleQuery("ROLLBACK")
                    XCTAssertEqual(try jobCount(), 0, label)
                }
            }
        }
        let messages: Int = try connection.query("SELECT count(*) FROM courier.messages")[0].decode(0)
        XCTAssertEqual(messages, 0)
    }

    func testTheProblemFunctionAcceptsExactlyTheW3CForm() throws {
        let cases: [(String?, Bool)] = [
            (nil, true), (Self.producer, true), (Self.other, true),
            ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff", true),
            ("fe-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true),
            ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false),
            ("", false), ("0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false),
        ]
        for (value, valid) in cases {
            let problem: String? = try connection.query("SELECT courier.traceparent_problem($1)", [value])[0].decode(0)
            XCTAssertEqual(problem == nil, valid, value ?? "NULL")
        }
    }

    func testAPublishedTraceparentIsOnEveryDelivery() throws {
        try connection.query("INSERT INTO courier.endpoints (url, event_types) VALUES ('https://b.example/in', '{*}')")
        try connection.query(
            "SELECT courier.publish(event_type => 'trace.tested', payload => '{}', traceparent => $1)", [Self.producer])
        XCTAssertEqual(try storedTraceparents(), [Self.producer, Self.producer])
    }
}

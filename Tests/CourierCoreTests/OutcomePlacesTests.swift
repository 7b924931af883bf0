import CourierCore
import CourierTesting
import Foundation
import Postgres
import XCTest

/// Migration 0022: the outcome statement builds its arrays without sorting each one, so they are
/// aligned but not in batch order, and hands each function the batch position of every element
/// (`places`). A breaker's streak depends on order (a failure after the last answer counts, one
/// before it does not), so each case here gives the same outcomes in an array order that says
/// the opposite of what the places say, and checks the places win; without places the arrays'
/// order is the batch order, as it was for callers of the old signatures.
final class OutcomePlacesTests: XCTestCase {
    private var connection: PostgresConnection!
    private var tag: String!

    override func setUpWithError() throws {
        connection = try PostgresConnection(try TestDatabase.shared(label: "outcomeplaces"))
        tag = "t\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDown() {
        connection?.close()
    }

    /// In array order: failed, failed, answered. In place order: answered, then two failures.
    private let signals = ["failed", "failed", "answered"]
    private let reversedPlaces: [Int64] = [2, 3, 1]

    private func destinationStreak(places: [Int64]?) throws -> Int {
        let host = "order-\(places == nil ? "arrays" : "places").\(tag!).test"
        try connection.query("INSERT INTO courier.destinations (host) VALUES ($1)", [host])
        try connection.query(
            "SELECT courier.record_destination_outcomes($1, $2, $3, $4)",
            [PostgresArray(Array(repeating: host, count: 3)), PostgresArray(signals),
             PostgresArray(["", "", ""]), places.map { PostgresArray($0) }])
        return try hostStreak(host)
    }

    func testTheDestinationStreakFollowsThePlacesNotTheArrayOrder() throws {
        XCTAssertEqual(try destinationStreak(places: reversedPlaces), 2, "two failures after the answer")
        XCTAssertEqual(try destinationStreak(places: nil), 0, "the answer came last")
    }

    private func endpointStreak(places: [Int64]?) throws -> Int {
        let host = "order.\(tag!).test"
        let key = "https://\(host)/\(places == nil ? "arrays" : "places")"
        let nulls = PostgresArray([Int64?](repeating: nil, count: 3))
        try connection.query(
            """
            SELECT courier.record_endpoint_outcomes($1, $2, $3, $3, $4, $5, $6, interval '0', 0, $7)
            """,
            [PostgresArray(Array(repeating: key, count: 3)), PostgresArray(Array(repeating: host, count: 3)), nulls,
             PostgresArray(["endpointFailed", "endpointFailed", "answered"]),
             PostgresArray(["retrying", "retrying", "succeeded"]), PostgresArray([Int64(-1), -2, -3]),
             places.map { PostgresArray($0) }])
        return try connection.query(
            "SELECT failure_streak FROM courier.endpoint_health WHERE key = $1", [key])[0].decode(0)
    }

    func testTheEndpointStreakFollowsThePlacesNotTheArrayOrder() throws {
        XCTAssertEqual(try endpointStreak(places: reversedPlaces), 2, "two failures after the answer")
        XCTAssertEqual(try endpointStreak(places: nil), 0, "the answer came last")
    }

    /// Through the worker's own statement: one batch at one host whose two refused connections
    /// come after its answer leaves a streak of two; the same outcomes with the answer last, none.
    func testTheOutcomeStatementHandsTheFunctionsTheBatchOrder() throws {
        let host = "batch.\(tag!).test"
        let queue = "q\(tag!)"
        for i in 0..<6 {
            try connection.query(
                "SELECT courier.enqueue(url => $1, payload => '{}', queue => $2)", ["https://\(host)/\(i)", queue])
        }
        let store = JobStore(connection: connection, workerID: "w-\(tag!)")
        let jobs = try store.claim(queues: [queue], limit: 6, lease: .seconds(60))
        XCTAssertEqual(jobs.count, 6)
        let answered = Delivery.delivered(status: 200)
        let refused = Delivery.failure(.transport(.connectRefused), error: "connection refused")
        try store.record([(jobs[0], answered), (jobs[1], refused), (jobs[2], refused)])
        XCTAssertEqual(try hostStreak(host), 2)
        try store.record([(jobs[3], refused), (jobs[4], refused), (jobs[5], answered)])
        XCTAssertEqual(try hostStreak(host), 0)
    }

    private func hostStreak(_ host: String) throws -> Int {
        try connection.query("SELECT failure_streak FROM courier.destinations WHERE host = $1", [host])[0].decode(0)
    }
}

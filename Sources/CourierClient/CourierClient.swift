import Foundation
import Logging
import PostgresNIO

/// Enqueues jobs and publishes webhook events from a Swift service on postgres-nio (Vapor,
/// Hummingbird), on the service's own `PostgresConnection`, inside its transaction when it
/// has begun one: the job or message exists exactly when the transaction commits.
///
/// Every call is one statement of the SQL API (`courier.enqueue_raw`, `courier.publish`), so
/// validation is the database's, and its refusals come back as ``CourierClientError``. This
/// target is the only SQL outside `Migrations/` and `CourierCore`: a producer's build needs
/// postgres-nio, not libpq.
public struct CourierClient: Sendable {
    /// The logger postgres-nio logs the statements' events to.
    public var logger: Logger

    /// A client; it holds no connection, each call takes the one to run on.
    public init(logger: Logger = Logger(label: "courier.client")) {
        self.logger = logger
    }

    /// Enqueues `job`; returns its id (the existing job's id when its idempotency key was
    /// used before in its queue).
    public func enqueue(_ job: CourierJob, on connection: PostgresConnection) async throws -> Int64 {
        try await enqueueMany([job], on: connection)[0]
    }

    /// Enqueues `jobs` in one statement, in order; returns their ids in the same order. One
    /// invalid job refuses them all (the statement writes nothing).
    public func enqueueMany(_ jobs: [CourierJob], on connection: PostgresConnection) async throws -> [Int64] {
        guard !jobs.isEmpty else { return [] }
        let batch = try CourierJob.batchJSON(jobs)
        let query: PostgresQuery = """
            SELECT courier.enqueue_raw(
                url => j->>'url', body => decode(j->>'body', 'base64'), method => j->>'method',
                headers => j->'headers', queue => j->>'queue',
                run_at => coalesce((j->>'run_at')::timestamptz, now()),
                max_attempts => (j->>'max_attempts')::integer, idempotency_key => j->>'idempotency_key',
                priority => (j->>'priority')::integer,
                retry_schedule => (SELECT array_agg(make_interval(secs => s::float8) ORDER BY n)
                                   FROM jsonb_array_elements_text(j->'retry_schedule') WITH ORDINALITY AS r(s, n)),
                traceparent => j->>'traceparent')
            FROM jsonb_array_elements(\(batch)::jsonb) WITH ORDINALITY AS t(j, position)
            ORDER BY position
            """
        return try await run(query, on: connection, expecting: jobs.count)
    }

    /// Publishes an event of `eventType` for `tenant` (nil: the internal endpoints): one
    /// message, and one delivery per enabled endpoint whose event types and payload filter
    /// match. Returns the message id (the first message's, when `idempotencyKey` was used
    /// before for this tenant).
    ///
    /// - Parameters:
    ///   - payloadJSON: the event's data as JSON text (see
    ///     ``publish(eventType:payload:tenant:idempotencyKey:traceparent:on:)`` for an `Encodable` value).
    ///   - traceparent: the producer's W3C trace context, written on every delivery; nil: the
    ///     transaction's `courier.traceparent` setting, if any.
    public func publish(
        eventType: String, payloadJSON: String, tenant: String? = nil, idempotencyKey: String? = nil,
        traceparent: String? = nil, on connection: PostgresConnection
    ) async throws -> Int64 {
        let query: PostgresQuery = """
            SELECT courier.publish(event_type => \(eventType), payload => \(payloadJSON)::jsonb, tenant => \(tenant),
                                   idempotency_key => \(idempotencyKey), traceparent => \(traceparent))
            """
        return try await run(query, on: connection, expecting: 1)[0]
    }

    /// Publishes `payload` encoded as JSON; see ``publish(eventType:payloadJSON:tenant:idempotencyKey:traceparent:on:)``.
    public func publish<Payload: Encodable>(
        eventType: String, payload: Payload, tenant: String? = nil, idempotencyKey: String? = nil,
        traceparent: String? = nil, on connection: PostgresConnection
    ) async throws -> Int64 {
        let data = try JSONEncoder().encode(payload)
        return try await publish(
            eventType: eventType, payloadJSON: String(decoding: data, as: UTF8.self), tenant: tenant,
            idempotencyKey: idempotencyKey, traceparent: traceparent, on: connection)
    }

    /// Runs `query`, whose rows are one id each, and maps the server's refusals.
    private func run(_ query: PostgresQuery, on connection: PostgresConnection, expecting count: Int) async throws -> [Int64] {
        do {
            var ids: [Int64] = []
            ids.reserveCapacity(count)
            for try await id in try await connection.query(query, logger: logger).decode(Int64.self) {
                ids.append(id)
            }
            guard ids.count == count else {
                throw CourierClientError(kind: .unexpected, message: "expected \(count) ids from the database, got \(ids.count)")
            }
            return ids
        } catch let error as PSQLError {
            throw CourierClientError(error) ?? error
        }
    }
}

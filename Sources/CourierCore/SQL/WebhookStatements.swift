import Foundation
import Postgres

/// The statements of the webhook layer: endpoints, their sealed secrets, messages, re-sends and
/// recovery. `courier.publish` itself is SQL in the migration, so producers call it directly.
public enum WebhookStatements {
    /// The headers as the JSON object `courier.endpoints.headers` holds (a later duplicate name
    /// wins, as in a job's headers).
    static func headersJSON(_ headers: [(String, String)]) -> PostgresJSON {
        var object: [String: String] = [:]
        for (name, value) in headers { object[name] = value }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return PostgresJSON(String(decoding: data, as: UTF8.self))
    }

    /// Adds an endpoint; the row trigger validates it (SQLSTATE 22023 with the field's problem).
    public static let insertEndpoint = Statement<NewEndpoint>("""
        INSERT INTO courier.endpoints (tenant, url, description, event_types, payload_filter, headers, queue,
                                       rate_limit, ordered)
        VALUES ($1, $2, $3, $4::text[], $5::jsonb, $6::jsonb, $7, $8, $9)
        RETURNING id
        """) { endpoint in
        [
            endpoint.tenant, endpoint.url, endpoint.description, PostgresArray(endpoint.eventTypes),
            endpoint.payloadFilter.map(PostgresJSON.init), headersJSON(endpoint.headers), endpoint.queue,
            endpoint.rateLimit, endpoint.ordered,
        ]
    }

    /// Stores endpoint `$1`'s new current secret, sealed.
    public static let insertSecret = Statement<(endpointID: Int64, sealed: [UInt8])>("""
        INSERT INTO courier.endpoint_secrets (endpoint_id, sealed) VALUES ($1, $2)
        """) { [$0.endpointID, $0.sealed] }

    /// Retires endpoint `$1`'s current secret: it keeps signing for `$2` ms more. Secrets that
    /// stopped signing are deleted on the way. Returns the retired secret's expiry.
    public static let retireSecret = Statement<(endpointID: Int64, grace: Duration)>("""
        WITH gone AS (
            DELETE FROM courier.endpoint_secrets WHERE endpoint_id = $1 AND expires_at <= now()
        )
        UPDATE courier.endpoint_secrets
        SET expires_at = now() + $2::bigint * interval '1 millisecond'
        WHERE endpoint_id = $1 AND expires_at IS NULL
        RETURNING expires_at
        """) { [$0.endpointID, $0.grace.inMilliseconds] }

    /// Endpoint `$1`'s secrets that sign now, newest first.
    public static let validSecrets = Statement<Int64>("""
        SELECT id, sealed, expires_at FROM courier.endpoint_secrets
        WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())
        ORDER BY id DESC
        """) { [$0] }

    /// One sealed secret of the database, to check at start that the key opens it.
    public static let anySecret = Statement<Void>("""
        SELECT endpoint_id, sealed FROM courier.endpoint_secrets ORDER BY id DESC LIMIT 1
        """)

    /// The columns `listEndpoints` and `endpoint` return, in `WebhookStore.decodeEndpoint`'s order.
    static let endpointColumns = """
        SELECT e.id, e.tenant, e.url, e.description, e.event_types::text, e.payload_filter::text, e.headers::text,
               e.queue, e.rate_limit, e.ordered, e.disabled_at, e.disabled_reason, e.created_at, e.updated_at,
               (SELECT count(*)::int FROM courier.endpoint_secrets s
                WHERE s.endpoint_id = e.id AND (s.expires_at IS NULL OR s.expires_at > now())),
               (SELECT min(s.expires_at) FROM courier.endpoint_secrets s
                WHERE s.endpoint_id = e.id AND s.expires_at > now()),
               r.total, r.succeeded, r.dead, r.waiting, r.last_state::text, r.last_status, r.last_success,
               h.failure_streak, h.opened_at, h.probe_at, h.failing_since, h.dead_streak, h.last_success_at,
               extract(epoch FROM e.disable_after)::float8, e.disable_after_dead
        FROM courier.endpoints e
        LEFT JOIN courier.endpoint_health h ON h.endpoint_id = e.id
        CROSS JOIN LATERAL (
        """ + deliveryCounts + """
            FROM (SELECT j.id, j.state, j.last_status, j.finished_at
                  FROM courier.deliveries l JOIN courier.jobs j ON j.id = l.job_id
                  WHERE l.endpoint_id = e.id ORDER BY l.job_id DESC LIMIT 100) d
        ) r
        """

    /// Deliveries `d` (id, state, last_status, finished_at) counted by state, with the newest
    /// one's state and status and the last success: an endpoint's recent health and a message's.
    static let deliveryCounts = """
            SELECT count(*)::int AS total,
                   count(*) FILTER (WHERE d.state = 'succeeded')::int AS succeeded,
                   count(*) FILTER (WHERE d.state = 'dead')::int AS dead,
                   count(*) FILTER (WHERE d.state IN ('pending', 'retrying', 'running'))::int AS waiting,
                   (array_agg(d.state ORDER BY d.id DESC))[1] AS last_state,
                   (array_agg(d.last_status ORDER BY d.id DESC))[1] AS last_status,
                   max(d.finished_at) FILTER (WHERE d.state = 'succeeded') AS last_success
        """

    /// Endpoints, of tenant `$1` when given, newest first, at most `$2`; each with its last
    /// 100 deliveries counted through `deliveries_endpoint_idx`.
    public static let listEndpoints = Statement<(tenant: String?, limit: Int)>(endpointColumns + """

        WHERE $1::text IS NULL OR e.tenant = $1::text
        ORDER BY e.id DESC
        LIMIT $2
        """) { [$0.tenant, $0.limit] }

    /// Endpoint `$1`.
    public static let endpoint = Statement<Int64>(endpointColumns + """

        WHERE e.id = $1
        """) { [$0] }

    /// Changes chosen fields of endpoint `$1`: each flag says whether the value after it
    /// replaces the current one. Returns the id, or no row for an unknown endpoint.
    public static let updateEndpoint = Statement<(id: Int64, change: EndpointChange)>("""
        UPDATE courier.endpoints SET
            url = CASE WHEN $2 THEN $3 ELSE url END,
            description = CASE WHEN $4 THEN $5 ELSE description END,
            event_types = CASE WHEN $6 THEN $7::text[] ELSE event_types END,
            payload_filter = CASE WHEN $8 THEN $9::jsonb ELSE payload_filter END,
            headers = CASE WHEN $10 THEN $11::jsonb ELSE headers END,
            queue = CASE WHEN $12 THEN $13 ELSE queue END,
            rate_limit = CASE WHEN $14 THEN $15::float8 ELSE rate_limit END,
            ordered = CASE WHEN $16 THEN $17 ELSE ordered END,
            disable_after = CASE WHEN $18 THEN $19::float8 * interval '1 second' ELSE disable_after END,
            disable_after_dead = CASE WHEN $20 THEN $21::int ELSE disable_after_dead END
        WHERE id = $1
        RETURNING id
        """) { id, change in
        [
            id, change.url != nil, change.url, change.description != nil, change.description,
            change.eventTypes != nil, change.eventTypes.map(PostgresArray.init),
            change.payloadFilter != nil, (change.payloadFilter ?? nil).map(PostgresJSON.init),
            change.headers != nil, change.headers.map(headersJSON),
            change.queue != nil, change.queue, change.rateLimit != nil, change.rateLimit ?? nil,
            change.ordered != nil, change.ordered ?? false,
            change.disableAfter != nil, (change.disableAfter ?? nil)?.inSeconds,
            change.disableAfterDead != nil, change.disableAfterDead ?? nil,
        ]
    }

    /// Disables endpoint `$1` with reason `$2` (kept when already disabled: the first reason and
    /// time stand). Returns whether it was enabled before.
    public static let disableEndpoint = Statement<(id: Int64, reason: String)>("""
        UPDATE courier.endpoints e SET disabled_at = coalesce(e.disabled_at, now()),
            disabled_reason = coalesce(e.disabled_reason, $2)
        FROM (SELECT id, disabled_at IS NULL AS was_enabled FROM courier.endpoints WHERE id = $1 FOR UPDATE) old
        WHERE e.id = old.id
        RETURNING old.was_enabled
        """) { [$0.id, $0.reason] }

    /// Enables endpoint `$1`. Returns whether it was disabled before.
    public static let enableEndpoint = Statement<Int64>("""
        UPDATE courier.endpoints e SET disabled_at = NULL, disabled_reason = NULL
        FROM (SELECT id, disabled_at IS NOT NULL AS was_disabled FROM courier.endpoints WHERE id = $1 FOR UPDATE) old
        WHERE e.id = old.id
        RETURNING old.was_disabled
        """) { [$0] }

    /// Endpoint `$1`'s newest `$2` deliveries, newest first: a backward walk of
    /// `deliveries_endpoint_idx (endpoint_id, job_id)` that stops after `$2` rows, however long
    /// its history.
    public static let endpointDeliveries = Statement<(endpointID: Int64, limit: Int)>(deliveryColumns + """

        WHERE l.endpoint_id = $1
        ORDER BY l.job_id DESC
        LIMIT $2
        """) { [$0.endpointID, $0.limit] }

    /// What `endpointDeliveries` and `messageDeliveries` return for each delivery, in
    /// `WebhookStore.decodeDelivery`'s order: the job and the endpoint's URL now (NULL once deleted).
    /// The caller filters the links `l` (a delivery whose job retention removed is left out).
    static let deliveryColumns = """
        SELECT j.id, j.message_id, j.endpoint_id, e.url, j.resent_from, j.state::text, j.attempt, j.max_attempts,
               j.last_status, j.last_error, j.run_at, j.finished_at, j.created_at
        FROM courier.deliveries l
        JOIN courier.jobs j ON j.id = l.job_id
        LEFT JOIN courier.endpoints e ON e.id = j.endpoint_id
        """

    /// Cancels endpoint `$1`'s waiting deliveries (before it is deleted): they would go to a
    /// receiver nobody registers any more. Running ones finish. Returns how many.
    public static let cancelEndpointDeliveries = Statement<Int64>("""
        UPDATE courier.jobs j SET state = 'cancelled', finished_at = now(), updated_at = now(),
            last_error = 'cancelled: the endpoint was deleted'
        FROM courier.deliveries l
        WHERE l.endpoint_id = $1 AND j.id = l.job_id AND j.state IN ('pending', 'retrying')
        """) { [$0] }

    /// Deletes endpoint `$1` (its secrets and pacing go with it); its deliveries stay as history.
    public static let deleteEndpoint = Statement<Int64>("""
        DELETE FROM courier.endpoints WHERE id = $1 RETURNING id
        """) { [$0] }

    /// Publishes through `courier.publish`; returns the message id and this transaction's id.
    public static let publish = Statement<(eventType: String, payload: String, tenant: String?, idempotencyKey: String?)>("""
        SELECT courier.publish(event_type => $1, payload => $2::jsonb, tenant => $3, idempotency_key => $4),
               pg_current_xact_id()::text::bigint
        """) { [$0.eventType, PostgresJSON($0.payload), $0.tenant, $0.idempotencyKey] }

    /// How message `$1` was published: the endpoints it went to, and whether another
    /// transaction than `$2` (the publishing one) wrote it, i.e. a repeated idempotency key
    /// returned it. A separate statement: the publishing statement's own snapshot cannot see the
    /// row its function wrote.
    public static let published = Statement<(messageID: Int64, transaction: Int64)>("""
        SELECT m.endpoints, m.xmin::text <> ($2::bigint % 4294967296)::text FROM courier.messages m WHERE m.id = $1
        """) { [$0.messageID, $0.transaction] }

    /// The columns of a message with its deliveries counted by state.
    static let messageColumns = """
        SELECT m.id, m.event_type, m.tenant, m.idempotency_key, m.endpoints, m.created_at,
               c.total, c.succeeded, c.dead, c.waiting, c.last_state::text, c.last_status
        FROM courier.messages m
        CROSS JOIN LATERAL (
        """ + deliveryCounts + """
            FROM courier.deliveries l JOIN courier.jobs d ON d.id = l.job_id WHERE l.message_id = m.id
        ) c
        """

    /// What `listMessages` filters on.
    public struct MessageFilter: Sendable, Equatable {
        /// Only this tenant.
        public var tenant: String?
        /// Only this event type.
        public var eventType: String?
        /// Only messages older than this id (paging).
        public var before: Int64?
        /// The most rows.
        public var limit: Int

        /// A filter.
        public init(tenant: String? = nil, eventType: String? = nil, before: Int64? = nil, limit: Int = 50) {
            self.tenant = tenant
            self.eventType = eventType
            self.before = before
            self.limit = limit
        }
    }

    /// Messages, newest first, with their deliveries counted.
    public static let listMessages = Statement<MessageFilter>(messageColumns + """

        WHERE ($1::text IS NULL OR m.tenant = $1::text) AND ($2::text IS NULL OR m.event_type = $2::text)
          AND ($3::bigint IS NULL OR m.id < $3::bigint)
        ORDER BY m.id DESC
        LIMIT $4
        """) { [$0.tenant, $0.eventType, $0.before, $0.limit] }

    /// Message `$1` with its payload.
    public static let message = Statement<Int64>(messageColumns.replacingOccurrences(
        of: "m.created_at,\n", with: "m.created_at, m.payload::text,\n") + """

        WHERE m.id = $1
        """) { [$0] }

    /// Message `$1`'s deliveries, oldest first, with each endpoint's URL (NULL once deleted).
    public static let messageDeliveries = Statement<Int64>(deliveryColumns + """

        WHERE l.message_id = $1
        ORDER BY l.job_id
        """) { [$0] }

    /// The delivery row a re-send or recovery writes for message `m` to endpoint `e`: the
    /// endpoint's URL and headers now, the message's body and `webhook-id`, the queue's attempts,
    /// and the endpoint's gate when it is ordered or its breaker is open (as `courier.publish`).
    /// The statement's rows (`FROM ...`) go between it and `resendLinks`.
    static let resendInsert = """
        WITH written AS (
        INSERT INTO courier.jobs (queue, method, url, headers, body, max_attempts, message_id, endpoint_id, resent_from,
                                  gate)
        SELECT e.queue, 'POST', e.url, courier.message_headers(m.id, e.headers),
               courier.message_body(m.event_type, m.created_at, m.payload),
               coalesce(q.max_attempts, 10), m.id, e.id, t.previous,
               CASE WHEN e.ordered OR EXISTS (SELECT 1 FROM courier.endpoint_health h
                                              WHERE h.endpoint_id = e.id AND h.opened_at IS NOT NULL)
                    THEN 'endpoint:' || e.id END
        """

    /// The end of a re-send or recovery: each new job's link, and the jobs in id order.
    static let resendLinks = """

        RETURNING id, message_id, endpoint_id, resent_from
        ),
        linked AS (
            INSERT INTO courier.deliveries (message_id, job_id, endpoint_id)
            SELECT w.message_id, w.id, w.endpoint_id FROM written w
        )
        SELECT w.id, w.message_id, w.endpoint_id, w.resent_from FROM written w ORDER BY w.id
        """

    /// Re-sends message `$1` to endpoint `$2`, or (NULL) to every endpoint it was delivered to:
    /// one new job each, linked to that endpoint's latest delivery of it. Disabled endpoints
    /// and endpoints of another tenant are left out (the store names them first).
    public static let resend = Statement<(messageID: Int64, endpointID: Int64?)>(resendInsert + """

        FROM courier.messages m
        JOIN LATERAL (
            (SELECT DISTINCT ON (l.endpoint_id) l.endpoint_id, l.job_id AS previous
             FROM courier.deliveries l
             WHERE l.message_id = m.id AND $2::bigint IS NULL
             ORDER BY l.endpoint_id, l.job_id DESC)
            UNION ALL
            SELECT $2::bigint, (SELECT max(l.job_id) FROM courier.deliveries l
                                WHERE l.message_id = m.id AND l.endpoint_id = $2::bigint)
            WHERE $2::bigint IS NOT NULL
        ) t ON true
        JOIN courier.endpoints e ON e.id = t.endpoint_id
        LEFT JOIN courier.queues q ON q.name = e.queue
        WHERE m.id = $1 AND e.disabled_at IS NULL AND coalesce(e.tenant, '') = coalesce(m.tenant, '')
        ORDER BY e.id
        """ + resendLinks) { [$0.messageID, $0.endpointID] }

    /// Recovers endpoint `$1`: re-sends every message published since `$2` whose latest
    /// delivery to it is dead. Messages are found by time (`messages_created_idx`), their
    /// deliveries to this endpoint through `deliveries_pkey`.
    public static let recover = Statement<(endpointID: Int64, since: Date)>(resendInsert + """

        FROM courier.endpoints e
        JOIN courier.messages m ON coalesce(m.tenant, '') = coalesce(e.tenant, '') AND m.created_at >= $2
        JOIN LATERAL (
            SELECT l.job_id AS previous, j.state
            FROM courier.deliveries l JOIN courier.jobs j ON j.id = l.job_id
            WHERE l.message_id = m.id AND l.endpoint_id = e.id
            ORDER BY l.job_id DESC LIMIT 1
        ) t ON t.state = 'dead'
        LEFT JOIN courier.queues q ON q.name = e.queue
        WHERE e.id = $1
        ORDER BY m.id
        """ + resendLinks) { [$0.endpointID, $0.since] }

    /// Deletes up to `$2` messages published more than `$1` ms ago that have no delivery left
    /// (their jobs were removed by retention, or none matched), with their links: the worker's
    /// maintenance pass. Oldest first through `messages_created_idx`; each candidate's jobs are
    /// probed through its links. Returns how many messages went.
    public static let purgeMessages = Statement<(olderThan: Duration, limit: Int)>("""
        WITH doomed AS (
            SELECT m.id FROM courier.messages m
            WHERE m.created_at < now() - $1::bigint * interval '1 millisecond'
              AND NOT EXISTS (SELECT 1 FROM courier.deliveries l JOIN courier.jobs j ON j.id = l.job_id
                              WHERE l.message_id = m.id)
            ORDER BY m.created_at
            LIMIT $2
        ),
        unlinked AS (
            DELETE FROM courier.deliveries l USING doomed WHERE l.message_id = doomed.id
        )
        DELETE FROM courier.messages m USING doomed WHERE m.id = doomed.id
        """) { [$0.olderThan.inMilliseconds, $0.limit] }
}

import Foundation
import Postgres

/// Runs `WebhookStatements` on one connection: endpoints, their secrets (sealed by the caller,
/// which holds the key), publishing, messages, re-sends and recovery.
public struct WebhookStore {
    /// The connection used.
    public let connection: PostgresConnection

    /// Creates a store on `connection`.
    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    // MARK: Endpoints

    /// Adds an endpoint and its first secret in one transaction.
    ///
    /// - Parameter seal: seals the new secret for the endpoint's id (the id is the associated
    ///   data, so it is known only once the row exists).
    /// - Returns: the new endpoint's id.
    public func addEndpoint(_ endpoint: NewEndpoint, seal: (Int64) -> [UInt8]) throws -> Int64 {
        try connection.transaction { connection in
            let id: Int64 = try connection.run(WebhookStatements.insertEndpoint, endpoint)[0].decode(0)
            try connection.run(WebhookStatements.insertSecret, (endpointID: id, sealed: seal(id)))
            return id
        }
    }

    /// Endpoints, newest first.
    public func listEndpoints(tenant: String? = nil, limit: Int = 50) throws -> [EndpointInfo] {
        try connection.run(WebhookStatements.listEndpoints, (tenant: tenant, limit: limit)).rows.map(Self.decodeEndpoint)
    }

    /// One endpoint, or nil when there is none with that id.
    public func endpoint(_ id: Int64) throws -> EndpointInfo? {
        try connection.run(WebhookStatements.endpoint, id).rows.first.map(Self.decodeEndpoint)
    }

    /// Changes an endpoint; throws a not-found ``WebhookError`` for an unknown id.
    public func updateEndpoint(_ id: Int64, _ change: EndpointChange) throws {
        guard !change.isEmpty else { return }
        if try connection.run(WebhookStatements.updateEndpoint, (id: id, change: change)).rows.isEmpty {
            throw Self.unknownEndpoint(id)
        }
    }

    /// Disables an endpoint: it receives no new messages. Returns false when it was already
    /// disabled (its first reason stands).
    @discardableResult
    public func disableEndpoint(_ id: Int64, reason: String) throws -> Bool {
        guard let row = try connection.run(WebhookStatements.disableEndpoint, (id: id, reason: reason)).rows.first else {
            throw Self.unknownEndpoint(id)
        }
        return try row.decode(0)
    }

    /// Enables an endpoint. Returns false when it was already enabled.
    @discardableResult
    public func enableEndpoint(_ id: Int64) throws -> Bool {
        guard let row = try connection.run(WebhookStatements.enableEndpoint, id).rows.first else {
            throw Self.unknownEndpoint(id)
        }
        return try row.decode(0)
    }

    /// Endpoint `id`'s newest `limit` deliveries, newest first (re-sends included); empty for
    /// an endpoint without any, or an unknown one.
    public func endpointDeliveries(_ id: Int64, limit: Int = 20) throws -> [WebhookDelivery] {
        try connection.run(WebhookStatements.endpointDeliveries, (endpointID: id, limit: limit)).rows.map(Self.decodeDelivery)
    }

    /// Deletes an endpoint and cancels its waiting deliveries, in one transaction. Returns how
    /// many deliveries were cancelled.
    @discardableResult
    public func deleteEndpoint(_ id: Int64) throws -> Int {
        try connection.transaction { connection in
            let cancelled = try connection.run(WebhookStatements.cancelEndpointDeliveries, id).affectedRows
            if try connection.run(WebhookStatements.deleteEndpoint, id).rows.isEmpty {
                throw Self.unknownEndpoint(id)
            }
            return cancelled
        }
    }

    /// Rotates an endpoint's secret: the current one keeps signing for `grace`, the new one
    /// (sealed by `seal` for the endpoint's id) signs from now on. Returns when the old one stops.
    ///
    /// - Parameter alongside: runs in the rotation's transaction once the new secret is stored
    ///   (the console writes its audit row there): both are committed, or neither.
    public func rotateSecret(
        _ id: Int64, grace: Duration, seal: (Int64) -> [UInt8],
        alongside: (PostgresConnection) throws -> Void = { _ in }
    ) throws -> Date? {
        try connection.transaction { connection in
            guard try connection.run(WebhookStatements.endpoint, id).rows.first != nil else {
                throw Self.unknownEndpoint(id)
            }
            let retired: Date? = try connection.run(WebhookStatements.retireSecret, (endpointID: id, grace: grace))
                .rows.first?.decode(0)
            try connection.run(WebhookStatements.insertSecret, (endpointID: id, sealed: seal(id)))
            try alongside(connection)
            return retired
        }
    }

    /// The sealed secrets of an endpoint that sign now, newest first.
    public func validSecrets(_ id: Int64) throws -> [SealedSecret] {
        try connection.run(WebhookStatements.validSecrets, id).rows.map {
            SealedSecret(id: try $0.decode(0), sealed: try $0.decode(1), expiresAt: try $0.decode(2))
        }
    }

    /// The newest sealed secret in the database with its endpoint, to check a key against; nil
    /// when no endpoint has one.
    public func anySealedSecret() throws -> (endpointID: Int64, sealed: [UInt8])? {
        guard let row = try connection.run(WebhookStatements.anySecret).rows.first else { return nil }
        return (try row.decode(0), try row.decode(1))
    }

    // MARK: Messages

    /// Publishes an event through `courier.publish`: the message and one delivery per matching
    /// endpoint. Bad input throws the function's error (SQLSTATE 22023) and writes nothing.
    public func publish(eventType: String, payload: String, tenant: String? = nil, idempotencyKey: String? = nil) throws
        -> PublishResult
    {
        let first = try connection.run(
            WebhookStatements.publish,
            (eventType: eventType, payload: payload, tenant: tenant, idempotencyKey: idempotencyKey))[0]
        let id: Int64 = try first.decode(0)
        let row = try connection.run(WebhookStatements.published, (messageID: id, transaction: try first.decode(1)))[0]
        return PublishResult(messageID: id, endpoints: try row.decode(0), duplicate: try row.decode(1))
    }

    /// Messages, newest first.
    public func listMessages(_ filter: WebhookStatements.MessageFilter) throws -> [MessageInfo] {
        try connection.run(WebhookStatements.listMessages, filter).rows.map { try Self.decodeMessage($0, payload: false).0 }
    }

    /// A message with its payload and every delivery; nil when there is none with that id.
    public func message(_ id: Int64) throws -> MessageDetail? {
        guard let row = try connection.run(WebhookStatements.message, id).rows.first else { return nil }
        let (message, payload) = try Self.decodeMessage(row, payload: true)
        let deliveries = try connection.run(WebhookStatements.messageDeliveries, id).rows.map(Self.decodeDelivery)
        return MessageDetail(message: message, payloadJSON: payload ?? "null", deliveries: deliveries)
    }

    /// Re-sends a message to one endpoint, or to every endpoint it was delivered to: one new
    /// delivery each, with the same `webhook-id`, whatever the first ones' outcome.
    ///
    /// - Throws: ``WebhookError``: the message or endpoint does not exist (not found), the
    ///   endpoint is disabled or belongs to another tenant, or the message has no delivery to
    ///   re-send.
    /// - Parameter alongside: runs in the re-send's transaction with the new deliveries (the
    ///   console writes its audit row there): both are committed, or neither.
    public func resend(
        messageID: Int64, endpointID: Int64? = nil,
        alongside: ([ResentDelivery], PostgresConnection) throws -> Void = { _, _ in }
    ) throws -> [ResentDelivery] {
        try connection.transaction { connection in
            guard let message = try connection.run(WebhookStatements.message, messageID).rows.first else {
                throw WebhookError("no message \(messageID)", notFound: true)
            }
            let tenant: String? = try message.decode(2)
            if let endpointID {
                guard let endpoint = try connection.run(WebhookStatements.endpoint, endpointID).rows.first else {
                    throw Self.unknownEndpoint(endpointID)
                }
                let endpointTenant: String? = try endpoint.decode(1)
                guard endpointTenant == tenant else {
                    throw WebhookError(
                        "endpoint \(endpointID) belongs to \(Self.tenantName(endpointTenant)), message \(messageID) to \(Self.tenantName(tenant))")
                }
                if try endpoint.decode(10, as: Date?.self) != nil {
                    throw WebhookError("endpoint \(endpointID) is disabled; enable it first (courier endpoints enable \(endpointID))")
                }
            }
            let written = try connection.run(WebhookStatements.resend, (messageID: messageID, endpointID: endpointID))
                .rows.map(Self.decodeResent)
            if written.isEmpty {
                throw WebhookError(
                    "message \(messageID) has no delivery to an enabled endpoint to re-send; name an endpoint of its tenant")
            }
            try alongside(written, connection)
            return written
        }
    }

    /// Recovers an endpoint: re-sends every message published since `since` whose latest
    /// delivery to it is dead. Returns the new deliveries (none when nothing failed).
    public func recover(endpointID: Int64, since: Date) throws -> [ResentDelivery] {
        try connection.transaction { connection in
            guard let endpoint = try connection.run(WebhookStatements.endpoint, endpointID).rows.first else {
                throw Self.unknownEndpoint(endpointID)
            }
            if try endpoint.decode(10, as: Date?.self) != nil {
                throw WebhookError("endpoint \(endpointID) is disabled; enable it first (courier endpoints enable \(endpointID))")
            }
            return try connection.run(WebhookStatements.recover, (endpointID: endpointID, since: since))
                .rows.map(Self.decodeResent)
        }
    }

    /// Deletes messages published more than `olderThan` ago whose deliveries are all gone, up
    /// to `limit`; returns how many.
    public func purgeMessages(olderThan: Duration, limit: Int) throws -> Int {
        try connection.run(WebhookStatements.purgeMessages, (olderThan: olderThan, limit: limit)).affectedRows
    }

    // MARK: Decoding

    static func unknownEndpoint(_ id: Int64) -> WebhookError {
        WebhookError("no endpoint \(id)", notFound: true)
    }

    static func tenantName(_ tenant: String?) -> String {
        tenant.map { "tenant \(Redaction.text($0).debugDescription)" } ?? "no tenant"
    }

    static func state(_ text: String) throws -> JobState {
        guard let state = JobState(rawValue: text) else { throw WebhookError("unknown job state \(text)") }
        return state
    }

    static func decodeEndpoint(_ row: PostgresRow) throws -> EndpointInfo {
        let patterns: String = try row.decode(4)
        return EndpointInfo(
            id: try row.decode(0), tenant: try row.decode(1), url: try row.decode(2), description: try row.decode(3),
            eventTypes: (PostgresArray.parse(patterns) ?? []).compactMap { $0 },
            payloadFilter: try row.decode(5), headersJSON: try row.decode(6), queue: try row.decode(7),
            rateLimit: try row.decode(8), ordered: try row.decode(9), disabledAt: try row.decode(10),
            disabledReason: try row.decode(11), createdAt: try row.decode(12), updatedAt: try row.decode(13),
            validSecrets: try row.decode(14), retiringUntil: try row.decode(15),
            recent: RecentDeliveries(
                total: try row.decode(16), succeeded: try row.decode(17), dead: try row.decode(18),
                waiting: try row.decode(19), lastState: try row.decode(20, as: String?.self).map(state),
                lastStatus: try row.decode(21)),
            lastSuccessAt: try row.decode(22),
            health: EndpointHealth(
                failureStreak: try row.decode(23, as: Int?.self) ?? 0, breakerOpenedAt: try row.decode(24),
                probeAt: try row.decode(25), failingSince: try row.decode(26),
                deadStreak: try row.decode(27, as: Int?.self) ?? 0, lastSuccessAt: try row.decode(28),
                disableAfter: try row.decode(29, as: Double?.self).map { .milliseconds(Int64(($0 * 1000).rounded())) },
                disableAfterDead: try row.decode(30)))
    }

    static func decodeMessage(_ row: PostgresRow, payload: Bool) throws -> (MessageInfo, String?) {
        let shift = payload ? 1 : 0
        let message = MessageInfo(
            id: try row.decode(0), eventType: try row.decode(1), tenant: try row.decode(2),
            idempotencyKey: try row.decode(3), endpoints: try row.decode(4), createdAt: try row.decode(5),
            deliveries: RecentDeliveries(
                total: try row.decode(6 + shift), succeeded: try row.decode(7 + shift), dead: try row.decode(8 + shift),
                waiting: try row.decode(9 + shift), lastState: try row.decode(10 + shift, as: String?.self).map(state),
                lastStatus: try row.decode(11 + shift)))
        return (message, payload ? try row.decode(6) : nil)
    }

    static func decodeDelivery(_ row: PostgresRow) throws -> WebhookDelivery {
        WebhookDelivery(
            jobID: try row.decode(0), messageID: try row.decode(1), endpointID: try row.decode(2),
            endpointURL: try row.decode(3), resentFrom: try row.decode(4), state: try state(row.decode(5)),
            attempt: try row.decode(6), maxAttempts: try row.decode(7), lastStatus: try row.decode(8),
            lastError: try row.decode(9), runAt: try row.decode(10), finishedAt: try row.decode(11),
            createdAt: try row.decode(12))
    }

    static func decodeResent(_ row: PostgresRow) throws -> ResentDelivery {
        ResentDelivery(
            jobID: try row.decode(0), messageID: try row.decode(1), endpointID: try row.decode(2),
            resentFrom: try row.decode(3))
    }
}

import Foundation

/// A new webhook endpoint, as `courier endpoints add` and the console build it; the database
/// (`courier.endpoint_problem`) validates every field.
public struct NewEndpoint: Sendable, Equatable {
    /// The producer's customer or application; nil for internal receivers.
    public var tenant: String?
    /// Absolute http(s) URL.
    public var url: String
    /// Free text.
    public var description: String
    /// Exact event types, `prefix.*` patterns, or `*`.
    public var eventTypes: [String]
    /// A JSON object the payload must contain, as text; nil for every payload.
    public var payloadFilter: String?
    /// Extra request headers, in order.
    public var headers: [(String, String)]
    /// Queue of the deliveries (default `webhooks`).
    public var queue: String
    /// First deliveries per second at most; nil for no limit.
    public var rateLimit: Double?
    /// Deliveries one at a time, in publish order.
    public var ordered: Bool

    /// An endpoint for `url` receiving `eventTypes`, with the defaults for everything else.
    public init(
        url: String, eventTypes: [String], tenant: String? = nil, description: String = "",
        payloadFilter: String? = nil, headers: [(String, String)] = [], queue: String = "webhooks",
        rateLimit: Double? = nil, ordered: Bool = false
    ) {
        self.url = url
        self.eventTypes = eventTypes
        self.tenant = tenant
        self.description = description
        self.payloadFilter = payloadFilter
        self.headers = headers
        self.queue = queue
        self.rateLimit = rateLimit
        self.ordered = ordered
    }

    public static func == (lhs: NewEndpoint, rhs: NewEndpoint) -> Bool {
        lhs.tenant == rhs.tenant && lhs.url == rhs.url && lhs.description == rhs.description
            && lhs.eventTypes == rhs.eventTypes && lhs.payloadFilter == rhs.payloadFilter
            && lhs.headers.elementsEqual(rhs.headers, by: ==) && lhs.queue == rhs.queue
            && lhs.rateLimit == rhs.rateLimit && lhs.ordered == rhs.ordered
    }
}

/// A change to an endpoint: nil leaves a field alone; for optional fields `.some(nil)` clears it.
public struct EndpointChange: Sendable, Equatable {
    /// New URL.
    public var url: String?
    /// New description.
    public var description: String?
    /// New event type patterns.
    public var eventTypes: [String]?
    /// New payload filter (JSON object text), or `.some(nil)` for none.
    public var payloadFilter: String??
    /// New extra headers (replacing all of them).
    public var headers: [(String, String)]?
    /// New queue.
    public var queue: String?
    /// New rate limit, or `.some(nil)` for none.
    public var rateLimit: Double??
    /// Ordered delivery on or off.
    public var ordered: Bool?
    /// How long every delivery may fail before it is disabled (zero: never), or `.some(nil)`
    /// for the workers' default.
    public var disableAfter: Duration??
    /// How many deliveries in a row may go dead before it is disabled (0: never), or
    /// `.some(nil)` for the workers' default.
    public var disableAfterDead: Int??

    /// An empty change.
    public init() {}

    /// True when nothing would change.
    public var isEmpty: Bool {
        url == nil && description == nil && eventTypes == nil && payloadFilter == nil && headers == nil
            && queue == nil && rateLimit == nil && ordered == nil && disableAfter == nil && disableAfterDead == nil
    }

    public static func == (lhs: EndpointChange, rhs: EndpointChange) -> Bool {
        lhs.url == rhs.url && lhs.description == rhs.description && lhs.eventTypes == rhs.eventTypes
            && lhs.payloadFilter == rhs.payloadFilter && lhs.queue == rhs.queue && lhs.rateLimit == rhs.rateLimit
            && lhs.ordered == rhs.ordered && lhs.disableAfter == rhs.disableAfter
            && lhs.disableAfterDead == rhs.disableAfterDead
            && (lhs.headers == nil) == (rhs.headers == nil)
            && (lhs.headers ?? []).elementsEqual(rhs.headers ?? [], by: ==)
    }
}

/// An endpoint as operators see it: its settings, its secrets' dates (never the secrets) and how
/// its last deliveries went.
public struct EndpointInfo: Sendable, Equatable {
    /// Endpoint id.
    public var id: Int64
    /// Tenant; nil for internal receivers.
    public var tenant: String?
    /// URL.
    public var url: String
    /// Free text.
    public var description: String
    /// Event type patterns.
    public var eventTypes: [String]
    /// Payload filter as JSON text.
    public var payloadFilter: String?
    /// Extra headers as stored (JSON object text).
    public var headersJSON: String
    /// Queue of its deliveries.
    public var queue: String
    /// First deliveries per second at most.
    public var rateLimit: Double?
    /// Ordered delivery.
    public var ordered: Bool
    /// When it was disabled.
    public var disabledAt: Date?
    /// Why.
    public var disabledReason: String?
    /// When it was added.
    public var createdAt: Date
    /// When a setting last changed.
    public var updatedAt: Date
    /// Secrets that sign now (the current one and those not yet expired).
    public var validSecrets: Int
    /// When the earliest retiring secret stops signing; nil when only the current one signs.
    public var retiringUntil: Date?
    /// How its last deliveries (at most 100) stand.
    public var recent: RecentDeliveries
    /// When a delivery to it last succeeded (among the recent ones).
    public var lastSuccessAt: Date?
    /// Its health: breaker, streaks, auto-disable settings.
    public var health = EndpointHealth()

    /// When a delivery last succeeded: the later of the recent deliveries' and the health row's
    /// record (the one kept to the minute outlives the last 100 deliveries).
    public var lastSuccess: Date? { [lastSuccessAt, health.lastSuccessAt].compactMap { $0 }.max() }
}

/// An endpoint's own health (`courier.endpoint_health`) and when it disables itself.
public struct EndpointHealth: Sendable, Equatable {
    /// Consecutive failures that were the endpoint's own (5xx, timeouts after sending).
    public var failureStreak = 0
    /// When its breaker opened; nil while closed.
    public var breakerOpenedAt: Date?
    /// While open: when the next probe may go.
    public var probeAt: Date?
    /// The first failed attempt since the last success.
    public var failingSince: Date?
    /// Deliveries that went dead since the last success.
    public var deadStreak = 0
    /// When a delivery last succeeded (to the minute).
    public var lastSuccessAt: Date?
    /// Its own failing window (zero: never), or nil for the workers' `--endpoint-disable-after`.
    public var disableAfter: Duration?
    /// Its own dead-in-a-row limit (0: never), or nil for the workers' `--endpoint-disable-dead`.
    public var disableAfterDead: Int?

    /// Health as read.
    public init(
        failureStreak: Int = 0, breakerOpenedAt: Date? = nil, probeAt: Date? = nil, failingSince: Date? = nil,
        deadStreak: Int = 0, lastSuccessAt: Date? = nil, disableAfter: Duration? = nil, disableAfterDead: Int? = nil
    ) {
        self.failureStreak = failureStreak
        self.breakerOpenedAt = breakerOpenedAt
        self.probeAt = probeAt
        self.failingSince = failingSince
        self.deadStreak = deadStreak
        self.lastSuccessAt = lastSuccessAt
        self.disableAfter = disableAfter
        self.disableAfterDead = disableAfterDead
    }

    /// Its health in a few words, the same in the CLI and the console: its breaker, failure
    /// and dead streaks, and since when every delivery failed; "ok" when there is nothing to say.
    public func summary(time: (Date) -> String) -> String {
        var parts: [String] = []
        if breakerOpenedAt != nil {
            parts.append("breaker open" + (probeAt.map { ", probe \(time($0))" } ?? ""))
        } else if failureStreak > 0 {
            parts.append("\(failureStreak) \(failureStreak == 1 ? "failure" : "failures") in a row")
        }
        if deadStreak > 0 { parts.append("\(deadStreak) dead in a row") }
        if let failingSince { parts.append("failing since \(time(failingSince))") }
        return parts.isEmpty ? "ok" : parts.joined(separator: "; ")
    }

    /// When the endpoint disables itself: its own settings, or the workers' defaults
    /// (``EndpointDisable/standard``).
    public func autoDisableSummary(duration: (Duration) -> String) -> String {
        let standard = EndpointDisable.standard
        let window = disableAfter.map { $0 == .zero ? "never after failing" : "after failing for \(duration($0))" }
            ?? "after failing for the workers' --endpoint-disable-after (\(duration(standard.window)) by default)"
        let dead = disableAfterDead.map { $0 == 0 ? "never for dead deliveries" : "after \($0) dead in a row" }
            ?? "after the workers' --endpoint-disable-dead in a row (\(standard.deadInARow) by default)"
        return "\(window); \(dead)"
    }
}

/// Counts over an endpoint's most recent deliveries (at most 100).
public struct RecentDeliveries: Sendable, Equatable {
    /// Deliveries counted.
    public var total: Int
    /// Succeeded.
    public var succeeded: Int
    /// Dead (failed for good).
    public var dead: Int
    /// Waiting, retrying or running.
    public var waiting: Int
    /// The newest delivery's state, if any.
    public var lastState: JobState?
    /// The newest delivery's last HTTP status.
    public var lastStatus: Int?

    /// Counts.
    public init(total: Int = 0, succeeded: Int = 0, dead: Int = 0, waiting: Int = 0, lastState: JobState? = nil, lastStatus: Int? = nil) {
        self.total = total
        self.succeeded = succeeded
        self.dead = dead
        self.waiting = waiting
        self.lastState = lastState
        self.lastStatus = lastStatus
    }
}

/// One published message.
public struct MessageInfo: Sendable, Equatable {
    /// Message id (`webhook-id: msg_<id>`).
    public var id: Int64
    /// Event type.
    public var eventType: String
    /// Tenant.
    public var tenant: String?
    /// Idempotency key.
    public var idempotencyKey: String?
    /// Endpoints it matched when published.
    public var endpoints: Int
    /// When it was published.
    public var createdAt: Date
    /// Its deliveries now, re-sends included, by state.
    public var deliveries: RecentDeliveries

    /// The `webhook-id` its deliveries carry.
    public var webhookID: String { "msg_\(id)" }
}

/// One delivery of a message to an endpoint: a row of a message's page (oldest first) and of
/// an endpoint's (newest first).
public struct WebhookDelivery: Sendable, Equatable {
    /// The job.
    public var jobID: Int64
    /// Its message (nil only for a row written around the API).
    public var messageID: Int64?
    /// The endpoint (it may have been deleted since).
    public var endpointID: Int64?
    /// The endpoint's URL now, nil when it was deleted.
    public var endpointURL: String?
    /// The delivery this one re-sends.
    public var resentFrom: Int64?
    /// State.
    public var state: JobState
    /// Attempts started.
    public var attempt: Int
    /// Attempts allowed.
    public var maxAttempts: Int
    /// Last HTTP status.
    public var lastStatus: Int?
    /// Last error.
    public var lastError: String?
    /// Next attempt not before.
    public var runAt: Date
    /// When it finished.
    public var finishedAt: Date?
    /// When it was written (published or re-sent).
    public var createdAt: Date
}

/// A message with its payload and deliveries (`courier messages show`).
public struct MessageDetail: Sendable, Equatable {
    /// The message.
    public var message: MessageInfo
    /// The payload as JSON text.
    public var payloadJSON: String
    /// Every delivery, oldest first.
    public var deliveries: [WebhookDelivery]
}

/// What `courier.publish` returned.
public struct PublishResult: Sendable, Equatable {
    /// The message id (the first message's, for a repeated idempotency key).
    public var messageID: Int64
    /// Endpoints the message was fanned out to (0: none matched).
    public var endpoints: Int
    /// True when the idempotency key was already used: nothing new was written.
    public var duplicate: Bool
}

/// A sealed secret of an endpoint, as stored.
public struct SealedSecret: Sendable, Equatable {
    /// Secret id (higher is newer).
    public var id: Int64
    /// AES-GCM nonce, ciphertext and tag.
    public var sealed: [UInt8]
    /// When it stops signing; nil for the current secret.
    public var expiresAt: Date?
}

/// A new delivery written by a re-send or a recovery.
public struct ResentDelivery: Sendable, Equatable {
    /// The new job.
    public var jobID: Int64
    /// Its message.
    public var messageID: Int64
    /// Its endpoint.
    public var endpointID: Int64
    /// The delivery it re-sends, if the endpoint had one.
    public var resentFrom: Int64?
}

/// A webhook request that cannot be carried out, with the exit code it deserves.
public struct WebhookError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why.
    public var message: String
    /// True when something named does not exist (CLI exit 3).
    public var notFound: Bool

    /// An error.
    public init(_ message: String, notFound: Bool = false) {
        self.message = message
        self.notFound = notFound
    }

    public var description: String { message }
}

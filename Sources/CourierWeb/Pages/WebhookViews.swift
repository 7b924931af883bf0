import CourierCore
import Foundation

// The webhook pages' view models: endpoints, one endpoint, a rotated secret, messages and one
// message. As in Views.swift, whatever came from the database is a `Shown`; an endpoint's
// header values and its secrets never reach a view (only the header names, the secrets' count
// and the retiring one's expiry), except the one secret a rotation just made, which
// `RotatedSecretView` carries once and nothing stores.

/// Counts of deliveries by state, as the webhook pages show them.
struct DeliveryCounts {
    let ok: Int
    let dead: Int
    let waiting: Int
    let total: Int

    init(_ recent: RecentDeliveries) {
        ok = recent.succeeded
        dead = recent.dead
        waiting = recent.waiting
        total = recent.total
    }
}

/// `/endpoints`: the tenant filter and the endpoints with their recent deliveries.
struct EndpointsView {
    /// The tenant filter as given (the operator's own input, to fill the form again).
    let filterTenant: String?
    let endpoints: [Row]
    let hasEndpoints: Bool
    /// Said when the list stopped at its limit.
    let truncated: String?

    /// One endpoint.
    struct Row {
        let id: String
        let tenant: Shown?
        /// The tenant as a query value, for the filter link.
        let tenantQuery: String?
        let url: Shown
        let eventTypes: Shown
        let queue: Shown
        let disabled: Bool
        let disabledReason: Shown?
        let recent: DeliveryCounts
        let lastSuccess: String?
        let lastSuccessISO: String?
        let secrets: Int
        /// Its own breaker and streaks (``EndpointHealth/summary(time:)``).
        let health: String
    }

    init(_ endpoints: [EndpointInfo], tenant: String?, limit: Int) {
        filterTenant = tenant
        self.endpoints = endpoints.map { e in
            let lastSuccess = e.lastSuccess
            return Row(
                id: String(e.id), tenant: e.tenant.map(Shown.text), tenantQuery: e.tenant.map(FormData.encode),
                url: .url(e.url), eventTypes: EndpointView.patterns(e.eventTypes), queue: .text(e.queue),
                disabled: e.disabledAt != nil, disabledReason: e.disabledReason.map { "(\(message: $0))" },
                recent: DeliveryCounts(e.recent), lastSuccess: lastSuccess.map(PageFormat.time),
                lastSuccessISO: lastSuccess.map(PageFormat.isoTime), secrets: e.validSecrets,
                health: e.health.summary(time: PageFormat.time))
        }
        hasEndpoints = !endpoints.isEmpty
        truncated = endpoints.count >= limit
            ? "The newest \(limit) endpoints are shown; filter by tenant to see others." : nil
    }
}

/// `/endpoints/<id>`: an endpoint's settings (headers by name only), its secrets' count and
/// expiry, its newest deliveries and the actions on it.
struct EndpointView {
    let id: String
    let tenant: Shown?
    let tenantQuery: String?
    let url: Shown
    let description: Shown?
    let eventTypes: Shown
    let payloadFilter: Shown?
    /// The extra headers' names; their values are never shown.
    let headerNames: [Shown]
    let hasHeaders: Bool
    let queue: Shown
    let queueQuery: String
    let rateLimit: String
    let ordered: Bool
    let disabled: Bool
    let disabledAt: String?
    let disabledReason: Shown?
    let created: String
    let updated: String
    let validSecrets: Int
    /// Secrets rotated out that still sign.
    let retiring: Int
    /// When the first retiring secret stops signing, if one is retiring.
    let retiringUntil: String?
    let recent: DeliveryCounts
    let lastSuccess: String?
    /// Its own breaker, streaks and failing window (``EndpointHealth/summary(time:)``).
    let health: String
    /// When it disables itself.
    let autoDisable: String
    let deliveries: [Delivery]
    let hasDeliveries: Bool
    let deliveriesShown: Int
    let canDisable: Bool
    let canEnable: Bool
    /// Rotation is offered: actions are on and the console holds the secrets key.
    let canRotate: Bool
    /// Actions are on but the console has no secrets key: the page says why it cannot rotate.
    let rotationNeedsKey: Bool
    let graceHours: Int

    /// One delivery.
    struct Delivery {
        let jobID: String
        let messageID: String?
        let webhookID: String?
        let resentFrom: String?
        let state: String
        let attempt: Int
        let maxAttempts: Int
        let lastStatus: Int?
        let lastError: Shown?
        let time: String
        let timeISO: String
    }

    init(
        _ e: EndpointInfo, deliveries: [WebhookDelivery], deliveriesShown: Int, actions: Bool, canSeal: Bool,
        grace: Duration
    ) {
        id = String(e.id)
        tenant = e.tenant.map(Shown.text)
        tenantQuery = e.tenant.map(FormData.encode)
        url = .url(e.url)
        description = e.description.isEmpty ? nil : .message(e.description)
        eventTypes = Self.patterns(e.eventTypes)
        payloadFilter = e.payloadFilter.map { Shown.body(Array($0.utf8), limit: 2_000).shown }
        headerNames = Self.headerNames(e.headersJSON).map(Shown.text)
        hasHeaders = !headerNames.isEmpty
        queue = .text(e.queue)
        queueQuery = FormData.encode(e.queue)
        rateLimit = e.rateLimit.map { String(format: "%g a second at most", $0) } ?? "none"
        ordered = e.ordered
        disabled = e.disabledAt != nil
        disabledAt = e.disabledAt.map(PageFormat.time)
        disabledReason = e.disabledReason.map { .message($0) }
        created = PageFormat.time(e.createdAt)
        updated = PageFormat.time(e.updatedAt)
        validSecrets = e.validSecrets
        retiring = max(0, e.validSecrets - 1)
        retiringUntil = e.retiringUntil.map(PageFormat.time)
        recent = DeliveryCounts(e.recent)
        lastSuccess = e.lastSuccess.map(PageFormat.time)
        health = e.health.summary(time: PageFormat.time)
        autoDisable = e.health.autoDisableSummary { PageFormat.age($0.inSeconds) }
        self.deliveries = deliveries.map { d in
            Delivery(
                jobID: String(d.jobID), messageID: d.messageID.map { String($0) }, webhookID: d.messageID.map { "msg_\($0)" },
                resentFrom: d.resentFrom.map { String($0) }, state: d.state.rawValue, attempt: d.attempt,
                maxAttempts: d.maxAttempts, lastStatus: d.lastStatus, lastError: d.lastError.map { .message($0, limit: 160) },
                time: PageFormat.time(d.createdAt), timeISO: PageFormat.isoTime(d.createdAt))
        }
        hasDeliveries = !deliveries.isEmpty
        self.deliveriesShown = deliveriesShown
        canDisable = actions && e.disabledAt == nil
        canEnable = actions && e.disabledAt != nil
        canRotate = actions && canSeal
        rotationNeedsKey = actions && !canSeal
        graceHours = Int(grace.components.seconds / 3600)
    }

    /// Event type patterns in one line; none means the endpoint receives nothing.
    static func patterns(_ patterns: [String]) -> Shown {
        patterns.isEmpty ? "none (it receives no event)" : .text(patterns.joined(separator: ", "))
    }

    /// The names of the stored headers object, sorted; the values are dropped here, before
    /// anything could show them.
    static func headerNames(_ json: String) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [] }
        return object.keys.sorted { $0.lowercased() < $1.lowercased() }
    }
}

/// The answer to rotating a secret: the new secret, shown this once. It is made in the
/// request, sealed into the database and put here; no notice, log line, audit row or redirect
/// carries it, and the page is `no-store` like every page.
struct RotatedSecretView {
    let id: String
    let url: Shown
    /// The new `whsec_` secret: not from the database, so not a `Shown`, and never redacted
    /// (its base64 could look like a `name=value` pair).
    let secret: String
    let retiringUntil: String?
    let graceHours: Int
}

/// `/messages`: the filter form and a page of messages, newest first.
struct WebhookMessagesView {
    /// The filter as given (the operator's own input, to fill the form again).
    let filterTenant: String?
    let filterEventType: String?
    let messages: [Row]
    let hasMessages: Bool
    let nextPage: String?
    let firstPage: String?

    /// One message.
    struct Row {
        let id: String
        let webhookID: String
        let eventType: Shown
        let tenant: Shown?
        let tenantQuery: String?
        let published: String
        let publishedISO: String
        let endpoints: Int
        let deliveries: DeliveryCounts
    }

    init(_ messages: [MessageInfo], tenant: String?, eventType: String?, before: Int64?, limit: Int) {
        filterTenant = tenant
        filterEventType = eventType
        self.messages = messages.map { m in
            Row(
                id: String(m.id), webhookID: m.webhookID, eventType: .text(m.eventType), tenant: m.tenant.map(Shown.text),
                tenantQuery: m.tenant.map(FormData.encode), published: PageFormat.time(m.createdAt),
                publishedISO: PageFormat.isoTime(m.createdAt), endpoints: m.endpoints, deliveries: DeliveryCounts(m.deliveries))
        }
        hasMessages = !messages.isEmpty
        let filter: [(String, String?)] = [("tenant", tenant), ("event_type", eventType)]
        nextPage = messages.count >= limit
            ? messages.last.map { "/messages" + WebApp.queryString(filter + [("before", String($0.id))]) } : nil
        firstPage = before == nil ? nil : "/messages" + WebApp.queryString(filter)
    }
}

/// `/messages/<id>`: a message, its payload (laid out, redacted like a body, clipped) and its
/// deliveries, with the re-send buttons.
struct WebhookMessageView {
    let messageID: String
    let webhookID: String
    let eventType: Shown
    let tenant: Shown?
    let tenantQuery: String?
    let idempotencyKey: Shown?
    let published: String
    let publishedISO: String
    let endpoints: Int
    let counts: DeliveryCounts
    let payload: Shown
    let payloadBytes: Int
    let payloadClipped: Bool
    let deliveries: [Delivery]
    let hasDeliveries: Bool
    /// "Re-send to all" is offered: actions are on and an endpoint of a delivery still exists.
    let canResendAll: Bool

    /// One delivery.
    struct Delivery {
        let jobID: String
        let endpointID: String?
        /// The endpoint's URL now; nil once the endpoint was deleted.
        let endpointURL: Shown?
        let resentFrom: String?
        let state: String
        let attempt: Int
        let maxAttempts: Int
        let lastStatus: Int?
        let lastError: Shown?
        /// The endpoint a re-send button on this row sends to: set on the newest delivery of
        /// each endpoint that still exists, when actions are on.
        let resendEndpoint: String?
    }

    /// The most of the stored payload laid out, and the most of that shown.
    static let payloadRead = 65_536
    static let payloadShown = 16_000

    init(_ detail: MessageDetail, actions: Bool) {
        let m = detail.message
        messageID = String(m.id)
        webhookID = m.webhookID
        eventType = .text(m.eventType)
        tenant = m.tenant.map(Shown.text)
        tenantQuery = m.tenant.map(FormData.encode)
        idempotencyKey = m.idempotencyKey.map(Shown.text)
        published = PageFormat.time(m.createdAt)
        publishedISO = PageFormat.isoTime(m.createdAt)
        endpoints = m.endpoints
        counts = DeliveryCounts(m.deliveries)
        let stored = Array(detail.payloadJSON.utf8)
        let laidOut = JSONLayout.pretty(String(decoding: stored.prefix(Self.payloadRead), as: UTF8.self))
        let shown = Shown.body(Array(laidOut.utf8), limit: Self.payloadShown)
        payload = shown.shown
        payloadBytes = stored.count
        payloadClipped = shown.clipped || stored.count > Self.payloadRead
        // The newest delivery of each endpoint that still exists carries its re-send button.
        var newest: [Int64: Int64] = [:]
        for d in detail.deliveries where d.endpointURL != nil {
            if let endpoint = d.endpointID { newest[endpoint] = max(newest[endpoint] ?? d.jobID, d.jobID) }
        }
        deliveries = detail.deliveries.map { d in
            let resend = actions && d.endpointID.map { newest[$0] == d.jobID } == true
            return Delivery(
                jobID: String(d.jobID), endpointID: d.endpointID.map { String($0) }, endpointURL: d.endpointURL.map(Shown.url),
                resentFrom: d.resentFrom.map { String($0) }, state: d.state.rawValue, attempt: d.attempt,
                maxAttempts: d.maxAttempts, lastStatus: d.lastStatus, lastError: d.lastError.map { .message($0, limit: 160) },
                resendEndpoint: resend ? d.endpointID.map { String($0) } : nil)
        }
        hasDeliveries = !deliveries.isEmpty
        canResendAll = actions && !newest.isEmpty
    }
}

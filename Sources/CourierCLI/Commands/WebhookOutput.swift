import CourierCLISupport
import CourierCore
import Foundation

/// Parsing and rendering shared by `endpoints`, `publish` and `messages`. Text read from the
/// database goes through `Redaction` (and header values through `Redaction.headerValue`), and
/// no secret is ever among what is printed: the sealed ones are not even read here.
enum WebhookOutput {
    // MARK: Input

    /// `--events 'invoice.*, order.paid'`: the patterns, blanks dropped; `''` is no event. The
    /// database judges each pattern (`courier.event_patterns_problem`).
    static func patterns(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `--filter`: a JSON object, checked here so a typo is named before any statement runs.
    static func filter(_ text: String, flag: String = "--filter") throws -> String {
        guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) else {
            throw CLIError.usage("\(flag) is not JSON: give the JSON object a payload must contain, e.g. '{\"plan\":\"pro\"}'")
        }
        guard value is [String: Any] else {
            throw CLIError.usage("\(flag) must be a JSON object (the payload must contain it), e.g. '{\"plan\":\"pro\"}'")
        }
        return text
    }

    /// `--header 'Name: value'` flags, in order.
    static func headers(_ flags: [String]) throws -> [(String, String)] {
        try flags.map { try parseHeader($0) }
    }

    // MARK: Reading stored values

    /// The endpoint's extra headers (a JSON object of strings as stored), sorted by name, with
    /// their real values: what a request carries, never for printing.
    static func storedHeaders(_ json: String) -> [(String, String)] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else { return [] }
        return object.keys.sorted().map { ($0, object[$0] as? String ?? "\(object[$0] ?? "")") }
    }

    /// The same headers as they may be shown: secret-looking values redacted.
    static func shownHeaders(_ json: String) -> [(String, String)] {
        storedHeaders(json).map { (Redaction.text($0.0), Redaction.headerValue(name: $0.0, value: $0.1)) }
    }

    /// A stored JSON text as a JSON value for `--json` (the text itself if it does not parse).
    static func jsonValue(_ text: String?) -> Any {
        guard let text else { return NSNull() }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
    }

    /// JSON text safe for a terminal and still the same JSON: control characters, C1 controls,
    /// line separators and bidirectional overrides (which JSON leaves raw inside strings)
    /// become `\uXXXX` escapes; everything else, backslashes included, stays as it is.
    static func terminalSafeJSON(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A stored JSON text on one line for a `show` line, terminal-safe and clipped.
    static func compactJSON(_ text: String, limit: Int) -> String {
        Output.clip(terminalSafeJSON(text), limit)
    }

    /// A stored JSON text pretty-printed, each line terminal-safe (`terminalSafeJSON`), at most
    /// `maxLines` lines of `width` characters.
    static func prettyJSON(_ text: String, maxLines: Int = 40, width: Int = 200) -> [String] {
        var pretty = text
        if let value = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]),
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        {
            pretty = String(decoding: data, as: UTF8.self)
        }
        let lines = pretty.split(separator: "\n", omittingEmptySubsequences: false).map {
            Output.clip(terminalSafeJSON(String($0)), width)
        }
        guard lines.count > maxLines else { return lines }
        return Array(lines.prefix(maxLines)) + ["… (\(lines.count - maxLines) more lines; --json prints it all)"]
    }

    // MARK: Rendering

    /// A tenant as shown in a table: `-` for none (internal receivers).
    static func tenant(_ tenant: String?) -> String {
        tenant.map { Output.clip(Redaction.text($0), 40) } ?? "-"
    }

    /// A tenant as shown in a `show` heading: `tenant acme`, or `no tenant`.
    static func tenantHeading(_ tenant: String?) -> String {
        tenant.map { "tenant " + Output.clip(Redaction.text($0), 100) } ?? "no tenant"
    }

    /// Event type patterns as shown: `invoice.*, order.paid`, or `none`.
    static func events(_ patterns: [String]) -> String {
        patterns.isEmpty ? "none" : patterns.map(Redaction.text).joined(separator: ", ")
    }

    /// `97 ok, 2 dead, 1 waiting`, or `none yet`.
    static func counts(_ recent: RecentDeliveries) -> String {
        guard recent.total > 0 else { return "none yet" }
        var parts: [String] = []
        if recent.succeeded > 0 { parts.append("\(recent.succeeded) ok") }
        if recent.dead > 0 { parts.append("\(recent.dead) dead") }
        if recent.waiting > 0 { parts.append("\(recent.waiting) waiting") }
        let cancelled = recent.total - recent.succeeded - recent.dead - recent.waiting
        if cancelled > 0 { parts.append("\(cancelled) cancelled") }
        return parts.joined(separator: ", ")
    }

    /// Delivery counts for `--json`.
    static func countsJSON(_ recent: RecentDeliveries) -> [String: Any] {
        [
            "total": recent.total, "succeeded": recent.succeeded, "dead": recent.dead, "waiting": recent.waiting,
            "last_state": Output.orNull(recent.lastState?.rawValue), "last_status": Output.orNull(recent.lastStatus),
        ]
    }

    /// `enabled`, or `disabled: <reason>`.
    static func state(_ endpoint: EndpointInfo, width: Int = 60) -> String {
        guard endpoint.disabledAt != nil else { return "enabled" }
        return "disabled: " + Output.clip(Output.oneLine(Redaction.text(endpoint.disabledReason ?? "")), width)
    }

    /// An endpoint's own health in a few words (``EndpointHealth/summary(time:)``).
    static func health(_ endpoint: EndpointInfo) -> String {
        endpoint.health.summary(time: Output.timestamp)
    }

    /// When an endpoint disables itself.
    static func autoDisable(_ health: EndpointHealth) -> String {
        health.autoDisableSummary { Output.duration($0.inSeconds) }
    }

    /// A rate limit: `50/s`, `0.5/s`, or `none`.
    static func rate(_ rate: Double?) -> String {
        guard let rate else { return "none" }
        return rate == rate.rounded() && abs(rate) < 1e15 ? "\(Int(rate))/s" : "\(rate)/s"
    }

    /// An endpoint for `--json`: every setting, its secrets' count and retiring expiry (never a
    /// secret), its recent deliveries.
    static func endpointJSON(_ endpoint: EndpointInfo) -> [String: Any] {
        [
            "id": endpoint.id, "tenant": Output.orNull(endpoint.tenant.map(Redaction.text)),
            "url": Redaction.url(endpoint.url), "description": Redaction.message(endpoint.description),
            "event_types": endpoint.eventTypes.map(Redaction.text),
            "payload_filter": jsonValue(endpoint.payloadFilter),
            "headers": shownHeaders(endpoint.headersJSON).map { ["name": $0.0, "value": $0.1] },
            "queue": Redaction.text(endpoint.queue), "rate_limit": Output.orNull(endpoint.rateLimit),
            "ordered": endpoint.ordered, "disabled": endpoint.disabledAt != nil,
            "disabled_at": Output.jsonTime(endpoint.disabledAt),
            "disabled_reason": Output.orNull(endpoint.disabledReason.map(Redaction.message)),
            "created_at": Output.timestamp(endpoint.createdAt), "updated_at": Output.timestamp(endpoint.updatedAt),
            "valid_secrets": endpoint.validSecrets, "retiring_until": Output.jsonTime(endpoint.retiringUntil),
            "recent": countsJSON(endpoint.recent), "last_success_at": Output.jsonTime(endpoint.lastSuccess),
            "health": [
                "failure_streak": endpoint.health.failureStreak,
                "breaker_open": endpoint.health.breakerOpenedAt != nil,
                "breaker_opened_at": Output.jsonTime(endpoint.health.breakerOpenedAt),
                "probe_at": Output.jsonTime(endpoint.health.probeAt),
                "failing_since": Output.jsonTime(endpoint.health.failingSince),
                "dead_streak": endpoint.health.deadStreak,
                "disable_after_seconds": Output.orNull(endpoint.health.disableAfter?.inSeconds),
                "disable_after_dead": Output.orNull(endpoint.health.disableAfterDead),
            ] as [String: Any],
        ]
    }

    /// A message for `--json` (without its payload).
    static func messageJSON(_ message: MessageInfo) -> [String: Any] {
        [
            "id": message.id, "webhook_id": message.webhookID, "event_type": Redaction.text(message.eventType),
            "tenant": Output.orNull(message.tenant.map(Redaction.text)),
            "idempotency_key": Output.orNull(message.idempotencyKey.map(Redaction.text)),
            "endpoints": message.endpoints, "created_at": Output.timestamp(message.createdAt),
            "delivery_counts": countsJSON(message.deliveries),
        ]
    }

    /// New deliveries of a re-send or a recovery for `--json`.
    static func resentJSON(_ deliveries: [ResentDelivery]) -> [[String: Any]] {
        deliveries.map {
            [
                "job_id": $0.jobID, "message_id": $0.messageID, "endpoint_id": $0.endpointID,
                "resent_from": Output.orNull($0.resentFrom),
            ]
        }
    }

    /// `101 102 103`.
    static func jobIDs(_ deliveries: [ResentDelivery]) -> String {
        deliveries.map { String($0.jobID) }.joined(separator: " ")
    }

    /// `1 delivery`, `3 deliveries`.
    static func plural(_ count: Int, _ one: String, _ many: String) -> String {
        "\(Output.count(count)) \(count == 1 ? one : many)"
    }
}

import Foundation
import Postgres

/// A destination as `courier destinations` shows it.
public struct DestinationInfo: Sendable, Equatable {
    /// The host (lower case, no port).
    public var host: String
    /// Jobs due now.
    public var due: Int
    /// Jobs waiting for a later `run_at` (scheduled or retrying).
    public var later: Int
    /// Requests in flight across all workers.
    public var running: Int
    /// The in-flight cap in force.
    public var maxInFlight: Int
    /// True when the cap is the workers' default (`--per-host-limit`), not the host's own.
    public var maxInFlightIsDefault: Bool
    /// Requests per second allowed to start; nil for no limit.
    public var rateLimit: Double?
    /// Consecutive failed attempts.
    public var failureStreak: Int
    /// Failures that open the breaker.
    public var breakerThreshold: Int
    /// How long an open breaker waits before a probe.
    public var breakerCooldown: Duration
    /// `closed`, `open` or `half-open` (a probe may go or is on its way).
    public var breaker: String
    /// When the breaker opened.
    public var openedAt: Date?
    /// When the next probe may start.
    public var probeAt: Date?
    /// When the destination was disabled; nil while enabled.
    public var disabledAt: Date?
    /// Why it is disabled.
    public var disabledReason: String?
    /// When an attempt last got an answer.
    public var lastSuccessAt: Date?
    /// When an attempt last failed.
    public var lastFailureAt: Date?
    /// Whether a 410 Gone disables the host (else only that job goes dead).
    public var disableOnGone: Bool
}

/// A change to a destination's settings; nil leaves a setting alone, `.some(nil)` restores
/// the default.
public struct DestinationSettingsChange: Sendable, Equatable {
    /// In-flight cap (`.some(nil)`: the workers' default).
    public var maxInFlight: Int??
    /// Requests per second (`.some(nil)`: no limit).
    public var rateLimit: Double??
    /// Failures that open the breaker.
    public var breakerThreshold: Int?
    /// How long an open breaker waits before a probe.
    public var breakerCooldown: Duration?
    /// Whether a 410 Gone disables the host.
    public var disableOnGone: Bool?

    /// An empty change.
    public init() {}

    /// True when nothing would change.
    public var isEmpty: Bool {
        maxInFlight == nil && rateLimit == nil && breakerThreshold == nil && breakerCooldown == nil
            && disableOnGone == nil
    }
}

/// Runs `DestinationStatements` on one connection.
public struct DestinationStore {
    /// The connection used.
    public let connection: PostgresConnection

    /// Creates a store on `connection`.
    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Destinations busiest first (`host` nil for all), at most `limit`.
    public func list(host: String? = nil, limit: Int, defaultMaxInFlight: Int) throws -> [DestinationInfo] {
        try connection.run(
            DestinationStatements.list, .init(host: host, limit: limit, defaultMaxInFlight: defaultMaxInFlight)
        ).rows.map { row in
            DestinationInfo(
                host: try row.decode(0), due: try row.decode(1), later: try row.decode(2), running: try row.decode(3),
                maxInFlight: try row.decode(4), maxInFlightIsDefault: try row.decode(5), rateLimit: try row.decode(6),
                failureStreak: try row.decode(7), breakerThreshold: try row.decode(8),
                breakerCooldown: try row.decodeSeconds(9) ?? .zero, breaker: try row.decode(10), openedAt: try row.decode(11),
                probeAt: try row.decode(12), disabledAt: try row.decode(13), disabledReason: try row.decode(14),
                lastSuccessAt: try row.decode(15), lastFailureAt: try row.decode(16), disableOnGone: try row.decode(17))
        }
    }

    /// Disables `host` with `reason`.
    public func disable(_ host: String, reason: String) throws {
        try connection.run(DestinationStatements.disable, .init(host: host, reason: reason))
    }

    /// Enables `host` and closes its breaker; false when the host has no row.
    public func enable(_ host: String) throws -> Bool {
        let changed = try connection.run(DestinationStatements.enable, host).rowCount > 0
        if changed { try connection.run(DestinationStatements.wake) }
        return changed
    }

    /// Applies `change` to `host`, creating its row.
    public func update(_ host: String, _ change: DestinationSettingsChange) throws {
        try connection.run(DestinationStatements.update, (host: host, change: change))
        try connection.run(DestinationStatements.wake)
    }
}

/// How a destination is named on the command line.
public enum DestinationHost {
    /// The destination a user means by `text`: a host name or address in any case, or a whole
    /// URL (its host is taken, as `courier.url_host` would). Nil when `text` names no host.
    public static func normalize(_ text: String) -> String? {
        var candidate = text.trimmingCharacters(in: .whitespaces)
        if candidate.contains("://") {
            guard let host = URLComponents(string: candidate)?.host, !host.isEmpty else { return nil }
            candidate = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        }
        candidate = candidate.lowercased()
        guard !candidate.isEmpty, candidate.utf8.count <= 255 else { return nil }
        if candidate.hasPrefix("[") {
            guard candidate.hasSuffix("]"), candidate.count > 2 else { return nil }
            return candidate.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
                ? candidate : nil
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-_")
        return candidate.allSatisfy { allowed.contains($0) } ? candidate : nil
    }
}

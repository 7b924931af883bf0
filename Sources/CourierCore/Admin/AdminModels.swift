import Foundation
import Postgres

/// A row of `courier jobs list` / `courier dead list`.
public struct JobSummary: Sendable, Equatable {
    public var id: Int64
    public var queue: String
    public var state: JobState
    public var priority: Int
    public var method: String
    public var url: String
    public var attempt: Int
    public var maxAttempts: Int
    public var runAt: StoredTime
    public var createdAt: StoredTime
    public var finishedAt: StoredTime?
    public var lastStatus: Int?
    public var lastError: String?
}

/// One job with everything `courier jobs show` prints.
public struct JobDetail: Sendable {
    public var summary: JobSummary
    /// Headers in stored order, values of secret-bearing headers already redacted.
    public var headers: [(String, String)]
    public var body: [UInt8]?
    public var retrySchedule: [Duration]?
    public var updatedAt: StoredTime
    public var lockedBy: String?
    public var lockedUntil: StoredTime?
    public var idempotencyKey: String?
    public var attempts: [AttemptSummary]
}

/// One row of a job's attempt history.
public struct AttemptSummary: Sendable, Equatable {
    public var attempt: Int
    public var startedAt: StoredTime
    public var finishedAt: StoredTime
    public var duration: StoredDuration
    public var status: Int?
    public var error: String?
    public var worker: String
    public var responseExcerpt: String?
    /// True for a request repeated in process within the attempt (migration 0008).
    public var inProcess: Bool = false
}

/// What happened to one id of a cancel, retry-now or requeue.
public struct JobChange: Sendable, Equatable {
    public var id: Int64
    /// Whether the job was changed.
    public var changed: Bool
    /// Its state before; nil when no such job exists.
    public var previousState: JobState?
}

/// Filters of a listing; nil fields do not filter.
public struct JobFilter: Sendable {
    public var state: JobState?
    public var queue: String?
    public var urlContains: String?
    public var createdSince: Date?
    public var finishedSince: Date?
    public var errorContains: String?
    public var limit: Int = 50
    /// Only jobs finished before this time.
    public var finishedBefore: Date?

    public init() {}
}

/// Which dead jobs a bulk requeue moves; nil fields do not filter. Substrings match literally.
public struct DeadJobFilter: Sendable, Equatable {
    public var queue: String?
    /// Died at or after this time.
    public var failedAfter: Date?
    /// Died before this time.
    public var failedBefore: Date?
    /// `last_error` contains this text.
    public var errorContains: String?
    /// The URL contains this text.
    public var urlContains: String?

    public init() {}
}

/// Which waiting jobs a bulk cancel cancels; nil fields do not filter. Only pending and
/// retrying jobs are ever cancelled.
public struct CancelFilter: Sendable, Equatable {
    /// Pending or retrying only.
    public var state: JobState?
    public var queue: String?
    /// The URL contains this text (literally).
    public var urlContains: String?
    /// Created at or after this time.
    public var createdSince: Date?

    public init() {}
}

/// A queue's settings; nil means "the default".
public struct QueueSettings: Sendable, Equatable {
    public var name: String
    public var paused: Bool
    public var maxAttempts: Int?
    public var retrySchedule: [Duration]?
    /// Whether a signing secret is set (the secret itself never leaves the database here).
    public var signed: Bool
    public var maxInFlight: Int?
    /// The OAuth2 token URL when the queue's requests carry a bearer token (migration 0008).
    /// The client secret never leaves the database here.
    public var oauthTokenURL: String? = nil
    /// The OAuth2 client id, when set.
    public var oauthClientID: String? = nil
    /// The OAuth2 scope, when set.
    public var oauthScope: String? = nil
    /// The OAuth2 audience, when set.
    public var oauthAudience: String? = nil
}

/// A change of a queue's OAuth2 client credentials: set all of them, or remove them.
public enum QueueOAuthChange: Sendable {
    /// Sets the credentials (token URL, client id, secret, optional scope and audience).
    case set(OAuth2ClientCredentials)
    /// Removes them: the queue's requests go without a bearer token again.
    case remove
}

/// A change of queue settings: nil leaves a field alone, `.some(nil)` restores the default.
public struct QueueSettingsChange: Sendable {
    public var maxAttempts: Int??
    public var retrySchedule: [Duration]??
    public var signingSecret: String??
    public var maxInFlight: Int??

    public init() {}

    /// Whether anything would change.
    public var isEmpty: Bool { maxAttempts == nil && retrySchedule == nil && signingSecret == nil && maxInFlight == nil }
}

/// Health of one queue, as `courier stats` shows it.
public struct QueueHealth: Sendable, Equatable {
    public var queue: String
    public var paused: Bool = false
    public var pending = 0
    public var running = 0
    public var retrying = 0
    public var dead = 0
    /// Age of the oldest due pending or retrying job (zero when none is due).
    public var lag: StoredDuration = .zero
    public var succeededLastHour = 0
    public var deadLastHour = 0
    /// Attempts behind the percentiles.
    public var recentAttempts = 0
    public var p50: StoredDuration?
    public var p95: StoredDuration?
    public var p99: StoredDuration?

    public init(queue: String) { self.queue = queue }
}

/// `courier stats`: per-queue health plus whole-table estimates of the final states.
public struct QueueStatsReport: Sendable {
    public var queues: [QueueHealth]
    /// Estimated rows per state over all queues (from the planner's statistics).
    public var estimatedTotals: [JobState: Int]
}

/// Result of a bulk import.
public struct ImportReport: Sendable, Equatable {
    /// Lines read and staged.
    public var staged: Int
    /// Jobs inserted.
    public var inserted: Int
    /// Lines whose idempotency key was already in the queue.
    public var duplicates: Int
    /// Lines rejected (skipped under `--skip-invalid`).
    public var rejected: [ImportProblem]
}

/// A rejected line of a bulk import.
public struct ImportProblem: Sendable, Equatable, Error {
    /// 1-based line number in the input.
    public var line: Int
    /// Why, as `courier.validate_job` (or the JSON reader) put it.
    public var reason: String

    public init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }
}

/// A stored `timestamptz` as the CLI shows it: the date when Foundation can hold and print it,
/// and always the server's own text.
///
/// Rows written around the API can hold `infinity`, `-infinity`, years past 9999 or before 1 AD;
/// decoding such a value never fails, and it is shown as the server wrote it.
public struct StoredTime: Sendable, Equatable, PostgresDecodable, CustomStringConvertible {
    /// The date, or nil when the stored value is outside years 1 to 9999 (or not finite).
    public let date: Date?
    /// The server's text for the value (`2026-11-22 20:30:00.123+00`, `infinity`).
    public let text: String

    /// Seconds since 1970 of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the dates shown
    /// as dates (and accepted from input by the CLI).
    public static let range: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// A time known as a date (for tests and callers that have one).
    public init(_ date: Date) {
        self.date = date
        text = PostgresTimestamp.format(date)
    }

    init(text: String) {
        self.text = text
        if let date = PostgresTimestamp.parse(text), Self.range.contains(date.timeIntervalSince1970) {
            self.date = date
        } else {
            self.date = nil
        }
    }

    /// Never nil: a value that is not a printable date keeps its text.
    public static func decode(postgresText text: String) -> StoredTime? { StoredTime(text: text) }

    public var description: String { text }
}

/// A stored span of time (a measured duration, a lag, a percentile) as the admin commands show
/// it: a `Duration` when it is one, and always the server's own number.
///
/// Rows written around the API can make these infinite or NaN (an attempt with `duration_ms`
/// `'Infinity'`, a job due at `-infinity`); decoding such a value never fails or traps, and it
/// is shown as the server wrote it.
public struct StoredDuration: Sendable, Equatable, Comparable, CustomStringConvertible {
    /// The span, or nil when the stored number is not finite or longer than a billion years.
    public let duration: Duration?
    /// The number as the server sent it, in its unit (`1234.5`, `Infinity`, `NaN`).
    public let text: String
    /// The number's unit, seconds or milliseconds.
    let scale: Double

    /// A span known as a `Duration`.
    public init(_ duration: Duration) {
        self.duration = duration
        text = String(duration.inSeconds)
        scale = 1
    }

    /// A stored number of seconds (`scale` 1) or milliseconds (`scale` 0.001).
    init(text: String, scale: Double) {
        self.text = text
        self.scale = scale
        duration = Double(text).flatMap { Duration.stored(seconds: $0 * scale) }
    }

    /// No time at all.
    public static let zero = StoredDuration(.zero)

    /// The stored number in seconds: infinite or NaN as stored, for output that shows it.
    package var seconds: Double { duration?.inSeconds ?? (Double(text).map { $0 * scale } ?? .nan) }

    /// Shorter spans first; NaN counts as shorter than any span, so it never wins a `max`.
    public static func < (lhs: StoredDuration, rhs: StoredDuration) -> Bool {
        func key(_ value: StoredDuration) -> Double { value.seconds.isNaN ? -.infinity : value.seconds }
        return key(lhs) < key(rhs)
    }

    public static func == (lhs: StoredDuration, rhs: StoredDuration) -> Bool {
        lhs.duration == rhs.duration && (lhs.duration != nil || lhs.text == rhs.text)
    }

    public var description: String { duration.map { "\($0)" } ?? text }
}

extension Duration {
    /// A stored number of seconds as a `Duration`, or nil when it is not finite or longer than
    /// a billion years either way (`Duration.seconds(_:)` traps far beyond that).
    package static func stored(seconds: Double) -> Duration? {
        guard seconds.isFinite, abs(seconds) <= 3.2e16 else { return nil }
        return .seconds(seconds)
    }
}

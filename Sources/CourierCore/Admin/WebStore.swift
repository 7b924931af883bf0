import Foundation
import Postgres

/// The filters of the console's job and dead-letter lists; nil fields do not filter.
/// Substrings match literally.
public struct WebJobFilter: Sendable, Equatable {
    /// Only jobs in this state.
    public var state: JobState?
    /// Only jobs of this queue.
    public var queue: String?
    /// Only jobs to this destination host (lower case, as `courier.url_host` stores it).
    public var host: String?
    /// The URL contains this text.
    public var urlContains: String?
    /// `last_error` contains this text.
    public var errorContains: String?
    /// Created at or after.
    public var createdSince: Date?
    /// Created before.
    public var createdBefore: Date?
    /// Finished (succeeded, dead, cancelled) at or after.
    public var finishedSince: Date?
    /// Finished before.
    public var finishedBefore: Date?

    /// No filter.
    public init() {}
}

/// One page of a job list and where the next one starts.
public struct WebJobPage: Sendable, Equatable {
    /// The jobs, newest first.
    public var jobs: [JobSummary]
    /// The cursor of the next (older) page; nil when this was the last.
    public var nextBefore: Int64?
    /// Set when the page stopped because it had read its scan window without filling up (a
    /// substring filter): the lowest id it examined. The next page searches below it.
    public var searchedDownTo: Int64?
}

/// One queue on the console's queue page.
public struct QueueOverview: Sendable, Equatable {
    /// The queue name.
    public var name: String
    /// Whether workers skip it.
    public var paused = false
    /// Jobs per state (states without jobs are absent).
    public var jobs: [JobState: Int] = [:]
    /// Age in seconds of the oldest due pending or retrying job; 0 when none is due.
    public var lag: StoredDuration = .zero

    /// An empty queue.
    public init(name: String) { self.name = name }
}

/// One minute of attempts.
public struct TrafficMinute: Sendable, Equatable {
    /// When the minute starts.
    public var start: Date
    /// Attempts answered with a 2xx status.
    public var delivered: Int
    /// The other attempts: another status, or no answer.
    public var failed: Int

    /// A minute.
    public init(start: Date, delivered: Int, failed: Int) {
        self.start = start
        self.delivered = delivered
        self.failed = failed
    }

    /// Every attempt of the minute.
    public var attempts: Int { delivered + failed }
}

/// The attempts of the last hour (or of `minutes`), from `courier.attempts`: per minute, oldest
/// first, the current minute so far last, and the percentiles of their durations.
public struct Traffic: Sendable, Equatable {
    /// Every minute of the window, oldest first.
    public var minutes: [TrafficMinute]
    /// Median attempt duration in milliseconds; nil without attempts.
    public var p50: Double?
    /// 95th percentile in milliseconds.
    public var p95: Double?
    /// 99th percentile in milliseconds.
    public var p99: Double?

    /// A window.
    public init(minutes: [TrafficMinute], p50: Double? = nil, p95: Double? = nil, p99: Double? = nil) {
        self.minutes = minutes
        self.p50 = p50
        self.p95 = p95
        self.p99 = p99
    }

    /// Attempts answered 2xx in the window.
    public var delivered: Int { minutes.reduce(0) { $0 + $1.delivered } }
    /// The other attempts in the window.
    public var failed: Int { minutes.reduce(0) { $0 + $1.failed } }
    /// Every attempt in the window.
    public var attempts: Int { delivered + failed }
    /// The share of attempts that failed, 0 to 1; nil without attempts.
    public var errorRate: Double? { attempts == 0 ? nil : Double(failed) / Double(attempts) }
}

/// The attempts of the last hour per queue, per host and over all, as one read of
/// `WebStatements.traffic` gives them.
public struct TrafficReport: Sendable, Equatable {
    /// The start of each minute of the window, oldest first (the last is the current one).
    public var minuteStarts: [Date]
    /// Per queue with attempts in the window.
    public var queues: [String: Traffic]
    /// Per host with attempts in the window.
    public var hosts: [String: Traffic]
    /// Every attempt in the window.
    public var all: Traffic

    /// A report.
    public init(minuteStarts: [Date], queues: [String: Traffic] = [:], hosts: [String: Traffic] = [:], all: Traffic? = nil) {
        self.minuteStarts = minuteStarts
        self.queues = queues
        self.hosts = hosts
        self.all = all ?? Traffic(minutes: minuteStarts.map { TrafficMinute(start: $0, delivered: 0, failed: 0) })
    }

    /// Queue `name`'s attempts (every minute empty when it had none).
    public func queue(_ name: String) -> Traffic { queues[name] ?? empty }

    /// Host `host`'s attempts (every minute empty when it had none).
    public func host(_ host: String) -> Traffic { hosts[host] ?? empty }

    private var empty: Traffic { Traffic(minutes: minuteStarts.map { TrafficMinute(start: $0, delivered: 0, failed: 0) }) }
}

/// One queue's page: its counts per state (maintained, so every state costs the same, the
/// succeeded ones kept by retention too) and its settings.
public struct QueueDetail: Sendable, Equatable {
    /// The queue name.
    public var name: String
    /// Jobs per state (states without jobs are absent).
    public var jobs: [JobState: Int] = [:]
    /// Age of the oldest due pending or retrying job; zero when none is due.
    public var lag: StoredDuration = .zero
    /// Whether the queue has a settings row (else every setting is the default).
    public var hasSettings = false
    /// Whether workers skip it.
    public var paused = false
    /// Attempts per job; nil: the default (`Defaults.maxAttempts`).
    public var maxAttempts: Int?
    /// The delays between attempts; nil: the default schedule.
    public var retrySchedule: [Duration]?
    /// Whether a signing secret is set (the secret itself is never read).
    public var signed = false
    /// Requests in flight per worker process; nil: no cap of the queue's own.
    public var maxInFlight: Int?
    /// How long succeeded jobs are kept; nil: the worker's default.
    public var keepSucceeded: Duration?
    /// How long dead jobs are kept; nil: the worker's default.
    public var keepDead: Duration?
    /// Whether requests carry an OAuth2 bearer token (the credentials are never read).
    public var oauth = false
    /// How far ahead a job may be scheduled; nil: no limit of the queue's own.
    public var maxScheduleAhead: Duration?

    /// A queue without jobs or settings.
    public init(name: String) { self.name = name }
}

/// One action of the console, as `courier.web_audit` records it.
public struct WebAuditEntry: Sendable, Equatable {
    /// The name the operator gave at login.
    public var who: String
    /// The peer address of the request.
    public var client: String
    /// What was done (`queue.pause`, `job.requeue`, ...).
    public var action: String
    /// What it was done to.
    public var target: String
    /// How many jobs changed.
    public var jobs: Int

    /// Creates an entry.
    public init(who: String, client: String, action: String, target: String, jobs: Int) {
        self.who = who
        self.client = client
        self.action = action
        self.target = target
        self.jobs = jobs
    }
}

/// Runs `WebStatements` on one connection; everything else the console does goes through
/// `AdminStore` and `DestinationStore`.
public struct WebStore {
    /// The connection used.
    public let connection: PostgresConnection

    /// Creates a store on `connection`.
    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// One page of jobs matching `filter`, newest first, with ids below `before` (nil: from the
    /// newest); at most `limit`. With a substring filter (URL or error) the page reads at most
    /// `scanWindow` candidate rows and may come back short, or empty, with a cursor to go on.
    public func jobs(_ filter: WebJobFilter, before: Int64?, limit: Int, scanWindow: Int = 20_000) throws -> WebJobPage {
        let page = WebStatements.JobPage(filter: filter, before: before, limit: limit, scanWindow: scanWindow)
        guard filter.urlContains != nil || filter.errorContains != nil else {
            let jobs = try connection.run(WebStatements.listJobs, page).rows.map(AdminStore.summary)
            return WebJobPage(jobs: jobs, nextBefore: jobs.count == limit ? jobs.last?.id : nil)
        }
        var jobs: [JobSummary] = []
        var lowest: Int64?
        var examined = 0
        for row in try connection.run(WebStatements.listJobsScanning, page).rows {
            lowest = try row.decode(13)
            examined = try row.decode(14)
            if try row.decode(0, as: Int64?.self) != nil { jobs.append(try AdminStore.summary(row)) }
        }
        if jobs.count == limit { return WebJobPage(jobs: jobs, nextBefore: jobs.last?.id) }
        let full = examined >= max(limit, scanWindow)
        return WebJobPage(jobs: jobs, nextBefore: full ? lowest : nil, searchedDownTo: full ? lowest : nil)
    }

    /// Every queue with jobs or settings, by name.
    public func queueOverview() throws -> [QueueOverview] {
        var queues: [String: QueueOverview] = [:]
        for row in try connection.run(WebStatements.queueOverview).rows {
            let name: String = try row.decode(0)
            var queue = queues[name] ?? QueueOverview(name: name)
            if let stateText: String = try row.decode(1), let state = JobState(rawValue: stateText) {
                queue.jobs[state, default: 0] += try row.decode(2, as: Int.self)
                if let lag = try row.decodeStoredSeconds(3) { queue.lag = max(queue.lag, lag) }
            }
            queues[name] = queue
        }
        for row in try connection.run(AdminStatements.pausedQueues).rows {
            let name: String = try row.decode(0)
            queues[name, default: QueueOverview(name: name)].paused = true
        }
        return queues.values.sorted { $0.name < $1.name }
    }

    /// The attempts of the last `minutes` minutes (the current one so far included) per queue,
    /// per host and over all, in one read (its own transaction, without JIT compilation).
    public func traffic(minutes: Int = 60) throws -> TrafficReport {
        let count = max(1, minutes)
        let rows = try connection.transaction { connection in
            try connection.run(WebStatements.trafficWithoutJIT)
            return try connection.run(WebStatements.traffic, count).rows
        }
        let since = try rows.first.map { Date(timeIntervalSince1970: try $0.decode(8)) } ?? Date()
        let starts = (0..<count).map { since.addingTimeInterval(Double($0) * 60) }
        let empty = Traffic(minutes: starts.map { TrafficMinute(start: $0, delivered: 0, failed: 0) })
        var report = TrafficReport(minuteStarts: starts)
        var all = empty
        for row in rows {
            let kind: Int = try row.decode(0)
            let name: String = try row.decode(1)
            var traffic = (kind == 0 ? report.queues[name] : kind == 1 ? report.hosts[name] : all) ?? empty
            if let minute = try row.decode(2, as: Int?.self) {
                guard traffic.minutes.indices.contains(minute) else { continue }
                let delivered: Int = try row.decode(3)
                let failed: Int = try row.decode(4)
                traffic.minutes[minute].delivered += delivered
                traffic.minutes[minute].failed += failed
                if kind == 0 {
                    all.minutes[minute].delivered += delivered
                    all.minutes[minute].failed += failed
                }
            } else {
                traffic.p50 = try row.decode(5)
                traffic.p95 = try row.decode(6)
                traffic.p99 = try row.decode(7)
            }
            switch kind {
            case 0: report.queues[name] = traffic
            case 1: report.hosts[name] = traffic
            default: all.p50 = traffic.p50; all.p95 = traffic.p95; all.p99 = traffic.p99
            }
        }
        report.all = all
        return report
    }

    /// Queue `name`'s counts and settings; nil when it has neither jobs (in any state still
    /// kept) nor settings.
    public func queueDetail(_ name: String) throws -> QueueDetail? {
        var detail = QueueDetail(name: name)
        for row in try connection.run(AdminStatements.queueStateCounts, name).rows {
            guard let state = JobState(rawValue: try row.decode(0)) else { continue }
            detail.jobs[state, default: 0] += try row.decode(1, as: Int.self)
            if let lag = try row.decodeStoredSeconds(2) { detail.lag = max(detail.lag, lag) }
        }
        let settings = try connection.run(WebStatements.queueSettings, name)
        if settings.rowCount == 1 {
            let row = settings[0]
            detail.hasSettings = true
            detail.paused = try row.decode(0)
            detail.maxAttempts = try row.decode(1)
            detail.retrySchedule = AdminStore.schedule(try row.decode(2))
            detail.signed = try row.decode(3)
            detail.maxInFlight = try row.decode(4)
            detail.keepSucceeded = try row.decodeSeconds(5)
            detail.keepDead = try row.decodeSeconds(6)
            detail.oauth = try row.decode(7)
            detail.maxScheduleAhead = try row.decodeSeconds(8)
        }
        return detail.jobs.isEmpty && !detail.hasSettings ? nil : detail
    }

    /// Writes one audit row.
    public func audit(_ entry: WebAuditEntry) throws {
        try connection.run(WebStatements.insertAudit, entry)
    }
}

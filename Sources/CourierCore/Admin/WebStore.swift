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

    /// The highest attempt id so far (0 without attempts).
    public func attemptsHighWater() throws -> Int64 {
        try connection.run(WebStatements.attemptsHighWater)[0].decode(0)
    }

    /// Writes one audit row.
    public func audit(_ entry: WebAuditEntry) throws {
        try connection.run(WebStatements.insertAudit, entry)
    }
}

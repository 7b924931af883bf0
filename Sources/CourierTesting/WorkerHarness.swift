import CourierCore
import CourierSink
import Foundation
import Postgres

/// Counts what a test sink saw, thread-safely.
public final class SinkLog: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [SinkRequest] = []
    private var perKey: [String: Int] = [:]
    private var concurrent: [String: Int] = [:]
    private var maxConcurrent: [String: Int] = [:]

    /// Creates an empty log.
    public init() {}

    /// Records a request and returns how many requests with this `key` were seen so far (1-based).
    @discardableResult
    public func record(_ request: SinkRequest, key: String) -> Int {
        lock.withLock {
            requests.append(request)
            perKey[key, default: 0] += 1
            return perKey[key]!
        }
    }

    /// Marks a request for `key` as started (for overlap checks); pair with `end`.
    public func begin(_ key: String) {
        lock.withLock {
            concurrent[key, default: 0] += 1
            maxConcurrent[key] = max(maxConcurrent[key, default: 0], concurrent[key]!)
        }
    }

    /// Marks a request for `key` as finished.
    public func end(_ key: String) { lock.withLock { concurrent[key, default: 1] -= 1 } }

    /// Every request so far.
    public var all: [SinkRequest] { lock.withLock { requests } }

    /// Requests seen per key.
    public var counts: [String: Int] { lock.withLock { perKey } }

    /// The most requests for one key that overlapped in time.
    public var maxOverlap: Int { lock.withLock { maxConcurrent.values.max() ?? 0 } }
}

/// Small SQL conveniences for worker tests (tests may read the schema directly).
public struct JobsProbe {
    /// The connection used.
    public let connection: PostgresConnection

    /// Opens a probe connection.
    public init(url: String) throws { connection = try PostgresConnection(url) }

    /// Enqueues a JSON job and returns its id.
    @discardableResult
    public func enqueue(
        url: String, queue: String, maxAttempts: Int = 3, retrySeconds: [Double] = [0.1], priority: Int = 0
    ) throws -> Int64 {
        try connection.query(
            """
            SELECT courier.enqueue(url => $1, payload => '{"hello":"world"}', queue => $2, max_attempts => $3,
                retry_schedule => (SELECT array_agg(s * interval '1 second') FROM unnest($4::float8[]) s), priority => $5)
            """, [url, queue, maxAttempts, PostgresArray(retrySeconds), priority])[0].decode(0)
    }

    /// The job's state, attempt and last status.
    public func job(_ id: Int64) throws -> (state: String, attempt: Int, lastStatus: Int?, lastError: String?) {
        let row = try connection.query(
            "SELECT state::text, attempt, last_status, last_error FROM courier.jobs WHERE id = $1", [id])[0]
        return (try row.decode(0), try row.decode(1), try row.decode(2), try row.decode(3))
    }

    /// Attempt rows of a job.
    public func attemptCount(_ id: Int64) throws -> Int {
        try connection.query("SELECT count(*) FROM courier.attempts WHERE job_id = $1", [id])[0].decode(0)
    }

    /// Jobs of `queue` not yet final.
    public func unsettled(queue: String) throws -> Int {
        try connection.query(
            "SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state NOT IN ('succeeded','dead','cancelled')",
            [queue])[0].decode(0)
    }

    /// Counts per state of `queue`.
    public func states(queue: String) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in try connection.query(
            "SELECT state::text, count(*) FROM courier.jobs WHERE queue = $1 GROUP BY 1", [queue]).rows
        {
            out[try row.decode(0)] = try row.decode(1)
        }
        return out
    }

    /// Polls until every job of `queue` is final or `timeout` passes; returns true when settled.
    public func waitUntilSettled(queue: String, timeout: Duration) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try unsettled(queue: queue) == 0 { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try unsettled(queue: queue) == 0
    }

    /// Removes every CHECK constraint of `courier.jobs` and `courier.queues` and every
    /// validation trigger of `courier.jobs` (the wake-up trigger stays), so a test can write the
    /// rows an older version, a restore or a producer with table rights could have left.
    public func dropRowGuards() throws {
        try connection.simpleQuery(
            """
            DO $$
            DECLARE c record;
            BEGIN
                FOR c IN SELECT conrelid::regclass AS tab, conname FROM pg_constraint
                         WHERE contype = 'c' AND conrelid IN ('courier.jobs'::regclass, 'courier.queues'::regclass) LOOP
                    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tab, c.conname);
                END LOOP;
                FOR c IN SELECT tgname FROM pg_trigger
                         WHERE tgrelid = 'courier.jobs'::regclass AND NOT tgisinternal
                           AND tgname <> 'jobs_notify_inserted' LOOP
                    EXECUTE format('DROP TRIGGER %I ON courier.jobs', c.tgname);
                END LOOP;
            END $$;
            """)
    }

    /// Forgets every destination's live state and settings, and the health of plain-job
    /// endpoints. Destinations are keyed by host, and tests of one database share 127.0.0.1:
    /// without this, one test's failures (a failure streak, an open breaker) or killed workers
    /// (running counts) would hold back the next.
    public func forgetDestinations() throws {
        try connection.query("DELETE FROM courier.destinations")
        try connection.query("DELETE FROM courier.endpoint_health WHERE endpoint_id IS NULL")
    }

    /// Closes the connection.
    public func close() { connection.close() }
}

/// The `courier` executable built next to the tests (`.build/<config>/courier`).
public enum CourierBinary {
    /// Path of the built `courier` binary.
    public static var path: String {
        let bundle = Bundle.main.bundleURL
        var directory = bundle
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("courier")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
            directory = directory.deletingLastPathComponent()
        }
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return repo.appendingPathComponent(".build/debug/courier").path
    }
}

/// Runs a shell command to completion with posix_spawn and waitpid, output to /dev/null.
///
/// Foundation's `Process` is avoided: a command that starts a server (`pg_ctl restart`) leaves
/// a child behind holding the descriptors, and `Process` may then never notice the exit.
public func runShellCommand(_ command: String) -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let arguments = ["/bin/sh", "-c", command]
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ) == 0 else { return 127 }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

extension JobStore {
    /// Writes one outcome, `result`, for each of `jobs` as the worker would: the transition the
    /// policy decides for it (with a fixed jitter) and `now` as its start and end.
    public func record(_ jobs: [ClaimedJob], _ result: Delivery) throws {
        try record(jobs.map { ($0, result) })
    }

    /// Writes the outcomes of one batch, each job with its own result, in the order given.
    public func record(_ batch: [(job: ClaimedJob, result: Delivery)]) throws {
        let now = Date()
        try recordOutcomes(batch.map { job, result in
            AttemptRecord(
                jobID: job.id, attempt: job.attempt,
                transition: JobTransition.decide(
                    result, attempt: job.attempt, maxAttempts: job.maxAttempts, schedule: job.schedule,
                    postponements: job.postponements, parkOnGone: job.parkOnGone, random: 0.5),
                delivery: result, startedAt: now, finishedAt: now, host: job.host)
        })
    }
}

/// A flag a receiver's handler reads and a test flips, from any thread.
public final class SharedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Bool

    /// A flag set to `value`.
    public init(_ value: Bool) { stored = value }

    /// The flag now.
    public var value: Bool {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

import Postgres

/// Statements `courier demo` and `courier bench` use to set up jobs and watch them settle.
public enum DemoStatements {
    /// A demo job: a JSON event to a URL, with a short retry schedule.
    public struct Job: Sendable {
        /// Where it goes.
        public var url: String
        /// The JSON payload.
        public var payload: String
        /// Its queue.
        public var queue: String
        /// Attempts in all.
        public var maxAttempts: Int
        /// Seconds between attempts.
        public var retrySchedule: [Duration]

        /// A demo job.
        public init(url: String, payload: String, queue: String, maxAttempts: Int, retrySchedule: [Duration]) {
            self.url = url
            self.payload = payload
            self.queue = queue
            self.maxAttempts = maxAttempts
            self.retrySchedule = retrySchedule
        }
    }

    /// Enqueues one JSON job through `courier.enqueue` with its own retry schedule, so demo
    /// retries take seconds, not minutes.
    public static let enqueue = Statement<Job>("""
        SELECT courier.enqueue(url => $1, payload => $2::jsonb, queue => $3, max_attempts => $4,
            retry_schedule => (SELECT array_agg(s * interval '1 second') FROM unnest($5::float8[]) s))
        """) { [$0.url, PostgresJSON($0.payload), $0.queue, $0.maxAttempts, PostgresArray($0.retrySchedule.map(\.inSeconds))] }

    /// Jobs of a queue not yet in a final state.
    public static let unsettledCount = Statement<String>("""
        SELECT count(*) FROM courier.jobs WHERE queue = $1 AND state NOT IN ('succeeded', 'dead', 'cancelled')
        """) { [$0] }

    /// One line per job of a queue: what happened to it.
    public static let summary = Statement<String>("""
        SELECT id, url, state::text, attempt, last_status, last_error,
               (SELECT count(*) FROM courier.attempts a WHERE a.job_id = j.id) AS attempt_rows
        FROM courier.jobs j WHERE queue = $1 ORDER BY id
        """) { [$0] }
}

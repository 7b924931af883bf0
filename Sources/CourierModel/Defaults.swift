/// Every default that more than one part of Courier relies on, named once.
///
/// The worker's configuration, the CLI's flags and their help, the console and the benchmark
/// read these instead of writing the numbers again.
public enum Defaults {
    /// The attempts a job gets when neither the job nor its queue says otherwise: 10, the
    /// Standard Webhooks example (``RetrySchedule/standardWebhooks`` holds the 9 delays between
    /// them).
    public static let maxAttempts = 10

    /// The jitter of a retry schedule: each delay is multiplied by a factor drawn uniformly
    /// from `1 ± 0.2`.
    public static let retryJitter = 0.2

    /// Deliveries one worker process has in flight at once: 400. Twice a claim, so a full claim
    /// still fits while the one before it is in flight, and twice the per-host cap, so one slow
    /// host holds at most half of a default worker.
    public static let concurrency = 400

    /// The most jobs one claim takes: 200. Each claim and each outcome write costs PostgreSQL a
    /// fixed part (starting the statement, preparing the table's checks, the commit) besides
    /// its rows; across 1,000 hosts, claims of 200 instead of 100 cut the server's CPU per job
    /// by about a tenth (docs/performance.md).
    public static let batchSize = 200

    /// Requests in flight to one host at once across all workers, for hosts without their own
    /// cap (`courier.destinations.max_in_flight`): 200.
    public static let perHostLimit = 200

    /// The longest wait a receiver's `Retry-After` may impose: one day.
    public static let maximumRetryAfter: Duration = .seconds(24 * 3600)

    /// How often one job may be postponed by a receiver's 429 or 503 with `Retry-After`
    /// without spending an attempt: 20.
    public static let maximumPostponements = 20

    /// Bytes of a response body kept as the attempt's excerpt: 20,000.
    public static let maximumExcerptBytes = 20_000

    /// The time allowed to connect to a receiver: 10 s.
    public static let connectTimeout: Duration = .seconds(10)

    /// The time allowed for one request, response head and excerpt included: 30 s.
    public static let totalTimeout: Duration = .seconds(30)

    /// Connections to receivers open at once over all hosts, idle or busy: 2,048 (a connection
    /// each for two thousand receivers; `courier worker --max-connections`).
    public static let maximumConnections = 2_048

    /// Request bodies up to this size travel with the claim: 64 KiB. A larger body stays in
    /// PostgreSQL until its delivery has room in the worker's body budget, then is read alone.
    public static let inlineBodyBytes = 65_536

    /// Bytes of larger request bodies one worker process holds at once: 64 MiB.
    public static let bodyBudgetBytes = 64 * 1_048_576
}

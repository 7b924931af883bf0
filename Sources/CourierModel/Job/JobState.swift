/// The lifecycle state of a job; the same closed set as the `courier.job_state` enum.
///
/// See `docs/state-machine.md` for the diagram. `succeeded`, `dead` and `cancelled` are final
/// and carry `finished_at`.
public enum JobState: String, Sendable, CaseIterable, Codable {
    /// Waiting for `run_at` (new, requeued, or given back at shutdown). Claimed when due.
    case pending
    /// Claimed by a worker, which holds a lease (`locked_until`) and renews it by heartbeat.
    /// Leaves by an outcome (succeeded, retrying, dead) or by rescue when the lease expires.
    case running
    /// An attempt failed and attempts are left: waits for `run_at`, then is claimed again.
    case retrying
    /// A 2xx response was received. Final.
    case succeeded
    /// Dead letter: a permanent failure or attempts exhausted. Final until requeued.
    case dead
    /// Cancelled by an operator while pending or retrying. Final.
    case cancelled

    /// True for the states a job never leaves on its own.
    public var isFinal: Bool { self == .succeeded || self == .dead || self == .cancelled }

    /// True for the states a claim picks up once `run_at` has passed.
    public var isClaimable: Bool { self == .pending || self == .retrying }
}

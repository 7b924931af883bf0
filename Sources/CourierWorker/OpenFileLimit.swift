import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How the worker's connection budget fits the process's open-file limit (`RLIMIT_NOFILE`).
///
/// Every connection to a receiver is a descriptor. A worker started from a shell usually has
/// a soft limit of 1,024, below the default budget of 2,048 connections; past the limit a new
/// connection fails with `EMFILE`, and that failure would count against the receiver (a
/// retry, a failure towards its breaker) though the receiver did nothing wrong. So at start
/// the soft limit is raised as far as the budget needs and the hard limit allows (the soft
/// limit is the process's own to raise), and when the hard limit is still too low the budget
/// shrinks to fit: idle connections are then closed sooner to make room, and a request waits
/// for a connection instead of failing.
public enum OpenFileLimit {
    /// Descriptors kept for everything but receiver connections: the database connections, the
    /// event loops' own descriptors, the metrics listener, DNS look-ups, files read at start. A
    /// worker in a 1,000-host drain was seen to hold 25 besides its receiver connections.
    public static let reserved: UInt64 = 64

    /// What to do at start.
    public struct Plan: Equatable, Sendable {
        /// The soft limit to set, or nil to leave it as it is.
        public var raiseSoftLimitTo: UInt64?
        /// The connection budget to use: the one asked for, or less when the limit is too low.
        public var connections: Int
        /// True when ``connections`` is below the budget asked for.
        public var shrunk: Bool { connections < requested }
        /// The budget asked for.
        public var requested: Int
    }

    /// The plan for a budget of `connections` under a soft limit `soft` and a hard limit
    /// `hard` (`RLIM_INFINITY` for none). Pure.
    public static func plan(connections: Int, soft: UInt64, hard: UInt64) -> Plan {
        let needed = descriptors(for: connections)
        if soft >= needed { return Plan(raiseSoftLimitTo: nil, connections: connections, requested: connections) }
        let limit = min(hard, needed)
        let raise = limit > soft ? limit : nil
        if limit >= needed { return Plan(raiseSoftLimitTo: raise, connections: connections, requested: connections) }
        // A small limit keeps a quarter for the rest rather than all of `reserved`.
        let keep = min(reserved, limit / 4)
        let fits = Int(clamping: max(1, limit - keep))
        return Plan(raiseSoftLimitTo: raise, connections: min(connections, fits), requested: connections)
    }

    /// The descriptors a budget of `connections` needs: one each, and ``reserved`` for the rest.
    static func descriptors(for connections: Int) -> UInt64 {
        let asked = UInt64(max(1, connections))
        return asked.addingReportingOverflow(reserved).overflow ? UInt64.max : asked + reserved
    }

    /// `RLIMIT_NOFILE` as `getrlimit` and `setrlimit` take it.
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    /// The process's soft and hard open-file limits.
    private static func current() -> (soft: UInt64, hard: UInt64)? {
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return nil }
        return (UInt64(limits.rlim_cur), UInt64(limits.rlim_max))
    }

    /// Sets the soft open-file limit to `soft`, keeping the hard one; false when refused.
    private static func setSoftLimit(_ soft: UInt64, hard: UInt64) -> Bool {
        var limits = rlimit(rlim_cur: rlim_t(soft), rlim_max: rlim_t(hard))
        return setrlimit(resource, &limits) == 0
    }

    /// Fits a budget of `connections` to this process: raises the soft limit where the plan
    /// says so and returns the budget to use, with what was done for the log (nil when nothing
    /// needed saying). When the soft limit cannot be raised the budget fits the one found.
    public static func apply(connections: Int) -> (connections: Int, note: Note?) {
        guard let (soft, hard) = current() else { return (connections, nil) }
        var plan = plan(connections: connections, soft: soft, hard: hard)
        var limit = soft
        if let raise = plan.raiseSoftLimitTo {
            if setSoftLimit(raise, hard: hard) {
                limit = raise
            } else {
                plan = self.plan(connections: connections, soft: soft, hard: soft)
            }
        }
        if plan.shrunk {
            return (plan.connections, .shrunk(limit: limit, hard: hard, connections: plan.connections, asked: connections))
        }
        if limit != soft { return (plan.connections, .raised(from: soft, to: limit, connections: connections)) }
        return (plan.connections, nil)
    }

    /// What ``apply(connections:)`` did.
    public enum Note: Equatable, Sendable {
        /// The soft limit was raised so the whole budget fits.
        case raised(from: UInt64, to: UInt64, connections: Int)
        /// The limit could not hold the budget asked for, so the budget is smaller.
        case shrunk(limit: UInt64, hard: UInt64, connections: Int, asked: Int)

        /// Whether the worker runs with less than it was asked for (a warning, not news).
        public var isWarning: Bool {
            if case .shrunk = self { return true }
            return false
        }

        /// The log line.
        public var message: String {
            switch self {
            case .raised(let from, let to, let connections):
                return "raised the open-file limit from \(from) to \(to) for \(connections) receiver connections and \(OpenFileLimit.reserved) others"
            case .shrunk(let limit, let hard, let connections, let asked):
                return "the open-file limit (\(limit), hard limit \(hard)) holds \(connections) receiver connections, not the \(asked) of --max-connections: "
                    + "idle connections are closed sooner and requests may wait for one; raise the hard limit (LimitNOFILE= in the unit, ulimit -Hn) "
                    + "to at least \(OpenFileLimit.descriptors(for: asked)), or lower --max-connections"
            }
        }
    }
}

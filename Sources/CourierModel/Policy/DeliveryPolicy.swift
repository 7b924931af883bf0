/// What every outcome of a delivery attempt means: the one table both retry tiers decide from.
///
/// Courier retries in two tiers (docs/state-machine.md): a short retry inside the attempt, in
/// process, and a durable retry on the queue's schedule. Both ask this table, so a status or a
/// transport failure is never retried by one tier and final for the other:
/// - the worker's in-process retries (`HTTPDeliverer`) retry exactly the ``Action/retryNow``
///   rows, and RetryClient's default retryable statuses and kinds are the rows that are
///   retried at all;
/// - the deliverer asks the table once and hands its ``Verdict`` inside a ``Delivery`` to the
///   outcome writer unchanged: ``JobTransition`` adds only what depends on the job (attempts
///   left, the schedule, how often it was postponed, whether its host parks on 410), and the
///   verdict's ``DestinationSignal`` is what the destination's streak and breaker are told.
public enum DeliveryPolicy {
    /// What happened to one request.
    public enum Outcome: Sendable, Hashable, CustomStringConvertible {
        /// A response arrived. `retryAfter`: it carried a usable `Retry-After`. `oauth`: the
        /// request carried a bearer token its client can replace (``Authenticator``).
        case response(status: Int, retryAfter: Bool = false, oauth: Bool = false)
        /// No response arrived.
        case transport(TransportError.Kind)
        /// The target resolved to a private, loopback or link-local address and private
        /// targets are not allowed (SSRF protection); nothing was sent.
        case refusedTarget
        /// The request failed validation (method, URL, headers) or could not be built;
        /// nothing was sent.
        case invalidRequest
        /// The OAuth2 token endpoint refused the credentials (a 4xx such as `invalid_client`)
        /// or answered something unusable; nothing was sent to the receiver.
        case tokenRejected
        /// The OAuth2 token endpoint could not be reached or failed (timeout, 5xx, 408, 429).
        case tokenUnavailable
        /// The worker could not open the webhook endpoint's signing secret: it has no secrets
        /// key, or another one than sealed it. Nothing was sent.
        case secretUnavailable
        /// The worker stopped before the answer arrived.
        case interrupted

        public var description: String {
            switch self {
            case .response(let status, let retryAfter, let oauth):
                return "HTTP \(status)" + (retryAfter ? " with Retry-After" : "") + (oauth ? " (OAuth)" : "")
            case .transport(let kind): return kind.rawValue
            case .refusedTarget: return "refused target"
            case .invalidRequest: return "invalid request"
            case .tokenRejected: return "token request rejected"
            case .tokenUnavailable: return "token endpoint unavailable"
            case .secretUnavailable: return "endpoint secret unavailable"
            case .interrupted: return "interrupted"
            }
        }
    }

    /// What is done with the job.
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// Delivered.
        case succeed
        /// Send again at once, within the same attempt, after a short backoff (the in-process
        /// tier); when those retries are used up, the verdict's ``Verdict/exhausted`` applies.
        case retryNow
        /// Fail this attempt and retry on the queue's schedule (the durable tier); dead when no
        /// attempt is left.
        case retryLater
        /// Retry after the receiver's `Retry-After` without spending the attempt (a limited
        /// number of times per job, then as ``retryLater``).
        case postpone
        /// Wait without spending the attempt until an operator acts: the destination is
        /// disabled (410 Gone; as ``dead`` where the host is shared).
        case park
        /// Final: the dead letters.
        case dead
    }

    /// What the outcome says about the destination: the receiving host as a whole, and the
    /// endpoint (a registered webhook endpoint, or the URL without its query), each with its
    /// own failure streak and breaker.
    public enum DestinationSignal: String, Sendable, Hashable, CaseIterable {
        /// It answered: both streaks end, open breakers close.
        case answered
        /// The host failed (nothing listened, the connection broke or never came up, its name
        /// did not resolve): counts towards the host's breaker, not the endpoint's.
        case failed
        /// The host answered but this endpoint failed (a 5xx, no answer in time after the
        /// request went out, an unusable answer): counts towards the endpoint's breaker; for
        /// the host it is an answer.
        case endpointFailed
        /// 410 Gone: the destination is disabled.
        case gone
        /// Nothing about the destination.
        case none
    }

    /// Which outcomes a row is about.
    public enum Match: Sendable, Hashable {
        /// Responses with a status in `statuses`; `retryAfter`/`oauth` nil match either.
        case responses(ClosedRange<Int>, retryAfter: Bool? = nil, oauth: Bool? = nil)
        /// Transport failures of these kinds.
        case transport(Set<TransportError.Kind>)
        /// Exactly this outcome.
        case outcome(Outcome)

        func matches(_ outcome: Outcome) -> Bool {
            switch (self, outcome) {
            case (.responses(let range, let retryAfter, let oauth), .response(let status, let hasRetryAfter, let hasOAuth)):
                return range.contains(status) && (retryAfter.map { $0 == hasRetryAfter } ?? true)
                    && (oauth.map { $0 == hasOAuth } ?? true)
            case (.transport(let kinds), .transport(let kind)):
                return kinds.contains(kind)
            case (.outcome(let wanted), _):
                return wanted == outcome
            default:
                return false
            }
        }
    }

    /// One line of the table: the outcomes it covers, the verdict and why.
    public struct Row: Sendable, Hashable {
        /// The outcomes covered.
        public var match: Match
        /// The verdict for them.
        public var verdict: Verdict
        /// The reason, for docs and reviews.
        public var why: String
    }

    private static func row(
        _ match: Match, _ action: Action, _ destination: DestinationSignal, then exhausted: Action = .retryLater, _ why: String
    ) -> Row {
        Row(match: match, verdict: Verdict(action, destination, exhausted: exhausted), why: why)
    }

    /// The table, first match wins (specific statuses before their class). Statuses outside
    /// 100-599 and anything unlisted fall to the last rows.
    public static let table: [Row] = [
        row(.responses(200...299), .succeed, .answered, "2xx is the only success"),
        row(.responses(401...401, oauth: true), .retryNow, .answered, then: .dead,
            "the bearer token was rejected: fetch a fresh one and resend once (a second 401 is final)"),
        row(.responses(408...408), .retryLater, .endpointFailed, "request timeout: the receiver was too slow"),
        row(.responses(410...410), .park, .gone,
            "the receiver is gone: disable the destination and park its jobs (dead where the host is shared)"),
        row(.responses(425...425), .retryLater, .answered, "too early: a replay guard, retry later"),
        row(.responses(429...429, retryAfter: true), .postpone, .none,
            "rate limited with Retry-After: come back then without spending the attempt"),
        row(.responses(429...429), .retryLater, .none, "rate limited: back off on the schedule"),
        row(.responses(503...503, retryAfter: true), .postpone, .endpointFailed,
            "unavailable with Retry-After: come back then without spending the attempt"),
        row(.responses(501...501), .dead, .answered,
            "not implemented: the receiver does not support this method; resending cannot change that"),
        row(.responses(505...505), .dead, .answered, "HTTP version not supported: resending cannot change that"),
        row(.responses(500...599), .retryLater, .endpointFailed, "the receiver failed; it may recover"),
        row(.responses(300...399), .dead, .answered, "redirects are not followed: the receiver is misconfigured"),
        row(.responses(400...499), .dead, .answered, "the receiver refused this request; resending cannot change that"),
        row(.responses(100...199), .dead, .answered, "an informational status is not an answer"),
        row(.transport([.connectRefused, .connectionReset]), .retryNow, .failed, then: .retryLater,
            "nothing listened or the connection broke: usually a restart, over in a moment"),
        row(.transport([.connectTimeout, .dnsFailure, .notConnected, .other]),
            .retryLater, .failed, "the host could not be reached; it or the network may recover"),
        row(.transport([.readTimeout, .invalidResponse, .bodyTooLarge]),
            .retryLater, .endpointFailed, "the request went out but no usable answer came back; the endpoint may recover"),
        row(.transport([.tlsFailure]), .dead, .none, "TLS failed: a certificate problem does not heal by waiting"),
        row(.transport([.invalidRequest]), .dead, .none, "the request cannot be sent as it is"),
        row(.outcome(.refusedTarget), .dead, .none, "a private target is refused (SSRF protection); nothing was sent"),
        row(.outcome(.invalidRequest), .dead, .none, "the request cannot be sent as it is; nothing was sent"),
        row(.outcome(.tokenRejected), .dead, .none,
            "the token endpoint refused the credentials: fix them and requeue; nothing was sent"),
        row(.outcome(.tokenUnavailable), .retryLater, .none,
            "the token endpoint is unreachable or failing: like a transport failure, not the receiver's"),
        row(.outcome(.secretUnavailable), .retryLater, .none,
            "the worker cannot open the endpoint's secret (no secrets key, or another one): fix the worker; nothing was sent"),
        row(.outcome(.interrupted), .retryLater, .none, "the worker stopped; the job is due again"),
    ]

    /// What happens after a status outside every row (e.g. 600): final, since nothing says it
    /// would ever change.
    static let unmatched = Verdict(.dead, .answered)

    /// The first row that matches `outcome`, or nil (an unlisted status).
    public static func row(for outcome: Outcome) -> Row? {
        table.first { $0.match.matches(outcome) }
    }

    /// The verdict for `outcome`: the first row that matches it.
    public static func verdict(for outcome: Outcome) -> Verdict {
        if let row = row(for: outcome) { return row.verdict }
        switch outcome {
        case .response: return unmatched
        default: return Verdict(.dead, .none)
        }
    }

    /// The verdict for a response with `status`.
    public static func verdict(status: Int, retryAfter: Bool = false, oauth: Bool = false) -> Verdict {
        verdict(for: .response(status: status, retryAfter: retryAfter, oauth: oauth))
    }

    /// Whether an action retries at all (now, later or after `Retry-After`).
    public static func retries(_ action: Action) -> Bool {
        action == .retryNow || action == .retryLater || action == .postpone
    }

    /// Transport failure kinds whose verdict is `action`.
    public static func transportKinds(where action: Action) -> Set<TransportError.Kind> {
        Set(TransportError.Kind.allCases.filter { verdict(for: .transport($0)).action == action })
    }

    /// Statuses (100-599, without a token to replace) that are retried, now or later.
    public static var retriedStatuses: Set<Int> {
        Set((100...599).filter { retries(verdict(status: $0).action) })
    }

    /// Transport failure kinds that are retried, now or later.
    public static var retriedTransportKinds: Set<TransportError.Kind> {
        Set(TransportError.Kind.allCases.filter { retries(verdict(for: .transport($0)).action) })
    }
}

/// What a delivery attempt comes to: ``DeliveryPolicy``'s decision for its outcome, an action
/// and what it says about the destination.
///
/// The deliverer decides it once; it travels unchanged, inside a ``Delivery``, to
/// ``JobTransition`` and the outcome write. Nothing downstream asks the policy again.
public struct Verdict: Sendable, Hashable, CustomStringConvertible {
    /// What is done with the job.
    public var action: DeliveryPolicy.Action
    /// What it says about the destination (its failure streak and breaker).
    public var destination: DeliveryPolicy.DestinationSignal
    /// For ``DeliveryPolicy/Action/retryNow``: what the queue does once the in-process retries
    /// are used up and the outcome is still this one; otherwise equal to ``action``.
    public var exhausted: DeliveryPolicy.Action

    /// Creates a verdict; `exhausted` matters only for ``DeliveryPolicy/Action/retryNow``
    /// (default ``DeliveryPolicy/Action/retryLater``).
    public init(
        _ action: DeliveryPolicy.Action, _ destination: DeliveryPolicy.DestinationSignal,
        exhausted: DeliveryPolicy.Action = .retryLater
    ) {
        self.action = action
        self.destination = destination
        self.exhausted = action == .retryNow ? exhausted : action
    }

    /// What the durable tier does: ``exhausted`` for ``DeliveryPolicy/Action/retryNow``, else
    /// ``action``.
    public var durable: DeliveryPolicy.Action { exhausted }

    public var description: String {
        "\(action.rawValue)" + (action == .retryNow ? " then \(exhausted.rawValue)" : "")
            + ", destination \(destination.rawValue)"
    }
}

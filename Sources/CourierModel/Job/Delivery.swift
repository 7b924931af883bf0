/// What one delivery attempt produced: the value the deliverer hands to the outcome writer.
///
/// Its ``verdict`` is ``DeliveryPolicy``'s decision, taken once where the outcome was seen;
/// ``JobTransition/decide(_:attempt:maxAttempts:schedule:postponements:parkOnGone:random:)``
/// and the outcome write read it as it is.
public struct Delivery: Sendable, Equatable {
    /// What is done with the job and what it says about the destination.
    public var verdict: Verdict
    /// The HTTP status, when a response arrived.
    public var status: Int?
    /// What went wrong, for the job's `last_error`; nil on success.
    public var error: String?
    /// The receiver's `Retry-After`, when it sent a readable one.
    public var retryAfter: Duration?
    /// At most ``Defaults/maximumExcerptBytes`` of the response body, as text (no NUL bytes).
    public var responseExcerpt: String?
    /// Requests repeated in process before the one this describes, oldest first.
    public var inProcess: [InProcessAttempt]

    /// Creates a delivery.
    public init(
        _ verdict: Verdict, status: Int? = nil, error: String? = nil, retryAfter: Duration? = nil,
        responseExcerpt: String? = nil, inProcess: [InProcessAttempt] = []
    ) {
        self.verdict = verdict
        self.status = status
        self.error = error
        self.retryAfter = retryAfter
        self.responseExcerpt = responseExcerpt
        self.inProcess = inProcess
    }

    /// A response with `status`, judged by ``DeliveryPolicy`` (with `Retry-After` when one was
    /// readable). `error` defaults to `HTTP <status>` for anything but a success.
    public static func response(
        status: Int, error: String? = nil, retryAfter: Duration? = nil, oauth: Bool = false,
        responseExcerpt: String? = nil
    ) -> Delivery {
        let verdict = DeliveryPolicy.verdict(status: status, retryAfter: retryAfter != nil, oauth: oauth)
        return Delivery(
            verdict, status: status, error: verdict.durable == .succeed ? nil : (error ?? "HTTP \(status)"),
            retryAfter: retryAfter, responseExcerpt: responseExcerpt)
    }

    /// A 2xx response: delivered.
    public static func delivered(status: Int = 200, responseExcerpt: String? = nil) -> Delivery {
        response(status: status, responseExcerpt: responseExcerpt)
    }

    /// No response: `outcome` (a transport failure, a refused target, a failed token request,
    /// the worker stopping...) judged by ``DeliveryPolicy``, with `error` for people.
    public static func failure(_ outcome: DeliveryPolicy.Outcome, error: String) -> Delivery {
        Delivery(DeliveryPolicy.verdict(for: outcome), error: error)
    }
}

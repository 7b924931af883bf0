import CourierCore
import Foundation

/// What a delivery came to, with the bounded response excerpt to keep.
public struct DeliveryReport: Sendable {
    /// The outcome as the queue sees it.
    public var result: DeliveryResult
    /// At most 20,000 bytes of the response body, as text (no NUL bytes).
    public var responseExcerpt: String?
    /// What the outcome says about the destination, when not what `result` says
    /// (`DestinationSignal.of`): a failed OAuth token request says nothing about the receiver.
    public var signal: DestinationSignal?
    /// Requests repeated in process before the one `result` describes, oldest first.
    public var inProcess: [InProcessAttempt]

    /// Creates a report.
    public init(
        result: DeliveryResult, responseExcerpt: String?, signal: DestinationSignal? = nil,
        inProcess: [InProcessAttempt] = []
    ) {
        self.result = result
        self.responseExcerpt = responseExcerpt
        self.signal = signal
        self.inProcess = inProcess
    }
}

/// Sends one claimed job and says what happened. Never throws: every failure is a result.
///
/// Production uses `HTTPDeliverer` (the RetryClient); the seam lets the claim machinery be
/// exercised on its own.
public protocol Deliverer: Sendable {
    /// Delivers `job` (one attempt, which may include short in-process retries).
    func deliver(_ job: ClaimedJob) async -> DeliveryReport
}

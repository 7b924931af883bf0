import Foundation
import Logging

/// Sends a request through an ``Interceptor`` and a transport, retrying in process only when
/// the wait is short.
///
/// This is the first of two retry tiers. A retry decided with a delay of at most
/// ``maximumInProcessDelay`` is carried out here (sleep, adapt again, resend); a longer delay
/// ends the call with ``RetryOutcome/retryLater(after:reason:last:attempts:)`` at once, without
/// sleeping, so the second tier (the durable queue) can schedule it and free the worker.
public struct RetryingClient: Sendable {
    /// The transport every attempt goes through.
    public let transport: any HTTPTransport
    /// The adapters and retriers.
    public let interceptor: Interceptor
    /// The longest retry delay waited for in process. Default 1 s.
    public let maximumInProcessDelay: Duration
    /// Receives one debug message per failed attempt; nothing at info.
    public let logger: Logger

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - transport: Sends each attempt.
    ///   - interceptor: Adapts each attempt and decides about failures. Default: none, so no
    ///     retries.
    ///   - maximumInProcessDelay: The longest in-process wait. Default 1 s.
    ///   - logger: For debug messages. Default: a logger labelled `courier.retry-client`.
    public init(
        transport: any HTTPTransport,
        interceptor: Interceptor = Interceptor(),
        maximumInProcessDelay: Duration = .seconds(1),
        logger: Logger = Logger(label: "courier.retry-client")
    ) {
        self.transport = transport
        self.interceptor = interceptor
        self.maximumInProcessDelay = maximumInProcessDelay
        self.logger = logger
    }

    /// Sends `request` until it succeeds, a retrier stops it, or a retry must wait longer than
    /// ``maximumInProcessDelay``.
    ///
    /// A 2xx response is the only success; any other status is a failure for the retriers.
    /// If the task is cancelled, the call stops after the current attempt (or during a wait) and
    /// returns `.retryLater(after: .zero, …)`, because a cancelled delivery was not refused.
    public func send(_ request: OutboundRequest) async -> RetryOutcome {
        await sendTraced(request).outcome
    }

    /// Sends `request` like ``send(_:)`` and also returns every attempt that went to the
    /// transport (an attempt whose adapter failed was never sent and is not in it), oldest
    /// first: what a caller that keeps a delivery history records, since an in-process retry
    /// is a request the receiver saw too.
    public func sendTraced(_ request: OutboundRequest) async -> (outcome: RetryOutcome, sent: [SentAttempt]) {
        var sent: [SentAttempt] = []
        let outcome = await send(request, sent: &sent)
        return (outcome, sent)
    }

    private func send(_ request: OutboundRequest, sent trace: inout [SentAttempt]) async -> RetryOutcome {
        let startedAt = ContinuousClock.now
        let startDate = Date()
        var failures: [AttemptFailure] = []
        var attempt = 0
        while true {
            attempt += 1
            let context = AttemptContext(
                attempt: attempt,
                firstAttemptStartedAt: startedAt,
                firstAttemptDate: startDate,
                previousFailures: failures
            )
            var sent = request
            let failure: AttemptFailure
            do {
                sent = try await interceptor.adapt(request, context: context)
                let sentAt = Date()
                do {
                    let response = try await transport.send(sent)
                    trace.append(SentAttempt(attempt: attempt, startedAt: sentAt, finishedAt: Date(), result: .success(response)))
                    if response.isSuccess { return .delivered(response, attempts: attempt) }
                    failure = .response(response)
                } catch {
                    let classified = AsyncHTTPClientTransport.classify(error)
                    trace.append(SentAttempt(attempt: attempt, startedAt: sentAt, finishedAt: Date(), result: .failure(classified)))
                    failure = .transport(classified)
                }
            } catch {
                failure = .adapter(error)
            }
            logger.debug(
                "attempt failed",
                // The URL is left out: it may carry credentials.
                metadata: [
                    "http.method": "\(request.method)", "retry.attempt": "\(attempt)",
                    "retry.failure": "\(failure)",
                ]
            )
            if Task.isCancelled {
                return .retryLater(after: .zero, reason: "cancelled: \(failure)", last: failure, attempts: attempt)
            }
            let decision = await interceptor.retry(sent, context: context, failure: failure)
            let wait: Duration
            switch decision {
            case .doNotRetry:
                return .gaveUp(reason: failure.description, last: failure, attempts: attempt)
            case .doNotRetryWithError(let reason):
                return .gaveUp(reason: reason, last: failure, attempts: attempt)
            case .retry:
                wait = .zero
            case .retryAfter(let delay):
                wait = max(.zero, delay)
            }
            if wait > maximumInProcessDelay {
                return .retryLater(after: wait, reason: failure.description, last: failure, attempts: attempt)
            }
            if wait > .zero {
                let sleepStartedAt = ContinuousClock.now
                do {
                    try await Task.sleep(for: wait)
                } catch {
                    let remaining = max(.zero, wait - (ContinuousClock.now - sleepStartedAt))
                    return .retryLater(
                        after: remaining, reason: "cancelled: \(failure)", last: failure, attempts: attempt)
                }
            }
            failures.append(failure)
        }
    }
}

/// One attempt that went to the transport, as ``RetryingClient/sendTraced(_:)`` reports it.
public struct SentAttempt: Sendable {
    /// The attempt number within the call, from 1.
    public var attempt: Int
    /// When it was handed to the transport.
    public var startedAt: Date
    /// When its response or failure was known.
    public var finishedAt: Date
    /// The response (any status), or why none arrived.
    public var result: Result<HTTPResponseSummary, TransportError>

    /// Creates a record.
    public init(attempt: Int, startedAt: Date, finishedAt: Date, result: Result<HTTPResponseSummary, TransportError>) {
        self.attempt = attempt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.result = result
    }
}

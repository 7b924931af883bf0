import Foundation

/// A job as a worker holds it after claiming: everything needed to send it and to record the
/// outcome, and nothing else.
public struct ClaimedJob: Sendable, Equatable {
    /// Job id.
    public var id: Int64
    /// Queue name.
    public var queue: String
    /// HTTP method.
    public var method: String
    /// Target URL.
    public var url: String
    /// Request headers in the order stored.
    public var headers: [(String, String)]
    /// Request body, if any; nil also while a body larger than ``Defaults/inlineBodyBytes``
    /// has not been read yet (``bodyPending``).
    public var body: [UInt8]?
    /// The body's size in bytes as stored (0 for none).
    public var bodySize: Int
    /// This attempt's number (1 for the first).
    public var attempt: Int
    /// Attempts allowed.
    public var maxAttempts: Int
    /// The effective schedule (the job's, else the queue's, else the default).
    public var schedule: RetrySchedule
    /// The queue's Standard Webhooks secret, when requests of this queue are signed.
    public var signingSecret: String?
    /// The queue's per-process in-flight cap, if set.
    public var queueMaxInFlight: Int?
    /// Times the receiver postponed this job (429/503 with `Retry-After`) without spending an
    /// attempt.
    public var postponements: Int
    /// The destination host as PostgreSQL derived it (`courier.url_host`): lower case, no port.
    public var host: String
    /// What a 410 Gone does: true parks the job (and the destination is disabled), false makes
    /// it dead (`courier.destinations.disable_on_gone`).
    public var parkOnGone: Bool
    /// The queue's OAuth2 client credentials, when its requests carry a bearer token.
    public var oauth: OAuth2ClientCredentials?
    /// The webhook endpoint this job delivers to, when it delivers a published message.
    public var endpointID: Int64?
    /// That endpoint's secrets that sign now, newest first, still sealed (AES-GCM, nonce,
    /// ciphertext and tag); the worker opens them with its secrets key. They replace the queue's.
    public var sealedEndpointSecrets: [[UInt8]]
    /// The producer's W3C trace context as stored (`courier.jobs.traceparent`), or nil: the
    /// parent of this attempt's span, or the `traceparent` header as it is when the worker does
    /// not trace.
    public var traceparent: String?

    /// Creates a claimed job.
    public init(
        id: Int64, queue: String, method: String, url: String, headers: [(String, String)], body: [UInt8]?,
        attempt: Int, maxAttempts: Int, schedule: RetrySchedule, signingSecret: String?, queueMaxInFlight: Int?,
        postponements: Int = 0, host: String? = nil, parkOnGone: Bool = true, oauth: OAuth2ClientCredentials? = nil,
        endpointID: Int64? = nil, sealedEndpointSecrets: [[UInt8]] = [], traceparent: String? = nil,
        bodySize: Int? = nil
    ) {
        self.id = id
        self.queue = queue
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bodySize = bodySize ?? body?.count ?? 0
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.schedule = schedule
        self.signingSecret = signingSecret
        self.queueMaxInFlight = queueMaxInFlight
        self.postponements = postponements
        self.parkOnGone = parkOnGone
        self.oauth = oauth
        self.endpointID = endpointID
        self.sealedEndpointSecrets = sealedEndpointSecrets
        self.traceparent = traceparent
        self.host = host ?? URLComponents(string: url)?.host?.lowercased() ?? ""
    }

    /// True when the claim left the body in PostgreSQL (it is larger than
    /// ``Defaults/inlineBodyBytes``): the worker reads it just before the delivery.
    public var bodyPending: Bool { body == nil && bodySize > 0 }

    public static func == (lhs: ClaimedJob, rhs: ClaimedJob) -> Bool {
        lhs.id == rhs.id && lhs.attempt == rhs.attempt
    }
}

/// One finished attempt, ready to be written: the delivery as the deliverer reported it, the
/// job's transition, and where and when it happened.
public struct AttemptRecord: Sendable, Equatable {
    /// Job id.
    public var jobID: Int64
    /// The attempt number the job had when claimed (guards the update).
    public var attempt: Int
    /// What the job becomes.
    public var transition: JobTransition
    /// What the delivery produced: its verdict, status, error, excerpt and the requests
    /// repeated in process before the one that decided it.
    public var delivery: Delivery
    /// When the request started.
    public var startedAt: Date
    /// When the outcome was known.
    public var finishedAt: Date
    /// The destination host, for its failure streak and breaker.
    public var host: String

    /// Creates a record.
    public init(
        jobID: Int64, attempt: Int, transition: JobTransition, delivery: Delivery, startedAt: Date,
        finishedAt: Date, host: String = ""
    ) {
        self.jobID = jobID
        self.attempt = attempt
        self.transition = transition
        self.delivery = delivery
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.host = host
    }

    /// What the outcome says about the destination: the verdict's destination signal.
    public var signal: DeliveryPolicy.DestinationSignal { delivery.verdict.destination }
}

/// A request the worker sent and then repeated within the same attempt: it reached the
/// receiver (or tried to) but did not decide the job.
public struct InProcessAttempt: Sendable, Equatable {
    /// When it was sent.
    public var startedAt: Date
    /// When its answer or failure was known.
    public var finishedAt: Date
    /// The HTTP status, when a response arrived.
    public var status: Int?
    /// Why it did not count.
    public var error: String
    /// At most 20,000 bytes of the response body, as text.
    public var responseExcerpt: String?

    /// Creates a record.
    public init(startedAt: Date, finishedAt: Date, status: Int?, error: String, responseExcerpt: String? = nil) {
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.status = status
        self.error = error
        self.responseExcerpt = responseExcerpt
    }
}

import Foundation

/// One HTTP job to enqueue: what `courier.enqueue` takes, typed. Defaults are the SQL
/// function's: POST, queue `default`, due now, the queue's attempts, priority 0.
public struct CourierJob: Sendable, Equatable {
    /// Absolute http or https URL.
    public var url: String
    /// The request body, sent as is.
    public var body: [UInt8]
    /// HTTP method.
    public var method: String
    /// Extra request headers (the worker adds `webhook-id` and, for a signed queue, the signature).
    public var headers: [String: String]
    /// Queue name.
    public var queue: String
    /// Not before this time (nil: now).
    public var runAt: Date?
    /// Attempts allowed (nil: the queue's setting, else 10).
    public var maxAttempts: Int?
    /// A key unique in the queue: enqueueing it again returns the first job.
    public var idempotencyKey: String?
    /// Lower runs first; 0 by default.
    public var priority: Int?
    /// Delays between attempts (nil: the queue's schedule, else exponential backoff).
    public var retrySchedule: [Duration]?
    /// The producer's W3C trace context (`00-<trace id>-<parent id>-<flags>`); nil: the
    /// transaction's `courier.traceparent` setting, if any. The worker's span for each attempt
    /// is its child, and the receiver's `traceparent` continues it.
    public var traceparent: String?

    /// A job that POSTs `body` to `url`.
    public init(
        url: String, body: [UInt8] = [], method: String = "POST", headers: [String: String] = [:], queue: String = "default",
        runAt: Date? = nil, maxAttempts: Int? = nil, idempotencyKey: String? = nil, priority: Int? = nil,
        retrySchedule: [Duration]? = nil, traceparent: String? = nil
    ) {
        self.url = url
        self.body = body
        self.method = method
        self.headers = headers
        self.queue = queue
        self.runAt = runAt
        self.maxAttempts = maxAttempts
        self.idempotencyKey = idempotencyKey
        self.priority = priority
        self.retrySchedule = retrySchedule
        self.traceparent = traceparent
    }

    /// A job that sends `payload` encoded as JSON, with `Content-Type: application/json`
    /// unless `headers` name one (as `courier.enqueue` does for a JSON payload).
    public init<Payload: Encodable>(
        url: String, json payload: Payload, method: String = "POST", headers: [String: String] = [:],
        queue: String = "default", runAt: Date? = nil, maxAttempts: Int? = nil, idempotencyKey: String? = nil,
        priority: Int? = nil, retrySchedule: [Duration]? = nil, traceparent: String? = nil
    ) throws {
        var headers = headers
        if !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
            headers["Content-Type"] = "application/json"
        }
        self.init(
            url: url, body: Array(try JSONEncoder().encode(payload)), method: method, headers: headers, queue: queue,
            runAt: runAt, maxAttempts: maxAttempts, idempotencyKey: idempotencyKey, priority: priority,
            retrySchedule: retrySchedule, traceparent: traceparent)
    }

    /// The jobs as the JSON array `CourierClient.enqueueMany`'s statement unpacks: one bound
    /// parameter for any number of jobs. Numbers out of the SQL types' range are refused here,
    /// naming the field, before any statement runs.
    static func batchJSON(_ jobs: [CourierJob]) throws -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var array: [[String: Any]] = []
        array.reserveCapacity(jobs.count)
        for (index, job) in jobs.enumerated() {
            func integer(_ value: Int?, _ field: String) throws -> Int? {
                guard let value else { return nil }
                guard value >= Int(Int32.min) && value <= Int(Int32.max) else {
                    throw CourierClientError(
                        kind: .invalidInput,
                        message: "job \(index): \(field) must be between \(Int32.min) and \(Int32.max), got \(value)")
                }
                return value
            }
            var object: [String: Any] = [
                "url": job.url, "body": Data(job.body).base64EncodedString(), "method": job.method,
                "headers": job.headers, "queue": job.queue,
            ]
            if let runAt = job.runAt { object["run_at"] = formatter.string(from: runAt) }
            if let value = try integer(job.maxAttempts, "maxAttempts") { object["max_attempts"] = value }
            if let key = job.idempotencyKey { object["idempotency_key"] = key }
            if let traceparent = job.traceparent { object["traceparent"] = traceparent }
            object["priority"] = try integer(job.priority, "priority") ?? 0
            if let schedule = job.retrySchedule {
                object["retry_schedule"] = schedule.map { duration -> String in
                    let (seconds, attoseconds) = duration.components
                    return String(Double(seconds) + Double(attoseconds) / 1e18)
                }
            }
            array.append(object)
        }
        let data = try JSONSerialization.data(withJSONObject: array)
        return String(decoding: data, as: UTF8.self)
    }
}

import CourierCore
import Tracing

/// The trace context of an attempt: the span that wraps it when the worker traces, and the
/// `traceparent` header the receiver gets either way.
///
/// With a tracer, the attempt is a client span named `courier.deliver` whose parent is the
/// job's stored traceparent (the producer's), and the request names that span, so the
/// receiver's trace continues through the worker. Without one, the stored value is sent as it
/// is and no span work is done. A stored value that is not a W3C traceparent (a row written
/// around `courier.enqueue`) is neither a parent nor sent: the header must pass the same checks
/// as every other.
enum AttemptTracing {
    /// The span's name.
    static let spanName = "courier.deliver"

    /// True for a W3C traceparent as `courier.traceparent_problem` accepts it: version, trace id,
    /// parent id and flags in lower-case hex, version not `ff`, ids not all zeros.
    static func isValid(_ traceparent: String) -> Bool {
        let bytes = Array(traceparent.utf8)
        guard bytes.count == 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"),
            bytes[52] == UInt8(ascii: "-")
        else { return false }
        func isHex(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
        }
        for (index, byte) in bytes.enumerated() where ![2, 35, 52].contains(index) {
            guard isHex(byte) else { return false }
        }
        let zero = UInt8(ascii: "0")
        return !(bytes[0] == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "f"))
            && !bytes[3..<35].allSatisfy { $0 == zero } && !bytes[36..<52].allSatisfy { $0 == zero }
    }

    /// The stored traceparent when it is valid: what the receiver gets when the worker does not
    /// trace.
    static func forwarded(_ job: ClaimedJob) -> String? {
        job.traceparent.flatMap { isValid($0) ? $0 : nil }
    }

    /// Runs `send` inside the attempt's span; `send` gets the traceparent naming that span.
    static func traced(
        _ job: ClaimedJob, tracer: any Tracer, send: (_ traceparent: String?) async -> Delivery
    ) async -> Delivery {
        await withSpan(job, tracer: tracer, send: send)
    }

    /// The body of ``traced(_:tracer:send:)`` with the tracer's type known, so its span is
    /// concrete.
    private static func withSpan<T: Tracer>(
        _ job: ClaimedJob, tracer: T, send: (_ traceparent: String?) async -> Delivery
    ) async -> Delivery {
        var parent = ServiceContext.topLevel
        if let stored = forwarded(job) {
            tracer.extract(["traceparent": stored], into: &parent, using: HeaderCarrier())
        }
        let span = tracer.startSpan(spanName, context: parent, ofKind: .client)
        span.attributes["courier.queue"] = job.queue
        span.attributes["courier.job.id"] = job.id
        span.attributes["courier.attempt"] = job.attempt
        span.attributes["server.address"] = job.host
        span.attributes["http.request.method"] = job.method
        var carrier: [String: String] = [:]
        tracer.inject(span.context, into: &carrier, using: HeaderCarrier())
        let delivery = await send(carrier["traceparent"])
        if let status = delivery.status { span.attributes["http.response.status_code"] = status }
        span.attributes["courier.outcome"] = delivery.verdict.action.rawValue
        if delivery.verdict.action != .succeed {
            span.setStatus(SpanStatus(code: .error, message: delivery.error ?? delivery.verdict.action.rawValue))
        }
        span.end()
        return delivery
    }
}

/// Headers as a carrier of trace context: extraction reads them, injection writes them.
struct HeaderCarrier: Extractor, Injector {
    typealias Carrier = [String: String]

    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key]
    }

    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}

import Foundation

/// A job to enqueue, as the CLI and the bulk loader describe it. Validation is not done here:
/// `courier.validate_job` in the database is the one definition of a valid job.
public struct NewJob: Sendable, Equatable {
    /// Absolute http(s) URL.
    public var url: String
    /// HTTP method (default POST).
    public var method: String = "POST"
    /// Request headers, in order.
    public var headers: [(String, String)] = []
    /// Request body; nil for none.
    public var body: [UInt8]?
    /// Queue (default `default`).
    public var queue: String = "default"
    /// Run at this time; nil means now plus `delay`.
    public var runAt: Date?
    /// Time from now before the first attempt, when `runAt` is nil (default zero).
    public var delay: Duration = .zero
    /// Attempts allowed; nil uses the queue's default (else 10).
    public var maxAttempts: Int?
    /// Lower runs first (default 0).
    public var priority: Int = 0
    /// Unique per queue while set.
    public var idempotencyKey: String?
    /// The job's own retry delays; nil uses the queue's schedule.
    public var retrySchedule: [Duration]?

    /// Creates a job for `url`; set the other fields as needed.
    public init(url: String) {
        self.url = url
    }

    public static func == (lhs: NewJob, rhs: NewJob) -> Bool {
        lhs.url == rhs.url && lhs.method == rhs.method && lhs.headers.elementsEqual(rhs.headers, by: ==)
            && lhs.body == rhs.body && lhs.queue == rhs.queue && lhs.runAt == rhs.runAt
            && lhs.delay == rhs.delay && lhs.maxAttempts == rhs.maxAttempts
            && lhs.priority == rhs.priority && lhs.idempotencyKey == rhs.idempotencyKey
            && lhs.retrySchedule == rhs.retrySchedule
    }

    /// Whether a header of this name (case-insensitive) is set.
    public func hasHeader(_ name: String) -> Bool {
        headers.contains { $0.0.caseInsensitiveCompare(name) == .orderedSame }
    }

    /// The headers as the JSON object `courier.jobs.headers` holds.
    public var headersJSON: String {
        var object: [String: String] = [:]
        for (name, value) in headers { object[name] = value }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// Writes rows in the text format of `COPY ... FROM STDIN`.
public enum CopyText {
    /// Appends one field, escaped; nil is `\N`.
    public static func appendField(_ value: String?, to buffer: inout [UInt8]) {
        guard let value else {
            buffer += [0x5C, 0x4E]  // \N
            return
        }
        for byte in value.utf8 {
            switch byte {
            case 0x5C: buffer += [0x5C, 0x5C]
            case 0x0A: buffer += [0x5C, 0x6E]
            case 0x0D: buffer += [0x5C, 0x72]
            case 0x09: buffer += [0x5C, 0x74]
            default: buffer.append(byte)
            }
        }
    }

    /// Appends a bytea field in bytea's escape form, escaped again for COPY: printable ASCII
    /// other than the backslash passes as is (a JSON body stays its own size, where hex would
    /// double it), a backslash becomes `\\\\`, any other byte `\\ooo`.
    public static func appendBytea(_ bytes: [UInt8]?, to buffer: inout [UInt8]) {
        guard let bytes else {
            buffer += [0x5C, 0x4E]
            return
        }
        buffer.reserveCapacity(buffer.count + bytes.count + 16)
        for byte in bytes {
            switch byte {
            case 0x5C:
                buffer += [0x5C, 0x5C, 0x5C, 0x5C]
            case 0x20...0x7E:
                buffer.append(byte)
            default:
                buffer += [0x5C, 0x5C, 0x30 + (byte >> 6), 0x30 + ((byte >> 3) & 7), 0x30 + (byte & 7)]
            }
        }
    }
}

/// The ranges `courier.validate_job` and `courier.settings_problem` accept for the integer
/// fields of a job, checked in Swift too so that a value beyond a database integer is named
/// with its flag instead of failing as `value ... is out of range for type integer`.
public enum JobLimits {
    /// `priority` (a smallint): lower runs first.
    public static let priority: ClosedRange<Int> = -32768...32767
    /// `max_attempts` of a job or a queue.
    public static let maxAttempts: ClosedRange<Int> = 1...1000
}

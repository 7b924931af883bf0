import CourierCore
import CourierCLISupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads JSON Lines of jobs from a file descriptor in pieces, without holding the whole input.
///
/// Each non-empty line is one JSON object with the fields of `courier enqueue`'s flags:
/// `url` (required), `method`, `headers` (object of strings), `payload` (any JSON, sent as
/// JSON) or `body` (a string, sent as is) or `body_base64`, `queue`, `delay` (`"30s"` or
/// seconds), `run_at` (ISO 8601), `max_attempts`, `priority`, `idempotency_key`,
/// `retry_schedule` (array of durations). A line that is not such an object is recorded in
/// `problems` with its number and not staged; the database validates the rest.
///
/// Whatever a line holds, it costs only its own line: bytes PostgreSQL cannot store (NUL),
/// invalid UTF-8, numbers out of range, nesting deeper than `maxDepth` and lines longer than
/// `maxLineBytes` are line-numbered problems, so one bad line can never make the COPY or the
/// INSERT of the whole file fail.
final class JobLineReader: Sequence, IteratorProtocol {
    /// The longest line read (4 MiB: a 1 MiB body as base64 or escaped JSON, with room to spare).
    /// Longer lines are skipped as they stream by, never held whole.
    static let maxLineBytes = 4 << 20
    /// The deepest nesting of arrays and objects a line may have.
    static let maxDepth = 64
    /// The largest delay or retry-schedule entry a line may give, in seconds (about 3,000
    /// years): beyond it PostgreSQL's interval arithmetic would fail for the whole file;
    /// `courier.enqueue`'s own, smaller bounds apply on top.
    static let maxSeconds = 1e11

    private let fd: Int32
    private let pieceSize: Int
    private let maxLineBytes: Int
    private var pending: [UInt8] = []
    private var start = 0
    private var atEOF = false
    private var lineNumber = 0
    /// Set while the bytes of an over-long line are being skipped.
    private var overLong = false
    /// Lines rejected while reading.
    private(set) var problems: [ImportProblem] = []
    /// Lines read (including rejected and blank).
    var linesRead: Int { lineNumber }

    static let knownFields: Set<String> = [
        "url", "method", "headers", "payload", "body", "body_base64", "queue", "delay", "run_at",
        "max_attempts", "priority", "idempotency_key", "retry_schedule",
    ]

    init(fd: Int32, pieceSize: Int, maxLineBytes: Int = JobLineReader.maxLineBytes) {
        self.fd = fd
        self.pieceSize = pieceSize
        self.maxLineBytes = maxLineBytes
    }

    func next() -> [(Int, NewJob)]? {
        var piece: [(Int, NewJob)] = []
        piece.reserveCapacity(pieceSize)
        while piece.count < pieceSize {
            guard let line = nextLine() else { break }
            lineNumber += 1
            guard let line else {
                problems.append(ImportProblem(line: lineNumber, reason: "line is longer than \(maxLineBytes) bytes"))
                continue
            }
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            do {
                piece.append((lineNumber, try Self.parse(line)))
            } catch let problem as LineProblem {
                problems.append(ImportProblem(line: lineNumber, reason: problem.reason))
            } catch {
                problems.append(ImportProblem(line: lineNumber, reason: "\(error)"))
            }
        }
        return piece.isEmpty && atEOF && start >= pending.count ? nil : piece
    }

    /// The next line without its newline, `.some(nil)` for a line over `maxLineBytes` (skipped
    /// without being held), nil at the end. `pending[start...]` is unread; the consumed front is
    /// dropped only when a new block is read, so each byte is copied a bounded number of times.
    private func nextLine() -> ArraySlice<UInt8>?? {
        while true {
            if let newline = pending[start...].firstIndex(of: 0x0A) {
                let line = pending[start..<newline]
                start = newline + 1
                if overLong || line.count > maxLineBytes {
                    overLong = false
                    return .some(nil)
                }
                return line
            }
            if atEOF {
                guard start < pending.count || overLong else { return nil }
                defer { start = pending.count }
                if overLong || pending.count - start > maxLineBytes {
                    overLong = false
                    return .some(nil)
                }
                return pending[start...]
            }
            if pending.count - start > maxLineBytes {
                // Too long already: forget what is held and skip to the next newline.
                overLong = true
                start = pending.count
            }
            pending.removeFirst(start)
            start = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 {
                atEOF = true
            } else {
                pending += buffer[..<count]
            }
        }
    }

    struct LineProblem: Error {
        var reason: String
    }

    static func parse(_ line: ArraySlice<UInt8>) throws -> NewJob {
        try checkBytes(line)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(line), options: [.fragmentsAllowed])
        } catch {
            let debug = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? ""
            if debug.contains("not representable") { throw LineProblem(reason: "a number is out of range") }
            throw LineProblem(reason: "not valid JSON")
        }
        guard let fields = object as? [String: Any] else { throw LineProblem(reason: "not a JSON object") }
        if let unknown = fields.keys.filter({ !knownFields.contains($0) }).sorted().first {
            throw LineProblem(reason: "unknown field \(unknown.debugDescription)")
        }
        guard let url = fields["url"] as? String else { throw LineProblem(reason: "url is required and must be a string") }
        try storable(url, "url")
        var job = NewJob(url: url)
        if let value = fields["method"] {
            guard let method = value as? String else { throw LineProblem(reason: "method must be a string") }
            try storable(method, "method")
            job.method = method.uppercased()
        }
        if let value = fields["headers"] {
            guard let headers = value as? [String: Any] else {
                throw LineProblem(reason: "headers must be an object of strings")
            }
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                guard let text = value as? String else { throw LineProblem(reason: "headers: the value of \(name) must be a string") }
                try storable(name, "a header name")
                try storable(text, "headers: the value of \(name)")
                job.headers.append((name, text))
            }
        }
        let bodyFields = ["payload", "body", "body_base64"].filter { fields[$0] != nil }
        if bodyFields.count > 1 { throw LineProblem(reason: "give only one of payload, body, body_base64") }
        if let payload = fields["payload"] {
            let data: Data
            do {
                data = try JSONSerialization.data(
                    withJSONObject: payload, options: [.fragmentsAllowed, .withoutEscapingSlashes])
            } catch {
                throw LineProblem(reason: "payload cannot be written back as JSON")
            }
            job.body = [UInt8](data)
            if !job.hasHeader("content-type") { job.headers.append(("Content-Type", "application/json")) }
        } else if let value = fields["body"] {
            guard let body = value as? String else { throw LineProblem(reason: "body must be a string (use payload for JSON)") }
            job.body = Array(body.utf8)
        } else if let value = fields["body_base64"] {
            guard let text = value as? String, let data = Data(base64Encoded: text) else {
                throw LineProblem(reason: "body_base64 is not valid base64")
            }
            job.body = [UInt8](data)
        }
        if let value = fields["queue"] {
            guard let queue = value as? String else { throw LineProblem(reason: "queue must be a string") }
            try storable(queue, "queue")
            job.queue = queue
        }
        if let value = fields["delay"] {
            job.delay = .seconds(try seconds(value, "delay must be a duration like \"30s\" or a number of seconds"))
        }
        if let value = fields["run_at"] {
            guard let text = value as? String, let date = parseISO8601(text) else {
                throw LineProblem(reason: "run_at must be an ISO 8601 time like 2026-01-31T12:00:00Z")
            }
            guard StoredTime.range.contains(date.timeIntervalSince1970) else {
                throw LineProblem(reason: "run_at is out of range (years 1 to 9999)")
            }
            job.runAt = date
        }
        if let value = fields["max_attempts"] {
            job.maxAttempts = try integer(value, "max_attempts", within: JobLimits.maxAttempts)
        }
        if let value = fields["priority"] { job.priority = try integer(value, "priority", within: JobLimits.priority) }
        if let value = fields["idempotency_key"] {
            guard let key = value as? String else { throw LineProblem(reason: "idempotency_key must be a string") }
            try storable(key, "idempotency_key")
            job.idempotencyKey = key
        }
        if let value = fields["retry_schedule"] {
            guard let items = value as? [Any] else { throw LineProblem(reason: "retry_schedule must be an array of durations") }
            job.retrySchedule = try items.map {
                .seconds(try seconds($0, "retry_schedule must be an array of durations like \"5s\""))
            }
        }
        return job
    }

    /// Refuses what no later step could store or read back, before JSON parsing: a NUL byte,
    /// invalid UTF-8, nesting deeper than `maxDepth` (a recursive parser's stack).
    static func checkBytes(_ line: ArraySlice<UInt8>) throws {
        if line.contains(0) { throw LineProblem(reason: "line contains a NUL byte") }
        if String(validating: line, as: UTF8.self) == nil { throw LineProblem(reason: "line is not valid UTF-8") }
        var depth = 0
        var inString = false
        var escaped = false
        for byte in line {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == 0x5C {
                    escaped = true
                } else if byte == 0x22 {
                    inString = false
                }
                continue
            }
            switch byte {
            case 0x22: inString = true
            case 0x5B, 0x7B:
                depth += 1
                if depth > maxDepth { throw LineProblem(reason: "JSON nested deeper than \(maxDepth) levels") }
            case 0x5D, 0x7D: depth -= 1
            default: break
            }
        }
    }

    /// Refuses a string PostgreSQL's text types cannot hold (`\u0000`).
    private static func storable(_ text: String, _ name: String) throws {
        if text.utf8.contains(0) { throw LineProblem(reason: "\(name) contains a NUL character") }
    }

    /// What a JSON number is, told by its type rather than by `is Bool`: swift-corelibs-foundation
    /// bridges the numbers 0 and 1 to `Bool` too, while a real `true`/`false` is a
    /// `__NSCFBoolean` whose Objective-C type is `c` (char); integers are `i`/`q`/`Q`
    /// (`s`/`l` elsewhere), other numbers `d`, and integers too large for 64 bits are
    /// `NSDecimalNumber`.
    enum JSONNumber: Equatable {
        case boolean
        case integer(Int64)
        case double(Double)
        case outOfRange
        case notANumber
    }

    static func classify(_ value: Any) -> JSONNumber {
        guard let number = value as? NSNumber else { return .notANumber }
        if number is NSDecimalNumber { return .outOfRange }
        let type = String(cString: number.objCType)
        if type == "c" || type == "B" { return .boolean }
        switch type {
        case "i", "s", "l", "q": return .integer(number.int64Value)
        case "I", "S", "L", "Q":
            let unsigned = number.uint64Value
            return unsigned <= UInt64(Int64.max) ? .integer(Int64(unsigned)) : .outOfRange
        default:
            let double = number.doubleValue
            return double.isFinite ? .double(double) : .outOfRange
        }
    }

    /// An integer field: whole numbers only (`1.0` and `1e3` are whole, `1.5` is not), within
    /// `range` (the one `courier.enqueue` checks, named in the problem).
    static func integer(_ value: Any, _ name: String, within range: ClosedRange<Int>) throws -> Int {
        let outOfRange = LineProblem(reason: "\(name) must be between \(range.lowerBound) and \(range.upperBound)")
        switch classify(value) {
        case .integer(let whole):
            guard let result = Int(exactly: whole), range.contains(result) else { throw outOfRange }
            return result
        case .double(let double):
            guard double == double.rounded() else { throw LineProblem(reason: "\(name) must be an integer") }
            guard abs(double) < 1e15, range.contains(Int(double)) else { throw outOfRange }
            return Int(double)
        case .outOfRange: throw outOfRange
        case .boolean, .notANumber: throw LineProblem(reason: "\(name) must be an integer")
        }
    }

    /// A duration field: a duration text (`"30s"`) or a number of seconds, at least 0 and at
    /// most `maxSeconds`.
    static func seconds(_ value: Any, _ problem: String) throws -> Double {
        let seconds: Double
        if let text = value as? String {
            guard let parsed = DurationParser.seconds(text) else { throw LineProblem(reason: problem) }
            seconds = parsed
        } else {
            switch classify(value) {
            case .integer(let whole): seconds = Double(whole)
            case .double(let double): seconds = double
            case .outOfRange: throw LineProblem(reason: problem + " (out of range)")
            case .boolean, .notANumber: throw LineProblem(reason: problem)
            }
        }
        guard seconds.isFinite, seconds >= 0, seconds <= maxSeconds else {
            throw LineProblem(reason: problem + " (out of range)")
        }
        return seconds
    }
}

import CourierCore
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
final class JobLineReader: Sequence, IteratorProtocol {
    private let fd: Int32
    private let pieceSize: Int
    private var pending: [UInt8] = []
    private var start = 0
    private var atEOF = false
    private var lineNumber = 0
    /// Lines rejected while reading.
    private(set) var problems: [ImportProblem] = []
    /// Lines read (including rejected and blank).
    var linesRead: Int { lineNumber }

    static let knownFields: Set<String> = [
        "url", "method", "headers", "payload", "body", "body_base64", "queue", "delay", "run_at",
        "max_attempts", "priority", "idempotency_key", "retry_schedule",
    ]

    init(fd: Int32, pieceSize: Int) {
        self.fd = fd
        self.pieceSize = pieceSize
    }

    func next() -> [(Int, NewJob)]? {
        var piece: [(Int, NewJob)] = []
        piece.reserveCapacity(pieceSize)
        while piece.count < pieceSize {
            guard let line = nextLine() else { break }
            lineNumber += 1
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

    /// The next line without its newline. `pending[start...]` is unread; the consumed front is
    /// dropped only when a new block is read, so each byte is copied a bounded number of times.
    private func nextLine() -> ArraySlice<UInt8>? {
        while true {
            if let newline = pending[start...].firstIndex(of: 0x0A) {
                let line = pending[start..<newline]
                start = newline + 1
                return line
            }
            if atEOF {
                guard start < pending.count else { return nil }
                defer { start = pending.count }
                return pending[start...]
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
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(line), options: [.fragmentsAllowed])
        } catch {
            throw LineProblem(reason: "not valid JSON")
        }
        guard let fields = object as? [String: Any] else { throw LineProblem(reason: "not a JSON object") }
        if let unknown = fields.keys.filter({ !knownFields.contains($0) }).sorted().first {
            throw LineProblem(reason: "unknown field \(unknown.debugDescription)")
        }
        guard let url = fields["url"] as? String else { throw LineProblem(reason: "url is required and must be a string") }
        var job = NewJob(url: url)
        if let value = fields["method"] {
            guard let method = value as? String else { throw LineProblem(reason: "method must be a string") }
            job.method = method.uppercased()
        }
        if let value = fields["headers"] {
            guard let headers = value as? [String: Any] else {
                throw LineProblem(reason: "headers must be an object of strings")
            }
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                guard let text = value as? String else { throw LineProblem(reason: "headers: the value of \(name) must be a string") }
                job.headers.append((name, text))
            }
        }
        let bodyFields = ["payload", "body", "body_base64"].filter { fields[$0] != nil }
        if bodyFields.count > 1 { throw LineProblem(reason: "give only one of payload, body, body_base64") }
        if let payload = fields["payload"] {
            let data = try JSONSerialization.data(withJSONObject: payload, options: [.fragmentsAllowed, .withoutEscapingSlashes])
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
            job.queue = queue
        }
        if let value = fields["delay"] {
            if let text = value as? String, let seconds = DurationParser.seconds(text) {
                job.delaySeconds = seconds
            } else if let number = value as? NSNumber, !(value is Bool), number.doubleValue >= 0 {
                job.delaySeconds = number.doubleValue
            } else {
                throw LineProblem(reason: "delay must be a duration like \"30s\" or a number of seconds")
            }
        }
        if let value = fields["run_at"] {
            guard let text = value as? String, let date = parseISO8601(text) else {
                throw LineProblem(reason: "run_at must be an ISO 8601 time like 2026-01-31T12:00:00Z")
            }
            job.runAt = date
        }
        if let value = fields["max_attempts"] { job.maxAttempts = try integer(value, "max_attempts") }
        if let value = fields["priority"] { job.priority = try integer(value, "priority") }
        if let value = fields["idempotency_key"] {
            guard let key = value as? String else { throw LineProblem(reason: "idempotency_key must be a string") }
            job.idempotencyKey = key
        }
        if let value = fields["retry_schedule"] {
            guard let items = value as? [Any] else { throw LineProblem(reason: "retry_schedule must be an array of durations") }
            job.retrySchedule = try items.map { item in
                if let text = item as? String, let seconds = DurationParser.seconds(text) { return seconds }
                if let number = item as? NSNumber, !(item is Bool) { return number.doubleValue }
                throw LineProblem(reason: "retry_schedule must be an array of durations like \"5s\"")
            }
        }
        return job
    }

    private static func integer(_ value: Any, _ name: String) throws -> Int {
        guard let number = value as? NSNumber, !(value is Bool), number.doubleValue == number.doubleValue.rounded(),
              abs(number.doubleValue) < 1e9
        else { throw LineProblem(reason: "\(name) must be an integer") }
        return number.intValue
    }
}

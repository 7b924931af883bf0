import CourierCore
import Foundation

/// The values of a job's page. Everything that came from the database is redacted as the CLI
/// redacts it (URL credentials and secret query values, secret header values, control
/// characters), and more: non-secret header values and attempt errors go through
/// `Redaction.message` (a URL with credentials inside any text), and the body through
/// `BodyRedaction`.
enum JobPage {
    static func values(_ job: JobDetail, actions: Bool) -> [String: Any] {
        let s = job.summary
        var values: [String: Any] = [
            "id": String(s.id), "state": s.state.rawValue, "queue": Redaction.text(s.queue),
            "queueQuery": FormData.encode(s.queue), "attempt": s.attempt, "maxAttempts": s.maxAttempts,
            "priority": s.priority, "created": PageFormat.time(s.createdAt), "runAt": PageFormat.time(s.runAt),
            "method": Redaction.text(s.method), "url": Redaction.url(s.url),
            "canRequeue": actions && s.state == .dead,
        ]
        if let finished = s.finishedAt { values["finished"] = PageFormat.time(finished) }
        if let lockedBy = job.lockedBy {
            values["lockedBy"] = Redaction.text(lockedBy)
            values["lockedUntil"] = job.lockedUntil.map(PageFormat.time) ?? "-"
        }
        if let key = job.idempotencyKey { values["idempotencyKey"] = Redaction.text(key) }
        if let error = s.lastError { values["lastError"] = Redaction.message(error) }
        let headers: [[String: Any]] = job.headers.map { name, value in
            // The store already replaced secret headers' values; a URL with credentials can
            // still hide in any other one.
            ["name": Redaction.text(name), "value": Redaction.message(value)]
        }
        values["headers"] = headers
        values["hasHeaders"] = !headers.isEmpty
        if let body = job.body, !body.isEmpty {
            let shown = BodyRedaction.show(body)
            values["body"] = shown.text
            values["bodyBytes"] = body.count
            values["bodyClipped"] = shown.clipped
        }
        let attempts: [[String: Any]] = job.attempts.map { attempt in
            var row: [String: Any] = [
                "attempt": attempt.attempt, "started": PageFormat.time(attempt.startedAt),
                "duration": PageFormat.milliseconds(attempt.duration.seconds * 1000), "worker": Redaction.text(attempt.worker),
                "outcome": (attempt.status.map { (200..<300).contains($0) } ?? false) ? "ok" : "failed",
            ]
            if let iso = PageFormat.isoTime(attempt.startedAt) { row["startedISO"] = iso }
            if let status = attempt.status { row["status"] = status }
            if let error = attempt.error { row["error"] = Redaction.message(error) }
            if let response = attempt.responseExcerpt, !response.isEmpty {
                row["response"] = BodyRedaction.show(Array(response.utf8), limit: 300).text
            }
            return row
        }
        values["attempts"] = attempts
        values["hasAttempts"] = !attempts.isEmpty
        values["history"] = history(job)
        return values
    }

    /// The job's life as far as the tables tell it: created, each attempt and its outcome,
    /// then where it is now.
    static func history(_ job: JobDetail) -> [[String: Any]] {
        let s = job.summary
        var items: [[String: Any]] = [item(s.createdAt, "created in queue \(Redaction.text(s.queue))")]
        for attempt in job.attempts {
            let outcome = attempt.status.map { "HTTP \($0)" } ?? "no answer"
            items.append(item(attempt.startedAt, "attempt \(attempt.attempt): \(outcome) after \(PageFormat.milliseconds(attempt.duration.seconds * 1000))"))
        }
        switch s.state {
        case .succeeded, .dead, .cancelled:
            items.append(item(s.finishedAt ?? job.updatedAt, s.state.rawValue))
        case .pending, .retrying:
            items.append(item(s.runAt, "\(s.state.rawValue): due at this time"))
        case .running:
            items.append(item(job.updatedAt, "running on \(Redaction.text(job.lockedBy ?? "a worker"))"))
        }
        return items
    }

    private static func item(_ time: StoredTime, _ what: String) -> [String: Any] {
        var row: [String: Any] = ["time": PageFormat.time(time), "what": what]
        if let iso = PageFormat.isoTime(time) { row["iso"] = iso }
        return row
    }
}

import CourierCore
import Foundation

/// The filters of the job and dead-letter lists as a query string (or a confirmation form)
/// carries them, read into store filters. Pure, so the tests check it without a server.
///
/// Jobs filter by queue, state, host, URL substring and creation time; dead letters by
/// queue, URL substring, error substring and time of death: exactly what `DeadJobFilter`
/// (the bulk requeue) takes, so "requeue all that match" moves what the list shows.
struct JobListQuery {
    let dead: Bool
    /// The filter for the listing.
    private(set) var filter = WebJobFilter()
    /// The keyset cursor: only ids below this.
    private(set) var before: Int64?
    /// Why a field was not understood (the list then shows nothing rather than too much).
    private(set) var problems: [String] = []
    /// The fields as given, to fill the form again and build links.
    private(set) var raw: [String: String] = [:]

    static let fields = ["queue", "state", "host", "url", "error", "since", "until"]

    init(_ form: FormData, dead: Bool, now: Date = Date()) {
        self.dead = dead
        for name in Self.fields where fieldShown(name) {
            if let value = form.nonEmpty(name) { raw[name] = value }
        }
        filter.queue = raw["queue"]
        filter.urlContains = raw["url"]
        if dead {
            filter.state = .dead
            filter.errorContains = raw["error"]
        } else if let state = raw["state"] {
            if let parsed = JobState(rawValue: state) { filter.state = parsed } else { problems.append("Unknown state.") }
        }
        if let host = raw["host"] {
            if let normalized = DestinationHost.normalize(host) { filter.host = normalized } else {
                problems.append("The host is not a host name.")
            }
        }
        let since = raw["since"].map { (text: $0, date: PageFormat.parseTime($0, now: now)) }
        let until = raw["until"].map { (text: $0, date: PageFormat.parseTime($0, now: now)) }
        for (label, value) in [("since", since), ("before", until)] {
            if let value, value.date == nil {
                problems.append("\(label): \(value.text.debugDescription) is neither a duration (2h) nor a date (2026-11-23T10:00Z).")
            }
        }
        if dead {
            filter.finishedSince = since?.date
            filter.finishedBefore = until?.date
        } else {
            filter.createdSince = since?.date
            filter.createdBefore = until?.date
        }
        if let text = form.nonEmpty("before") {
            if let id = Int64(text), id > 0 { before = id } else { problems.append("Bad page.") }
        }
    }

    private func fieldShown(_ name: String) -> Bool {
        switch name {
        case "state", "host": return !dead
        case "error": return dead
        default: return true
        }
    }

    /// The bulk requeue's filter, the same rows as `filter` on the dead-letter list.
    var deadFilter: DeadJobFilter {
        var result = DeadJobFilter()
        result.queue = filter.queue
        result.urlContains = filter.urlContains
        result.errorContains = filter.errorContains
        result.failedAfter = filter.finishedSince
        result.failedBefore = filter.finishedBefore
        return result
    }

    /// Query pairs of a link to this list (filters as given, and the cursor).
    func linkPairs(before: Int64?) -> [(String, String?)] {
        Self.fields.map { ($0, raw[$0]) } + [("before", before.map(String.init))]
    }

    /// The filters with times fixed as dates, for the confirmation form: a requeue confirmed a
    /// minute later moves what was counted, not what "the last 2h" means by then.
    var formPairs: [(String, String)] {
        var pairs: [(String, String)] = []
        for name in ["queue", "url", "error"] { if let value = raw[name] { pairs.append((name, value)) } }
        if let date = filter.finishedSince { pairs.append(("since", Self.iso(date))) }
        if let date = filter.finishedBefore { pairs.append(("until", Self.iso(date))) }
        return pairs
    }

    private static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The filter in words, for the confirmation page and the audit row.
    var description: String {
        var parts: [String] = [filter.queue.map { "in queue \(Redaction.text($0))" } ?? "in every queue"]
        if let url = filter.urlContains { parts.append("with a URL containing \(Redaction.url(url).debugDescription)") }
        if let error = filter.errorContains { parts.append("with an error containing \(Redaction.message(error).debugDescription)") }
        if let date = filter.finishedSince { parts.append("dead since \(PageFormat.time(date))") }
        if let date = filter.finishedBefore { parts.append("dead before \(PageFormat.time(date))") }
        return parts.joined(separator: ", ")
    }
}

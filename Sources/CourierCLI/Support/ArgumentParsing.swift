import ArgumentParser
import CourierCLISupport
import CourierCore
import Foundation

/// Asks for confirmation on a terminal when more than `threshold` ids were named at once
/// (`dead requeue 1 2 3 ...`); changes by filter ask always (`BulkChangeOptions`).
///
/// - Throws: a usage error when confirmation is needed but stdin is not a terminal and `--yes`
///   was not given, or an error (exit code 1) when the operator says no.
func confirm(_ question: String, count: Int, threshold: Int = 10, yes: Bool) throws {
    guard count > threshold, !yes else { return }
    guard Output.stdinIsTerminal else {
        throw CLIError.usage("\(question.lowercased()) needs confirmation: pass --yes (stdin is not a terminal)")
    }
    try askOnTerminal(question)
}

/// Parses `--since`: a duration meaning "that long ago" (`2h`, `7d`) or an ISO 8601 time.
func parseSince(_ text: String?, flag: String = "--since") throws -> Date? {
    guard let text else { return nil }
    switch DurationParser.parse(text) {
    case .seconds(let seconds): return Date().addingTimeInterval(-seconds)
    case .missingUnit: throw CLIError.usage(DurationParser.message(text, flag: flag))
    case .invalid: break
    }
    if let date = parseISO8601(text) { return date }
    throw CLIError.usage("\(flag): \(text.debugDescription) is neither a duration (30m, 2h, 7d) nor an ISO 8601 time")
}

/// Parses an ISO 8601 time with or without fractional seconds (`2026-11-22T10:00:00Z`).
func parseISO8601(_ text: String) -> Date? {
    if let date = try? Date(text, strategy: .iso8601) { return date }
    let fractional = ISO8601DateFormatter()
    fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return fractional.date(from: text)
}

/// Parses a comma-separated schedule (`5s,1m,1h`).
func parseSchedule(_ text: String, flag: String) throws -> [Duration] {
    let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    guard !parts.isEmpty else { throw CLIError.usage("\(flag): the schedule is empty (use e.g. 5s,1m,1h)") }
    return try parts.map { try parseDuration($0, flag: flag) }
}

/// Parses job ids from arguments.
func parseIDs(_ texts: [String]) throws -> [Int64] {
    try texts.map { text in
        guard let id = Int64(text), id > 0 else {
            throw CLIError.usage("\(text.debugDescription) is not a job id (a positive integer)")
        }
        return id
    }
}

extension JobState: ExpressibleByArgument {}

/// Parses one `--header 'Name: value'` (the value may be empty; the name may not). The text is
/// not echoed in the error: without its colon a header's value cannot be told from its name,
/// and the value may be a credential.
func parseHeader(_ header: String, flag: String = "--header") throws -> (String, String) {
    guard let colon = header.firstIndex(of: ":") else {
        throw CLIError.usage("\(flag): expected 'Name: value', got \(header.count) characters without a colon")
    }
    let name = header[..<colon].trimmingCharacters(in: .whitespaces)
    let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    guard !name.isEmpty else { throw CLIError.usage("\(flag): expected 'Name: value', the name is empty") }
    return (name, value)
}

/// Parses the id of a named thing (`endpoint`, `message`): a positive integer.
func parseID(_ text: String, of what: String) throws -> Int64 {
    guard let id = Int64(text), id > 0 else {
        throw CLIError.usage("\(Redaction.text(text).debugDescription) is not \(what) id (a positive integer)")
    }
    return id
}

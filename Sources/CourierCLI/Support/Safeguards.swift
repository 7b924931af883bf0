import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `--yes` and `--dry-run` of the commands that change many jobs at once by filter (`purge`,
/// `dead requeue --all`, `jobs cancel --all`).
struct BulkChangeOptions: ParsableArguments {
    @Flag(help: "Go ahead without asking (required when stdin is not a terminal).")
    var yes = false

    @Flag(name: .customLong("dry-run"), help: "Print how many jobs would change, and change nothing.")
    var dryRun = false

    /// What to do once the matching jobs are counted.
    enum Decision: Equatable {
        /// Nothing matches: say so, change nothing, exit 0.
        case nothingMatches
        /// `--dry-run`: print the count, change nothing, exit 0.
        case report
        /// Ask on the terminal first.
        case ask
        /// Stop with a usage error: stdin cannot answer a question and `--yes` is missing.
        case refuse
        /// Go ahead.
        case proceed
    }

    /// The decision for `count` matching jobs, given whether stdin is a terminal.
    static func decide(count: Int, yes: Bool, dryRun: Bool, stdinIsTerminal: Bool) -> Decision {
        if count == 0 { return .nothingMatches }
        if dryRun { return .report }
        if yes { return .proceed }
        return stdinIsTerminal ? .ask : .refuse
    }

    /// Decides for `count` jobs and carries out the asking or refusing part.
    ///
    /// - Parameters:
    ///   - change: what would happen, e.g. `delete 1,204 dead jobs finished before ... (all
    ///     queues)`; it starts the prompt, the dry-run line and the refusal.
    /// - Returns: `.proceed` to go ahead, or `.nothingMatches` / `.report`, which the caller
    ///   prints before it exits 0 without changing anything.
    /// - Throws: a usage error when stdin is not a terminal and `--yes` is missing, or an error
    ///   (exit code 1) when the operator does not answer yes. Nothing has changed either way.
    func confirm(_ change: String, count: Int) throws -> Decision {
        let decision = Self.decide(count: count, yes: yes, dryRun: dryRun, stdinIsTerminal: Output.stdinIsTerminal)
        switch decision {
        case .nothingMatches, .report, .proceed:
            return decision
        case .refuse:
            throw CLIError.usage(
                "this would \(change); pass --yes to go ahead or --dry-run to only count "
                    + "(stdin is not a terminal, so nothing was asked and nothing changed)")
        case .ask:
            try askOnTerminal("This will \(change). Continue?")
            return .proceed
        }
    }
}

extension BulkChangeOptions {
    /// Carries out a change of the `count` jobs a filter matched, the same way for every bulk
    /// command: asks or refuses (`confirm`); prints that nothing matches, or the dry-run count,
    /// and stops; or runs `change` with a progress line and prints how many changed.
    ///
    /// - Parameters:
    ///   - verb: `delete`, `requeue`, `cancel`; `done` is its past tense, the JSON key and the
    ///     progress label.
    ///   - what: the jobs and their filter, e.g. `dead jobs (queue "billing")`.
    ///   - json: print JSON (`{done, "matching", "dry_run"}` plus `fields`) instead of lines.
    ///   - change: makes the change in batches, calling its argument with the running total;
    ///     returns how many jobs changed.
    func run(
        verb: String, done: String, count: Int, what: String, json: Bool, fields: [String: Any] = [:],
        change: (_ progress: (Int) -> Void) throws -> Int
    ) throws {
        func report(_ changed: Int, dryRun: Bool) throws {
            try Output.json(fields.merging([done: changed, "matching": count, "dry_run": dryRun]) { $1 })
        }
        switch try confirm("\(verb) \(Output.counted(count, what))", count: count) {
        case .nothingMatches, .report:
            if json {
                try report(0, dryRun: dryRun)
            } else if count == 0 {
                print("No \(what).")
            } else {
                print("Would \(verb) \(Output.counted(count, what)). Nothing was changed (--dry-run).")
            }
            return
        case .ask, .refuse, .proceed:
            break
        }
        let progress = ProgressLine(done, total: count)
        let changed = try change { progress.update($0) }
        progress.finish(changed)
        if json { return try report(changed, dryRun: false) }
        var line = "\(done.prefix(1).uppercased())\(done.dropFirst()) \(Output.counted(changed, what))."
        // Jobs can move on between the count and the change: claimed, finished, requeued by
        // someone else. They are left alone, and the operator hears of it.
        if changed < count { line += " \(Output.count(count - changed)) no longer matched." }
        print(line)
    }
}

/// Asks `question` on stderr and reads the answer from the terminal on stdin.
///
/// - Throws: an error (exit code 1) unless the answer is `y` or `yes`.
func askOnTerminal(_ question: String) throws {
    Output.stderr("\(question) [y/N] ")
    let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
    guard answer == "y" || answer == "yes" else {
        throw CLIError("nothing changed: not confirmed")
    }
}

/// Describes a filter for the confirmation line: `queue "billing", error contains "503"`, or
/// `all queues, no filter` when there is none. Values are quoted so spaces and empty strings
/// show.
func describeFilters(_ parts: [(String, String?)]) -> String {
    let given = parts.compactMap { label, value in value.map { "\(label) \($0.debugDescription)" } }
    return given.isEmpty ? "all queues, no filter" : given.joined(separator: ", ")
}

/// Unknown queue names: an error naming close matches, since a typo must not quietly act on
/// (or create) a queue nobody meant.
enum QueueCheck {
    /// Throws a not-found error (exit code 3) when `name` has neither settings nor jobs.
    ///
    /// - Parameter createHint: what to add to the error when the command can create the queue
    ///   (`pass --create to ...`).
    static func requireKnown(_ name: String?, store: AdminStore, createHint: String? = nil) throws {
        guard let name, try !store.queueExists(name) else { return }
        var message = "no queue named \(Redaction.text(name).debugDescription)"
        if let close = closeMatches(for: name, store: store) {
            message += " (did you mean \(close)?)"
        } else {
            message += " (courier queues list shows the queues)"
        }
        if let createHint { message += "; \(createHint)" }
        throw CLIError.notFound(message)
    }

    /// The existing queues `name` is probably a typo of, quoted and joined with "or"; nil when
    /// there is none (or the names cannot be read: a suggestion is not worth a second error).
    static func closeMatches(for name: String, store: AdminStore) -> String? {
        let known = ((try? store.knownQueues()) ?? []).filter { $0 != name }
        let close = QueueNames.closeMatches(to: name, among: known)
        guard !close.isEmpty else { return nil }
        return close.map { Redaction.text($0).debugDescription }.joined(separator: " or ")
    }
}

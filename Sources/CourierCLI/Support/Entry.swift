import ArgumentParser
import CourierCore
import Foundation
import Postgres
import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// The `courier` executable's entry point: parses, runs, and maps every error to one line on
/// stderr and an exit code (0 ok, 1 failure, 2 usage, 3 not found, 4 schema not as expected).
public enum CourierMain {
    /// Runs `courier` with the process arguments and exits.
    public static func main() async -> Never {
        // Line by line even into a pipe or a file: `courier demo --keep | tee` must show the
        // database URL while the demo runs, and stdout lines must not trail stderr's.
        lineBufferStandardOutput()
        let code = await run(Array(CommandLine.arguments.dropFirst()))
        SignalCleanup.shared.waitIfCleaning()
        exit(code)
    }

    /// Runs `courier` with `arguments` and returns the exit code (used by `main` and tests).
    ///
    /// Help (`--help`, `-h`, `courier help <command>`) and `--version` reach this function as
    /// errors of swift-argument-parser, either from parsing or from running its `help`
    /// command; both print to stdout and exit 0 (`exitCode(for:)` says which errors are
    /// clean exits).
    public static func run(_ arguments: [String]) async -> Int32 {
        ErrorRedaction.shared.remember(arguments: arguments)
        let command: any ParsableCommand
        do {
            command = try Courier.parseAsRoot(arguments)
        } catch {
            if let code = cleanExit(error) { return code }
            printError("error: " + oneLineUsage(Courier.message(for: error), arguments: arguments))
            return CourierExitCode.usage.rawValue
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try await runOnOwnThread(command)
            }
            return 0
        } catch let error as CLIError {
            printError("error: \(error.message)")
            return error.exitCode.rawValue
        } catch let error as ExitCode {
            return error.rawValue
        } catch let error as PostgresError where Self.isMissingSchema(error) {
            // A statement met no courier schema (a database changed under a running command);
            // `connect()` refuses unmigrated databases first.
            printError("error: \(CLIError.describe(error)): the database lacks Courier's schema; run `courier migrate`")
            return CourierExitCode.schemaMismatch.rawValue
        } catch let error as PostgresError where error.sqlState == "42501" {
            printError(
                "error: \(CLIError.describe(error)): grant this database role courier_operator "
                    + "(GRANT courier_operator TO <role>; see docs/operations.md, Roles and least privilege)")
            return CourierExitCode.failure.rawValue
        } catch let error as PostgresError where Self.isInvalidInput(error) {
            printError("error: \(CLIError.describe(error))")
            return CourierExitCode.usage.rawValue
        } catch let error as WebhookError {
            // Something named does not exist (3), or the request cannot be carried out (1).
            printError("error: \(error.message)")
            return (error.notFound ? CourierExitCode.notFound : CourierExitCode.failure).rawValue
        } catch let error as ValidationError {
            printError("error: \(error.message)")
            return CourierExitCode.usage.rawValue
        } catch {
            if let code = cleanExit(error) { return code }
            printError("error: \(CLIError.describe(error))")
            return CourierExitCode.failure.rawValue
        }
    }

    /// Makes C's `stdout` (which `print` writes to) line-buffered. The global `stdout` cannot
    /// be named under Swift 6's concurrency checking, so its address comes from the loader.
    static func lineBufferStandardOutput() {
        guard let symbol = dlsym(nil, "stdout") else { return }
        guard let stream = symbol.assumingMemoryBound(to: UnsafeMutablePointer<FILE>?.self).pointee else { return }
        setvbuf(stream, nil, _IOLBF, 0)
    }

    /// Prints help or the version and returns 0 when `error` is swift-argument-parser's way of
    /// asking for them; nil for real errors.
    static func cleanExit(_ error: any Error) -> Int32? {
        guard Courier.exitCode(for: error) == .success else { return nil }
        let message = Courier.fullMessage(for: error)
        if !message.isEmpty { print(message) }
        return 0
    }

    /// Runs a synchronous command on a thread of its own: commands such as `worker` block for
    /// their whole life, and must not hold one of the few threads Swift's async tasks run on.
    static func runOnOwnThread(_ command: any ParsableCommand) async throws {
        let box = UncheckedBox(command)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                do {
                    var command = box.value
                    try command.run()
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    /// Undefined table or schema (42P01, 3F000) inside `courier.`: the schema is missing.
    static func isMissingSchema(_ error: PostgresError) -> Bool {
        guard error.sqlState == "42P01" || error.sqlState == "3F000" else { return false }
        return error.message.contains("courier")
    }

    /// Bad values the database refused (courier.validate_job's 22023, a malformed value, a
    /// violated CHECK): the input was wrong, so exit code 2 like any usage error.
    static func isInvalidInput(_ error: PostgresError) -> Bool {
        guard let state = error.sqlState else { return false }
        return state == "22023" || state == "22P02" || state == "23514" || state == "22007" || state == "22008"
    }

    /// swift-argument-parser's message folded into one line, lists of allowed values joined,
    /// with a pointer to the right `--help`.
    static func oneLineUsage(_ message: String, arguments: [String]) -> String {
        var parts: [String] = []
        var choices: [String] = []
        for raw in message.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("Usage:") || line.hasPrefix("See '") { continue }
            if line.hasPrefix("- ") { choices.append(String(line.dropFirst(2))) } else { parts.append(line) }
        }
        var text = parts.joined(separator: " ")
        if text.isEmpty { text = "invalid arguments" }
        if !choices.isEmpty {
            text = text.replacingOccurrences(of: "Please provide one of the following:", with: "Use one of:")
            text += " " + choices.joined(separator: ", ")
        }
        let commands = arguments.prefix { !$0.hasPrefix("-") }.prefix(2).joined(separator: " ")
        return text + " (see 'courier \(commands.isEmpty ? "" : commands + " ")--help')"
    }

    /// Writes one line to stderr, redacted: the database URL's password (whether or not the
    /// URL parses), URL credentials and secret parameters, control characters.
    static func printError(_ line: String) {
        if SignalCleanup.shared.isCleaning { return }
        FileHandle.standardError.write(Data((ErrorRedaction.shared.redact(line) + "\n").utf8))
    }
}

/// The connection strings this run could have used (`--database-url`, `COURIER_DATABASE_URL`),
/// so that every error line can be scrubbed of their passwords: libpq quotes pieces of a
/// connection string it cannot parse, and any command's error can carry such a message.
final class ErrorRedaction: @unchecked Sendable {
    static let shared = ErrorRedaction()
    private let lock = NSLock()
    private var conninfos: [String] = []

    /// Notes the database URLs in `arguments` and the environment.
    func remember(arguments: [String]) {
        var found: [String] = []
        if let url = ProcessInfo.processInfo.environment["COURIER_DATABASE_URL"], !url.isEmpty { found.append(url) }
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "--database-url", let value = iterator.next() {
                found.append(value)
            } else if argument.hasPrefix("--database-url=") {
                found.append(String(argument.dropFirst("--database-url=".count)))
            }
        }
        lock.withLock { conninfos = found }
    }

    /// `line` without secrets, on one line.
    func redact(_ line: String) -> String {
        var text = line
        for conninfo in lock.withLock({ conninfos }) {
            text = Redaction.connectionError(text, conninfo: conninfo)
        }
        return Redaction.message(text)
    }
}

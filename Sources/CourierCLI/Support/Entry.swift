import ArgumentParser
import Foundation
import Postgres

#if canImport(Glibc)
    import Glibc
#endif

/// The `courier` executable's entry point: parses, runs, and maps every error to one line on
/// stderr and an exit code (0 ok, 1 failure, 2 usage, 3 not found).
public enum CourierMain {
    /// Runs `courier` with the process arguments and exits.
    public static func main() async -> Never {
        let code = await run(Array(CommandLine.arguments.dropFirst()))
        SignalCleanup.shared.waitIfCleaning()
        exit(code)
    }

    /// Runs `courier` with `arguments` and returns the exit code (used by `main` and tests).
    public static func run(_ arguments: [String]) async -> Int32 {
        let command: any ParsableCommand
        do {
            command = try Courier.parseAsRoot(arguments)
        } catch {
            let code = Courier.exitCode(for: error)
            if code == .success {
                print(Courier.fullMessage(for: error))
                return 0
            }
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
        } catch let error as PostgresError where Self.isInvalidInput(error) {
            printError("error: \(CLIError.describe(error))")
            return CourierExitCode.usage.rawValue
        } catch let error as ValidationError {
            printError("error: \(error.message)")
            return CourierExitCode.usage.rawValue
        } catch {
            printError("error: \(CLIError.describe(error))")
            return CourierExitCode.failure.rawValue
        }
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

    static func printError(_ line: String) {
        if SignalCleanup.shared.isCleaning { return }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}


/// Carries a non-Sendable value to the one thread that will use it.
final class UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// Waits on the current (non-async) thread for an async operation.
func blockingAwait<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let semaphore = DispatchSemaphore(value: 0)
    let result = UncheckedBox<Result<T, any Error>?>(nil)
    Task {
        do { result.value = .success(try await operation()) } catch { result.value = .failure(error) }
        semaphore.signal()
    }
    semaphore.wait()
    return try result.value!.get()
}

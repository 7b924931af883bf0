import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `courier` executable's entry point: parses, runs, and maps every error to one line on
/// stderr and an exit code (0 ok, 1 failure, 2 usage, 3 not found).
public enum CourierMain {
    /// Runs `courier` with the process arguments and exits.
    public static func main() async -> Never {
        let code = await run(Array(CommandLine.arguments.dropFirst()))
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
            let message = Courier.message(for: error)
            printError(message.isEmpty ? "invalid arguments" : message)
            if !message.contains("--help") { printError("Run 'courier --help' for usage.") }
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

    static func printError(_ line: String) {
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

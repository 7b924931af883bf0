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
            var command = command
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
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

    static func printError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

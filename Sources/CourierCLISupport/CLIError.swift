import Postgres

/// The exit codes of `courier` (listed in the README and docs/operations.md).
public enum CourierExitCode: Int32, Sendable {
    /// Success.
    case ok = 0
    /// The command failed (database unreachable, a statement failed, ...).
    case failure = 1
    /// The command line was wrong (unknown flag, malformed value).
    case usage = 2
    /// A job, queue or other named thing does not exist.
    case notFound = 3
    /// The database schema is not the one this binary expects (never migrated, older or
    /// newer): `courier worker` refuses to start, so systemd does not restart it in a loop.
    case schemaMismatch = 4
}

/// An error the CLI reports as one line on stderr with a chosen exit code.
public struct CLIError: Error, CustomStringConvertible, Sendable {
    /// The one-line message, naming what was wrong.
    public let message: String
    /// The exit code.
    public let exitCode: CourierExitCode

    /// Creates an error.
    public init(_ message: String, exitCode: CourierExitCode = .failure) {
        self.message = message
        self.exitCode = exitCode
    }

    /// A usage error (exit code 2).
    public static func usage(_ message: String) -> CLIError { CLIError(message, exitCode: .usage) }

    /// A not-found error (exit code 3).
    public static func notFound(_ message: String) -> CLIError { CLIError(message, exitCode: .notFound) }

    public var description: String { message }
}

extension CLIError {
    /// Turns any error into the one line `courier` prints, without secrets.
    package static func describe(_ error: any Error) -> String {
        switch error {
        case let error as CLIError: return error.message
        case let error as PostgresError:
            // Validation errors from courier.enqueue carry the field in the message; keep it short.
            var text = error.message
            if let detail = error.detail, !detail.isEmpty { text += " (\(detail))" }
            if let hint = error.hint, !hint.isEmpty { text += "; hint: \(hint)" }
            return text.replacingOccurrences(of: "\n", with: " ")
        default:
            return "\(error)".replacingOccurrences(of: "\n", with: " ")
        }
    }
}

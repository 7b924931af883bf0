import ArgumentParser
import CourierCLISupport
import CourierSecrets
import Foundation

/// `--secrets-key-file` / `COURIER_SECRETS_KEY_FILE`: the key that seals webhook endpoints'
/// secrets. A file that is missing or malformed is a usage error (exit 2) naming the setting.
struct SecretsKeyOptions: ParsableArguments {
    @Option(
        name: .customLong("secrets-key-file"),
        help: ArgumentHelp(
            "File with the key that seals endpoint secrets: one line, 32 random bytes in base64 (openssl rand -base64 32).",
            discussion: "Default: the COURIER_SECRETS_KEY_FILE environment variable."))
    var secretsKeyFile: String?

    /// The configured file and the name of the setting that named it.
    func configured(environment: [String: String] = ProcessInfo.processInfo.environment) -> (path: String, source: String)? {
        if let secretsKeyFile { return (secretsKeyFile, "--secrets-key-file") }
        if let path = environment["COURIER_SECRETS_KEY_FILE"], !path.isEmpty { return (path, "COURIER_SECRETS_KEY_FILE") }
        return nil
    }

    /// The key, or nil when none is configured.
    func loadIfSet() throws -> SecretsKey? {
        guard let (path, source) = configured() else { return nil }
        do {
            return try SecretsKey.load(path: path)
        } catch {
            // Not `--secrets-key-file: ...`: error lines are redacted, and that reads as a
            // secret header (`Name-With-Secret: value`), which left the operator `***` alone.
            throw CLIError.usage("\(error) (from \(source))")
        }
    }

    /// The key; a command that seals or opens secrets cannot run without it.
    func load(for purpose: String) throws -> SecretsKey {
        guard let key = try loadIfSet() else {
            throw CLIError.usage(
                "\(purpose) needs the secrets key: set COURIER_SECRETS_KEY_FILE or --secrets-key-file to a file made by "
                    + "`openssl rand -base64 32` (keep it; the worker needs the same file)")
        }
        return key
    }
}

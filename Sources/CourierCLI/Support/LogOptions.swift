import ArgumentParser
import CourierCLISupport
import Foundation
import Logging

/// `--log-level` and `--log-format` of the long-running commands (`worker`, `web`).
struct LogOptions: ParsableArguments {
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error (default info).")
    var logLevel: String?

    @Option(
        name: .customLong("log-format"),
        help: "auto (journal under systemd, else text), text, json or journal (<N> priority prefixes).")
    var logFormat: String?

    /// The level and format from the flags, else `<prefix>LOG_LEVEL` and `<prefix>LOG_FORMAT`
    /// in `environment`; a value that is neither is a usage error naming the choices.
    func resolve(prefix: String, environment: [String: String]) throws -> (level: Logger.Level, format: LogFormat) {
        let level = logLevel ?? environment["\(prefix)LOG_LEVEL"] ?? "info"
        guard let parsedLevel = Logger.Level(rawValue: level) else {
            throw CLIError.usage("--log-level: unknown level \(level.debugDescription) (trace, debug, info, notice, warning, error)")
        }
        let formatName = logFormat ?? environment["\(prefix)LOG_FORMAT"] ?? "auto"
        if formatName == "auto" {
            let detected = LogFormat.detect(
                journalStream: environment["JOURNAL_STREAM"], stderrIdentity: LogFormat.stderrIdentity())
            return (parsedLevel, detected)
        }
        guard let chosen = LogFormat(rawValue: formatName) else {
            throw CLIError.usage("--log-format: unknown format \(formatName.debugDescription) (auto, text, json, journal)")
        }
        return (parsedLevel, chosen)
    }
}

import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `courier queues`: per-queue settings kept in `courier.queues`.
struct QueuesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queues",
        abstract: "List queues, pause and resume them, change their settings.",
        discussion: """
            Examples:
              courier queues list
              courier queues pause billing
              courier queues set billing --max-attempts 5
              courier queues set billing --keep-succeeded 3d --keep-dead 90d
              courier queues show billing
            """,
        subcommands: [List.self, Show.self, Pause.self, Resume.self, Set.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List queues with settings or jobs (the default subcommand).",
            discussion: """
                Example:
                  courier queues list --json

                SQL: SELECT name, paused, max_attempts, retry_schedule, max_in_flight FROM courier.queues;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            let connection = try database.connect()
            defer { connection.close() }
            let queues = try AdminStore(connection: connection).queues()
            if output.json {
                try Output.json(queues.map { queue -> [String: Any] in
                    [
                        "name": Redaction.text(queue.name), "paused": queue.paused,
                        "max_attempts": Output.orNull(queue.maxAttempts),
                        "retry_schedule_seconds": Output.seconds(queue.retrySchedule), "signed": queue.signed,
                        "max_in_flight": Output.orNull(queue.maxInFlight), "oauth": OAuthOptions.json(queue),
                    ]
                })
                return
            }
            guard !queues.isEmpty else {
                print("No queues yet (a queue exists once it has settings or jobs).")
                return
            }
            var rows = [["NAME", "PAUSED", "MAX ATTEMPTS", "RETRY SCHEDULE", "SIGNED", "MAX IN FLIGHT", "OAUTH"]]
            for queue in queues {
                rows.append([
                    Redaction.text(queue.name), queue.paused ? "yes" : "no",
                    queue.maxAttempts.map(String.init) ?? "default (10)",
                    Output.schedule(queue.retrySchedule), queue.signed ? "yes" : "no",
                    queue.maxInFlight.map(String.init) ?? "default", queue.oauthTokenURL == nil ? "no" : "yes",
                ])
            }
            print(TextTable.render(rows))
        }
    }

    struct Pause: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop workers from claiming jobs of a queue (running jobs finish).",
            discussion: """
                A name with neither settings nor jobs is refused (exit code 3, naming close
                matches), so a typo cannot create a new, paused queue; --create pauses a
                queue before its first job arrives.

                Examples:
                  courier queues pause billing
                  courier queues pause invoices --create

                SQL: INSERT INTO courier.queues (name, paused) VALUES ('billing', true)
                     ON CONFLICT (name) DO UPDATE SET paused = true;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Queue name.")
        var name: String
        @Flag(help: "Create the queue's settings when it has none and no jobs yet.")
        var create = false

        func run() throws { try setPaused(database, output, name, true, create: create) }
    }

    struct Resume: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let workers claim jobs of a paused queue again.",
            discussion: """
                Example:
                  courier queues resume billing
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Queue name.")
        var name: String

        func run() throws { try setPaused(database, output, name, false, create: false) }
    }

    static func setPaused(
        _ database: DatabaseOptions, _ output: OutputOptions, _ name: String, _ paused: Bool, create: Bool
    ) throws {
        let connection = try database.connect()
        defer { connection.close() }
        let store = AdminStore(connection: connection)
        if !create {
            let hint = paused ? "pass --create to pause a new queue" : nil
            try QueueCheck.requireKnown(name, store: store, createHint: hint)
        }
        try store.setPaused(name, paused)
        if output.json { try Output.json(["name": name, "paused": paused]) } else {
            print("Queue \(name) \(paused ? "paused" : "resumed").")
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a queue's settings; 'default' restores a default.",
            discussion: """
                The signing secret is read from a file (or - for stdin) so it stays out of
                shell history and process lists; it is never printed.

                Examples:
                  courier queues set billing --max-attempts 5 --retry-schedule 10s,1m,10m,1h
                  courier queues set billing --signing-secret-file /etc/courier/billing.secret
                  courier queues set billing --max-in-flight default --clear-signing-secret
                  courier queues set invoices --create --max-attempts 3
                  courier queues set partner --oauth-token-url https://id.example.com/oauth/token \
                      --oauth-client-id courier --oauth-client-secret-file /etc/courier/partner.secret \
                      --oauth-scope hooks.write
                  courier queues set partner --no-oauth

                With OAuth2 client credentials the worker obtains a bearer token from the
                token URL (HTTP Basic with the client id and secret,
                grant_type=client_credentials), sends it with every request of the queue,
                fetches a new one shortly before it expires, and after a 401 from the
                receiver fetches one and retries once. The client secret is read from a file
                (or - for stdin; without the flag, from the environment variable
                COURIER_OAUTH_CLIENT_SECRET) and never printed.

                A name with neither settings nor jobs is refused (exit code 3, naming close
                matches) unless --create is given.

                SQL: UPDATE courier.queues SET max_attempts = 5 WHERE name = 'billing';
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Queue name.")
        var name: String
        @Option(name: .customLong("max-attempts"), help: "Default attempts for new jobs of this queue, or 'default'.")
        var maxAttempts: String?
        @Option(name: .customLong("retry-schedule"), help: "Delays after attempt 1, 2, ... (e.g. 5s,5m,1h), or 'default'.")
        var retrySchedule: String?
        @Option(name: .customLong("signing-secret-file"), help: "Read a whsec_<base64> secret from this file, or - for stdin.")
        var signingSecretFile: String?
        @Flag(name: .customLong("clear-signing-secret"), help: "Stop signing this queue's requests.")
        var clearSigningSecret = false
        @Option(name: .customLong("max-in-flight"), help: "Most deliveries of this queue in flight per worker, or 'default'.")
        var maxInFlight: String?
        @Flag(help: "Create the queue's settings when it has none and no jobs yet.")
        var create = false
        @OptionGroup var keep: KeepOptions
        @OptionGroup var oauth: OAuthOptions

        func run() throws {
            var change = QueueSettingsChange()
            if let maxAttempts { change.maxAttempts = .some(try Self.optionalInt(maxAttempts, flag: "--max-attempts")) }
            if let maxInFlight { change.maxInFlight = .some(try Self.optionalInt(maxInFlight, flag: "--max-in-flight")) }
            if let retrySchedule {
                change.retrySchedule = .some(
                    retrySchedule == "default" ? nil : try parseSchedule(retrySchedule, flag: "--retry-schedule"))
            }
            if signingSecretFile != nil && clearSigningSecret {
                throw CLIError.usage("give --signing-secret-file or --clear-signing-secret, not both")
            }
            if let signingSecretFile { change.signingSecret = .some(try Self.readSecret(signingSecretFile)) }
            if clearSigningSecret { change.signingSecret = .some(nil) }
            let retention = try keep.change()
            let oauthChange = try oauth.change()
            guard !change.isEmpty || !retention.isEmpty || oauthChange != nil else {
                throw CLIError.usage("nothing to change: give --max-attempts, --retry-schedule, --signing-secret-file, --clear-signing-secret, --max-in-flight, --keep-succeeded, --keep-cancelled, --keep-dead, --oauth-token-url or --no-oauth")
            }
            let connection = try database.connect()
            defer { connection.close() }
            let store = AdminStore(connection: connection)
            if !create {
                try QueueCheck.requireKnown(name, store: store, createHint: "pass --create to set up a new queue")
            }
            if !change.isEmpty { try store.update(name, change) }
            try store.updateRetention(name, retention)
            if let oauthChange { try store.updateOAuth(name, oauthChange) }
            let settings = try store.queues().first { $0.name == name }
            let kept = try store.retention(of: name)
            if output.json {
                try Output.json([
                    "name": name, "max_attempts": Output.orNull(settings?.maxAttempts),
                    "retry_schedule_seconds": Output.seconds(settings?.retrySchedule), "signed": settings?.signed ?? false,
                    "max_in_flight": Output.orNull(settings?.maxInFlight), "paused": settings?.paused ?? false,
                    "keep_succeeded_seconds": Output.seconds(kept.keepSucceeded),
                    "keep_cancelled_seconds": Output.seconds(kept.keepCancelled),
                    "keep_dead_seconds": Output.seconds(kept.keepDead),
                    "oauth": OAuthOptions.json(settings),
                ])
            } else {
                print("Queue \(name): max attempts \(settings?.maxAttempts.map(String.init) ?? "default"), retry schedule \(Output.schedule(settings?.retrySchedule)), signed \((settings?.signed ?? false) ? "yes" : "no"), max in flight \(settings?.maxInFlight.map(String.init) ?? "default").")
                if !retention.isEmpty { print(KeepOptions.summary(kept)) }
                if oauthChange != nil { print("OAuth: \(OAuthOptions.summary(settings)).") }
            }
        }

        static func optionalInt(_ text: String, flag: String) throws -> Int? {
            if text == "default" { return nil }
            guard let value = Int(text), value >= 1 else {
                throw CLIError.usage("\(flag): \(text.debugDescription) is not a positive integer or 'default'")
            }
            if flag == "--max-attempts", !JobLimits.maxAttempts.contains(value) {
                throw CLIError.usage("--max-attempts must be between 1 and 1000, got \(value)")
            }
            return value
        }

        static func readSecret(_ path: String) throws -> String {
            let data: Data?
            if path == "-" { data = FileHandle.standardInput.readDataToEndOfFile() } else { data = FileManager.default.contents(atPath: path) }
            guard let data else { throw CLIError.usage("--signing-secret-file: cannot read \(path)") }
            let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard secret.hasPrefix("whsec_"), Data(base64Encoded: String(secret.dropFirst(6))) != nil,
                  secret.count > 6
            else {
                throw CLIError.usage("--signing-secret-file: the secret must be whsec_ followed by base64")
            }
            return secret
        }
    }
}

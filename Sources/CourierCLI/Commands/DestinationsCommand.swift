import ArgumentParser
import CourierCore
import Foundation
import CourierCLISupport

/// `courier destinations`: destinations, their live state and their settings (`courier.destinations`).
struct DestinationsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "destinations",
        abstract: "List destinations (receiving hosts); disable, enable and limit them.",
        discussion: """
            Every job's URL host is a destination. Workers never run more than its
            in-flight cap of requests at it (across all workers), start at most its rate
            limit per second, stop sending while its circuit breaker is open, and send
            nothing while it is disabled (a 410 Gone disables it too). Its waiting jobs
            stay due and visible.

            Examples:
              courier destinations list
              courier destinations disable hooks.example.com --reason "customer asked to pause"
              courier destinations enable hooks.example.com
              courier destinations set hooks.example.com --max-in-flight 8 --rate-limit 50

            SQL: SELECT * FROM courier.destinations;
            `courier hosts` is the same command under its former name.
            """,
        subcommands: [List.self, Disable.self, Enable.self, Set.self],
        defaultSubcommand: List.self,
        aliases: ["hosts"]
    )

    static func host(_ text: String) throws -> String {
        guard let host = DestinationHost.normalize(text) else {
            throw CLIError.usage("\(Redaction.text(text).debugDescription) is not a host name (e.g. hooks.example.com)")
        }
        return host
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List destinations, busiest first: due, running, cap, rate limit, failures, breaker.",
            discussion: """
                The cap shown for hosts without their own is --per-host-limit's default
                (\(Defaults.perHostLimit)); workers started with another --per-host-limit
                use theirs.

                Examples:
                  courier destinations list
                  courier destinations list hooks.example.com --json

                SQL: SELECT host, failure_streak, opened_at, disabled_reason FROM courier.destinations;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Only this host.")
        var host: String?
        @Option(help: "Show at most this many hosts (1-100000).")
        var limit = 50
        @Option(name: .customLong("default-max-in-flight"), help: "The workers' --per-host-limit, for hosts without their own cap.")
        var defaultMaxInFlight = Defaults.perHostLimit

        func run() throws {
            guard (1...100_000).contains(limit) else { throw CLIError.usage("--limit must be between 1 and 100000") }
            guard defaultMaxInFlight >= 1 else { throw CLIError.usage("--default-max-in-flight must be at least 1") }
            let filter = try host.map(DestinationsCommand.host)
            let connection = try database.connect()
            defer { connection.close() }
            let hosts = try DestinationStore(connection: connection).list(
                host: filter, limit: limit + 1, defaultMaxInFlight: defaultMaxInFlight)
            let shown = Array(hosts.prefix(limit))
            if let filter, shown.isEmpty { throw CLIError.notFound("no destination \(filter): no jobs and no settings") }
            if output.json {
                try Output.json(shown.map { host -> [String: Any] in
                    [
                        "host": host.host, "due": host.due, "scheduled": host.later, "running": host.running,
                        "max_in_flight": host.maxInFlight, "max_in_flight_is_default": host.maxInFlightIsDefault,
                        "rate_limit": Output.orNull(host.rateLimit), "failure_streak": host.failureStreak,
                        "breaker": host.breaker, "breaker_threshold": host.breakerThreshold,
                        "breaker_cooldown_seconds": host.breakerCooldown.inSeconds,
                        "opened_at": Output.jsonTime(host.openedAt), "probe_at": Output.jsonTime(host.probeAt),
                        "disabled": host.disabledAt != nil, "disabled_at": Output.jsonTime(host.disabledAt),
                        "disabled_reason": Output.orNull(host.disabledReason.map(Redaction.text)),
                        "last_success_at": Output.jsonTime(host.lastSuccessAt),
                        "last_failure_at": Output.jsonTime(host.lastFailureAt),
                        "on_gone": host.disableOnGone ? "disable" : "dead",
                    ]
                })
                return
            }
            guard !shown.isEmpty else {
                print("No destinations yet (a host appears once a job for it is waiting or claimed).")
                return
            }
            var rows = [["HOST", "DUE", "LATER", "RUNNING", "MAX IN FLIGHT", "RATE LIMIT", "FAILURES", "BREAKER", "STATE"]]
            for host in shown {
                rows.append([
                    host.host, Output.count(host.due), Output.count(host.later), Output.count(host.running),
                    host.maxInFlightIsDefault ? "\(host.maxInFlight) (default)" : "\(host.maxInFlight)",
                    host.rateLimit.map { "\(Self.number($0))/s" } ?? "none",
                    "\(host.failureStreak)/\(host.breakerThreshold)",
                    host.breaker == "closed" ? "closed" : "\(host.breaker), probe \(Output.timestamp(host.probeAt))",
                    host.disabledAt == nil
                        ? "enabled" : "disabled: \(Output.clip(Output.oneLine(Redaction.text(host.disabledReason ?? "")), 60))",
                ])
            }
            print(TextTable.render(rows))
            if hosts.count > limit { print("(showing the first \(limit); use --limit to see more)") }
        }

        static func number(_ value: Double) -> String {
            value == value.rounded() ? String(Int(value)) : String(format: "%.2f", value)
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop sending to a host; its jobs wait, parked, until it is enabled.",
            discussion: """
                Requests already on their way finish. Nothing is dropped: the host's jobs
                stay due and show in `courier destinations list` and `courier jobs list`.

                Example:
                  courier destinations disable hooks.example.com --reason "endpoint migrating"
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Host name (or a URL: its host is taken).")
        var host: String
        @Option(help: "Why, shown by `courier destinations list`.")
        var reason = "disabled by an operator"

        func run() throws {
            let host = try DestinationsCommand.host(self.host)
            guard !reason.isEmpty, reason.count <= 500 else { throw CLIError.usage("--reason must be 1-500 characters") }
            let connection = try database.connect()
            defer { connection.close() }
            try DestinationStore(connection: connection).disable(host, reason: reason)
            if output.json { try Output.json(["host": host, "disabled": true]) } else {
                print("Host \(host) disabled; its jobs wait until `courier destinations enable \(host)`.")
            }
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send to a disabled host again; also closes its circuit breaker.",
            discussion: """
                Example:
                  courier destinations enable hooks.example.com
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Host name (or a URL: its host is taken).")
        var host: String

        func run() throws {
            let host = try DestinationsCommand.host(self.host)
            let connection = try database.connect()
            defer { connection.close() }
            guard try DestinationStore(connection: connection).enable(host) else {
                throw CLIError.notFound("no destination \(host): it was never claimed, disabled or configured")
            }
            if output.json { try Output.json(["host": host, "disabled": false, "breaker": "closed"]) } else {
                print("Host \(host) enabled; breaker closed.")
            }
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a host's in-flight cap, rate limit or breaker; 'default' restores a default.",
            discussion: """
                Examples:
                  courier destinations set hooks.example.com --max-in-flight 8
                  courier destinations set hooks.example.com --rate-limit 20 --breaker-threshold 5 --breaker-cooldown 1m
                  courier destinations set hooks.example.com --max-in-flight default --rate-limit none
                  courier destinations set hooks.zapier.com --on-gone dead

                SQL: UPDATE courier.destinations SET max_in_flight = 8 WHERE host = 'hooks.example.com';
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "Host name (or a URL: its host is taken).")
        var host: String
        @Option(name: .customLong("max-in-flight"), help: "Requests in flight across all workers (1-100000), or 'default'.")
        var maxInFlight: String?
        @Option(name: .customLong("rate-limit"), help: "Requests started per second across all workers, or 'none'.")
        var rateLimit: String?
        @Option(name: .customLong("breaker-threshold"), help: "Consecutive failures that open the breaker (default 10).")
        var breakerThreshold: Int?
        @Option(name: .customLong("breaker-cooldown"), help: "How long an open breaker waits before a probe (1s-1d; default 30s).")
        var breakerCooldown: String?
        @Option(
            name: .customLong("on-gone"),
            help: "What a 410 Gone does: disable (the host, parking its jobs; default) or dead (only that job, for a host many receivers share).")
        var onGone: String?

        func run() throws {
            let host = try DestinationsCommand.host(self.host)
            var change = DestinationSettingsChange()
            if let maxInFlight {
                if maxInFlight == "default" { change.maxInFlight = .some(nil) } else {
                    guard let value = Int(maxInFlight), (1...100_000).contains(value) else {
                        throw CLIError.usage("--max-in-flight: \(maxInFlight.debugDescription) is not 1-100000 or 'default'")
                    }
                    change.maxInFlight = .some(value)
                }
            }
            if let rateLimit {
                if rateLimit == "none" || rateLimit == "default" { change.rateLimit = .some(nil) } else {
                    guard let value = Double(rateLimit), value.isFinite, value > 0, value <= 1_000_000 else {
                        throw CLIError.usage("--rate-limit: \(rateLimit.debugDescription) is not a number of requests per second (0-1000000] or 'none'")
                    }
                    change.rateLimit = .some(value)
                }
            }
            if let breakerThreshold {
                guard (1...100_000).contains(breakerThreshold) else {
                    throw CLIError.usage("--breaker-threshold must be between 1 and 100000")
                }
                change.breakerThreshold = breakerThreshold
            }
            if let breakerCooldown {
                let cooldown = try parseDuration(breakerCooldown, flag: "--breaker-cooldown")
                guard cooldown >= .seconds(1), cooldown <= .seconds(86_400) else {
                    throw CLIError.usage("--breaker-cooldown must be between 1s and 1d")
                }
                change.breakerCooldown = cooldown
            }
            if let onGone {
                switch onGone {
                case "disable": change.disableOnGone = true
                case "dead": change.disableOnGone = false
                default: throw CLIError.usage("--on-gone: \(onGone.debugDescription) is not disable or dead")
                }
            }
            guard !change.isEmpty else {
                throw CLIError.usage("nothing to change: give --max-in-flight, --rate-limit, --breaker-threshold, --breaker-cooldown or --on-gone")
            }
            let connection = try database.connect()
            defer { connection.close() }
            let store = DestinationStore(connection: connection)
            try store.update(host, change)
            guard let info = try store.list(host: host, limit: 1, defaultMaxInFlight: Defaults.perHostLimit).first else {
                throw CLIError.notFound("no destination \(host)")
            }
            if output.json {
                try Output.json([
                    "host": host, "max_in_flight": info.maxInFlightIsDefault ? NSNull() : info.maxInFlight as Any,
                    "rate_limit": Output.orNull(info.rateLimit), "breaker_threshold": info.breakerThreshold,
                    "breaker_cooldown_seconds": info.breakerCooldown.inSeconds,
                    "on_gone": info.disableOnGone ? "disable" : "dead",
                ])
            } else {
                print("Host \(host): max in flight \(info.maxInFlightIsDefault ? "default" : String(info.maxInFlight)), rate limit \(info.rateLimit.map { "\(List.number($0))/s" } ?? "none"), breaker after \(info.breakerThreshold) failures, cool-down \(Output.duration(info.breakerCooldown)), 410 Gone: \(info.disableOnGone ? "disables the host" : "the job goes dead").")
            }
        }
    }
}

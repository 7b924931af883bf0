import ArgumentParser
import CourierCLISupport
import CourierCore
import CourierSecrets
import Foundation

/// `courier endpoints`: the webhook endpoints `courier publish` fans messages out to, their
/// secrets and their deliveries (`courier.endpoints`, `courier.endpoint_secrets`).
struct EndpointsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "endpoints",
        abstract: "Add, list, change, disable, test and recover webhook endpoints.",
        discussion: """
            An endpoint is a receiver of a tenant: a URL, the event types it wants
            (exact types, prefix.* or *), an optional payload filter and extra headers.
            Every message `courier publish` writes goes to each enabled endpoint of its
            tenant that matches, as a job of the endpoint's queue, signed with its
            secrets.

            Secrets are sealed with the key in --secrets-key-file or
            COURIER_SECRETS_KEY_FILE (the worker needs the same file); `add` and
            `rotate-secret` print a new secret once, and nothing prints it again.

            Examples:
              courier endpoints add --url https://acme.example/hooks --events 'invoice.*'
              courier endpoints list --tenant acme
              courier endpoints show 7
              courier endpoints test 7
              courier endpoints rotate-secret 7 --grace 24h
              courier endpoints recover 7 --since 2h

            SQL: SELECT id, tenant, url, event_types FROM courier.endpoints;
            """,
        subcommands: [
            List.self, Show.self, Add.self, Update.self, Disable.self, Enable.self, Delete.self, RotateSecret.self,
            Recover.self, Test.self,
        ],
        defaultSubcommand: List.self
    )

    /// The endpoint id argument.
    static func id(_ text: String) throws -> Int64 { try parseID(text, of: "an endpoint") }

    /// Reads endpoint `id`, or exits 3.
    static func endpoint(_ id: Int64, store: WebhookStore) throws -> EndpointInfo {
        guard let endpoint = try store.endpoint(id) else { throw CLIError.notFound("no endpoint \(id)") }
        return endpoint
    }

    /// The lines after a new secret: it is shown once, and what to do with it.
    static func secretNotice(_ id: Int64) -> String {
        "This secret is shown only now: give it to the receiver to verify the webhook-signature header. "
            + "`courier endpoints rotate-secret \(id)` makes a new one."
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List endpoints, newest first, with how their last 100 deliveries went.",
            discussion: """
                HEALTH is the endpoint's own breaker (its 5xx and timeouts open it; its
                host's breaker is `courier hosts`), its failure and dead streaks, and since
                when every delivery failed. RECENT counts the endpoint's last 100 deliveries
                by outcome; LAST SUCCESS is the newest successful one. When more endpoints
                exist than --limit shows, a last line says so (on stderr with --json).

                Examples:
                  courier endpoints list
                  courier endpoints list --tenant acme --json

                SQL: SELECT id, tenant, url, event_types, queue, disabled_reason
                     FROM courier.endpoints ORDER BY id DESC LIMIT 50;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Option(help: "Only endpoints of this tenant.")
        var tenant: String?
        @OptionGroup var limit: LimitOption

        func run() throws {
            let connection = try database.connect()
            defer { connection.close() }
            let found = try WebhookStore(connection: connection).listEndpoints(
                tenant: tenant, limit: limit.limit == Int.max ? limit.limit : limit.limit + 1)
            let endpoints = Array(found.prefix(limit.limit))
            let more = found.count > endpoints.count
            if output.json {
                try Output.json(endpoints.map(WebhookOutput.endpointJSON))
                if more { MainOutput.error("note: more endpoints exist: showing the newest \(endpoints.count) (raise --limit)") }
                return
            }
            guard !endpoints.isEmpty else {
                print(tenant == nil ? "No endpoints yet (add one with `courier endpoints add`)." : "No endpoints of this tenant.")
                return
            }
            var rows = [["ID", "TENANT", "URL", "EVENTS", "QUEUE", "STATE", "HEALTH", "RECENT", "LAST SUCCESS"]]
            for endpoint in endpoints {
                rows.append([
                    String(endpoint.id), WebhookOutput.tenant(endpoint.tenant), Output.clip(Redaction.url(endpoint.url), 50),
                    Output.clip(WebhookOutput.events(endpoint.eventTypes), 40), Redaction.text(endpoint.queue),
                    WebhookOutput.state(endpoint, width: 40), Output.clip(WebhookOutput.health(endpoint), 40),
                    WebhookOutput.counts(endpoint.recent), Output.timestamp(endpoint.lastSuccess),
                ])
            }
            print(TextTable.render(rows))
            if more { print("\nMore endpoints exist: showing the newest \(endpoints.count) (raise --limit or give --tenant).") }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one endpoint: settings, secrets (how many, never their values), recent deliveries.",
            discussion: """
                Example:
                  courier endpoints show 7

                SQL: SELECT * FROM courier.endpoints WHERE id = 7;
                     SELECT id, expires_at FROM courier.endpoint_secrets WHERE endpoint_id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            let connection = try database.connect()
            defer { connection.close() }
            let endpoint = try EndpointsCommand.endpoint(id, store: WebhookStore(connection: connection))
            if output.json {
                try Output.json(WebhookOutput.endpointJSON(endpoint))
                return
            }
            var lines = [
                "Endpoint \(endpoint.id)  \(WebhookOutput.state(endpoint, width: 200))  \(WebhookOutput.tenantHeading(endpoint.tenant))",
                "  url          \(Redaction.url(endpoint.url))",
            ]
            if !endpoint.description.isEmpty {
                lines.append("  description  \(Output.clip(Output.oneLine(Redaction.message(endpoint.description)), 200))")
            }
            lines.append("  events       \(WebhookOutput.events(endpoint.eventTypes))")
            if let filter = endpoint.payloadFilter {
                lines.append("  filter       \(WebhookOutput.compactJSON(filter, limit: 200)) (payloads must contain it)")
            }
            for (name, value) in WebhookOutput.shownHeaders(endpoint.headersJSON) {
                lines.append("  header       \(name): \(Output.clip(value, 200))")
            }
            lines.append("  queue        \(Redaction.text(endpoint.queue))")
            lines.append("  rate limit   \(WebhookOutput.rate(endpoint.rateLimit))")
            lines.append("  ordered      \(endpoint.ordered ? "yes (one delivery at a time, in publish order)" : "no")")
            var secrets = WebhookOutput.plural(endpoint.validSecrets, "secret signs", "secrets sign")
            if let until = endpoint.retiringUntil { secrets += "; the previous one until \(Output.timestamp(until))" }
            lines.append("  secrets      \(secrets)")
            lines.append("  created      \(Output.timestamp(endpoint.createdAt))")
            lines.append("  updated      \(Output.timestamp(endpoint.updatedAt))")
            if let disabled = endpoint.disabledAt { lines.append("  disabled     \(Output.timestamp(disabled))") }
            var recent = WebhookOutput.counts(endpoint.recent)
            if endpoint.recent.total > 0 { recent += " (of the last \(endpoint.recent.total))" }
            if let state = endpoint.recent.lastState {
                recent += "; newest \(state.rawValue)" + (endpoint.recent.lastStatus.map { " (HTTP \($0))" } ?? "")
            }
            lines.append("  deliveries   \(recent)")
            lines.append("  health       \(WebhookOutput.health(endpoint))")
            lines.append("  auto-disable \(WebhookOutput.autoDisable(endpoint.health))")
            lines.append("  last success \(Output.timestamp(endpoint.lastSuccess))")
            print(lines.joined(separator: "\n"))
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an endpoint and its first secret; prints the secret once.",
            discussion: """
                Needs the secrets key (--secrets-key-file or COURIER_SECRETS_KEY_FILE): the
                new secret is sealed with it before it is stored. The database checks every
                field (URL, event type patterns, filter, headers, queue, rate limit); a bad
                one is named and nothing is written.

                --events takes exact types (invoice.paid), prefixes (invoice.* for every
                type under invoice.) and * (every type), separated by commas; '' receives
                nothing until changed with `courier endpoints update`.

                Examples:
                  courier endpoints add --url https://a.example/in --events 'invoice.*,order.*'
                  courier endpoints add --url https://a.example/in --events '*' --tenant acme
                  courier endpoints add --url "$URL" --events '*' --filter '{"eu":true}' --json
                  courier endpoints add --url "$URL" --events '' --header 'X-Team: ops'

                SQL: INSERT INTO courier.endpoints (tenant, url, event_types)
                     VALUES ('acme', 'https://a.example/in', '{invoice.*,order.*}');
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var secrets: SecretsKeyOptions
        @Option(help: "Where deliveries are POSTed (absolute http or https URL).")
        var url: String
        @Option(help: ArgumentHelp("Event types to receive: types, prefix.* or *, comma-separated ('' for none).", valueName: "patterns"))
        var events: String
        @Option(help: "The producer's customer or application this endpoint belongs to (default: none, internal receivers).")
        var tenant: String?
        @Option(help: "Free text for people.")
        var description = ""
        @Option(help: ArgumentHelp("Only payloads that contain this JSON object, e.g. '{\"plan\":\"pro\"}'.", valueName: "json"))
        var filter: String?
        @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value' (repeatable).", valueName: "header"))
        var headers: [String] = []
        @Option(help: "Queue of the deliveries (its attempts and retry schedule apply).")
        var queue = "webhooks"
        @Option(name: .customLong("rate-limit"), help: "First deliveries per second at most (default: no limit).")
        var rateLimit: Double?
        @Flag(help: "Deliver one at a time, in publish order.")
        var ordered = false

        func run() throws {
            var endpoint = NewEndpoint(
                url: url, eventTypes: WebhookOutput.patterns(events), tenant: tenant, description: description,
                queue: queue, rateLimit: rateLimit, ordered: ordered)
            endpoint.payloadFilter = try filter.map { try WebhookOutput.filter($0) }
            endpoint.headers = try WebhookOutput.headers(headers)
            let key = try secrets.load(for: "courier endpoints add")
            let secret = SecretsKey.newWebhookSecret()
            let connection = try database.connect()
            defer { connection.close() }
            let id = try WebhookStore(connection: connection).addEndpoint(endpoint) { key.seal(secret, endpointID: $0) }
            if output.json {
                try Output.json(["id": id, "secret": secret])
                return
            }
            print("Endpoint \(id) added (events: \(WebhookOutput.events(endpoint.eventTypes))).")
            print("Secret: \(secret)")
            print(EndpointsCommand.secretNotice(id))
        }
    }

    struct Update: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change an endpoint's URL, events, description, filter, headers, queue, rate limit or ordering.",
            discussion: """
                Only the settings given change. --header replaces all extra headers (repeat
                it for several); --no-headers removes them. Messages published from now on
                follow the new settings; deliveries already written keep their URL and
                headers.

                Examples:
                  courier endpoints update 7 --url https://acme.example/hooks/v2
                  courier endpoints update 7 --events 'invoice.*' --no-filter
                  courier endpoints update 7 --header 'X-Team: ops' --rate-limit 20 --ordered
                  courier endpoints update 7 --disable-after 2d --disable-after-dead 0

                SQL: UPDATE courier.endpoints SET url = 'https://acme.example/hooks/v2'
                     WHERE id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String
        @Option(help: "New URL (absolute http or https).")
        var url: String?
        @Option(help: ArgumentHelp("New event types: types, prefix.* or *, comma-separated ('' for none).", valueName: "patterns"))
        var events: String?
        @Option(help: "New description.")
        var description: String?
        @Option(help: ArgumentHelp("New payload filter, a JSON object payloads must contain.", valueName: "json"))
        var filter: String?
        @Flag(name: .customLong("no-filter"), help: "Send every payload (remove the filter).")
        var noFilter = false
        @Option(name: .customLong("header"), help: ArgumentHelp("An extra header, 'Name: value' (repeatable; replaces all).", valueName: "header"))
        var headers: [String] = []
        @Flag(name: .customLong("no-headers"), help: "Remove every extra header.")
        var noHeaders = false
        @Option(help: "New queue of the deliveries.")
        var queue: String?
        @Option(name: .customLong("rate-limit"), help: "First deliveries per second at most.")
        var rateLimit: Double?
        @Flag(name: .customLong("no-rate-limit"), help: "Remove the rate limit.")
        var noRateLimit = false
        @Flag(help: "Deliver one at a time, in publish order.")
        var ordered = false
        @Flag(help: "Deliver concurrently again.")
        var unordered = false
        @Option(
            name: .customLong("disable-after"),
            help: ArgumentHelp("Disable it when every delivery failed for this long (e.g. 3d); 0 never; 'default' for the workers'.", valueName: "duration"))
        var disableAfter: String?
        @Option(
            name: .customLong("disable-after-dead"),
            help: ArgumentHelp("Disable it after this many deliveries in a row went dead; 0 never; 'default' for the workers'.", valueName: "n"))
        var disableAfterDead: String?

        func validate() throws {
            if filter != nil && noFilter { throw CLIError.usage("give --filter or --no-filter, not both") }
            if !headers.isEmpty && noHeaders { throw CLIError.usage("give --header or --no-headers, not both") }
            if rateLimit != nil && noRateLimit { throw CLIError.usage("give --rate-limit or --no-rate-limit, not both") }
            if ordered && unordered { throw CLIError.usage("give --ordered or --unordered, not both") }
        }

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            var change = EndpointChange()
            var changed: [String] = []
            if let url { change.url = url; changed.append("url") }
            if let events { change.eventTypes = WebhookOutput.patterns(events); changed.append("events") }
            if let description { change.description = description; changed.append("description") }
            if let filter { change.payloadFilter = .some(try WebhookOutput.filter(filter)); changed.append("filter") }
            if noFilter { change.payloadFilter = .some(nil); changed.append("filter") }
            if !headers.isEmpty { change.headers = try WebhookOutput.headers(headers); changed.append("headers") }
            if noHeaders { change.headers = []; changed.append("headers") }
            if let queue { change.queue = queue; changed.append("queue") }
            if let rateLimit { change.rateLimit = .some(rateLimit); changed.append("rate limit") }
            if noRateLimit { change.rateLimit = .some(nil); changed.append("rate limit") }
            if ordered || unordered { change.ordered = ordered; changed.append("ordering") }
            if let disableAfter {
                if disableAfter == "default" {
                    change.disableAfter = .some(nil)
                } else if disableAfter == "0" {
                    change.disableAfter = .some(.zero)
                } else if let seconds = DurationParser.seconds(disableAfter) {
                    change.disableAfter = .some(.seconds(seconds))
                } else {
                    throw CLIError.usage(DurationParser.message(disableAfter, flag: "--disable-after") + ", or 'default'")
                }
                changed.append("disable after")
            }
            if let disableAfterDead {
                if disableAfterDead == "default" {
                    change.disableAfterDead = .some(nil)
                } else if let count = Int(disableAfterDead), count >= 0 {
                    change.disableAfterDead = .some(count)
                } else {
                    throw CLIError.usage(
                        "--disable-after-dead must be a whole number of at least 0, or 'default', got \(disableAfterDead.debugDescription)")
                }
                changed.append("disable after dead")
            }
            guard !change.isEmpty else {
                throw CLIError.usage(
                    "nothing to change: give --url, --events, --description, --filter, --no-filter, --header, --no-headers, "
                        + "--queue, --rate-limit, --no-rate-limit, --ordered, --unordered, --disable-after or --disable-after-dead")
            }
            let connection = try database.connect()
            defer { connection.close() }
            let store = WebhookStore(connection: connection)
            try store.updateEndpoint(id, change)
            if output.json {
                try Output.json(WebhookOutput.endpointJSON(try EndpointsCommand.endpoint(id, store: store)))
            } else {
                print("Endpoint \(id) updated: \(changed.joined(separator: ", ")).")
            }
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop sending to an endpoint; its waiting deliveries wait until it is enabled.",
            discussion: """
                Messages published while it is disabled are not sent to it (`recover` can
                send them later); deliveries already waiting stay waiting, visible, and go
                when it is enabled. Disabling a disabled endpoint keeps its first reason.
                Every disable, by an operator or by the endpoint's health, publishes the
                event courier.endpoint.disabled to the internal endpoints (no tenant)
                subscribed to it.

                Example:
                  courier endpoints disable 7 --reason "customer asked to pause"

                SQL: UPDATE courier.endpoints SET disabled_at = now(),
                     disabled_reason = 'customer asked to pause' WHERE id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String
        @Option(help: "Why, shown by `courier endpoints list` and `show`.")
        var reason = "disabled by an operator"

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            guard !reason.isEmpty, reason.utf8.count <= 1024 else { throw CLIError.usage("--reason must be 1-1024 bytes") }
            let connection = try database.connect()
            defer { connection.close() }
            let changed = try WebhookStore(connection: connection).disableEndpoint(id, reason: reason)
            if output.json { try Output.json(["id": id, "disabled": true, "changed": changed]) } else if changed {
                print("Endpoint \(id) disabled; it receives no new messages until `courier endpoints enable \(id)`.")
            } else {
                print("Endpoint \(id) was disabled already; its first reason stands.")
            }
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send to a disabled endpoint again: its waiting deliveries go, and new messages.",
            discussion: """
                Deliveries that waited while it was disabled go at once (still in publish
                order for an ordered endpoint). Messages published while it was disabled
                are not sent by this; `courier endpoints recover` re-sends dead ones.

                Example:
                  courier endpoints enable 7

                SQL: UPDATE courier.endpoints SET disabled_at = NULL, disabled_reason = NULL
                     WHERE id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            let connection = try database.connect()
            defer { connection.close() }
            let changed = try WebhookStore(connection: connection).enableEndpoint(id)
            if output.json { try Output.json(["id": id, "disabled": false, "changed": changed]) } else {
                print(changed ? "Endpoint \(id) enabled." : "Endpoint \(id) was enabled already.")
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an endpoint and its secrets; cancel its waiting deliveries.",
            discussion: """
                Deliveries in flight finish; finished ones stay as history (`courier
                messages show`). To stop sending for a while, use `courier endpoints
                disable`.

                Example:
                  courier endpoints delete 7

                SQL: DELETE FROM courier.endpoints WHERE id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            let connection = try database.connect()
            defer { connection.close() }
            let cancelled = try WebhookStore(connection: connection).deleteEndpoint(id)
            if output.json { try Output.json(["id": id, "deleted": true, "cancelled": cancelled]) } else {
                print("Endpoint \(id) deleted; \(WebhookOutput.plural(cancelled, "waiting delivery", "waiting deliveries")) cancelled.")
            }
        }
    }

    struct RotateSecret: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-secret",
            abstract: "Give an endpoint a new secret; the current one keeps signing for --grace.",
            discussion: """
                Needs the secrets key. While both are valid every delivery carries two
                signatures, so the receiver can switch to the new secret at any time within
                the grace period. --grace 0s stops the old secret at once. Secrets that
                stopped signing are deleted on the way.

                Examples:
                  courier endpoints rotate-secret 7
                  courier endpoints rotate-secret 7 --grace 0s --json

                SQL: SELECT id, created_at, expires_at FROM courier.endpoint_secrets
                     WHERE endpoint_id = 7;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var secrets: SecretsKeyOptions
        @Argument(help: "The endpoint id.")
        var id: String
        @Option(help: ArgumentHelp("How long the current secret keeps signing (0s-30d; default 24h).", valueName: "duration"))
        var grace = "24h"

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            let grace = try parseDuration(self.grace, flag: "--grace")
            guard grace <= .seconds(30 * 86_400) else { throw CLIError.usage("--grace must be between 0s and 30d") }
            let key = try secrets.load(for: "courier endpoints rotate-secret")
            let secret = SecretsKey.newWebhookSecret()
            let connection = try database.connect()
            defer { connection.close() }
            let previous = try WebhookStore(connection: connection).rotateSecret(id, grace: grace) {
                key.seal(secret, endpointID: $0)
            }
            if output.json {
                try Output.json(["id": id, "secret": secret, "previous_expires_at": Output.jsonTime(previous)])
                return
            }
            print("Endpoint \(id) has a new secret.")
            print("Secret: \(secret)")
            if let previous {
                print(
                    grace == .zero
                        ? "The previous secret no longer signs."
                        : "The previous secret keeps signing until \(Output.timestamp(previous)).")
            }
            print(EndpointsCommand.secretNotice(id))
        }
    }

    struct Recover: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-send every message since a time whose latest delivery to the endpoint is dead.",
            discussion: """
                After an outage of the receiver: each message of the endpoint's tenant
                published since --since whose latest delivery to this endpoint went dead
                gets a new one, with the same webhook-id (msg_<id>), so the receiver can
                drop what it already has. A disabled endpoint is refused; enable it first.

                Examples:
                  courier endpoints recover 7 --since 2h
                  courier endpoints recover 7 --since 2026-11-22T06:00:00Z --json

                SQL: SELECT message_id, job_id, state FROM courier.message_deliveries
                     WHERE endpoint_id = 7 AND published_at >= now() - interval '2 hours';
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The endpoint id.")
        var id: String
        @Option(help: ArgumentHelp("Messages published since: a duration ago (2h, 7d) or an ISO 8601 time.", valueName: "time"))
        var since: String

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            guard let since = try parseSince(since) else { throw CLIError.usage("give --since") }
            let connection = try database.connect()
            defer { connection.close() }
            let resent = try WebhookStore(connection: connection).recover(endpointID: id, since: since)
            if output.json {
                try Output.json([
                    "endpoint_id": id, "since": Output.timestamp(since), "resent": resent.count,
                    "deliveries": WebhookOutput.resentJSON(resent),
                ])
            } else if resent.isEmpty {
                print("Nothing to re-send: no message since \(Output.timestamp(since)) has a dead latest delivery to endpoint \(id).")
            } else {
                print(
                    "Re-sent \(WebhookOutput.plural(resent.count, "delivery", "deliveries")) to endpoint \(id): "
                        + "jobs \(WebhookOutput.jobIDs(resent)).")
            }
        }
    }
}

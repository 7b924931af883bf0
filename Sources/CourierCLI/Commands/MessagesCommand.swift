import ArgumentParser
import CourierCLISupport
import CourierCore
import Foundation

/// `courier messages`: published messages (`courier.messages`), their deliveries, re-sends.
struct MessagesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "messages",
        abstract: "List and show published messages and their deliveries; re-send one.",
        discussion: """
            Examples:
              courier messages list --tenant acme --type invoice.paid
              courier messages show 12
              courier messages resend 12 --endpoint 7

            SQL: SELECT message_id, endpoint_id, job_id, state, last_status
                 FROM courier.message_deliveries WHERE message_id = 12;
            """,
        subcommands: [List.self, Show.self, Resend.self],
        defaultSubcommand: List.self
    )

    /// The message id argument.
    static func id(_ text: String) throws -> Int64 { try parseID(text, of: "a message") }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List messages, newest first, with their deliveries counted by outcome.",
            discussion: """
                ENDPOINTS is how many endpoints matched when it was published; DELIVERIES
                counts its deliveries now, re-sends included. --before pages back: give the
                last id shown. When more messages match than --limit shows, a last line says
                so (on stderr with --json).

                Examples:
                  courier messages list
                  courier messages list --tenant acme --type invoice.paid --limit 20 --json
                  courier messages list --before 1200

                SQL: SELECT id, event_type, tenant, endpoints, created_at FROM courier.messages
                     WHERE tenant = 'acme' ORDER BY id DESC LIMIT 50;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Option(help: "Only messages of this tenant.")
        var tenant: String?
        @Option(help: ArgumentHelp("Only messages of this event type.", valueName: "type"))
        var type: String?
        @Option(help: ArgumentHelp("Only messages older than this id (paging).", valueName: "id"))
        var before: String?
        @OptionGroup var limit: LimitOption

        func run() throws {
            let filter = WebhookStatements.MessageFilter(
                tenant: tenant, eventType: type, before: try before.map { try MessagesCommand.id($0) },
                limit: limit.limit == Int.max ? limit.limit : limit.limit + 1)
            let connection = try database.connect()
            defer { connection.close() }
            let found = try WebhookStore(connection: connection).listMessages(filter)
            let messages = Array(found.prefix(limit.limit))
            let more = found.count > messages.count
            let shown = "showing the newest \(messages.count) (page back with --before \(messages.last?.id ?? 0))"
            if output.json {
                try Output.json(messages.map(WebhookOutput.messageJSON))
                if more { MainOutput.error("note: more messages match: \(shown)") }
                return
            }
            guard !messages.isEmpty else {
                print("No messages match.")
                return
            }
            var rows = [["ID", "TYPE", "TENANT", "ENDPOINTS", "DELIVERIES", "PUBLISHED"]]
            for message in messages {
                rows.append([
                    String(message.id), Output.clip(Redaction.text(message.eventType), 40),
                    WebhookOutput.tenant(message.tenant), String(message.endpoints),
                    WebhookOutput.counts(message.deliveries), Output.timestamp(message.createdAt),
                ])
            }
            print(TextTable.render(rows))
            if more { print("\nMore messages match: \(shown).") }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one message: its payload and every delivery per endpoint.",
            discussion: """
                The payload is printed as JSON, escaped and cut at 40 lines (--json prints
                it whole). RESENT FROM names the delivery a re-send repeats.

                Example:
                  courier messages show 12

                SQL: SELECT * FROM courier.messages WHERE id = 12;
                     SELECT * FROM courier.message_deliveries WHERE message_id = 12;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The message id.")
        var id: String

        func run() throws {
            let id = try MessagesCommand.id(self.id)
            let connection = try database.connect()
            defer { connection.close() }
            guard let detail = try WebhookStore(connection: connection).message(id) else {
                throw CLIError.notFound("no message \(id)")
            }
            let message = detail.message
            if output.json {
                var object = WebhookOutput.messageJSON(message)
                object["payload"] = WebhookOutput.jsonValue(detail.payloadJSON)
                object["deliveries"] = detail.deliveries.map { delivery -> [String: Any] in
                    [
                        "job_id": delivery.jobID, "endpoint_id": Output.orNull(delivery.endpointID),
                        "url": Output.orNull(delivery.endpointURL.map(Redaction.url)), "state": delivery.state.rawValue,
                        "attempt": delivery.attempt, "max_attempts": delivery.maxAttempts,
                        "last_status": Output.orNull(delivery.lastStatus),
                        "last_error": Output.orNull(delivery.lastError.map(Redaction.message)),
                        "resent_from": Output.orNull(delivery.resentFrom), "run_at": Output.timestamp(delivery.runAt),
                        "finished_at": Output.jsonTime(delivery.finishedAt),
                    ]
                }
                try Output.json(object)
                return
            }
            var lines = [
                "Message \(message.id) (\(message.webhookID))  \(Redaction.text(message.eventType))  \(WebhookOutput.tenantHeading(message.tenant))",
                "  published    \(Output.timestamp(message.createdAt))",
            ]
            if let key = message.idempotencyKey { lines.append("  idempotency  \(Redaction.text(key))") }
            lines.append("  endpoints    \(message.endpoints) matched when published")
            lines.append("  deliveries   \(WebhookOutput.counts(message.deliveries))")
            lines.append("  payload")
            lines += WebhookOutput.prettyJSON(detail.payloadJSON).map { "    " + $0 }
            print(lines.joined(separator: "\n"))
            print("")
            guard !detail.deliveries.isEmpty else {
                print("No deliveries (it matched no endpoint; `courier messages resend \(id) --endpoint ID` sends it).")
                return
            }
            var rows = [["JOB", "ENDPOINT", "URL", "STATE", "ATTEMPT", "LAST STATUS", "LAST ERROR", "RESENT FROM"]]
            for delivery in detail.deliveries {
                rows.append([
                    String(delivery.jobID), delivery.endpointID.map(String.init) ?? "-",
                    delivery.endpointURL.map { Output.clip(Redaction.url($0), 50) } ?? "(deleted)", delivery.state.rawValue,
                    "\(delivery.attempt)/\(delivery.maxAttempts)", delivery.lastStatus.map(String.init) ?? "-",
                    delivery.lastError.map { Output.clip(Redaction.message($0), 50) } ?? "-",
                    delivery.resentFrom.map(String.init) ?? "-",
                ])
            }
            print(TextTable.render(rows))
        }
    }

    struct Resend: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a message again: to one endpoint, or to every endpoint it went to.",
            discussion: """
                Each re-send is a new delivery with the same webhook-id (msg_<id>) and body,
                whatever the first one's outcome, so the receiver can drop a duplicate. The
                endpoint must be enabled and of the message's tenant; --endpoint may name
                one the message never went to (one added later, say).

                Examples:
                  courier messages resend 12
                  courier messages resend 12 --endpoint 7 --json

                SQL: SELECT job_id, endpoint_id, resent_from FROM courier.message_deliveries
                     WHERE message_id = 12;
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The message id.")
        var id: String
        @Option(help: ArgumentHelp("Only to this endpoint.", valueName: "id"))
        var endpoint: String?

        func run() throws {
            let id = try MessagesCommand.id(self.id)
            let endpointID = try endpoint.map { try EndpointsCommand.id($0) }
            let connection = try database.connect()
            defer { connection.close() }
            let resent = try WebhookStore(connection: connection).resend(messageID: id, endpointID: endpointID)
            if output.json {
                try Output.json(["message_id": id, "webhook_id": "msg_\(id)", "deliveries": WebhookOutput.resentJSON(resent)])
            } else {
                print(
                    "Re-sent message \(id) (msg_\(id)) as \(WebhookOutput.plural(resent.count, "delivery", "deliveries")): "
                        + "jobs \(WebhookOutput.jobIDs(resent)).")
            }
        }
    }
}

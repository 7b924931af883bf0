import ArgumentParser
import CourierCLISupport
import CourierCore
import Foundation

/// `courier publish`: one event through `courier.publish`, to every matching endpoint.
struct PublishCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish an event: one message, one delivery per matching endpoint of its tenant.",
        discussion: """
            The same as a producer's SELECT courier.publish(...): the message is written
            with one job per enabled endpoint of the tenant whose event types and
            payload filter match, each carrying webhook-id msg_<id>. A message that
            matches no endpoint is kept (it can be re-sent to an endpoint later). With
            an --idempotency-key the tenant used already, the first message's id is
            printed and nothing new is sent.

            Examples:
              courier publish --type invoice.paid --tenant acme --data '{"id":"in_42"}'
              courier publish --type order.paid --data @order.json --idempotency-key o-42
              producer | courier publish --type order.paid --data - --json

            SQL: SELECT courier.publish(event_type => 'invoice.paid',
                     payload => '{"invoice":"in_42"}', tenant => 'acme');
            """
    )

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions
    @Option(help: ArgumentHelp("Event type: dot-separated words, e.g. invoice.paid.", valueName: "type"))
    var type: String
    @Option(help: ArgumentHelp("The payload, any JSON value: inline, @file, or - for stdin.", valueName: "json"))
    var data: String
    @Option(help: "The tenant whose endpoints receive it (default: none, the internal endpoints).")
    var tenant: String?
    @Option(name: .customLong("idempotency-key"), help: "Unique per tenant: publishing it again sends nothing new.")
    var idempotencyKey: String?

    func run() throws {
        let payload = try Self.payload(data)
        let connection = try database.connect()
        defer { connection.close() }
        let result = try WebhookStore(connection: connection).publish(
            eventType: type, payload: payload, tenant: tenant, idempotencyKey: idempotencyKey)
        let id = result.messageID
        if output.json {
            try Output.json([
                "id": id, "webhook_id": "msg_\(id)", "endpoints": result.endpoints, "duplicate": result.duplicate,
            ])
        } else if result.duplicate {
            print("The idempotency key was already published as message \(id); nothing new was sent.")
        } else if result.endpoints == 0 {
            print("Published message \(id) (msg_\(id)); it matched no endpoint; the message is kept.")
        } else {
            print("Published message \(id) (msg_\(id)) to \(WebhookOutput.plural(result.endpoints, "endpoint", "endpoints")).")
        }
    }

    /// `--data`: inline, `@file` or `-` (stdin); UTF-8 JSON, checked here so a typo is named
    /// before the statement runs.
    static func payload(_ argument: String) throws -> String {
        let bytes: Data
        if argument == "-" {
            bytes = FileHandle.standardInput.readDataToEndOfFile()
        } else if argument.hasPrefix("@") {
            let path = String(argument.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError.usage("--data @\(path): cannot read the file")
            }
            bytes = data
        } else {
            bytes = Data(argument.utf8)
        }
        guard let text = String(data: bytes, encoding: .utf8),
            (try? JSONSerialization.jsonObject(with: bytes, options: [.fragmentsAllowed])) != nil
        else {
            throw CLIError.usage("--data is not JSON: the payload must be a JSON value, e.g. '{\"invoice\":\"in_42\"}'")
        }
        return text
    }
}

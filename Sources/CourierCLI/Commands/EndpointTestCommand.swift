import ArgumentParser
import CourierCLISupport
import CourierCore
import CourierSecrets
import CourierWorker
import Foundation
import Logging

extension EndpointsCommand {
    /// `courier endpoints test`: one signed `courier.ping` from this process, through the
    /// worker's `HTTPDeliverer`, and the receiver's answer. Nothing is written.
    struct Test: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a signed courier.ping to an endpoint now and print its answer.",
            discussion: """
                The ping goes from this process, not through a queue or a worker, and
                nothing is written to the database. It is sent as a worker sends: the
                endpoint's URL and headers, webhook-id ping_<random>, and one
                webhook-signature per valid secret (opened with the secrets key), with the
                body

                  {"type":"courier.ping","timestamp":"...","data":{"endpoint_id":7}}

                Exit code 0 when the receiver answers 2xx, 1 otherwise (another status, a
                refused connection, a timeout). Private and loopback targets are refused, as
                by the worker, unless --allow-private-targets.

                Examples:
                  courier endpoints test 7
                  courier endpoints test 7 --timeout 5s --json
                  courier endpoints test 7 --allow-private-targets
                """
        )
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var secrets: SecretsKeyOptions
        @Argument(help: "The endpoint id.")
        var id: String
        @Flag(name: .customLong("allow-private-targets"), help: "Allow private, loopback and link-local targets.")
        var allowPrivateTargets = false
        @Option(help: ArgumentHelp("Total time for the request (at most 5m).", valueName: "duration"))
        var timeout = "10s"

        func run() throws {
            let id = try EndpointsCommand.id(self.id)
            let timeout = try parseDuration(self.timeout, flag: "--timeout")
            guard timeout > .zero, timeout <= .seconds(300) else { throw CLIError.usage("--timeout must be between 1ms and 5m") }
            let key = try secrets.load(for: "courier endpoints test")
            let connection = try database.connect()
            defer { connection.close() }
            let store = WebhookStore(connection: connection)
            let endpoint = try EndpointsCommand.endpoint(id, store: store)
            let sealed = try store.validSecrets(id)
            connection.close()
            // The deliverer opens them too; opening here first tells a wrong key (a usage
            // error, as for the worker) from a receiver's failure.
            for secret in sealed {
                do { _ = try key.open(secret.sealed, endpointID: id) } catch { throw CLIError.usage("\(error)") }
            }
            let ping = Self.ping(endpoint, secrets: sealed.map(\.sealed))
            var configuration = HTTPDelivererConfiguration()
            configuration.totalTimeout = timeout
            configuration.connectTimeout = min(timeout, Defaults.connectTimeout)
            configuration.allowPrivateTargets = allowPrivateTargets
            configuration.quickRetries = 0
            configuration.maximumConnectionsPerHost = 1
            configuration.secretsKey = key
            let deliverer = HTTPDeliverer(
                configuration: configuration, logger: Logger(label: "courier.endpoints.test", factory: { _ in SwiftLogNoOpLogHandler() }))
            defer { deliverer.shutdown() }
            let started = ContinuousClock.now
            let delivery = try blockingAwait { await deliverer.deliver(ping.job) }
            let elapsed = ContinuousClock.now - started
            try report(delivery, endpointID: id, webhookID: ping.webhookID, elapsed: elapsed)
        }

        /// The ping as a claimed job of the endpoint: its URL and headers, a fresh webhook-id,
        /// the Standard Webhooks body, its sealed secrets for the deliverer to sign with.
        static func ping(_ endpoint: EndpointInfo, secrets: [[UInt8]]) -> (job: ClaimedJob, webhookID: String) {
            var random = SystemRandomNumberGenerator()
            let webhookID = "ping_" + (0..<12).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &random)) }.joined()
            let timestamp = Output.timestamp(Date())
            let body = #"{"type":"courier.ping","timestamp":"\#(timestamp)","data":{"endpoint_id":\#(endpoint.id)}}"#
            let headers = WebhookOutput.storedHeaders(endpoint.headersJSON)
                + [("webhook-id", webhookID), ("Content-Type", "application/json")]
            let job = ClaimedJob(
                id: 0, queue: endpoint.queue, method: "POST", url: endpoint.url, headers: headers, body: Array(body.utf8),
                attempt: 1, maxAttempts: 1, schedule: RetrySchedule(delays: []), signingSecret: nil, queueMaxInFlight: nil,
                endpointID: endpoint.id, sealedEndpointSecrets: secrets)
            return (job, webhookID)
        }

        private func report(_ delivery: Delivery, endpointID: Int64, webhookID: String, elapsed: Duration) throws {
            let milliseconds = Int((elapsed.inSeconds * 1000).rounded())
            let excerpt = delivery.responseExcerpt.map { Output.clip(Redaction.message(Output.escaped($0)), 500) }
            let accepted = delivery.status.map { (200..<300).contains($0) } ?? false
            let error = delivery.error.map(Redaction.message)
            if output.json {
                try Output.json([
                    "endpoint_id": endpointID, "webhook_id": webhookID, "status": Output.orNull(delivery.status),
                    "duration_ms": milliseconds, "error": Output.orNull(accepted ? nil : error),
                    "response_excerpt": Output.orNull(excerpt),
                ])
            } else if let status = delivery.status {
                // A failed response's error is its status line (`HTTP 500 Internal Server Error`).
                print("\(accepted ? Self.statusLine(status) : error ?? "HTTP \(status)") in \(milliseconds) ms")
                if let excerpt { print("Response: \(excerpt)") }
            }
            guard !accepted else { return }
            if delivery.status != nil {
                throw CLIError("endpoint \(endpointID) did not accept the ping: \(error ?? "not a 2xx answer")")
            }
            throw CLIError("endpoint \(endpointID): \(error ?? "no answer") (after \(milliseconds) ms; nothing was written)")
        }

        /// `HTTP 200 OK` for a 2xx status (failures carry their status line in the delivery's
        /// error, with the receiver's own reason phrase).
        static func statusLine(_ status: Int) -> String {
            let reasons = [
                200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
                205: "Reset Content", 206: "Partial Content",
            ]
            return "HTTP \(status)" + (reasons[status].map { " " + $0 } ?? "")
        }
    }
}

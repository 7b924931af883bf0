import CourierCLISupport
import CourierCore
import CourierSecrets
import Foundation
import Postgres

/// The `webhooks` scenario: what publishing costs a producer next to `courier.enqueue`, one
/// publish fanning out to 100 endpoints, and a worker draining fan-out deliveries (signed with
/// each endpoint's secret) next to a drain of plain jobs.
extension BenchRunner {
    /// The three parts, each its own result row.
    package func webhooks(jobs: Int) throws -> [BenchResult] {
        let keyFile = TemporaryFile("courier-bench-secrets-\(getpid()).key")
        defer { keyFile.remove() }
        let keyBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try Data((Data(keyBytes).base64EncodedString() + "\n").utf8).write(to: URL(fileURLWithPath: keyFile.path))
        let key = try SecretsKey(bytes: keyBytes)
        return [
            try publishRate(key: key),
            try publishFanout(key: key, endpoints: 100, publishes: 200),
            try webhookDrain(key: key, keyFile: keyFile.path, jobs: jobs),
        ]
    }

    private var webhooks: WebhookStore { WebhookStore(connection: connection) }

    /// Replaces tenant `tenant`'s endpoints with `count` new ones to the sink, in `queue`.
    private func endpoints(tenant: String, count: Int, queue: String, key: SecretsKey) throws {
        for statement in BenchStatements.resetTenant { try connection.run(statement, tenant) }
        for n in 0..<count {
            _ = try webhooks.addEndpoint(
                NewEndpoint(url: sink.url("/hook?endpoint=\(n)"), eventTypes: ["invoice.*"], tenant: tenant, queue: queue),
                seal: { key.seal(SecretsKey.newWebhookSecret(), endpointID: $0) })
        }
    }

    /// The payload of message `n` (the same ~200 bytes `drain` sends).
    private static func eventPayload(_ n: Int) -> String { String(decoding: payload(n), as: UTF8.self) }

    /// Calls of `courier.enqueue` and of `courier.publish` to one endpoint, alternating rounds
    /// so both see the same machine: one call per transaction (what a producer's request
    /// does), and 100 calls per transaction.
    private func publishRate(key: SecretsKey) throws -> BenchResult {
        let tenant = "bench-publish-1"
        let publishQueue = "bench-publish-1"
        let enqueueQueue = "bench-enqueue-1"
        try endpoints(tenant: tenant, count: 1, queue: publishQueue, key: key)
        try reset(publishQueue)
        try reset(enqueueQueue)
        let rounds = 5
        let single = 1000
        let batched = 5000
        say("webhooks: publish to 1 endpoint vs enqueue, \(rounds) alternating rounds of \(Output.count(single)) single and \(Output.count(batched)) batched calls...")
        var enqueueSingle = 0.0, publishSingle = 0.0, enqueueBatched = 0.0, publishBatched = 0.0
        func time(_ count: Int, perTransaction: Int, _ call: (Int) throws -> Void) throws -> Double {
            let started = Date()
            var n = 0
            while n < count {
                let size = min(perTransaction, count - n)
                if perTransaction == 1 {
                    try call(n)
                } else {
                    try connection.transaction { _ in for i in n..<(n + size) { try call(i) } }
                }
                n += size
            }
            return Date().timeIntervalSince(started)
        }
        let url = sink.url("/hook")
        let enqueue: (Int) throws -> Void = { n in
            try connection.run(BenchStatements.enqueueJSON, (url: url, payload: Self.eventPayload(n), queue: enqueueQueue))
        }
        let publish: (Int) throws -> Void = { n in
            try connection.run(BenchStatements.publish, (eventType: "invoice.paid", payload: Self.eventPayload(n), tenant: tenant))
        }
        try store.setPaused(enqueueQueue, true)
        try store.setPaused(publishQueue, true)
        for _ in 0..<rounds {
            enqueueSingle += try time(single, perTransaction: 1, enqueue)
            publishSingle += try time(single, perTransaction: 1, publish)
            enqueueBatched += try time(batched, perTransaction: 100, enqueue)
            publishBatched += try time(batched, perTransaction: 100, publish)
        }
        let published: Int = try connection.run(BenchStatements.queueJobs, publishQueue)[0].decode(0)
        let total = rounds * (single + batched)
        guard published == total else { throw CLIError("webhooks: \(published) deliveries for \(total) publishes") }
        try reset(publishQueue)
        try reset(enqueueQueue)
        for statement in BenchStatements.resetTenant { try connection.run(statement, tenant) }
        let rate = { (seconds: Double, count: Int) in Double(rounds * count) / seconds }
        let singleRatio = rate(publishSingle, single) / rate(enqueueSingle, single)
        let batchedRatio = rate(publishBatched, batched) / rate(enqueueBatched, batched)
        var result = BenchResult(
            name: "publish-1", jobs: rounds * (single + batched), seconds: publishSingle + publishBatched, cpuPerThousand: nil,
            peakRSS: nil,
            detail: String(
                format: "one per transaction: publish %@/s, enqueue %@/s (%.0f%%); 100 per transaction: publish %@/s, enqueue %@/s (%.0f%%)",
                Output.count(Int(rate(publishSingle, single))), Output.count(Int(rate(enqueueSingle, single))), singleRatio * 100,
                Output.count(Int(rate(publishBatched, batched))), Output.count(Int(rate(enqueueBatched, batched))),
                batchedRatio * 100))
        result.extra["publish_single_per_second"] = rate(publishSingle, single).rounded()
        result.extra["enqueue_single_per_second"] = rate(enqueueSingle, single).rounded()
        result.extra["publish_batched_per_second"] = rate(publishBatched, batched).rounded()
        result.extra["enqueue_batched_per_second"] = rate(enqueueBatched, batched).rounded()
        result.extra["publish_vs_enqueue_single"] = (singleRatio * 1000).rounded() / 1000
        result.extra["publish_vs_enqueue_batched"] = (batchedRatio * 1000).rounded() / 1000
        return result
    }

    /// `publishes` messages, one per transaction, each to `endpoints` endpoints.
    private func publishFanout(key: SecretsKey, endpoints count: Int, publishes: Int) throws -> BenchResult {
        let tenant = "bench-publish-\(count)"
        let queue = "bench-publish-\(count)"
        try endpoints(tenant: tenant, count: count, queue: queue, key: key)
        try reset(queue)
        try store.setPaused(queue, true)
        say("webhooks: \(publishes) publishes, each to \(count) endpoints...")
        var latencies: [Double] = []
        let started = Date()
        for n in 0..<publishes {
            let one = Date()
            try connection.run(BenchStatements.publish, (eventType: "invoice.paid", payload: Self.eventPayload(n), tenant: tenant))
            latencies.append(Date().timeIntervalSince(one) * 1000)
        }
        let seconds = Date().timeIntervalSince(started)
        let written: Int = try connection.run(BenchStatements.queueJobs, queue)[0].decode(0)
        guard written == publishes * count else { throw CLIError("webhooks: \(written) deliveries for \(publishes) x \(count)") }
        try reset(queue)
        for statement in BenchStatements.resetTenant { try connection.run(statement, tenant) }
        latencies.sort()
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, Int(Double(latencies.count - 1) * 0.99))]
        var result = BenchResult(
            name: "publish-\(count)", jobs: written, seconds: seconds, cpuPerThousand: nil, peakRSS: nil,
            detail: String(format: "one publish to %d endpoints: p50 %.1f ms, p99 %.1f ms (%@ deliveries written/s)", count, p50, p99,
                           Output.count(Int(Double(written) / seconds))))
        result.extra["endpoints"] = count
        result.extra["publish_ms_p50"] = (p50 * 100).rounded() / 100
        result.extra["publish_ms_p99"] = (p99 * 100).rounded() / 100
        return result
    }

    /// A drain of `jobs` fan-out deliveries (10 endpoints at the sink, each delivery signed)
    /// beside drains of as many plain jobs, unsigned and signed, in turns over five rounds; the
    /// medians of each.
    private func webhookDrain(key: SecretsKey, keyFile: String, jobs: Int) throws -> BenchResult {
        let tenant = "bench-drain"
        let queue = "bench-webhooks"
        let endpointCount = 10
        let messages = max(1, jobs / endpointCount)
        let deliveries = messages * endpointCount
        let workerFlags = ["--secrets-key-file", keyFile]
        let rounds = 5
        let plainQueue = "bench-webhooks-plain"
        let signedPlainQueue = "bench-webhooks-signed"
        try endpoints(tenant: tenant, count: endpointCount, queue: queue, key: key)
        // Plain jobs twice: unsigned, and in a queue with a signing secret, which pays the same
        // HMAC per request as an endpoint's delivery; the fan-out's own cost is the difference
        // to the second.
        var change = QueueSettingsChange()
        change.signingSecret = .some(SecretsKey.newWebhookSecret())
        try store.update(signedPlainQueue, change)
        var plain: [BenchResult] = []
        var signedPlain: [BenchResult] = []
        var fanned: [BenchResult] = []
        // The order turns every round, so none of the three always drains after the others'
        // dead rows; each drain starts from a vacuumed, analyzed table (`settle`).
        enum Kind: CaseIterable { case plain, signedPlain, webhooks }
        for round in 0..<rounds {
            let order = (0..<3).map { Kind.allCases[($0 + round) % 3] }
            say("webhooks: drain round \(round + 1) of \(rounds): \(Output.count(deliveries)) each of plain jobs, signed plain jobs and fan-out deliveries...")
            for kind in order {
                switch kind {
                case .plain:
                    plain.append(try drainLike(
                        name: "drain-plain", queue: plainQueue, jobs: deliveries, path: "/hook", retrySchedule: nil,
                        extraWorker: workerFlags, settle: true).0)
                case .signedPlain:
                    signedPlain.append(try drainLike(
                        name: "drain-plain-signed", queue: signedPlainQueue, jobs: deliveries, path: "/hook", retrySchedule: nil,
                        extraWorker: workerFlags, settle: true).0)
                case .webhooks:
                    fanned.append(try fanoutDrain(queue: queue, tenant: tenant, messages: messages, workerFlags: workerFlags))
                }
            }
        }
        try reset(queue)
        try reset(plainQueue)
        try reset(signedPlainQueue)
        for statement in BenchStatements.resetTenant { try connection.run(statement, tenant) }
        func median(_ results: [BenchResult]) -> BenchResult {
            results.sorted { $0.rate < $1.rate }[results.count / 2]
        }
        var result = median(fanned)
        let plainMedian = median(plain)
        let signedMedian = median(signedPlain)
        // Rounded as the JSON and the goal line give them, so every place prints the same figure.
        let ratio = (result.rate / plainMedian.rate * 1000).rounded() / 1000
        let signedRatio = (result.rate / signedMedian.rate * 1000).rounded() / 1000
        func rates(_ results: [BenchResult]) -> String { results.map { Output.count(Int($0.rate)) }.joined(separator: ", ") }
        func serverCPU(_ result: BenchResult) -> String {
            (result.extra["server_cpu_seconds_per_1000_jobs"] as? Double).map { String(format: "%.3f", $0) } ?? "-"
        }
        result.detail = String(
            format: "%d endpoints, signed; plain jobs: %@ jobs/s (%.0f%%), signed plain jobs: %@ jobs/s (%.0f%%); worker CPU s/1K plain %.3f, signed plain %.3f; PostgreSQL CPU s/1K webhooks %@, plain %@, signed plain %@; rounds: webhooks %@, plain %@, signed plain %@",
            endpointCount, Output.count(Int(plainMedian.rate)), ratio * 100, Output.count(Int(signedMedian.rate)),
            signedRatio * 100, plainMedian.cpuPerThousand ?? 0, signedMedian.cpuPerThousand ?? 0, serverCPU(result),
            serverCPU(plainMedian), serverCPU(signedMedian), rates(fanned), rates(plain), rates(signedPlain))
        result.extra["plain_jobs_per_second"] = plainMedian.rate.rounded()
        result.extra["plain_worker_cpu_seconds_per_1000_jobs"] = Output.orNull(plainMedian.cpuPerThousand)
        result.extra["signed_plain_jobs_per_second"] = signedMedian.rate.rounded()
        result.extra["signed_plain_worker_cpu_seconds_per_1000_jobs"] = Output.orNull(signedMedian.cpuPerThousand)
        result.extra["webhooks_vs_plain"] = (ratio * 1000).rounded() / 1000
        result.extra["webhooks_vs_signed_plain"] = (signedRatio * 1000).rounded() / 1000
        return result
    }

    /// Publishes `messages` messages to tenant `tenant`'s endpoints (100 per transaction, the
    /// queue paused), then times a worker draining them.
    private func fanoutDrain(queue: String, tenant: String, messages: Int, workerFlags: [String]) throws -> BenchResult {
        try reset(queue)
        for statement in BenchStatements.resetTenant.dropFirst() { try connection.run(statement, tenant) }
        try store.setPaused(queue, true)
        var n = 0
        while n < messages {
            let size = min(100, messages - n)
            try connection.transaction { connection in
                for i in n..<(n + size) {
                    try connection.run(
                        BenchStatements.publish, (eventType: "invoice.paid", payload: Self.eventPayload(i), tenant: tenant))
                }
            }
            n += size
        }
        let deliveries: Int = try connection.run(BenchStatements.queueJobs, queue)[0].decode(0)
        try connection.simpleQuery(BenchStatements.settleJobs.sql)
        return try timeDrain(name: "drain-webhooks", queue: queue, jobs: deliveries, extraWorker: workerFlags)
    }
}

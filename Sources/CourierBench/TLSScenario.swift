import CourierCLISupport
import CourierSink
import Foundation

/// The files of a certificate authority made for one benchmark run and of the sink's
/// certificate for `receiver.localhost` that it signed (`SinkCertificateAuthority`), in
/// temporary files removed with the value, or on Ctrl-C.
struct BenchCertificates {
    /// The name the server certificate is for; the worker resolves it to 127.0.0.1.
    static let serverName = "receiver.localhost"

    private let files: [String: TemporaryFile]
    /// The sink's certificate and key.
    let sink: SinkTLS

    /// The authority's certificate, what the worker trusts.
    var authority: String { files["ca.pem"]!.path }

    static func make() throws -> BenchCertificates {
        let files = Dictionary(uniqueKeysWithValues: SinkCertificateAuthority.fileNames.map { name in
            (name, TemporaryFile("courier-bench-tls-\(getpid())-\(name)"))
        })
        do {
            let sink = try SinkCertificateAuthority.make(serverName: serverName) { files[$0]!.path }
            return BenchCertificates(files: files, sink: sink)
        } catch {
            throw CLIError("tls: \(error)")
        }
    }
}

extension BenchRunner {
    /// The drain to one host over HTTPS: a sink of its own with a certificate for
    /// `receiver.localhost` signed by a CA made for the run, which the worker trusts with
    /// `--tls-ca-file`; the name resolves to the sink with `--resolve`.
    package func tls(jobs: Int) throws -> BenchResult {
        say("tls: \(Output.count(jobs)) jobs to one host over HTTPS...")
        let certificates = try BenchCertificates.make()
        let ok: [UInt8] = Array(#"{"ok":true}"#.utf8)
        let files = certificates.sink
        let tlsSink = try blockingAwait {
            try await HTTPSink.start(
                tls: files,
                immediate: { _ in .respond(status: 200, headers: [("Content-Type", "application/json")], body: ok) })
        }
        defer { _ = try? blockingAwait { await tlsSink.shutdown() } }
        // The files are removed when `certificates` goes away: keep it until the drain is over.
        var (result, enqueueSeconds) = try withExtendedLifetime(certificates) { try drainLike(
            name: "tls", queue: "bench-tls", jobs: jobs, path: "/hook", retrySchedule: nil,
            extraWorker: Self.resolveLocalhost + ["--tls-ca-file", certificates.authority],
            base: "https://\(BenchCertificates.serverName):\(tlsSink.port)") }
        result.detail = "HTTPS, test CA; bulk enqueue \(Output.count(Int(Double(jobs) / enqueueSeconds)))/s; \(Self.claimDetail(result))"
        return result
    }
}

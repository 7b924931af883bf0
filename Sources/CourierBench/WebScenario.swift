import CourierCLISupport
import CourierCore
import CourierWeb
import Foundation
import Logging
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `web` scenario of `courier bench`: the console's pages timed over HTTP next to a large
/// history of finished jobs.
extension BenchRunner {
    /// Loads `history` succeeded jobs (each with its attempt row, as `scale` does), 20,000
    /// dead letters and 2,000 waiting jobs, starts the console in this process on 127.0.0.1,
    /// logs in, and requests each page 3 times to warm up and 20 times timed (the whole HTTP
    /// round trip: session check, statements, rendering); then times the read of the last
    /// hour's traffic that the pages share (`WebStore.traffic`) the same way, without HTTP.
    func web(history: Int) throws -> [BenchResult] {
        let historyQueue = "bench-history"
        let deadQueue = "bench-dead"
        let dueQueue = "bench-due"
        for queue in [historyQueue, deadQueue, dueQueue] { try reset(queue) }
        say("web: loading \(Output.count(history)) finished jobs with their attempt rows...")
        let span = 6.0 * 86_400
        try load(queue: historyQueue, count: history, span: span)
        try load(queue: deadQueue, count: 20_000, span: span)
        try connection.run(WebStatements.benchMakeDead, deadQueue)
        _ = try AdminStore(connection: connection).importJobs(makeJobs(2_000, path: "/hook", queue: dueQueue), skipInvalid: false)
        try AdminStore(connection: connection).setPaused(dueQueue, true)
        for statement in BenchStatements.settleHistory { try connection.run(statement) }
        try connection.run(WorkerStatements.foldJobCounts)

        let secret = UUID().uuidString + UUID().uuidString
        var configuration = WebConfiguration(databaseURL: databaseURL, password: try WebPassword(fileContents: secret))
        configuration.port = 0
        var logger = Logger(label: "courier.bench.web")
        // Stopping an in-process server by cancellation makes Hummingbird log an error; not news.
        logger.logLevel = .critical
        let settings = configuration
        let log = logger
        let server = try blockingAwait { try await WebServer.start(settings, logger: log) }
        defer { try? blockingAwait { await server.stop() } }
        let client = BenchHTTP(base: "http://127.0.0.1:\(server.port)")
        try client.login(password: secret)

        let someJob: Int64 = try connection.run(WebStatements.benchNewestJob, historyQueue)[0].decode(0)
        let deadJob: Int64 = try connection.run(WebStatements.benchNewestJob, deadQueue)[0].decode(0)
        let middle: Int64 = try connection.run(WebStatements.benchMiddleJob)[0].decode(0)
        let host = URLComponents(string: sink.baseURL)?.host ?? "127.0.0.1"
        let pages = [
            "/queues", "/jobs", "/jobs?queue=\(historyQueue)", "/jobs?state=dead", "/jobs?state=pending",
            "/jobs?queue=\(historyQueue)&state=succeeded", "/jobs?host=\(host)", "/jobs?since=1h",
            "/jobs?url=%2Fhook", "/jobs?url=no-such-text", "/jobs?before=\(middle)",
            "/jobs/\(someJob)", "/jobs/\(deadJob)", "/dead", "/dead?queue=\(deadQueue)", "/dead?error=503",
            "/dead?before=\(deadJob - 10_000)", "/dead/requeue?queue=\(deadQueue)", "/destinations",
            "/queues/\(historyQueue)", "/queues/\(deadQueue)", "/destinations/\(host)",
        ]
        var results: [BenchResult] = []
        // The pages keep the last hour for a few seconds (`TrafficFeed`); the read behind it,
        // one pass over the hour's attempts for every queue and host, is timed on its own.
        let trafficRead = "(the hour's traffic read, every queue and host)"
        for page in pages + [trafficRead] {
            let fetch: () throws -> Int = page == trafficRead
                ? { _ = try WebStore(connection: self.connection).traffic(); return 200 }
                : { try client.get(page) }
            for _ in 0..<3 { _ = try fetch() }
            var times: [Double] = []
            for _ in 0..<20 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                let status = try fetch()
                times.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
                guard status == 200 else { throw CLIError("web: \(page) answered \(status)") }
            }
            times.sort()
            let p50 = times[times.count / 2]
            let p95 = times[Int(Double(times.count - 1) * 0.95)]
            let detail = String(format: "p50 %.1f p95 %.1f max %.1f ms %@", p50, p95, times.last ?? 0,
                                p95 < 100 ? "(met: < 100 ms)" : "(MISSED: >= 100 ms)")
            say("  \(page): \(detail)")
            var result = BenchResult(name: "web " + page, jobs: times.count, seconds: times.reduce(0, +) / 1000,
                                     cpuPerThousand: nil, peakRSS: nil, detail: detail)
            result.extra["page_ms_p50"] = (p50 * 100).rounded() / 100
            result.extra["page_ms_p95"] = (p95 * 100).rounded() / 100
            result.extra["history_rows"] = history
            results.append(result)
        }
        return results
    }

    private func load(queue: String, count: Int, span: Double) throws {
        let chunk = 250_000
        let step = count > 0 ? span * 1000 / Double(count) : 0
        var loaded = 0
        while loaded < count {
            let n = min(chunk, count - loaded)
            try connection.run(
                BenchStatements.loadFinished,
                .init(queue: queue, url: sink.url("/hook"), body: BenchRunner.payload(loaded), count: n,
                      firstAgo: .seconds(span - Double(loaded) * step / 1000), step: .milliseconds(step)))
            loaded += n
        }
    }
}

/// A small blocking HTTP client for the `web` scenario: keeps the session cookie and does not
/// follow redirects (the login's answer carries the cookie).
final class BenchHTTP: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    let base: String
    private var cookie: String?
    private lazy var session = URLSession(configuration: .ephemeral, delegate: self, delegateQueue: nil)

    init(base: String) { self.base = base }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func login(password: String) throws {
        var request = URLRequest(url: URL(string: base + "/login")!)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        let escaped = password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password
        request.httpBody = Data("name=bench&password=\(escaped)".utf8)
        let response = try send(request)
        guard let setCookie = response.value(forHTTPHeaderField: "Set-Cookie"),
            let pair = setCookie.split(separator: ";").first
        else { throw CLIError("web: the console refused the benchmark's login (status \(response.statusCode))") }
        cookie = String(pair)
    }

    /// GETs `path` and returns the status.
    func get(_ path: String) throws -> Int {
        var request = URLRequest(url: URL(string: base + path)!)
        if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
        return try send(request).statusCode
    }

    private func send(_ request: URLRequest) throws -> HTTPURLResponse {
        let semaphore = DispatchSemaphore(value: 0)
        let box = UncheckedBox<Result<HTTPURLResponse, any Error>?>(nil)
        session.dataTask(with: request) { _, response, error in
            if let response = response as? HTTPURLResponse {
                box.value = .success(response)
            } else {
                box.value = .failure(error ?? CLIError("web: no answer"))
            }
            semaphore.signal()
        }.resume()
        semaphore.wait()
        return try box.value!.get()
    }
}

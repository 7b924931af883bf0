import CourierCore
import CourierSecrets
import Foundation
import Logging
import RetryClient
import Tracing

/// How deliveries are sent.
public struct HTTPDelivererConfiguration: Sendable {
    /// Connect timeout (default ``Defaults/connectTimeout``, 10 s).
    public var connectTimeout: Duration = Defaults.connectTimeout
    /// Total time for one request, response head and excerpt included (default
    /// ``Defaults/totalTimeout``, 30 s).
    public var totalTimeout: Duration = Defaults.totalTimeout
    /// Bytes of the response body kept as the excerpt; the rest is not read (default
    /// ``Defaults/maximumExcerptBytes``, 20,000).
    public var maximumExcerptBytes: Int = Defaults.maximumExcerptBytes
    /// Allow private, loopback, link-local and other non-global targets (default false).
    public var allowPrivateTargets: Bool = false
    /// Connections kept per host (default 32; match the per-host in-flight cap).
    public var maximumConnectionsPerHost: Int = 32
    /// Connections open at once over all hosts, idle or busy (default 2,048); past it an idle
    /// connection picked at random is closed (``PooledHTTPTransport``).
    public var maximumConnections: Int = Defaults.maximumConnections
    /// A PEM file of certificate authorities trusted besides the system's (`--tls-ca-file`),
    /// for receivers with a private CA; nil (the default) trusts the system's only.
    public var trustedCAFile: String?
    /// In-process retries of a refused or reset connection (default 2): the first tier of
    /// docs/state-machine.md. Everything else goes back to the queue's schedule.
    public var quickRetries: Int = 2
    /// Delay before the first quick retry, doubling after (default 100 ms).
    public var quickRetryDelay: Duration = .milliseconds(100)
    /// The `User-Agent` sent unless the job sets one.
    public var userAgent: String = "Courier/0.1"
    /// Resolves target host names once per delivery when private targets are refused; the
    /// connection then goes to a checked address (default ``SystemResolver``, `getaddrinfo`).
    /// Not used when private targets are allowed: then the transport resolves as usual.
    public var resolver: any HostResolver = SystemResolver()
    /// Opens webhook endpoints' sealed secrets (`--secrets-key-file`); nil when the worker has
    /// none, and then a delivery of a signed endpoint waits (``DeliveryPolicy/Outcome/secretUnavailable``).
    public var secretsKey: SecretsKey?
    /// Makes each attempt a span (`courier.deliver`) whose `traceparent` the request carries;
    /// nil (the default) traces nothing and forwards the job's stored traceparent as it is.
    public var tracer: (any Tracer)?

    /// The defaults above.
    public init() {}
}

/// Sends claimed jobs through RetryClient: one shared `PooledHTTPTransport` (keep-alive
/// connections per host and checked address under one budget, no redirects, bounded excerpt,
/// connect and total timeouts), a Standard Webhooks signer when the
/// queue has a secret, and a `RetryPolicy` that retries a refused or reset connection in
/// process a couple of times. Any other failure ends the call and is classified for the
/// queue, which schedules the durable retry or the dead letter (`JobTransition`).
///
/// Before anything touches the network the request is checked (``RequestValidation``: method,
/// URL, port, header names and values); a violation is a permanent failure. Unless private
/// targets are allowed, the host is resolved once with the configured ``HostResolver``, every
/// address is checked (``TargetPolicy``), and the connection goes to the first checked address
/// only (``OutboundRequest/connectAddress``), so a rebinding DNS answer cannot redirect it;
/// the `Host` header, SNI and certificate checks keep the URL's host. Every request carries
/// `courier-job-id` and `courier-attempt` (and, when signed, `webhook-id`, stable across
/// retries) so receivers can deduplicate and trace, and `traceparent` when the job has a trace
/// context or the worker traces (``AttemptTracing``).
public final class HTTPDeliverer: Deliverer, Sendable {
    private let transport: any HTTPTransport
    private let ownedTransport: PooledHTTPTransport?
    private let configuration: HTTPDelivererConfiguration
    private let quickRetries: Interceptor
    private let logger: Logger
    private let tokens: OAuthTokenCache
    private let signers = EndpointSignerCache()

    /// Creates a deliverer with its own HTTP client; call `shutdown()` when done.
    public convenience init(configuration: HTTPDelivererConfiguration, logger: Logger) {
        let transport = PooledHTTPTransport(configuration: Self.transportConfiguration(configuration))
        self.init(configuration: configuration, transport: transport, ownedTransport: transport, logger: logger)
    }

    /// The transport's settings for `configuration`.
    static func transportConfiguration(_ configuration: HTTPDelivererConfiguration) -> PooledHTTPTransport.Configuration {
        var transport = PooledHTTPTransport.Configuration()
        transport.connectTimeout = configuration.connectTimeout
        transport.totalTimeout = configuration.totalTimeout
        transport.maximumExcerptBytes = configuration.maximumExcerptBytes
        transport.maximumConnectionsPerHost = configuration.maximumConnectionsPerHost
        transport.maximumConnections = configuration.maximumConnections
        transport.additionalTrustRootFiles = configuration.trustedCAFile.map { [$0] } ?? []
        return transport
    }

    /// Why the TLS settings of `configuration` cannot be used (``HTTPDelivererConfiguration/trustedCAFile``
    /// unreadable or holding no certificate), or `nil`.
    public static func tlsProblem(_ configuration: HTTPDelivererConfiguration) -> String? {
        PooledHTTPTransport.tlsProblem(in: transportConfiguration(configuration))
    }

    /// Creates a deliverer that sends through `transport` (tests: a transport that records or
    /// refuses); `shutdown()` leaves it alone.
    public convenience init(configuration: HTTPDelivererConfiguration, transport: any HTTPTransport, logger: Logger) {
        self.init(configuration: configuration, transport: transport, ownedTransport: nil, logger: logger)
    }

    private init(
        configuration: HTTPDelivererConfiguration, transport: any HTTPTransport,
        ownedTransport: PooledHTTPTransport?, logger: Logger
    ) {
        self.configuration = configuration
        self.logger = logger
        self.transport = transport
        self.ownedTransport = ownedTransport
        self.tokens = OAuthTokenCache(transport: transport)
        quickRetries = Interceptor(retriers: [Self.quickRetryPolicy(configuration)])
    }

    /// The in-process tier: exactly the transport failures ``DeliveryPolicy`` retries now, a
    /// couple of times with a short backoff; no status (a 401 with OAuth is the authenticator's).
    static func quickRetryPolicy(_ configuration: HTTPDelivererConfiguration) -> RetryPolicy {
        RetryPolicy(
            retryLimit: configuration.quickRetries,
            exponentialBackoffScale: configuration.quickRetryDelay,
            maximumBackoff: .seconds(1), retryableStatusCodes: [],
            retryableTransportErrorKinds: DeliveryPolicy.transportKinds(where: .retryNow))
    }

    /// Closes the client's connections.
    public func shutdown() {
        try? ownedTransport?.syncShutdown()
    }

    /// The pooled transport's connections; nil for a transport of another kind.
    public var connections: ConnectionStatistics? {
        guard let pooled = ownedTransport ?? (transport as? PooledHTTPTransport) else { return nil }
        let counts = pooled.connectionCounts
        return ConnectionStatistics(
            open: counts.open, idle: counts.idle, waiting: counts.waiting, evicted: pooled.connectionsEvicted)
    }

    public func deliver(_ job: ClaimedJob) async -> Delivery {
        guard let tracer = configuration.tracer else {
            return await send(job, traceparent: AttemptTracing.forwarded(job))
        }
        return await AttemptTracing.traced(job, tracer: tracer) { traceparent in
            await send(job, traceparent: traceparent)
        }
    }

    /// One attempt of `job`, its request naming `traceparent` unless the job's headers set one.
    private func send(_ job: ClaimedJob, traceparent: String?) async -> Delivery {
        var request = makeRequest(job, traceparent: traceparent)
        let host: String
        do {
            host = try request.validateRemembering().host
        } catch {
            return .failure(.invalidRequest, error: "invalid request: \(error)")
        }
        // Private targets allowed: the name is resolved by the connection itself, unless fixed
        // answers (`--resolve`) must steer it.
        if !configuration.allowPrivateTargets || configuration.resolver is OverrideResolver {
            switch await checkedAddress(of: host) {
            case .success(let address):
                request.connectAddress = address
            case .failure(let refusal):
                return refusal.delivery
            }
        }
        var adapters: [any RequestAdapter] = []
        var retriers = quickRetries.retriers
        if let oauth = job.oauth {
            // Before the quick retries: it handles 401 (fresh token, one retry), they do not.
            let authenticator = tokens.authenticator(for: oauth)
            adapters.append(authenticator)
            retriers.insert(authenticator, at: 0)
        }
        if let endpointID = job.endpointID, !job.sealedEndpointSecrets.isEmpty {
            // A webhook endpoint's own secrets replace the queue's: one signature per valid secret.
            guard let key = configuration.secretsKey else {
                return .failure(
                    .secretUnavailable,
                    error: "endpoint \(endpointID) signs its deliveries but this worker has no secrets key "
                        + "(--secrets-key-file or COURIER_SECRETS_KEY_FILE); nothing was sent")
            }
            do {
                adapters.append(try signers.signer(endpointID: endpointID, sealed: job.sealedEndpointSecrets) {
                    try StandardWebhookSigner(secrets: job.sealedEndpointSecrets.map { try key.open($0, endpointID: endpointID) })
                })
            } catch let error as SecretsKeyError {
                return .failure(.secretUnavailable, error: "\(error); nothing was sent")
            } catch {
                return .failure(.invalidRequest, error: "endpoint \(endpointID): \(error)")
            }
        } else if let secret = job.signingSecret {
            do {
                adapters.append(try StandardWebhookSigner(secrets: [secret]))
            } catch {
                return .failure(.invalidRequest, error: "queue \(job.queue): \(error)")
            }
        }
        let client = RetryingClient(
            transport: transport,
            interceptor: Interceptor(adapters: adapters, retriers: retriers),
            maximumInProcessDelay: .seconds(1), logger: logger)
        let (outcome, sent) = await client.sendTraced(request)
        var delivery = self.delivery(outcome)
        // Every request before the call's deciding one was repeated within this attempt: each
        // leaves its own row. (When the deciding try failed in an adapter, nothing of it was sent.)
        delivery.inProcess = sent.filter { $0.attempt < outcome.attempts }.map { earlier in
            switch earlier.result {
            case .success(let response):
                return InProcessAttempt(
                    startedAt: earlier.startedAt, finishedAt: earlier.finishedAt, status: response.status,
                    error: Self.classify(response).error ?? response.description, responseExcerpt: Self.excerpt(response))
            case .failure(let error):
                return InProcessAttempt(
                    startedAt: earlier.startedAt, finishedAt: earlier.finishedAt, status: nil,
                    error: Self.classify(error, configuration: configuration).error ?? error.description)
            }
        }
        return delivery
    }

    /// What a finished call produced: its last attempt decides.
    private func delivery(_ outcome: RetryOutcome) -> Delivery {
        switch outcome {
        case .delivered(let response, _):
            return Self.classify(response)
        case .retryLater(_, _, let last, _), .gaveUp(_, let last, _):
            switch last {
            case .response(let response):
                return Self.classify(response)
            case .transport(let error):
                return Self.classify(error, configuration: configuration)
            case .adapter(let error as OAuth2TokenError):
                // The token endpoint failed, not the receiver: the verdict leaves its breaker alone.
                return .failure(
                    error.isPermanent ? .tokenRejected : .tokenUnavailable, error: Redaction.message(error.description))
            case .adapter(let error):
                return .failure(.invalidRequest, error: "\(error)")
            }
        }
    }

    private struct Refusal: Error {
        var delivery: Delivery
    }

    /// The address to connect to for `host`: the literal itself, or the first address of one
    /// resolution when every address it returned is global (or private targets are allowed).
    /// `nil` connects as the URL says (an IP literal needs no pinning).
    private func checkedAddress(of host: String) async -> Result<String?, Refusal> {
        func refuse(_ address: IPAddress) -> Result<String?, Refusal> {
            .failure(Refusal(delivery: .failure(
                .refusedTarget,
                error: "refused private target: \(host) resolves to \(address) (allow with --allow-private-targets)")))
        }
        let checked = !configuration.allowPrivateTargets
        if let literal = IPAddress(host) {
            return literal.isGlobal || !checked ? .success(nil) : refuse(literal)
        }
        let addresses: [IPAddress]
        do {
            addresses = try await configuration.resolver.resolve(host)
        } catch {
            return .failure(Refusal(delivery: .failure(.transport(.dnsFailure), error: "\(error)")))
        }
        guard let first = addresses.first else {
            return .failure(Refusal(delivery: .failure(
                .transport(.dnsFailure), error: "DNS lookup of \(host) returned no address")))
        }
        if checked, let bad = TargetPolicy.firstNonGlobal(addresses) { return refuse(bad) }
        return .success(first.description)
    }

    /// The request of one attempt of `job`, naming `traceparent` unless the job's headers set one.
    ///
    /// The job's fields in their order, but for the three the worker always sets itself, then
    /// the worker's: `User-Agent` and `traceparent` unless the job has them, `courier-job-id`,
    /// `courier-attempt`, `webhook-id` unless the job has one, `webhook-timestamp`. One pass over
    /// the job's fields and one allocation.
    func makeRequest(_ job: ClaimedJob, traceparent: String?) -> OutboundRequest {
        var headers = HeaderFields()
        headers.reserveCapacity(job.headers.count + 6)
        var hasUserAgent = false
        var hasTraceparent = false
        var hasWebhookID = false
        for (name, value) in job.headers {
            if HeaderFields.sameName(name, "courier-job-id") || HeaderFields.sameName(name, "courier-attempt")
                || HeaderFields.sameName(name, "webhook-timestamp")
            {
                continue
            }
            if HeaderFields.sameName(name, "user-agent") {
                hasUserAgent = true
            } else if HeaderFields.sameName(name, "traceparent") {
                hasTraceparent = true
            } else if HeaderFields.sameName(name, "webhook-id") {
                hasWebhookID = true
            }
            headers.add(name, value)
        }
        if !hasUserAgent { headers.add("User-Agent", configuration.userAgent) }
        // A traceparent the producer put in the job's own headers is its choice and is kept.
        if let traceparent, !hasTraceparent { headers.add("traceparent", traceparent) }
        headers.add("courier-job-id", String(job.id))
        headers.add("courier-attempt", String(job.attempt))
        // Standard Webhooks' id and timestamp on every delivery, signed or not: the id is the
        // job's, the same on every attempt, so any receiver can drop a duplicate (a producer's
        // own webhook-id is kept). A signed queue's signer sets the timestamp again as it signs.
        if !hasWebhookID { headers.add("webhook-id", "job_\(job.id)") }
        headers.add("webhook-timestamp", String(Int64(Date().timeIntervalSince1970.rounded(.down))))
        return OutboundRequest(method: job.method, url: job.url, headers: headers, body: job.body)
    }

    /// The excerpt as text: NUL removed (text columns cannot hold it), invalid UTF-8 replaced,
    /// never longer than the byte limit.
    static func excerpt(_ response: HTTPResponseSummary) -> String? {
        guard !response.bodyExcerpt.isEmpty else { return nil }
        var text = String(decoding: response.bodyExcerpt, as: UTF8.self)
        if text.utf8.contains(0) { text = text.replacingOccurrences(of: "\0", with: "") }
        while text.utf8.count > response.bodyExcerpt.count { text.removeLast() }
        return text
    }

    /// What a response produced: ``DeliveryPolicy``'s verdict for its status (with
    /// `Retry-After` when sent and readable), the excerpt, and an error line for anything but a
    /// success.
    static func classify(_ response: HTTPResponseSummary) -> Delivery {
        let status = response.status
        let retryAfter = response.header("retry-after").flatMap { RetryPolicy.parseRetryAfter($0, now: Date()) }
        var description = "HTTP \(status) \(response.reason)"
        if (300..<400).contains(status) { description += " (redirects are not followed)" }
        return .response(status: status, error: description, retryAfter: retryAfter, responseExcerpt: excerpt(response))
    }

    /// What a transport failure produced: ``DeliveryPolicy``'s verdict for its kind, with a
    /// message for people.
    static func classify(_ error: TransportError, configuration: HTTPDelivererConfiguration) -> Delivery {
        let message: String
        switch error.kind {
        case .invalidRequest: message = "invalid URL or request: \(error.message.prefix(200))"
        case .tlsFailure: message = "TLS failure: \(error.message.prefix(200))"
        case .connectRefused: message = "connection refused"
        case .connectionReset: message = "connection reset before a complete response"
        case .connectTimeout: message = "connect timeout after \(configuration.connectTimeout.components.seconds) s"
        case .readTimeout: message = "timeout after \(configuration.totalTimeout.components.seconds) s"
        case .dnsFailure: message = "DNS lookup failed: \(error.message.prefix(200))"
        default: message = "transport error: \(error.message.prefix(200))"
        }
        return .failure(.transport(error.kind), error: message)
    }
}

/// Signers of webhook endpoints, by endpoint and sealed secrets: a delivery to an endpoint whose
/// secrets have not changed reuses the signer, so the secrets are opened (AES-GCM) and decoded
/// once, not at every delivery. A rotation changes the sealed values and so makes a new entry.
final class EndpointSignerCache: @unchecked Sendable {
    private struct Key: Hashable {
        var endpointID: Int64
        var sealed: [[UInt8]]
    }

    private let lock = NSLock()
    // Guarded by `lock`.
    private var signers: [Key: StandardWebhookSigner] = [:]
    /// Entries kept at most; past it the cache starts again (secrets change rarely, endpoints
    /// are many).
    private let capacity: Int

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// The signer for these sealed secrets of `endpointID`, made by `make` on first use.
    func signer(endpointID: Int64, sealed: [[UInt8]], make: () throws -> StandardWebhookSigner) throws
        -> StandardWebhookSigner
    {
        let key = Key(endpointID: endpointID, sealed: sealed)
        if let known = lock.withLock({ signers[key] }) { return known }
        let signer = try make()
        lock.withLock {
            if signers.count >= capacity { signers.removeAll(keepingCapacity: true) }
            signers[key] = signer
        }
        return signer
    }
}


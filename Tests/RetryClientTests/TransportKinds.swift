import RetryClient

/// A transport a test can shut down: both production transports.
protocol ProductionTransport: HTTPTransport {
    func shutdown() async throws
}

extension AsyncHTTPClientTransport: ProductionTransport {}
extension PooledHTTPTransport: ProductionTransport {}

/// The production transports, so one test checks a guarantee of each.
enum TransportKind: CaseIterable, CustomStringConvertible {
    case asyncHTTPClient
    case pooled

    var description: String {
        switch self {
        case .asyncHTTPClient: "AsyncHTTPClientTransport"
        case .pooled: "PooledHTTPTransport"
        }
    }

    /// A transport of this kind with these bounds, the other settings at their defaults.
    func make(
        totalTimeout: Duration, connectTimeout: Duration, excerptLimit: Int = Defaults.maximumExcerptBytes
    ) -> any ProductionTransport {
        switch self {
        case .asyncHTTPClient:
            var configuration = AsyncHTTPClientTransport.Configuration()
            configuration.totalTimeout = totalTimeout
            configuration.connectTimeout = connectTimeout
            configuration.maximumExcerptBytes = excerptLimit
            return AsyncHTTPClientTransport(configuration: configuration)
        case .pooled:
            var configuration = PooledHTTPTransport.Configuration()
            configuration.totalTimeout = totalTimeout
            configuration.connectTimeout = connectTimeout
            configuration.maximumExcerptBytes = excerptLimit
            return PooledHTTPTransport(configuration: configuration)
        }
    }
}

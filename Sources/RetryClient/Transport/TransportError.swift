/// Why a request got no HTTP response at all.
///
/// A non-2xx status is not a transport error: it arrives as an ``HTTPResponseSummary``.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed set of transport failures; each names what a retry policy needs to know.
    public enum Kind: String, Sendable, Equatable, Hashable, CaseIterable {
        /// Nothing listens on the port (ECONNREFUSED).
        case connectRefused
        /// The connection was not established within the connect timeout.
        case connectTimeout
        /// The host name could not be resolved.
        case dnsFailure
        /// The peer closed or reset the connection before the response was complete.
        case connectionReset
        /// The response did not arrive (or stalled) within the read or total timeout.
        case readTimeout
        /// TLS handshake or certificate verification failed.
        case tlsFailure
        /// The body was larger than a transport limit allowed.
        case bodyTooLarge
        /// The peer sent something that is not valid HTTP.
        case invalidResponse
        /// The request itself is unusable: a malformed URL, no host, an unsupported scheme.
        case invalidRequest
        /// The network is not reachable (also the kind a stub uses for "offline").
        case notConnected
        /// Anything else, including cancellation.
        case other
    }

    /// What kind of failure this is; stable, suitable as a metric label.
    public var kind: Kind
    /// A human explanation, for logs and the job's last error.
    public var message: String

    /// Creates an error.
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    /// `"connectRefused: Connection refused"`.
    public var description: String { "\(kind.rawValue): \(message)" }
}

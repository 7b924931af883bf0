/// Why a request got no HTTP response at all.
///
/// A non-2xx status is not a transport error: it arrives as an ``HTTPResponseSummary``.
///
/// The kinds are static members of ``Kind``, a struct, not cases of an enum (as
/// AsyncHTTPClient's `HTTPClientError`): a later version can add a kind without breaking a
/// caller's `switch`, which always needs a `default`. Compare with `==` or match with `case`:
/// `if error.kind == .connectRefused`, `case .readTimeout:`.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of transport failure this is; each names what a retry policy needs to know.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: String, Sendable, CaseIterable {
            case connectRefused, connectTimeout, dnsFailure, connectionReset, readTimeout, tlsFailure, bodyTooLarge,
                invalidResponse, invalidRequest, notConnected, other
        }

        private let code: Code

        private init(_ code: Code) { self.code = code }

        /// Nothing listens on the port (ECONNREFUSED).
        public static let connectRefused = Kind(.connectRefused)
        /// The connection was not established within the connect timeout.
        public static let connectTimeout = Kind(.connectTimeout)
        /// The host name could not be resolved.
        public static let dnsFailure = Kind(.dnsFailure)
        /// The peer closed or reset the connection before the response was complete.
        public static let connectionReset = Kind(.connectionReset)
        /// The response did not arrive (or stalled) within the read or total timeout.
        public static let readTimeout = Kind(.readTimeout)
        /// TLS handshake or certificate verification failed.
        public static let tlsFailure = Kind(.tlsFailure)
        /// The body was larger than a transport limit allowed.
        public static let bodyTooLarge = Kind(.bodyTooLarge)
        /// The peer sent something that is not valid HTTP.
        public static let invalidResponse = Kind(.invalidResponse)
        /// The request itself is unusable: a malformed URL, no host, an unsupported scheme.
        public static let invalidRequest = Kind(.invalidRequest)
        /// The network is not reachable (also the kind a stub uses for "offline").
        public static let notConnected = Kind(.notConnected)
        /// Anything else, including cancellation.
        public static let other = Kind(.other)

        /// Every kind this version knows, for tables and tests; later versions may add more.
        public static var allCases: [Kind] { Code.allCases.map(Kind.init) }

        /// The stable name, e.g. `"connectRefused"`: the metric label and the prefix of
        /// ``TransportError/description``.
        public var rawValue: String { code.rawValue }

        /// The kind named `rawValue`, or nil.
        public init?(rawValue: String) {
            guard let code = Code(rawValue: rawValue) else { return nil }
            self.code = code
        }

        /// The same as ``rawValue``.
        public var description: String { rawValue }
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

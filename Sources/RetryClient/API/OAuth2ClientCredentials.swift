import Foundation

extension OAuth2ClientCredentials {
    /// The token request: `POST tokenURL` with `grant_type=client_credentials` (and scope and
    /// audience when set) as a form, the client authenticated as ``authentication`` says.
    public func tokenEndpoint() -> Endpoint<OAuth2TokenResponse> {
        var headers: HeaderFields = [:]
        let form: TokenForm
        switch authentication {
        case .basic:
            // RFC 6749 §2.3.1: id and secret are form-encoded before they are joined.
            let pair = "\(FormEncoder.escape(clientID)):\(FormEncoder.escape(clientSecret))"
            headers["Authorization"] = "Basic \(Data(pair.utf8).base64EncodedString())"
            form = TokenForm(scope: scope, audience: audience)
        case .body:
            form = TokenForm(scope: scope, audience: audience, clientID: clientID, clientSecret: clientSecret)
        }
        return Endpoint(method: "POST", headers: headers, body: .form(form))
    }

    private struct TokenForm: Encodable, Sendable {
        var grantType = "client_credentials"
        var scope: String?
        var audience: String?
        var clientID: String?
        var clientSecret: String?

        enum CodingKeys: String, CodingKey {
            case grantType = "grant_type", scope, audience, clientID = "client_id", clientSecret = "client_secret"
        }
    }
}

/// A token endpoint's successful answer (RFC 6749 §5.1).
public struct OAuth2TokenResponse: Decodable, Sendable, Equatable {
    /// The token.
    public var accessToken: String
    /// The token's lifetime, when the server says (`expires_in`, seconds on the wire; some
    /// servers send it as a string). A value past a year is kept as a year; one that is not a
    /// finite number is no lifetime.
    public var expiresIn: Duration?
    /// The token type; only `Bearer` (any case) is usable here.
    public var tokenType: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token", expiresIn = "expires_in", tokenType = "token_type"
    }

    /// Creates a response.
    public init(accessToken: String, expiresIn: Duration? = nil, tokenType: String? = "Bearer") {
        self.accessToken = accessToken
        self.expiresIn = expiresIn
        self.tokenType = tokenType
    }

    /// Decodes `expires_in` as a number or a numeric string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decode(String.self, forKey: .accessToken)
        tokenType = try container.decodeIfPresent(String.self, forKey: .tokenType)
        if let seconds = try? container.decodeIfPresent(Double.self, forKey: .expiresIn) {
            expiresIn = Self.lifetime(seconds)
        } else if let text = try container.decodeIfPresent(String.self, forKey: .expiresIn) {
            guard let seconds = Double(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .expiresIn, in: container, debugDescription: "not a number of seconds")
            }
            expiresIn = Self.lifetime(seconds)
        } else {
            expiresIn = nil
        }
    }

    /// The longest lifetime a token is trusted for: a year (and a day).
    static let longestLifetime: Duration = .seconds(366 * 86_400)

    /// `expires_in` seconds as a lifetime: nil when not finite, at most ``longestLifetime``.
    private static func lifetime(_ seconds: Double) -> Duration? {
        guard seconds.isFinite else { return nil }
        return .seconds(max(-1, min(seconds, 366 * 86_400)))
    }
}

/// Why no token could be obtained from a token endpoint.
public struct OAuth2TokenError: Error, Sendable, CustomStringConvertible {
    /// The token endpoint, as printed (credentials in it redacted).
    public var tokenURL: String
    /// What the endpoint (or the network) did.
    public var underlying: APIError

    /// Creates an error.
    public init(tokenURL: String, underlying: APIError) {
        self.tokenURL = OAuth2ClientCredentials.redactedURL(tokenURL)
        self.underlying = underlying
    }

    /// True when asking again cannot help until someone changes the settings: the endpoint's
    /// answer or failure is final by ``DeliveryPolicy`` (a 4xx other than 408 and 429, such as
    /// `invalid_client` or `invalid_scope`; a TLS failure), its success did not decode, or the
    /// request could not be built. An unreachable endpoint, a timeout, a 5xx, 408 and 429 are
    /// transient.
    public var isPermanent: Bool {
        switch underlying {
        case .status(let code, _, _, _): return !DeliveryPolicy.retries(DeliveryPolicy.verdict(status: code).durable)
        case .decoding, .invalidRequest, .adapter: return true
        case .transport(let error, _): return !DeliveryPolicy.retries(DeliveryPolicy.verdict(for: .transport(error.kind)).durable)
        }
    }

    /// `"oauth token request to https://id.example.com/token failed: 401 invalid_client"`.
    public var description: String {
        let what: String
        switch underlying {
        case .status(let code, let reason, _, _):
            if let code = underlying.errorCode {
                what = "\(underlying.status ?? 0) \(code)"
            } else {
                what = reason.isEmpty ? "HTTP \(code)" : "HTTP \(code) \(reason)"
            }
        default:
            what = underlying.description
        }
        return "oauth token request to \(tokenURL) failed: \(what)"
    }
}

/// Obtains access tokens with OAuth2 client credentials through an ``APIClient``, and hands
/// out an ``Authenticator`` that uses them.
///
/// ```swift
/// let credentials = OAuth2ClientCredentials(
///     tokenURL: "https://id.example.com/oauth/token", clientID: "courier", clientSecret: secret, scope: "hooks")
/// let tokens = OAuth2TokenClient(credentials: credentials, transport: transport)
/// let auth = tokens.authenticator()
/// let client = RetryingClient(transport: transport, interceptor: Interceptor(adapters: [auth], retriers: [auth, RetryPolicy()]))
/// ```
public struct OAuth2TokenClient: Sendable {
    /// The credentials.
    public let credentials: OAuth2ClientCredentials
    /// The client token requests go through.
    public let api: APIClient

    /// Creates a token client sending through `transport` with `interceptor` (default: no
    /// retries; the caller's own retries decide about a failed fetch).
    public init(credentials: OAuth2ClientCredentials, transport: any HTTPTransport, interceptor: Interceptor = Interceptor()) {
        self.credentials = credentials
        self.api = APIClient(baseURL: credentials.tokenURL, transport: transport, interceptor: interceptor)
    }

    /// Fetches a token; its usable time ends shortly before `expires_in` (see
    /// ``AccessToken/expiring(_:in:now:)``), or never when the server gives no lifetime.
    ///
    /// - Throws: ``OAuth2TokenError``.
    public func fetchToken() async throws(OAuth2TokenError) -> AccessToken {
        let started = ContinuousClock.now
        let response: OAuth2TokenResponse
        do {
            response = try await api.send(credentials.tokenEndpoint())
        } catch {
            throw OAuth2TokenError(tokenURL: credentials.tokenURL, underlying: error)
        }
        if let type = response.tokenType, type.lowercased() != "bearer" {
            throw OAuth2TokenError(
                tokenURL: credentials.tokenURL,
                underlying: .decoding(
                    type: "OAuth2TokenResponse", message: "token_type \(APIError.printable(type, limit: 32)) is not Bearer",
                    bodyExcerpt: ""))
        }
        guard !response.accessToken.isEmpty else {
            throw OAuth2TokenError(
                tokenURL: credentials.tokenURL,
                underlying: .decoding(type: "OAuth2TokenResponse", message: "access_token is empty", bodyExcerpt: ""))
        }
        guard let lifetime = response.expiresIn, lifetime > .zero else {
            return AccessToken(value: response.accessToken)
        }
        return .expiring(
            response.accessToken, in: min(lifetime, OAuth2TokenResponse.longestLifetime), now: started)
    }

    /// An authenticator whose tokens come from ``fetchToken()``.
    public func authenticator() -> Authenticator {
        let client = self
        return Authenticator { try await client.fetchToken() }
    }
}

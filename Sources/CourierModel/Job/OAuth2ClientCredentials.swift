import Foundation

/// OAuth2 client credentials (RFC 6749 §4.4): what a client needs to obtain access tokens for
/// itself from a token endpoint.
///
/// The secret never appears in `description`, `debugDescription` or a `Mirror`, so logging
/// or printing the value is safe.
public struct OAuth2ClientCredentials: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// How the client proves its identity to the token endpoint.
    public enum ClientAuthentication: String, Sendable, Hashable {
        /// HTTP Basic with the form-encoded id and secret (`client_secret_basic`, the default
        /// every server must accept).
        case basic
        /// `client_id` and `client_secret` in the form body (`client_secret_post`).
        case body
    }

    /// The token endpoint, an absolute `http` or `https` URL.
    public var tokenURL: String
    /// The client id.
    public var clientID: String
    /// The client secret.
    public var clientSecret: String
    /// The scope asked for (space-separated), or `nil` for the server's default.
    public var scope: String?
    /// The audience (resource) asked for, for servers that want one (`audience=`), or `nil`.
    public var audience: String?
    /// How the client authenticates. Default ``ClientAuthentication/basic``.
    public var authentication: ClientAuthentication

    /// Creates credentials.
    public init(
        tokenURL: String, clientID: String, clientSecret: String, scope: String? = nil, audience: String? = nil,
        authentication: ClientAuthentication = .basic
    ) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
        self.audience = audience
        self.authentication = authentication
    }

    /// `token URL, client id and scope`: the secret is left out.
    public var description: String {
        "OAuth2ClientCredentials(tokenURL: \(Self.redactedURL(tokenURL)), clientID: \(clientID), "
            + "scope: \(scope ?? "-"), secret: ***)"
    }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without the secret, so `dump` and reflection-based loggers cannot print it.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["tokenURL": Self.redactedURL(tokenURL), "clientID": clientID, "scope": scope as Any, "audience": audience as Any,
                       "clientSecret": "***"])
    }

    /// The URL without user info or a query (either could carry a credential).
    public static func redactedURL(_ url: String) -> String {
        var text = url
        if let query = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = String(text[..<query]) }
        if let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") {
                text = String(text[..<scheme.upperBound]) + "***@" + String(rest[rest.index(after: at)...])
            }
        }
        return text
    }
}

/// A queue's OAuth2 client credentials (migration 0007): the worker obtains bearer tokens from
/// `tokenURL` and sends one with every request of the queue.
///
/// The secret never appears in `description`, `debugDescription` or a `Mirror`, so a claimed
/// job can be logged or dumped without leaking it.
public struct QueueOAuth: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The token endpoint.
    public var tokenURL: String
    /// The client id.
    public var clientID: String
    /// The client secret.
    public var clientSecret: String
    /// The scope asked for, or nil.
    public var scope: String?
    /// The audience asked for, or nil.
    public var audience: String?

    /// Creates credentials.
    public init(tokenURL: String, clientID: String, clientSecret: String, scope: String? = nil, audience: String? = nil) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
        self.audience = audience
    }

    /// Token URL (redacted), client id and scope; never the secret.
    public var description: String {
        "QueueOAuth(tokenURL: \(Redaction.url(tokenURL)), clientID: \(clientID), scope: \(scope ?? "-"), secret: ***)"
    }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without the secret.
    public var customMirror: Mirror {
        Mirror(self, children: ["tokenURL": Redaction.url(tokenURL), "clientID": clientID, "clientSecret": "***"])
    }
}

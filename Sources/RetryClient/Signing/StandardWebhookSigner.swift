import Crypto
import Foundation

/// Signs requests per Standard Webhooks: `webhook-id`, `webhook-timestamp` and
/// `webhook-signature` headers.
///
/// The signature is `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`. The id is stable
/// across retries (receivers deduplicate on it); the timestamp is taken afresh for every attempt
/// so receivers' freshness checks pass on late retries. During a key rotation several secrets
/// sign at once and the signatures are joined by spaces.
public struct StandardWebhookSigner: RequestAdapter {
    /// A signing failure; the message never contains the secret.
    public struct SigningError: Error, Sendable, Equatable, CustomStringConvertible {
        /// A human explanation.
        public var message: String
        /// Creates an error.
        public init(_ message: String) { self.message = message }
        /// The message.
        public var description: String { message }
    }

    // Raw key bytes: `SymmetricKey` is not `Sendable`, so a key is built per signature.
    private let keys: [[UInt8]]
    private let messageID: @Sendable (OutboundRequest) -> String?
    private let now: @Sendable () -> Date

    /// Creates a signer.
    ///
    /// - Parameters:
    ///   - secrets: One or more secrets, each `whsec_<base64>` (the prefix may be omitted).
    ///   - messageID: The stable message id of a request. Default: the request's own
    ///     `webhook-id` header, so the caller sets it once and every attempt reuses it.
    ///   - now: The clock of `webhook-timestamp`. Default `Date()`.
    /// - Throws: ``SigningError`` if there is no secret or one is not valid base64.
    public init(
        secrets: [String],
        messageID: @escaping @Sendable (OutboundRequest) -> String? = { $0.headers["webhook-id"] },
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        guard !secrets.isEmpty else { throw SigningError("no webhook signing secret given") }
        self.keys = try secrets.map { Array(try Self.decodeSecret($0)) }
        self.messageID = messageID
        self.now = now
    }

    /// Sets `webhook-id`, `webhook-timestamp` (unix seconds, now) and `webhook-signature`.
    ///
    /// - Throws: ``SigningError`` when the request has no message id.
    public func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
        guard let id = messageID(request), !id.isEmpty else {
            throw SigningError("no webhook-id for the request to \(request.url)")
        }
        let timestamp = Int64(now().timeIntervalSince1970.rounded(.down))
        let body = request.body ?? []
        let signatures = keys.map {
            Self.signature(key: SymmetricKey(data: $0), id: id, timestamp: timestamp, body: body)
        }
        var signed = request
        signed.headers["webhook-id"] = id
        signed.headers["webhook-timestamp"] = String(timestamp)
        signed.headers["webhook-signature"] = signatures.joined(separator: " ")
        return signed
    }

    /// Computes one signature, `v1,<base64>`, for `secret` (`whsec_<base64>`).
    ///
    /// - Throws: ``SigningError`` if the secret is not valid base64.
    public static func sign(secret: String, id: String, timestamp: Int64, body: [UInt8]) throws -> String {
        signature(key: SymmetricKey(data: try decodeSecret(secret)), id: id, timestamp: timestamp, body: body)
    }

    static func signature(key: SymmetricKey, id: String, timestamp: Int64, body: [UInt8]) -> String {
        // Fed in two parts, so the body (up to 1 MiB) is never copied to be signed.
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        let mac = hmac.finalize()
        return "v1," + Data(mac).base64EncodedString()
    }

    static func decodeSecret(_ secret: String) throws -> Data {
        let encoded = secret.hasPrefix("whsec_") ? String(secret.dropFirst("whsec_".count)) : secret
        guard !encoded.isEmpty else { throw SigningError("webhook signing secret is empty") }
        guard let data = Data(base64Encoded: encoded), !data.isEmpty else {
            throw SigningError("webhook signing secret is not whsec_ followed by base64")
        }
        return data
    }
}

import Crypto
import Foundation

/// The key that seals webhook endpoints' secrets, read from the file named by
/// `--secrets-key-file` / `COURIER_SECRETS_KEY_FILE`.
///
/// The file holds one line: 32 random bytes in base64, as `openssl rand -base64 32` writes. Each
/// secret is sealed with AES-256-GCM under this key, with its endpoint's id as associated data,
/// so `courier.endpoint_secrets` holds only nonce, ciphertext and tag, and a sealed value copied
/// onto another endpoint does not open.
public struct SecretsKey: Sendable {
    /// The key's bytes (`SymmetricKey` is not `Sendable`; one is made per use, which costs a copy).
    private let bytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: bytes) }

    /// A key from its 32 bytes.
    public init(bytes: [UInt8]) throws(SecretsKeyError) {
        guard bytes.count == 32 else {
            throw SecretsKeyError(.wrongLength(bytes.count))
        }
        self.bytes = bytes
    }

    /// Reads the key file at `path`: one line of base64 for exactly 32 bytes (surrounding
    /// whitespace ignored).
    public static func load(path: String) throws(SecretsKeyError) -> SecretsKey {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SecretsKeyError(.unreadable(path: path, reason: Self.reason(error)))
        }
        guard data.count <= 4096, let text = String(data: data, encoding: .utf8) else {
            throw SecretsKeyError(.notBase64(path: path))
        }
        let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !line.isEmpty, !line.contains("\n"), let bytes = Data(base64Encoded: line) else {
            throw SecretsKeyError(.notBase64(path: path))
        }
        do {
            return try SecretsKey(bytes: Array(bytes))
        } catch {
            throw SecretsKeyError(.wrongLength(bytes.count), path: path)
        }
    }

    private static func reason(_ error: any Error) -> String {
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
        if let code = underlying?.code, underlying?.domain == NSPOSIXErrorDomain, let posix = POSIXErrorCode(rawValue: Int32(code)) {
            return String(cString: strerror(posix.rawValue))
        }
        switch (error as NSError).code {
        case NSFileReadNoSuchFileError: return "No such file or directory"
        case NSFileReadNoPermissionError: return "Permission denied"
        default: return "cannot be read"
        }
    }

    /// Seals `secret` for endpoint `endpointID`: a fresh 12-byte nonce, the ciphertext, the tag.
    public func seal(_ secret: String, endpointID: Int64) -> [UInt8] {
        // AES-GCM with a random nonce fails only on an invalid key size, which `init` excludes.
        let box = try! AES.GCM.seal(Array(secret.utf8), using: key, authenticating: Self.context(endpointID))
        return Array(box.combined!)
    }

    /// Opens a value sealed by ``seal(_:endpointID:)`` for the same endpoint.
    ///
    /// - Throws: ``SecretsKeyError`` `.cannotOpen` when the value was sealed under another key,
    ///   for another endpoint, or changed.
    public func open(_ sealed: [UInt8], endpointID: Int64) throws(SecretsKeyError) -> String {
        do {
            let box = try AES.GCM.SealedBox(combined: sealed)
            let plain = try AES.GCM.open(box, using: key, authenticating: Self.context(endpointID))
            guard let text = String(bytes: plain, encoding: .utf8) else { throw SecretsKeyError(.cannotOpen(endpointID)) }
            return text
        } catch {
            throw SecretsKeyError(.cannotOpen(endpointID))
        }
    }

    /// The associated data of an endpoint's secrets.
    private static func context(_ endpointID: Int64) -> [UInt8] {
        Array("courier.endpoint_secrets:\(endpointID)".utf8)
    }

    /// A new Standard Webhooks secret: `whsec_` and 32 random bytes in base64.
    public static func newWebhookSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }
}

/// Why a secrets key could not be read or used.
public struct SecretsKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Problem: Sendable, Equatable {
        /// The file could not be read.
        case unreadable(path: String, reason: String)
        /// The file is not one line of base64.
        case notBase64(path: String)
        /// The key is not 32 bytes.
        case wrongLength(Int)
        /// A sealed secret of this endpoint did not open with this key.
        case cannotOpen(Int64)
    }

    /// What went wrong.
    public var problem: Problem
    /// The key file, when known.
    public var path: String?

    /// An error.
    public init(_ problem: Problem, path: String? = nil) {
        self.problem = problem
        self.path = path
    }

    /// One line for people: what is wrong and how to make a key.
    public var description: String {
        switch problem {
        case .unreadable(let path, let reason):
            return "cannot read the secrets key file \(path) (\(reason))"
        case .notBase64(let path):
            return "the secrets key file \(path) must hold one line of base64 (make one with: openssl rand -base64 32)"
        case .wrongLength(let count):
            let file = path.map { "the secrets key file \($0)" } ?? "the secrets key"
            return "\(file) must hold 32 bytes in base64, got \(count) (make one with: openssl rand -base64 32)"
        case .cannotOpen(let endpointID):
            return "the secrets key does not open endpoint \(endpointID)'s secret: it was sealed with another key"
        }
    }
}

import Crypto
import Foundation

/// The console's login secret, held only as an HMAC-SHA256 under a key made for this process:
/// the plain text is dropped once this is built, and a memory dump shows no reusable hash.
/// Checks take the same time wherever a guess differs.
public struct WebPassword: Sendable {
    private let key: [UInt8]
    private let digest: [UInt8]

    /// The shortest secret accepted.
    public static let minimumLength = 12

    /// Builds the check from a password file's contents: one trailing newline (CR LF or LF) is
    /// not part of the secret.
    ///
    /// - Throws: `WebPasswordError` when the secret is shorter than `minimumLength`, or holds
    ///   a line break or NUL inside.
    public init(fileContents: String) throws {
        var secret = fileContents
        if secret.hasSuffix("\r\n") { secret.removeLast(1) } else if secret.hasSuffix("\n") { secret.removeLast() }
        guard !secret.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\0" }) else {
            throw WebPasswordError(message: "the password file must hold one line")
        }
        guard secret.count >= Self.minimumLength else {
            throw WebPasswordError(
                message: "the password must be at least \(Self.minimumLength) characters (got \(secret.count))")
        }
        key = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        digest = Array(HMAC<SHA256>.authenticationCode(for: Array(secret.utf8), using: SymmetricKey(data: key)))
    }

    /// Whether `guess` is the secret, in constant time.
    public func matches(_ guess: String) -> Bool {
        let code = HMAC<SHA256>.authenticationCode(for: Array(guess.utf8), using: SymmetricKey(data: key))
        return ConstantTime.equal(Array(code), digest)
    }
}

/// A password file the console refuses.
public struct WebPasswordError: Error, Sendable, CustomStringConvertible {
    /// What is wrong (never the secret).
    public let message: String
    /// The message, so the error prints as what went wrong.
    public var description: String { message }
}

/// Comparisons whose time does not depend on where two values differ.
enum ConstantTime {
    /// Whether `a` and `b` are equal; the time depends only on their lengths.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// Whether two tokens (cookie values, CSRF tokens) are equal.
    static func equal(_ a: String, _ b: String) -> Bool { equal(Array(a.utf8), Array(b.utf8)) }
}

import Foundation
import RetryClient

/// One ``Authenticator`` per set of OAuth2 client credentials (token URL, client id, secret,
/// scope, audience) for the life of a deliverer, so every delivery of every queue that shares
/// them shares one token and one single-flight fetch.
///
/// The secret is part of the key: after `courier queues set --oauth-client-secret-file` the
/// next claim carries the new secret and gets a new authenticator. Entries are never evicted;
/// there is one per distinct credential set the worker has seen.
final class OAuthTokenCache: @unchecked Sendable {
    private let transport: any HTTPTransport
    private let lock = NSLock()
    // Guarded by `lock`.
    private var authenticators: [OAuth2ClientCredentials: Authenticator] = [:]

    init(transport: any HTTPTransport) {
        self.transport = transport
    }

    /// The authenticator for `oauth`, created on first use.
    func authenticator(for credentials: OAuth2ClientCredentials) -> Authenticator {
        lock.withLock {
            if let existing = authenticators[credentials] { return existing }
            // No retries of its own: a failed fetch fails the attempt, and the queue's schedule
            // (transient) or the dead letters (rejected credentials) take it from there.
            let created = OAuth2TokenClient(credentials: credentials, transport: transport).authenticator()
            authenticators[credentials] = created
            return created
        }
    }
}

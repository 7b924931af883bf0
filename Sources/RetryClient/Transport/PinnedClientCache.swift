import AsyncHTTPClient
import Foundation

/// The `HTTPClient`s that connect a host name to one checked address, one per (host, address),
/// reused across requests and bounded in number.
///
/// AsyncHTTPClient resolves names itself; its only hook that keeps the name for the `Host`
/// header, SNI and certificate verification while connecting elsewhere is the client-wide
/// `dnsOverride`. So each pinned pair gets its own client (cheap: it shares the event loops)
/// and its own connection pool. The least recently used client beyond the bound is shut down,
/// at once when idle, else when its last request ends.
final class PinnedClientCache: @unchecked Sendable {
    struct Key: Hashable {
        var host: String
        var address: String
    }

    /// A client handed out for one request; give it back with ``release(_:)``.
    struct Lease {
        let key: Key
        let client: HTTPClient
    }

    private final class Entry {
        let client: HTTPClient
        var users = 0
        var lastUse: UInt64 = 0
        var retired = false
        init(client: HTTPClient) { self.client = client }
    }

    private let capacity: Int
    private let makeClient: @Sendable (_ dnsOverride: [String: String]) -> HTTPClient
    private let lock = NSLock()
    // Guarded by `lock`.
    private var entries: [Key: Entry] = [:]
    private var retired: [Entry] = []
    private var clock: UInt64 = 0
    private var closed = false

    init(capacity: Int, makeClient: @escaping @Sendable (_ dnsOverride: [String: String]) -> HTTPClient) {
        self.capacity = max(1, capacity)
        self.makeClient = makeClient
    }

    /// The number of live pinned clients (for tests).
    var count: Int { lock.withLock { entries.count } }

    /// The client connecting `host` to `address`, created when missing.
    func acquire(host: String, address: String) throws -> Lease {
        let key = Key(host: host, address: address)
        var evicted: HTTPClient?
        let lease: Lease = try lock.withLock {
            guard !closed else { throw TransportError(kind: .other, message: "the transport is shut down") }
            clock += 1
            if let entry = entries[key] {
                entry.users += 1
                entry.lastUse = clock
                return Lease(key: key, client: entry.client)
            }
            if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                entries[oldest.key] = nil
                if oldest.value.users == 0 {
                    evicted = oldest.value.client
                } else {
                    oldest.value.retired = true
                    retired.append(oldest.value)
                }
            }
            let entry = Entry(client: makeClient([host: address]))
            entry.users = 1
            entry.lastUse = clock
            entries[key] = entry
            return Lease(key: key, client: entry.client)
        }
        if let evicted { Self.shutDownInBackground(evicted) }
        return lease
    }

    /// Returns a lease; a retired client is shut down once its last lease is back.
    func release(_ lease: Lease) {
        let idleRetired: HTTPClient? = lock.withLock {
            if let entry = entries[lease.key], entry.client === lease.client {
                entry.users -= 1
                return nil
            }
            guard let index = retired.firstIndex(where: { $0.client === lease.client }) else { return nil }
            retired[index].users -= 1
            guard retired[index].users == 0 else { return nil }
            return retired.remove(at: index).client
        }
        if let idleRetired { Self.shutDownInBackground(idleRetired) }
    }

    /// Closes every client, even when one fails to close (a client released unclosed traps);
    /// rethrows the first failure. Later ``acquire(host:address:)`` calls fail.
    func shutdown() async throws {
        var failure: (any Error)?
        for client in takeAll() {
            do { try await client.shutdown() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// Closes every client like ``shutdown()``, blocking the calling thread.
    func syncShutdown() throws {
        var failure: (any Error)?
        for client in takeAll() {
            do { try client.syncShutdown() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    private func takeAll() -> [HTTPClient] {
        lock.withLock {
            closed = true
            let all = entries.values.map(\.client) + retired.map(\.client)
            entries = [:]
            retired = []
            return all
        }
    }

    private static func shutDownInBackground(_ client: HTTPClient) {
        Task { try? await client.shutdown() }
    }
}

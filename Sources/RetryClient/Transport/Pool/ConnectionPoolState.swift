/// Which connections a ``PooledHTTPTransport`` may keep and reuse: the pure decisions of its
/// pool, with no socket and no clock of its own (the caller passes `now`), so every rule is
/// checked by unit tests.
///
/// - Connections are pooled per ``PoolKey`` (scheme, host, port and the checked address):
///   a connection is reused only for the same name *and* the same address.
/// - One budget, ``Limits/maximumConnections``, bounds every connection open or being opened,
///   over all keys; a key holds at most ``Limits/maximumPerKey`` of them.
/// - At the budget, an idle connection (of any key) picked at random is closed to make room;
///   when every connection is busy the request waits, first come first served. At random, not
///   least recently used: when more hosts take turns than the budget holds (a fan-out to every
///   endpoint), the least recently used connection is always the one wanted next, so every
///   request would open a new one; a random pick keeps most of them (1,000 hosts over 960
///   connections: 88 % reused in a simulation, against none).
/// - An idle connection is reused most recently used first (the one least likely to have been
///   closed by its server) and is closed once idle for ``Limits/idleTimeout``.
struct ConnectionPoolState {
    /// The bounds of a pool.
    struct Limits: Equatable {
        /// Connections open or being opened, over all keys.
        var maximumConnections: Int
        /// Connections open or being opened for one key.
        var maximumPerKey: Int
        /// Nanoseconds after which an idle connection is closed.
        var idleTimeout: UInt64
    }

    /// What a request gets from ``acquire(_:waiter:allowReuse:now:)`` or, later, as a waiter.
    enum Grant: Equatable {
        /// Send on this idle connection (it is busy now).
        case reuse(Int)
        /// Open a new connection with this id (its place in the budget is taken); a failure to open
        /// is reported with ``closed(_:now:)``.
        case create(Int)
    }

    /// The result of ``acquire(_:waiter:allowReuse:now:)``.
    struct Acquired: Equatable {
        /// The grant, or `nil` when the request waits (its grant comes in a later ``Changes``).
        var grant: Grant?
        /// Idle connections to close (evicted or expired).
        var close: [Int]
    }

    /// What a change of the pool decided for the waiters and the idle connections.
    struct Changes: Equatable {
        /// Grants for waiting requests, by waiter id.
        var granted: [(waiter: Int, grant: Grant)] = []
        /// Idle connections to close.
        var close: [Int] = []

        static func == (lhs: Changes, rhs: Changes) -> Bool {
            lhs.close == rhs.close && lhs.granted.map(\.waiter) == rhs.granted.map(\.waiter)
                && lhs.granted.map(\.grant) == rhs.granted.map(\.grant)
        }
    }

    private enum Phase {
        case busy
        /// `slot`: its place in `idleIDs`.
        case idle(since: UInt64, stamp: UInt64, slot: Int)
    }

    private struct Entry {
        var key: PoolKey
        var phase: Phase
    }

    private struct Waiter {
        var id: Int
        var key: PoolKey
        var allowReuse: Bool
    }

    let limits: Limits
    private var entries: [Int: Entry] = [:]
    private var idleByKey: [PoolKey: [Int]] = [:]
    private var openByKey: [PoolKey: Int] = [:]
    /// Idle connections in the order they became idle, each with the stamp it had then; an
    /// entry whose connection was reused or closed since is stale and skipped.
    private var idleOrder: [(id: Int, stamp: UInt64)] = []
    private var idleOrderStart = 0
    /// Every idle connection, in no order, for the pick of one to close at the budget.
    private var idleIDs: [Int] = []
    /// The generator of that pick (SplitMix64).
    private var randomState: UInt64
    private var waiters: [Waiter] = []
    private var nextID = 0
    private var nextStamp: UInt64 = 0
    private(set) var isShutDown = false
    /// Idle connections closed to make room under the budget, since the pool began.
    private(set) var evictions = 0

    /// A pool within `limits`; `seed` starts the generator of the evictions' random picks.
    init(limits: Limits, seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        randomState = seed
        self.limits = Limits(
            maximumConnections: max(1, limits.maximumConnections), maximumPerKey: max(1, limits.maximumPerKey),
            idleTimeout: limits.idleTimeout)
    }

    /// Connections open or being opened.
    var openCount: Int { entries.count }
    /// Idle connections.
    var idleCount: Int { idleIDs.count }
    /// Requests waiting for a connection.
    var waitingCount: Int { waiters.count }
    /// Entries in the order of idle connections, stale ones included (for tests: it is bounded).
    var idleOrderLength: Int { idleOrder.count - idleOrderStart }
    /// The key of connection `id`, if the pool holds it.
    func key(of id: Int) -> PoolKey? { entries[id]?.key }

    /// A connection for `key`: an idle one (unless `allowReuse` is false), a new one within
    /// the budgets, or a wait. A waiting request is known by `waiter` until granted or
    /// ``cancel(waiter:now:)``ed.
    mutating func acquire(_ key: PoolKey, waiter: Int, allowReuse: Bool, now: UInt64) -> Acquired {
        var close: [Int] = []
        if let grant = tryGrant(key, allowReuse: allowReuse, now: now, close: &close) {
            return Acquired(grant: grant, close: close)
        }
        waiters.append(Waiter(id: waiter, key: key, allowReuse: allowReuse))
        return Acquired(grant: nil, close: close)
    }

    /// Whether `waiter` still waits for a grant.
    func isWaiting(_ waiter: Int) -> Bool { waiters.contains { $0.id == waiter } }

    /// A waiting request gave up (deadline, cancellation).
    mutating func cancel(waiter: Int, now: UInt64) -> Changes {
        waiters.removeAll { $0.id == waiter }
        return serveWaiters(now: now)
    }

    /// A request finished with connection `id`; it stays open for reuse when `reusable`.
    mutating func release(_ id: Int, reusable: Bool, now: UInt64) -> Changes {
        guard let entry = entries[id], case .busy = entry.phase else { return serveWaiters(now: now) }
        guard reusable, !isShutDown else {
            removeEntry(id)
            var changes = serveWaiters(now: now)
            changes.close.insert(id, at: 0)
            return changes
        }
        // A waiter for the same key takes it over at once.
        if let index = waiters.firstIndex(where: { $0.key == entry.key && $0.allowReuse }) {
            let waiter = waiters.remove(at: index)
            var changes = serveWaiters(now: now)
            changes.granted.insert((waiter.id, .reuse(id)), at: 0)
            return changes
        }
        nextStamp += 1
        entries[id]?.phase = .idle(since: now, stamp: nextStamp, slot: idleIDs.count)
        idleIDs.append(id)
        idleByKey[entry.key, default: []].append(id)
        idleOrder.append((id, nextStamp))
        compactIdleOrder()
        return serveWaiters(now: now)
    }

    /// Connection `id` is closed (by its server, an error, or failing to open): its place in
    /// the budget is free.
    mutating func closed(_ id: Int, now: UInt64) -> Changes {
        guard entries[id] != nil else { return Changes() }
        removeEntry(id)
        return serveWaiters(now: now)
    }

    /// Idle connections past the idle timeout, to close.
    mutating func expire(now: UInt64) -> Changes {
        var changes = Changes()
        while let id = oldestIdle(), case .idle(let since, _, _)? = entries[id]?.phase,
            now &- since >= limits.idleTimeout
        {
            changes.close.append(id)
            removeEntry(id)
        }
        return changes
    }

    /// Refuses new requests; returns the idle connections to close and the waiters to fail
    /// (busy connections are closed when released).
    mutating func shutdown() -> (close: [Int], waiters: [Int]) {
        isShutDown = true
        let idle = entries.compactMap { id, entry -> Int? in
            if case .idle = entry.phase { return id }
            return nil
        }
        for id in idle { removeEntry(id) }
        let waiting = waiters.map(\.id)
        waiters = []
        return (idle, waiting)
    }

    // MARK: private

    private mutating func tryGrant(_ key: PoolKey, allowReuse: Bool, now: UInt64, close: inout [Int]) -> Grant? {
        if allowReuse, var idle = idleByKey[key] {
            while let id = idle.popLast() {
                guard case .idle(let since, _, let slot)? = entries[id]?.phase else { continue }
                if now &- since >= limits.idleTimeout {
                    // Too old to trust: its server may have closed it by now.
                    idleByKey[key] = idle
                    removeEntry(id)
                    close.append(id)
                    idle = idleByKey[key] ?? []
                    continue
                }
                idleByKey[key] = idle.isEmpty ? nil : idle
                removeIdle(at: slot)
                entries[id]?.phase = .busy
                return .reuse(id)
            }
            idleByKey[key] = nil
        }
        if openByKey[key, default: 0] >= limits.maximumPerKey {
            // The key is full: make room with one of its own idle connections, else wait.
            guard let own = idleByKey[key]?.first else { return nil }
            removeEntry(own)
            close.append(own)
        } else if entries.count >= limits.maximumConnections {
            guard let victim = randomIdle() else { return nil }
            removeEntry(victim)
            close.append(victim)
            evictions += 1
        }
        nextID += 1
        entries[nextID] = Entry(key: key, phase: .busy)
        openByKey[key, default: 0] += 1
        return .create(nextID)
    }

    /// Grants what the waiters can have now, oldest first.
    private mutating func serveWaiters(now: UInt64) -> Changes {
        var changes = Changes()
        guard !waiters.isEmpty, !isShutDown else { return changes }
        var index = 0
        while index < waiters.count {
            let waiter = waiters[index]
            if let grant = tryGrant(waiter.key, allowReuse: waiter.allowReuse, now: now, close: &changes.close) {
                waiters.remove(at: index)
                changes.granted.append((waiter.id, grant))
            } else {
                index += 1
            }
        }
        return changes
    }

    /// The least recently used idle connection, dropping stale entries of the order.
    private mutating func oldestIdle() -> Int? {
        while idleOrderStart < idleOrder.count {
            let (id, stamp) = idleOrder[idleOrderStart]
            if case .idle(_, let current, _)? = entries[id]?.phase, current == stamp { return id }
            idleOrderStart += 1
        }
        idleOrder.removeAll(keepingCapacity: true)
        idleOrderStart = 0
        return nil
    }

    /// An idle connection picked at random, or nil when none is idle.
    private mutating func randomIdle() -> Int? {
        guard !idleIDs.isEmpty else { return nil }
        // SplitMix64: enough for spreading evictions, and repeatable from a seed in tests.
        randomState &+= 0x9E37_79B9_7F4A_7C15
        var z = randomState
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return idleIDs[Int(z % UInt64(idleIDs.count))]
    }

    /// Takes the idle connection at `slot` of `idleIDs` out of it (the last one moves there).
    private mutating func removeIdle(at slot: Int) {
        let last = idleIDs.removeLast()
        guard slot < idleIDs.count else { return }
        idleIDs[slot] = last
        if case .idle(let since, let stamp, _)? = entries[last]?.phase {
            entries[last]?.phase = .idle(since: since, stamp: stamp, slot: slot)
        }
    }

    private mutating func removeEntry(_ id: Int) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        if case .idle(_, _, let slot) = entry.phase {
            removeIdle(at: slot)
            if var idle = idleByKey[entry.key], let index = idle.firstIndex(of: id) {
                idle.remove(at: index)
                idleByKey[entry.key] = idle.isEmpty ? nil : idle
            }
        }
        let open = openByKey[entry.key, default: 1] - 1
        openByKey[entry.key] = open > 0 ? open : nil
    }

    /// Drops the stale entries of the idle order once they outnumber the connections, so a
    /// connection that stays idle at the front cannot make the order grow with every reuse
    /// behind it (amortized constant time per release).
    private mutating func compactIdleOrder() {
        guard idleOrder.count - idleOrderStart > 2 * entries.count + 1_024 else { return }
        idleOrder = idleOrder[idleOrderStart...].filter { id, stamp in
            if case .idle(_, let current, _)? = entries[id]?.phase { return current == stamp }
            return false
        }
        idleOrderStart = 0
    }
}

/// What a pooled connection is for: the scheme (TLS or not), the URL's host as written
/// (lowercased; the `Host` header, SNI and certificate name), the port, and the checked
/// address it connects to (`nil`: the host is resolved when connecting).
struct PoolKey: Hashable, Sendable {
    var secure: Bool
    var host: String
    var port: Int
    var address: String?
}

@testable import RetryClient
import XCTest

/// The pool's decisions with no socket: the budget, random eviction of idle connections,
/// waiting, idle expiry, per-host caps.
final class ConnectionPoolStateTests: XCTestCase {
    private static let second: UInt64 = 1_000_000_000

    private static func key(_ host: String, address: String? = "192.0.2.1") -> PoolKey {
        PoolKey(secure: false, host: host, port: 80, address: address)
    }

    private static func pool(
        budget: Int, perKey: Int = 32, idle: UInt64 = 60 * second, seed: UInt64 = 42
    ) -> ConnectionPoolState {
        ConnectionPoolState(limits: .init(maximumConnections: budget, maximumPerKey: perKey, idleTimeout: idle), seed: seed)
    }

    /// The id of a new connection, failing when the grant is anything else.
    private static func created(_ acquired: ConnectionPoolState.Acquired, file: StaticString = #filePath, line: UInt = #line) -> Int {
        guard case .create(let id)? = acquired.grant else {
            XCTFail("expected a new connection, got \(acquired)", file: file, line: line)
            return -1
        }
        return id
    }

    func testAnIdleConnectionIsReusedForTheSameHostAndAddressOnly() {
        var pool = Self.pool(budget: 10)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        _ = pool.release(a, reusable: true, now: 1)
        // Same name, other checked address: a connection of its own.
        let other = pool.acquire(Self.key("a", address: "192.0.2.2"), waiter: 2, allowReuse: true, now: 2)
        XCTAssertNotEqual(other.grant, .reuse(a))
        XCTAssertEqual(pool.acquire(Self.key("a"), waiter: 3, allowReuse: true, now: 3).grant, .reuse(a))
        XCTAssertEqual(pool.openCount, 2)
    }

    func testReuseIsRefusedWhenAskedForAFreshConnection() {
        var pool = Self.pool(budget: 10)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        _ = pool.release(a, reusable: true, now: 1)
        let fresh = Self.created(pool.acquire(Self.key("a"), waiter: 2, allowReuse: false, now: 2))
        XCTAssertNotEqual(fresh, a)
    }

    func testBudgetIsHeldByClosingAnIdleConnectionNeverABusyOne() {
        var closedFirst: Set<Int> = []
        for seed in UInt64(0)..<64 {
            var pool = Self.pool(budget: 3, seed: seed)
            var ids: [String: Int] = [:]
            for (n, host) in ["a", "b", "c"].enumerated() {
                ids[host] = Self.created(pool.acquire(Self.key(host), waiter: n, allowReuse: true, now: UInt64(n)))
            }
            for (n, host) in ["b", "a", "c"].enumerated() { _ = pool.release(ids[host]!, reusable: true, now: 10 + UInt64(n)) }
            // a is in use again: only b and c may go.
            XCTAssertEqual(pool.acquire(Self.key("a"), waiter: 5, allowReuse: true, now: 20).grant, .reuse(ids["a"]!))
            let d = pool.acquire(Self.key("d"), waiter: 6, allowReuse: true, now: 21)
            XCTAssertNotNil(d.grant)
            XCTAssertEqual(d.close.count, 1)
            XCTAssertTrue([ids["b"]!, ids["c"]!].contains(d.close[0]), "closed \(d.close), a is busy")
            closedFirst.insert(d.close[0])
            XCTAssertEqual(pool.openCount, 3)
            XCTAssertEqual(pool.idleCount, 1)
            // Then the other one; then nothing idle is left, and e waits.
            let e = pool.acquire(Self.key("e"), waiter: 7, allowReuse: true, now: 22)
            XCTAssertEqual(Set(d.close + e.close), [ids["b"]!, ids["c"]!])
            XCTAssertEqual(pool.idleCount, 0)
            XCTAssertEqual(pool.evictions, 2)
            XCTAssertNil(pool.acquire(Self.key("f"), waiter: 8, allowReuse: true, now: 23).grant)
            XCTAssertEqual(pool.openCount, 3)
        }
        XCTAssertEqual(closedFirst.count, 2, "the pick is not always the same connection")
    }

    /// More hosts taking turns than the budget holds (a fan-out to every endpoint): the least
    /// recently used connection would always be the next one wanted, so every request would
    /// open a new connection; picked at random, most connections are reused.
    func testHostsTakingTurnsBeyondTheBudgetStillReuseMostConnections() {
        var pool = Self.pool(budget: 96)
        var reused = 0
        var created = 0
        var now: UInt64 = 0
        for round in 0..<50 {
            for host in 0..<100 {
                now += 1
                let acquired = pool.acquire(Self.key("h\(host)"), waiter: Int(now), allowReuse: true, now: now)
                guard let grant = acquired.grant else { return XCTFail("waited with idle connections to close") }
                switch grant {
                case .reuse(let id):
                    if round > 0 { reused += 1 }
                    _ = pool.release(id, reusable: true, now: now)
                case .create(let id):
                    if round > 0 { created += 1 }
                    _ = pool.release(id, reusable: true, now: now)
                }
                XCTAssertLessThanOrEqual(pool.openCount, 96)
                XCTAssertEqual(pool.idleCount, pool.openCount)
            }
        }
        // 96 connections for 100 hosts: about nine in ten requests reuse one (none with LRU).
        XCTAssertEqual(pool.evictions, created + 4, "every connection past the first 96 took an idle one's place")
        XCTAssertGreaterThan(Double(reused) / Double(reused + created), 0.8, "reused \(reused), created \(created)")
    }

    func testAtTheBudgetWithEveryConnectionBusyARequestWaitsAndGetsTheFirstOneReleased() {
        var pool = Self.pool(budget: 2)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        let b = Self.created(pool.acquire(Self.key("b"), waiter: 2, allowReuse: true, now: 0))
        let waiting = pool.acquire(Self.key("c"), waiter: 3, allowReuse: true, now: 1)
        XCTAssertNil(waiting.grant)
        XCTAssertEqual(pool.waitingCount, 1)
        XCTAssertEqual(pool.openCount, 2)
        // b finishes and stays reusable: it is closed for c's new connection.
        let changes = pool.release(b, reusable: true, now: 2)
        XCTAssertEqual(changes.close, [b])
        XCTAssertEqual(changes.granted.count, 1)
        XCTAssertEqual(changes.granted.first?.waiter, 3)
        guard case .create(let c)? = changes.granted.first?.grant else { return XCTFail("\(changes)") }
        XCTAssertNotEqual(c, a)
        XCTAssertEqual(pool.openCount, 2)
        XCTAssertEqual(pool.waitingCount, 0)
    }

    func testAWaiterForTheSameHostTakesOverTheReleasedConnection() {
        var pool = Self.pool(budget: 1)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        XCTAssertNil(pool.acquire(Self.key("a"), waiter: 2, allowReuse: true, now: 1).grant)
        let changes = pool.release(a, reusable: true, now: 2)
        XCTAssertEqual(changes.close, [])
        XCTAssertEqual(changes.granted.first?.waiter, 2)
        XCTAssertEqual(changes.granted.first?.grant, .reuse(a))
    }

    func testAClosedConnectionFreesItsPlaceForAWaiter() {
        var pool = Self.pool(budget: 1)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        XCTAssertNil(pool.acquire(Self.key("b"), waiter: 2, allowReuse: true, now: 1).grant)
        let changes = pool.closed(a, now: 2)
        XCTAssertEqual(changes.granted.first?.waiter, 2)
        XCTAssertEqual(pool.openCount, 1)
        // Closing an id twice (the close future after a release that closed it) changes nothing.
        XCTAssertEqual(pool.closed(a, now: 3), ConnectionPoolState.Changes())
        XCTAssertEqual(pool.openCount, 1)
    }

    func testACancelledWaiterIsNeverGranted() {
        var pool = Self.pool(budget: 1)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        XCTAssertNil(pool.acquire(Self.key("b"), waiter: 2, allowReuse: true, now: 1).grant)
        _ = pool.cancel(waiter: 2, now: 2)
        let changes = pool.release(a, reusable: true, now: 3)
        XCTAssertTrue(changes.granted.isEmpty)
        XCTAssertEqual(pool.idleCount, 1)
    }

    func testThePerHostCapMakesARequestWaitWhileOtherHostsStillConnect() {
        var pool = Self.pool(budget: 10, perKey: 1)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        XCTAssertNil(pool.acquire(Self.key("a"), waiter: 2, allowReuse: true, now: 1).grant)
        XCTAssertNotNil(pool.acquire(Self.key("b"), waiter: 3, allowReuse: true, now: 1).grant)
        XCTAssertEqual(pool.release(a, reusable: false, now: 2).granted.first?.waiter, 2)
    }

    func testIdleConnectionsExpireAndAreNotReusedPastTheTimeout() {
        var pool = Self.pool(budget: 10, idle: 5 * Self.second)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        let b = Self.created(pool.acquire(Self.key("b"), waiter: 2, allowReuse: true, now: 0))
        _ = pool.release(a, reusable: true, now: 1 * Self.second)
        _ = pool.release(b, reusable: true, now: 4 * Self.second)
        XCTAssertEqual(pool.expire(now: 6 * Self.second).close, [a])
        XCTAssertEqual(pool.openCount, 1)
        // b is past its timeout at the next request: closed, and a new connection made.
        let next = pool.acquire(Self.key("b"), waiter: 3, allowReuse: true, now: 10 * Self.second)
        XCTAssertEqual(next.close, [b])
        XCTAssertNotEqual(next.grant, .reuse(b))
        XCTAssertEqual(pool.openCount, 1)
    }

    func testAConnectionThatCannotBeReusedIsClosedOnRelease() {
        var pool = Self.pool(budget: 10)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        XCTAssertEqual(pool.release(a, reusable: false, now: 1).close, [a])
        XCTAssertEqual(pool.openCount, 0)
    }

    func testShutdownClosesIdleConnectionsAndFailsWaitersAndLaterReleasesClose() {
        var pool = Self.pool(budget: 2)
        let a = Self.created(pool.acquire(Self.key("a"), waiter: 1, allowReuse: true, now: 0))
        let b = Self.created(pool.acquire(Self.key("b"), waiter: 2, allowReuse: true, now: 0))
        XCTAssertNil(pool.acquire(Self.key("c"), waiter: 3, allowReuse: true, now: 0).grant)
        // c takes a's place: a is closed for it.
        XCTAssertEqual(pool.release(a, reusable: true, now: 1).close, [a])
        XCTAssertNil(pool.acquire(Self.key("d"), waiter: 4, allowReuse: true, now: 1).grant)
        let (close, waiters) = pool.shutdown()
        XCTAssertEqual(waiters, [4])
        XCTAssertEqual(close, [])
        XCTAssertEqual(pool.release(b, reusable: true, now: 2).close, [b])
    }

    func testManyHostsNeverExceedTheBudget() {
        var pool = Self.pool(budget: 50)
        var busy: [Int] = []
        var now: UInt64 = 0
        for n in 0..<5_000 {
            now += 1
            let acquired = pool.acquire(Self.key("h\(n % 1_000)"), waiter: n, allowReuse: true, now: now)
            switch acquired.grant {
            case .create(let id)?, .reuse(let id)?: busy.append(id)
            case nil: XCTFail("waited with idle connections to evict")
            }
            XCTAssertLessThanOrEqual(pool.openCount, 50)
            if busy.count > 20 { _ = pool.release(busy.removeFirst(), reusable: true, now: now) }
        }
    }

    func testTheIdleOrderStaysBoundedWhileAnOldConnectionStaysIdle() {
        var pool = Self.pool(budget: 2)
        let old = Self.created(pool.acquire(Self.key("old"), waiter: 0, allowReuse: true, now: 0))
        _ = pool.release(old, reusable: true, now: 0)
        let hot = Self.created(pool.acquire(Self.key("hot"), waiter: 1, allowReuse: true, now: 1))
        for n in 0..<20_000 {
            _ = pool.release(hot, reusable: true, now: UInt64(n))
            XCTAssertEqual(pool.acquire(Self.key("hot"), waiter: n + 2, allowReuse: true, now: UInt64(n)).grant, .reuse(hot))
        }
        XCTAssertLessThanOrEqual(pool.idleOrderLength, 2 * pool.openCount + 1_025)
        // The old connection is still the oldest idle one: it is the first to expire.
        XCTAssertEqual(pool.expire(now: 60 * Self.second).close, [old])
        XCTAssertEqual(pool.idleCount, 0)
    }
}

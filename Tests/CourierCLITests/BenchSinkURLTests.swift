import CourierCLISupport
import CourierSink
import CourierTesting
import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `courier bench --sink-url URL` sends to the URL exactly as given, path included, instead of
/// appending a path of the built-in sink (`/hook`), and leaves nothing in its temporary
/// directory (its cluster, its worker's log).
final class BenchSinkURLTests: XCTestCase {
    func testBenchSendsToTheSinkURLAsGiven() throws {
        let seen = SeenTargets()
        let sink = try blockingAwait {
            try await HTTPSink.start { request in
                seen.add(request.uri)
                return .respond(status: 200, body: Array("ok\n".utf8))
            }
        }
        defer { _ = try? blockingAwait { await sink.shutdown() } }
        let given = sink.baseURL + "/receiver/in"
        // A temporary directory of its own, to see that the benchmark leaves nothing there.
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: temporary) }
        // As root the throwaway cluster belongs to `postgres`, which must reach its directory.
        chmod(temporary.path, 0o755)
        let result = try CourierRunner.run(
            ["bench", "--scenarios", "latency", "--rate", "5", "--duration", "1s", "--sink-url", given],
            databaseURL: nil, environment: ["TMPDIR": temporary.path])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let targets = seen.all
        XCTAssertFalse(targets.isEmpty, "the sink got no request")
        XCTAssertEqual(Set(targets), ["/receiver/in"], "\(Set(targets))")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temporary.path), [], "the benchmark left files")
    }
}

/// Request targets a sink saw, from its threads.
private final class SeenTargets: @unchecked Sendable {
    private let lock = NSLock()
    private var targets: [String] = []
    func add(_ target: String) { lock.withLock { targets.append(target) } }
    var all: [String] { lock.withLock { targets } }
}


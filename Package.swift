// swift-tools-version:6.1
import PackageDescription

/// Every target is built in the Swift 6 language mode (complete strict concurrency) with
/// `ExistentialAny`, so `any` is always spelled out.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "courier",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "courier", targets: ["courier"]),
        .library(name: "RetryClient", targets: ["RetryClient"]),
        .library(name: "RetryClientTesting", targets: ["RetryClientTesting"]),
        .library(name: "CourierModel", targets: ["CourierModel"]),
        .library(name: "CourierCore", targets: ["CourierCore"]),
        .library(name: "CourierClient", targets: ["CourierClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // OTLP/HTTP only: the gRPC exporter would add grpc-swift to every build.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // The libpq headers; the only C in the package.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The types every layer shares: job states and transitions, claimed jobs and attempt
        // records, the delivery policy and its verdict, backoff and schedules, defaults.
        // Foundation only, so the admin commands and the console never link the HTTP stack.
        .target(
            name: "CourierModel",
            swiftSettings: strict
        ),
        // A thin, safe layer over libpq: the only `import CLibPQ`.
        .target(
            name: "Postgres",
            dependencies: ["CLibPQ"],
            swiftSettings: strict
        ),
        // The retrying HTTP client: transport seam, interceptors, backoff, signing.
        .target(
            name: "RetryClient",
            dependencies: [
                "CourierModel",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Test doubles for users of RetryClient (a stub transport), kept out of the library.
        .target(
            name: "RetryClientTesting",
            dependencies: ["RetryClient"],
            swiftSettings: strict
        ),
        // SQL statements, the stores that run them and the migrator, over CourierModel's types.
        .target(
            name: "CourierCore",
            dependencies: [
                "CourierModel",
                "Postgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Migrations/README.md", "Migrations/schema.sql"],
            resources: [
                .embedInCode("Migrations/0001_init.sql"),
                .embedInCode("Migrations/0002_job_problem.sql"),
                .embedInCode("Migrations/0003_cheaper_queue_check.sql"),
                .embedInCode("Migrations/0004_hostile_input.sql"),
                .embedInCode("Migrations/0005_destinations.sql"),
                .embedInCode("Migrations/0006_retention.sql"),
                .embedInCode("Migrations/0007_claim_index.sql"),
                .embedInCode("Migrations/0008_queue_oauth.sql"),
                .embedInCode("Migrations/0009_web_audit.sql"),
                .embedInCode("Migrations/0010_claim_lanes.sql"),
                .embedInCode("Migrations/0011_webhooks.sql"),
                .embedInCode("Migrations/0012_deliveries.sql"),
                .embedInCode("Migrations/0013_traces.sql"),
                .embedInCode("Migrations/0014_endpoint_health.sql"),
                .embedInCode("Migrations/0015_attempts_without_key_share.sql"),
                .embedInCode("Migrations/0016_finished_jobs_one_index.sql"),
                .embedInCode("Migrations/0017_queue_check_over_bytes.sql"),
                .embedInCode("Migrations/0018_destination_outcomes_by_probe.sql"),
                .embedInCode("Migrations/0019_attempts_keyed_by_job.sql"),
                .embedInCode("Migrations/0020_fewer_index_entries.sql"),
                .embedInCode("Migrations/0021_settings_checked_when_written.sql"),
                .embedInCode("Migrations/0022_outcomes_in_place_order.sql"),
            ],
            swiftSettings: strict
        ),
        // The key that seals webhook endpoints' secrets (AES-256-GCM) and the secrets themselves:
        // read from COURIER_SECRETS_KEY_FILE by the CLI, the console and the worker.
        .target(
            name: "CourierSecrets",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // Worker loops, claiming, leases, rescue, retention, shutdown, metrics, and a span per
        // attempt exported over OTLP/HTTP when the OTEL_* environment asks for it.
        .target(
            name: "CourierWorker",
            dependencies: [
                "CourierCore",
                "CourierSecrets",
                "Postgres",
                "RetryClient",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        // The worker's Prometheus endpoint: a registry whose series carry help text, served on
        // `GET /metrics` by an HTTP server of its own.
        .target(
            name: "CourierMetrics",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // A small loopback HTTP server: the sink of `courier demo` and `courier bench`, and
        // the server of the integration tests.
        .target(
            name: "CourierSink",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // The operator's console: `courier web`, server-rendered pages over the admin store.
        .target(
            name: "CourierWeb",
            dependencies: [
                "CourierCore",
                "CourierSecrets",
                "Postgres",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // What the commands and the benchmark share: errors with exit codes, output formats,
        // text tables, child processes, signal cleanup and throwaway PostgreSQL clusters.
        .target(
            name: "CourierCLISupport",
            dependencies: [
                "CourierCore",
                "Postgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // `courier bench`: the scenarios, the worker processes they start and the figures
        // they print. Not part of the product's behaviour; the CLI only registers the command.
        .target(
            name: "CourierBench",
            dependencies: [
                "CourierCLISupport",
                "CourierCore",
                "CourierSecrets",
                "CourierSink",
                "CourierWeb",
                "CourierWorker",
                "Postgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Commands, flags, environment, output formats and exit codes.
        .target(
            name: "CourierCLI",
            dependencies: [
                "CourierBench",
                "CourierCLISupport",
                "CourierCore",
                "CourierSecrets",
                "CourierWorker",
                "CourierMetrics",
                "CourierSink",
                "CourierWeb",
                "Postgres",
                "RetryClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "courier",
            dependencies: ["CourierCLI"],
            swiftSettings: strict,
            // jemalloc serves every allocation of the binary (docs/performance.md: the worker's
            // CPU per job across 1,000 hosts fell by 8 to 11 % against glibc's malloc).
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]
        ),
        // Test helpers: throwaway databases, a loopback HTTP server, a stub transport.
        .target(
            name: "CourierTesting",
            dependencies: [
                "CourierCore",
                "CourierSink",
                "Postgres",
                "RetryClient",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Two kinds of tests (docs/architecture.md, "Tests", has the command for each). Unit
        // targets (CourierModelTests, RetryClientTests and the *UnitTests) need no PostgreSQL
        // and run in seconds; they may use CourierTesting's loopback servers and `courier`
        // runner, never its TestDatabase (RepositoryRulesTests checks). Integration targets use
        // a real server through COURIER_TEST_DATABASE_URL (scripts/with-postgres).
        .testTarget(
            name: "CourierModelTests",
            dependencies: ["CourierModel"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PostgresUnitTests",
            dependencies: ["Postgres"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", "CourierTesting"],
            swiftSettings: strict
        ),
        // A unit target: a stub transport and servers on 127.0.0.1, no database.
        .testTarget(
            name: "RetryClientTests",
            dependencies: [
                "RetryClient", "RetryClientTesting", "CourierTesting", "CourierSink",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierCoreUnitTests",
            dependencies: ["CourierCore"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierCoreTests",
            dependencies: ["CourierCore", "Postgres", "CourierTesting"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierWorkerUnitTests",
            dependencies: [
                "CourierWorker", "CourierCore", "CourierSecrets", "RetryClient", "RetryClientTesting", "CourierTesting",
                "Postgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The producer library for Swift services on postgres-nio: typed enqueue, enqueueMany and
        // publish on the caller's connection. Its three statements are the only SQL outside
        // Migrations/ and CourierCore, so a producer's build needs no libpq.
        .target(
            name: "CourierClient",
            dependencies: [
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierClientTests",
            dependencies: [
                "CourierClient", "CourierTesting", "CourierSink", "Postgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierWorkerTests",
            dependencies: [
                "CourierWorker", "CourierCore", "CourierSecrets", "CourierSink", "Postgres", "RetryClient", "CourierTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierCLIUnitTests",
            dependencies: [
                "CourierCLI", "CourierCLISupport", "CourierCore", "CourierMetrics", "CourierTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierCLITests",
            dependencies: [
                "CourierCLI", "CourierCLISupport", "CourierBench", "CourierCore", "CourierMetrics", "Postgres",
                "CourierTesting", "CourierSecrets", "CourierSink", "RetryClient",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CourierWebTests",
            dependencies: [
                "CourierWeb", "CourierCLISupport", "CourierCore", "CourierSecrets", "Postgres", "CourierTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)

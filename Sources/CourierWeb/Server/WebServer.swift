import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// `courier web`: the operator's console on Hummingbird.
public enum WebServer {
    /// Serves until SIGTERM or SIGINT, then finishes open requests and ends the live streams.
    public static func run(_ configuration: WebConfiguration, logger: Logger) async throws {
        let app = try WebApp(configuration: configuration, logger: logger)
        defer { app.database.close() }
        let application = makeApplication(app, configuration, logger: logger) { port in
            logger.notice(
                "courier web is listening",
                metadata: ["address": "\(configuration.host):\(port)", "read_only": "\(configuration.readOnly)"])
        }
        try await application.runService()
    }

    /// Starts a console in this process (for tests and benchmarks) and returns once it listens.
    public static func start(_ configuration: WebConfiguration, logger: Logger) async throws -> RunningWebServer {
        let app = try WebApp(configuration: configuration, logger: logger)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = makeApplication(app, configuration, logger: logger) { port in
            continuation.yield(port)
            continuation.finish()
        }
        let task = Task {
            defer { continuation.finish() }
            try await application.run()
        }
        for await port in ports {
            return RunningWebServer(port: port, app: app, task: task)
        }
        // It stopped before it listened: the error says why.
        try await task.value
        throw WebStartError(message: "the console stopped before it listened")
    }

    private static func makeApplication(
        _ app: WebApp, _ configuration: WebConfiguration, logger: Logger, listening: @escaping @Sendable (Int) -> Void
    ) -> some ApplicationProtocol {
        Application(
            router: app.makeRouter(),
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port)),
            services: [app.feed, app.traffic],
            onServerRunning: { channel in listening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }
}

/// A console started by `WebServer.start`.
public final class RunningWebServer: Sendable {
    /// The port it listens on.
    public let port: Int
    let app: WebApp
    private let task: Task<Void, any Error>

    init(port: Int, app: WebApp, task: Task<Void, any Error>) {
        self.port = port
        self.app = app
        self.task = task
    }

    /// Database reads the shared live reader made so far.
    public var liveReads: Int { app.feed.reads.current }

    /// Reads of the last hour's attempts made so far (`TrafficFeed`).
    public var trafficReads: Int { app.traffic.reads.current }

    /// Browsers listening to the live updates now.
    public var liveSubscribers: Int { app.feed.subscriberCount }

    /// Stops serving and closes the database connections.
    public func stop() async {
        app.feed.stop()
        task.cancel()
        _ = await task.result
        app.database.close()
    }
}

/// The console could not start.
public struct WebStartError: Error, CustomStringConvertible {
    /// Why.
    public let message: String
    /// The message, so the error prints as what went wrong.
    public var description: String { message }
}

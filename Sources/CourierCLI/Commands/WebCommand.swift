import ArgumentParser
import CourierCore
import CourierMetrics
import CourierWeb
import Foundation
import Logging
import Postgres
import CourierCLISupport

/// `courier web`: the operator's console in the browser, until SIGTERM or SIGINT.
struct WebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Serve the operator's console (queues, jobs, dead letters, destinations, webhooks) in the browser.",
        discussion: """
            A login is required: the password is read from --password-file (or the file
            named by COURIER_WEB_PASSWORD_FILE), at least 12 characters on one line, and
            held only as a keyed hash in memory. Every flag can also come from the
            environment (COURIER_WEB_<FLAG>, e.g. COURIER_WEB_ADDRESS=127.0.0.1:8080),
            which is how deploy/courier-web.service configures it; a flag wins over the
            environment. Serve it on loopback and put a TLS proxy in front for anyone
            else; see docs/web.md. Rotating a webhook endpoint's secret in the console
            needs the workers' secrets key (--secrets-key-file or
            COURIER_SECRETS_KEY_FILE); without it the console shows endpoints and
            messages but rotates nothing.

            Examples:
              courier web --password-file /etc/courier/web.password
              courier web --address 127.0.0.1:9000 --read-only --password-file web.password
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Option(help: "HOST:PORT to listen on (default 127.0.0.1:8080).")
    var address: String?

    @Option(name: .customLong("password-file"), help: "File holding the login password (one line).")
    var passwordFile: String?

    @Flag(name: .customLong("read-only"), help: "Show everything, change nothing: no action buttons, every change refused.")
    var readOnly = false

    @Flag(
        name: .customLong("secure-cookies"),
        help: "Always mark the session cookie Secure (behind a TLS proxy that does not send X-Forwarded-Proto).")
    var secureCookies = false

    @Option(help: "Database connections at most (default 4).")
    var connections: Int?

    @OptionGroup var secrets: SecretsKeyOptions

    @OptionGroup var logging: LogOptions

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        func value(_ flag: String?, _ name: String) -> String? { flag ?? env["COURIER_WEB_\(name)"] }
        func enabled(_ flag: Bool, _ name: String) -> Bool { flag || env["COURIER_WEB_\(name)"] == "true" }

        let addressText = value(address, "ADDRESS") ?? "127.0.0.1:8080"
        guard let listen = MetricsServer.parseAddress(addressText) else {
            throw CLIError.usage("--address: \(addressText.debugDescription) is not HOST:PORT (e.g. 127.0.0.1:8080)")
        }
        guard let path = value(passwordFile, "PASSWORD_FILE"), !path.isEmpty else {
            throw CLIError.usage("--password-file (or COURIER_WEB_PASSWORD_FILE) is required: the console never runs without a login")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the password file \(path.debugDescription)")
        }
        let password: WebPassword
        do {
            password = try WebPassword(fileContents: String(decoding: data, as: UTF8.self))
        } catch let error as WebPasswordError {
            throw CLIError.usage("\(path): \(error.message)")
        }
        var connectionCount = 4
        if let text = connections.map(String.init) ?? env["COURIER_WEB_CONNECTIONS"] {
            guard let parsed = Int(text), (1...64).contains(parsed) else {
                throw CLIError.usage("--connections must be between 1 and 64, got \(text.debugDescription)")
            }
            connectionCount = parsed
        }
        let (parsedLevel, format) = try logging.resolve(prefix: "COURIER_WEB_", environment: env)

        var configuration = WebConfiguration(databaseURL: database.resolvedURL, password: password)
        configuration.host = listen.host
        configuration.port = listen.port
        configuration.readOnly = enabled(readOnly, "READ_ONLY")
        configuration.secureCookies = enabled(secureCookies, "SECURE_COOKIES")
        configuration.databaseConnections = connectionCount
        configuration.secretsKey = try secrets.loadIfSet()

        try await Self.checkSchema(database)

        LoggingSystem.bootstrap { label in StderrLogHandler(label: label, format: format) }
        var logger = Logger(label: "courier.web")
        logger.logLevel = parsedLevel
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let mode = attributes[.posixPermissions] as? Int, mode & 0o004 != 0
        {
            logger.warning("the password file is readable by every user", metadata: ["file": "\(path)"])
        }
        do {
            try await WebServer.run(configuration, logger: logger)
        } catch let error as PostgresError {
            throw CLIError(Redaction.connectionError(error.message, conninfo: database.resolvedURL))
        }
    }

    /// Refuses to serve a database without the schema this binary expects (exit 4), checked on
    /// a thread of its own: libpq blocks.
    static func checkSchema(_ database: DatabaseOptions) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result {
                    let connection = try database.connect()
                    defer { connection.close() }
                    let status = try Migrator().status(connection)
                    guard status.isCurrent else { throw CLIError(status.message, exitCode: .schemaMismatch) }
                })
            }
        }
    }
}

import ArgumentParser
import CourierBench
import CourierCore

/// The root `courier` command.
public struct Courier: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A durable queue of outbound HTTP jobs (webhooks) in PostgreSQL.",
        discussion: """
            The database comes from --database-url, else COURIER_DATABASE_URL, else
            libpq's PG* variables. Exit codes: 0 ok, 1 failure, 2 usage error or invalid
            input, 3 not found, 4 database schema missing or not the one this courier
            expects (run courier migrate).

            Help on any command: courier help <command>, or courier <command> --help.

            Examples:
              courier migrate
              courier enqueue --url https://example.com/hook --data '{"event":"paid"}'
              courier worker --concurrency 64
              courier jobs show 42
              courier dead requeue --all --queue billing
              courier stats --watch
              courier web --password-file /etc/courier/web.password
              courier publish --type invoice.paid --tenant acme --data '{"id":"in_42"}'
            """,
        version: CourierVersion.text,
        subcommands: [
            MigrateCommand.self, EnqueueCommand.self, WorkerCommand.self, JobsCommand.self, DeadCommand.self,
            QueuesCommand.self, DestinationsCommand.self, EndpointsCommand.self, PublishCommand.self,
            MessagesCommand.self, StatsCommand.self, PurgeCommand.self, DemoCommand.self, BenchCommand.self,
            WebCommand.self,
        ]
    )

    public init() {}
}

/// The version of `courier`, as `courier --version` prints it.
public enum CourierVersion {
    /// The release of this build (one constant, bumped at release).
    public static let number = "0.1.0"

    /// The schema version this build expects: the highest embedded migration number.
    public static var schema: Int { EmbeddedMigrations.all.map(\.version).max() ?? 0 }

    /// `courier 0.1.0 (schema 3)`.
    public static var text: String { "courier \(number) (schema \(schema))" }
}

extension Courier {
    /// Every command path below `courier` (`["jobs"]`, `["jobs", "list"]`, ...), read from the
    /// command configuration, so a test can run each one's `--help` and none is forgotten.
    public static var allCommandPaths: [[String]] {
        func walk(_ command: any ParsableCommand.Type, _ path: [String]) -> [[String]] {
            command.configuration.subcommands.flatMap { sub -> [[String]] in
                let name = sub.configuration.commandName ?? sub._commandName
                return [path + [name]] + walk(sub, path + [name])
            }
        }
        return walk(Courier.self, [])
    }
}

import ArgumentParser

/// The root `courier` command.
public struct Courier: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "A durable queue of outbound HTTP jobs (webhooks) in PostgreSQL.",
        discussion: """
            The database comes from --database-url, else COURIER_DATABASE_URL, else libpq's PG*
            variables. Exit codes: 0 ok, 1 failure, 2 usage error or invalid input, 3 not found.

            Examples:
              courier migrate
              courier enqueue --url https://example.com/hook --data '{"event":"paid"}'
              courier worker --concurrency 64
              courier jobs show 42
              courier dead requeue --all --queue billing
              courier stats --watch
            """,
        subcommands: [
            MigrateCommand.self, EnqueueCommand.self, WorkerCommand.self, JobsCommand.self, DeadCommand.self,
            QueuesCommand.self, StatsCommand.self, PurgeCommand.self, DemoCommand.self, BenchCommand.self,
        ]
    )

    public init() {}
}

/// The files of `Migrations/`, compiled into the binary so `courier migrate` works from any
/// directory. A new file must be added here and as `.embedInCode` in Package.swift; a test
/// compares this list with the folder.
public enum EmbeddedMigrations {
    /// Every migration, in version order.
    public static let all: [Migration] = [
        Migration(fileName: "0001_init.sql", bytes: PackageResources._001_init_sql),
        Migration(fileName: "0002_job_problem.sql", bytes: PackageResources._002_job_problem_sql),
        Migration(fileName: "0003_cheaper_queue_check.sql", bytes: PackageResources._003_cheaper_queue_check_sql),
        Migration(fileName: "0004_hostile_input.sql", bytes: PackageResources._004_hostile_input_sql),
        Migration(fileName: "0005_destinations.sql", bytes: PackageResources._005_destinations_sql),
        Migration(fileName: "0006_retention.sql", bytes: PackageResources._006_retention_sql),
        Migration(fileName: "0007_claim_index.sql", bytes: PackageResources._007_claim_index_sql),
        Migration(fileName: "0008_queue_oauth.sql", bytes: PackageResources._008_queue_oauth_sql),
        Migration(fileName: "0009_web_audit.sql", bytes: PackageResources._009_web_audit_sql),
        Migration(fileName: "0010_claim_lanes.sql", bytes: PackageResources._010_claim_lanes_sql),
        Migration(fileName: "0011_webhooks.sql", bytes: PackageResources._011_webhooks_sql),
        Migration(fileName: "0012_deliveries.sql", bytes: PackageResources._012_deliveries_sql),
        Migration(fileName: "0013_traces.sql", bytes: PackageResources._013_traces_sql),
        Migration(fileName: "0014_endpoint_health.sql", bytes: PackageResources._014_endpoint_health_sql),
        Migration(
            fileName: "0015_attempts_without_key_share.sql", bytes: PackageResources._015_attempts_without_key_share_sql),
        Migration(fileName: "0016_finished_jobs_one_index.sql", bytes: PackageResources._016_finished_jobs_one_index_sql),
        Migration(fileName: "0017_queue_check_over_bytes.sql", bytes: PackageResources._017_queue_check_over_bytes_sql),
        Migration(fileName: "0018_destination_outcomes_by_probe.sql", bytes: PackageResources._018_destination_outcomes_by_probe_sql),
        Migration(fileName: "0019_attempts_keyed_by_job.sql", bytes: PackageResources._019_attempts_keyed_by_job_sql),
        Migration(fileName: "0020_fewer_index_entries.sql", bytes: PackageResources._020_fewer_index_entries_sql),
        Migration(fileName: "0021_settings_checked_when_written.sql", bytes: PackageResources._021_settings_checked_when_written_sql),
        Migration(fileName: "0022_outcomes_in_place_order.sql", bytes: PackageResources._022_outcomes_in_place_order_sql),
    ]
}

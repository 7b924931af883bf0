import CourierTesting
import CourierWorker
import Foundation
import XCTest

/// The Prometheus alert rules and the Grafana dashboard of `deploy/`: promtool accepts the rules
/// and their unit tests pass (each alert fires on the series it is for, and not before its
/// time), every dashboard query is valid PromQL, and both name only metrics the worker exports.
final class DeployMonitoringTests: XCTestCase {
    private let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy")
    private var rules: URL { deploy.appendingPathComponent("prometheus/courier-alerts.yml") }
    private var ruleTests: URL { deploy.appendingPathComponent("prometheus/courier-alerts.test.yml") }
    private var dashboard: URL { deploy.appendingPathComponent("grafana/courier-dashboard.json") }

    private func promtool() throws -> String {
        if let path = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first(where: FileManager.default.isExecutableFile) {
            return path
        }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            XCTFail("promtool is missing (apt-get install prometheus)")
        }
        throw XCTSkip("promtool is not installed (apt-get install prometheus); the rules are not checked")
    }

    /// Every `expr` of the dashboard's panels, with Grafana's variables as Prometheus would get them.
    private func dashboardQueries() throws -> [(panel: String, expr: String)] {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: dashboard)) as? [String: Any]
        let panels = try XCTUnwrap(json?["panels"] as? [[String: Any]], "the dashboard has no panels")
        return panels.flatMap { panel -> [(panel: String, expr: String)] in
            let title = panel["title"] as? String ?? "?"
            return (panel["targets"] as? [[String: Any]] ?? []).compactMap { target in
                (target["expr"] as? String).map {
                    (title, $0.replacingOccurrences(of: "$__rate_interval", with: "5m").replacingOccurrences(of: "$queue", with: ".*"))
                }
            }
        }
    }

    func testTheAlertRulesPassPromtoolAndTheirUnitTests() throws {
        let promtool = try promtool()
        let check = try runTool(promtool, ["check", "rules", rules.path])
        XCTAssertEqual(check.status, 0, check.output)
        let tests = try runTool(promtool, ["test", "rules", ruleTests.path])
        XCTAssertEqual(tests.status, 0, tests.output)
        // Every alert has a unit test that expects it to fire.
        let text = try String(contentsOf: rules, encoding: .utf8)
        let testText = try String(contentsOf: ruleTests, encoding: .utf8)
        let alerts = text.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst("- alert: ".count)) : nil
        }
        XCTAssertEqual(alerts.count, 7, "\(alerts)")
        for alert in alerts {
            XCTAssertTrue(testText.contains("alertname: \(alert)\n        exp_alerts:\n"), "\(alert) has no test where it fires")
        }
    }

    func testEveryDashboardQueryIsValidPromQL() throws {
        let promtool = try promtool()
        let queries = try dashboardQueries()
        XCTAssertGreaterThanOrEqual(queries.count, 14)
        // promtool checks PromQL in rule files: each query becomes a recording rule.
        var file = "groups:\n  - name: dashboard\n    rules:\n"
        for (index, query) in queries.enumerated() {
            let quoted = query.expr.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            file += "      - record: courier_dashboard:query\(index)\n        expr: \"\(quoted)\"\n"
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-dashboard-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("queries.yml").path
        try Data(file.utf8).write(to: URL(fileURLWithPath: path))
        let check = try runTool(promtool, ["check", "rules", path])
        XCTAssertEqual(check.status, 0, "\(check.output)\n\(queries.map { "\($0.panel): \($0.expr)" }.joined(separator: "\n"))")
    }

    /// A renamed metric would leave a panel empty and an alert silent: both may only name what
    /// `WorkerMetrics.help` lists, and the dashboard shows every one of them.
    func testTheDashboardAndAlertsNameOnlyExportedMetricsAndTheDashboardShowsThemAll() throws {
        let exported = Set(WorkerMetrics.help.keys)
        func names(_ text: String) -> Set<String> {
            let regex = try? NSRegularExpression(pattern: "courier_[a-z_]+")
            let range = NSRange(text.startIndex..., in: text)
            return Set((regex?.matches(in: text, range: range) ?? []).compactMap { match in
                Range(match.range, in: text).map { name -> String in
                    var name = String(text[name])
                    for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && !exported.contains(name) {
                        name = String(name.dropLast(suffix.count))
                    }
                    return name
                }
            })
        }
        let inDashboard = names(try dashboardQueries().map(\.expr).joined(separator: "\n"))
        let inAlerts = names(try String(contentsOf: rules, encoding: .utf8).split(separator: "\n")
            .filter { $0.contains("expr:") }.joined(separator: "\n"))
        XCTAssertEqual(inDashboard.subtracting(exported), [], "the dashboard names metrics the worker does not export")
        XCTAssertEqual(inAlerts.subtracting(exported), [], "the alerts name metrics the worker does not export")
        XCTAssertEqual(exported.subtracting(inDashboard), [], "metrics the dashboard does not show")
        XCTAssertFalse(inAlerts.isEmpty)
    }
}

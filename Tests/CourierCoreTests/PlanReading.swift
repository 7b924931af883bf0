import Foundation
import Postgres
import XCTest

/// Reading what a statement did from `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`: rows handled
/// and relations read, never how long anything took.
extension OwnDatabaseTestCase {
    /// The plan of `statement` executed with `arguments` (SQL literals, comma-separated) after
    /// `settings`, in a transaction that is rolled back. `name` names the prepared statement.
    func explainRolledBack(_ statement: String, arguments: String, settings: String? = nil, name: String)
        throws -> [String: Any]
    {
        try connection.prepare(name: name, sql: statement)
        var plan: [String: Any] = [:]
        do {
            try connection.transaction { connection in
                if let settings { try connection.simpleQuery(settings) }
                let call = arguments.isEmpty ? name : "\(name)(\(arguments))"
                let text: String = try connection.query("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE \(call)")[0]
                    .decode(0)
                let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]
                plan = parsed?.first ?? [:]
                throw PlanRollBack()
            }
        } catch is PlanRollBack {}
        return plan
    }
}

struct PlanRollBack: Error {}

/// The most rows any step of the plan produced (rows per loop times loops).
func mostRows(_ node: [String: Any]) -> Int {
    let rows = (node["Actual Rows"] as? NSNumber)?.intValue ?? 0
    let loops = (node["Actual Loops"] as? NSNumber)?.intValue ?? 1
    let children = (node["Plans"] as? [[String: Any]] ?? []).map { mostRows($0) }
    return max(rows * loops, children.max() ?? 0)
}

func mostRows(plan: [String: Any]) -> Int { mostRows(plan["Plan"] as? [String: Any] ?? [:]) }

/// Every (node type, relation or index) the plan has, e.g. ("Seq Scan", "jobs").
func scans(_ node: [String: Any]) -> [(type: String, relation: String)] {
    let type = node["Node Type"] as? String ?? ""
    var own: [(type: String, relation: String)] = []
    if let index = node["Index Name"] as? String {
        own.append((type, index))
    } else if let relation = node["Relation Name"] as? String {
        own.append((type, relation))
    }
    return own + (node["Plans"] as? [[String: Any]] ?? []).flatMap { scans($0) }
}

func scans(plan: [String: Any]) -> [(type: String, relation: String)] { scans(plan["Plan"] as? [String: Any] ?? [:]) }

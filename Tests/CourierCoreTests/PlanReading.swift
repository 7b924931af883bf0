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
    nodes(node).compactMap { node in
        let type = node["Node Type"] as? String ?? ""
        if let index = node["Index Name"] as? String { return (type, index) }
        if let relation = node["Relation Name"] as? String { return (type, relation) }
        return nil
    }
}

func scans(plan: [String: Any]) -> [(type: String, relation: String)] { scans(plan["Plan"] as? [String: Any] ?? [:]) }

/// A bound parameter as an SQL literal, for `EXECUTE name(...)`: text as a quoted string, a
/// binary array (`PostgresBinaryArray`) as the array literal the server would read from it.
func sqlLiteral(_ value: PostgresValue) -> String {
    switch value {
    case .null: return "NULL"
    case .text(let text): return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    case .bytes(let bytes): return "'" + binaryArrayLiteral(bytes) + "'"
    }
}

/// The text form of a one-dimensional binary array of `bigint`, `integer`, `float8` or
/// `boolean` (the only kinds `PostgresBinaryArray` writes).
private func binaryArrayLiteral(_ bytes: [UInt8]) -> String {
    func word(_ at: Int) -> UInt32 { bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
    func long(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
    guard word(0) == 1 else { return "{}" }
    let oid = word(8)
    var at = 20
    var elements: [String] = []
    for _ in 0..<Int(word(12)) {
        let length = Int32(bitPattern: word(at))
        at += 4
        guard length >= 0 else {
            elements.append("NULL")
            continue
        }
        switch oid {
        case 20: elements.append(String(Int64(bitPattern: long(at))))
        case 23: elements.append(String(Int32(bitPattern: word(at))))
        case 701: elements.append("\(Double(bitPattern: long(at)))")
        default: elements.append(bytes[at] == 0 ? "f" : "t")
        }
        at += Int(length)
    }
    return "{" + elements.joined(separator: ",") + "}"
}

/// Every node of the plan, depth first.
func nodes(_ node: [String: Any]) -> [[String: Any]] {
    [node] + (node["Plans"] as? [[String: Any]] ?? []).flatMap { nodes($0) }
}

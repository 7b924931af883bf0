/// Renders rows as a left-aligned text table; the first row is the header.
package enum TextTable {
    package static func render(_ rows: [[String]]) -> String {
        guard let first = rows.first else { return "" }
        var widths = first.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

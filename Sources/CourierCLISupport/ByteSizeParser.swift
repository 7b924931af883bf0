/// Parses sizes in bytes for flags and environment variables: `65536`, `512KiB`, `64MiB`,
/// `1GiB` (binary units; `KB`, `MB` and `GB` are read as the same powers of 1,024, as most
/// people who write them mean).
package enum ByteSizeParser {
    /// The units, longest suffix first so `kib` is not read as `b`.
    private static let units: [(suffix: String, bytes: Int)] = [
        ("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30), ("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30),
        ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("b", 1),
    ]

    /// Bytes, or nil when `text` is not a whole number with an optional unit, or overflows.
    package static func bytes(_ text: String) -> Int? {
        let trimmed = text.filter { $0 != " " }.lowercased()
        var digits = Substring(trimmed)
        var scale = 1
        for (suffix, bytes) in units where trimmed.hasSuffix(suffix) {
            digits = trimmed.dropLast(suffix.count)
            scale = bytes
            break
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(digits) else {
            return nil
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: scale)
        return overflow ? nil : product
    }
}

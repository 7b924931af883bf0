/// JSON text laid out for reading: one member or element per line, indented by depth.
///
/// It re-indents the text as stored and parses nothing, so numbers keep their digits (a
/// payload's 20-digit id is not rounded through a Double), member order stays, and text that
/// is cut off or not JSON at all still comes out, laid out as far as it goes.
enum JSONLayout {
    /// `text` with a line per member or element, `indent` spaces per level; empty objects and
    /// arrays stay `{}` and `[]`.
    static func pretty(_ text: String, indent: Int = 2) -> String {
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        out.reserveCapacity(scalars.count + scalars.count / 4)
        var depth = 0
        var index = 0
        var inString = false
        func newline() {
            out.append("\n")
            for _ in 0..<(depth * indent) { out.append(" ") }
        }
        /// The index of the next scalar that is not JSON whitespace, from `start`.
        func nextSignificant(_ start: Int) -> Int {
            var i = start
            while i < scalars.count, [" ", "\n", "\r", "\t"].contains(scalars[i]) { i += 1 }
            return i
        }
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            if inString {
                out.append(scalar)
                if scalar == "\\", index < scalars.count {
                    out.append(scalars[index])
                    index += 1
                } else if scalar == "\"" {
                    inString = false
                }
                continue
            }
            switch scalar {
            case " ", "\n", "\r", "\t":
                continue
            case "\"":
                inString = true
                out.append(scalar)
            case "{", "[":
                let next = nextSignificant(index)
                if next < scalars.count, scalars[next] == (scalar == "{" ? "}" : "]") {
                    out.append(scalar)
                    out.append(scalars[next])
                    index = next + 1
                } else {
                    out.append(scalar)
                    depth += 1
                    newline()
                }
            case "}", "]":
                depth = max(0, depth - 1)
                newline()
                out.append(scalar)
            case ",":
                out.append(scalar)
                newline()
            case ":":
                out.append(scalar)
                out.append(" ")
            default:
                out.append(scalar)
            }
        }
        return String(out)
    }
}

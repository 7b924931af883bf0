import Foundation
import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a benchmark worker's Prometheus counters (`courier worker --metrics-port`), so the
/// bench can print what the worker did, not only what the database shows: claims made, jobs
/// claimed, jobs given back.
package enum BenchMetrics {
    /// The unlabelled samples of `127.0.0.1:port/metrics` by metric name (labelled series are
    /// summed under their name); empty when the endpoint cannot be read.
    package static func scrape(port: Int) -> [String: Double] {
        guard let text = get(port: port, path: "/metrics") else { return [:] }
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            let series = parts[0]
            let name = series.split(separator: "{", maxSplits: 1).first.map(String.init) ?? String(series)
            values[name, default: 0] += value
        }
        return values
    }

    /// One HTTP/1.1 GET with `Connection: close` on loopback; the body, or nil.
    package static func get(port: Int, path: String) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            response += buffer[0..<count]
            // Stop once the whole body announced by Content-Length is in.
            if let text = String(bytes: response, encoding: .utf8), let split = text.range(of: "\r\n\r\n") {
                let head = text[..<split.lowerBound].lowercased()
                if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                    text.utf8.count - text.utf8.distance(from: text.startIndex, to: split.upperBound) >= length
                {
                    return String(text[split.upperBound...])
                }
            }
        }
        guard let text = String(bytes: response, encoding: .utf8), let split = text.range(of: "\r\n\r\n") else {
            return nil
        }
        return String(text[split.upperBound...])
    }
}

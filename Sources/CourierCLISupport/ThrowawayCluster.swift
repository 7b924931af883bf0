import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary PostgreSQL cluster started from the installed server binaries, for `courier demo`
/// and `courier bench`: no configuration, a free port on 127.0.0.1, trust authentication, gone
/// after `stop()`.
///
/// `initdb` refuses to run as root, so as root the cluster belongs to the `postgres` user.
package final class ThrowawayCluster {
    /// The libpq URI of the cluster's `postgres` database.
    package let url: String
    private let directory: URL
    private let binDirectory: String
    private let asOwner: [String]
    private var running = true
    private var cleanupKey: Int?

    /// Initializes and starts a cluster; throws a `CLIError` that says what is missing.
    package init(tuning: [String] = []) throws {
        guard let bin = Self.findServerBinaries() else {
            throw CLIError("no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin); install them: apt-get install -y postgresql")
        }
        binDirectory = bin
        let isRoot = getuid() == 0
        asOwner = isRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : []
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-cluster-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        if isRoot {
            guard let owner = getpwnam("postgres") else {
                throw CLIError("running as root needs a 'postgres' user to own the throwaway cluster (apt-get install -y postgresql creates it)")
            }
            chown(directory.path, owner.pointee.pw_uid, owner.pointee.pw_gid)
        }
        let port = try Self.freePort()
        url = "postgresql://postgres@127.0.0.1:\(port)/postgres"
        let data = directory.appendingPathComponent("data").path
        try run(["\(bin)/initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"])
        let settings = [
            "port = \(port)", "listen_addresses = '127.0.0.1'", "unix_socket_directories = '\(directory.path)'",
            "max_connections = 200", "fsync = off", "synchronous_commit = off", "full_page_writes = off",
            "log_min_messages = warning",
        ] + tuning
        let conf = URL(fileURLWithPath: data).appendingPathComponent("postgresql.conf")
        let handle = try FileHandle(forWritingTo: conf)
        handle.seekToEndOfFile()
        handle.write(Data(("\n" + settings.joined(separator: "\n") + "\n").utf8))
        try handle.close()
        try run(["\(bin)/pg_ctl", "-D", data, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "60", "start"])
        let box = UncheckedBox(self)
        cleanupKey = SignalCleanup.shared.add { box.value.stop() }
    }

    deinit { stop() }

    /// Stops the server and deletes the cluster. Safe to call twice.
    package func stop() {
        guard running else { return }
        running = false
        if let cleanupKey { SignalCleanup.shared.remove(cleanupKey) }
        _ = try? run(["\(binDirectory)/pg_ctl", "-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs a command to completion (see `Spawn`), its output in `command.log`.
    private func run(_ command: [String]) throws {
        let full = asOwner + command
        let logPath = directory.appendingPathComponent("command.log").path
        let exitCode = Spawn.wait(try Spawn.start(full, outputPath: logPath, append: false))
        guard exitCode == 0 else {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            let name = URL(fileURLWithPath: command[0]).lastPathComponent
            let reason = text.split(separator: "\n").last.map(String.init) ?? "exit \(exitCode)"
            throw CLIError("\(name) failed while starting the throwaway cluster: \(reason)")
        }
    }

    package static func findServerBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = "\(root)/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: "\(bin)/initdb") { return bin }
        }
        return nil
    }

    /// Asks the kernel for a free port by binding port 0.
    package static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIError("cannot open a socket to find a free port") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw CLIError("cannot bind a socket to find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time and peak memory of a process, read from /proc (Linux).
struct ProcessStats {
    /// User plus system CPU seconds so far.
    var cpuSeconds: Double
    /// Peak resident set size in bytes (VmHWM).
    var peakRSS: Int

    static func read(pid: pid_t) -> ProcessStats? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name: state is field 3; utime and stime are 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var peak = 0
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
            for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
                peak = (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) * 1024
            }
        }
        return ProcessStats(cpuSeconds: (user + system) / ticks, peakRSS: peak)
    }

    static func current() -> ProcessStats { read(pid: getpid()) ?? ProcessStats(cpuSeconds: 0, peakRSS: 0) }
}

/// A `courier worker` child process started by the benchmark: the real worker path, measured
/// from outside.
final class WorkerProcess {
    let pid: pid_t
    let logPath: String

    init(arguments: [String], logPath: String) throws {
        self.logPath = logPath
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let full = [executable, "worker"] + arguments
        let argv: [UnsafeMutablePointer<CChar>?] = full.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, nil, argv, environ)
        guard status == 0 else { throw CLIError("cannot start the worker: \(String(cString: strerror(status)))") }
        pid = child
    }

    var stats: ProcessStats? { ProcessStats.read(pid: pid) }

    /// Whether it is still running.
    var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// SIGTERM, then waits for it to exit; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

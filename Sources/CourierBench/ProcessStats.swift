import Foundation
import CourierCLISupport

#if canImport(Glibc)
    import Glibc
#endif

/// CPU time and peak memory of a process, read from /proc (Linux).
package struct ProcessStats {
    /// User plus system CPU seconds so far.
    package var cpuSeconds: Double
    /// Peak resident set size in bytes (VmHWM).
    package var peakRSS: Int

    package static func read(pid: pid_t) -> ProcessStats? {
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

    package static func current() -> ProcessStats { read(pid: getpid()) ?? ProcessStats(cpuSeconds: 0, peakRSS: 0) }
}

/// The CPU a local PostgreSQL cluster has used, read from /proc: what the drain costs the
/// database besides the worker. The benchmark's own session (`observer`), which polls for the
/// end of a drain (`DrainPoll`), is left out: no user's worker pays for it.
package struct ServerCPU {
    /// The postmaster's process id.
    package let postmaster: pid_t
    /// The server process of the benchmark's own connection, whose CPU is not counted.
    package let observer: pid_t?

    /// The cluster whose data directory is `dataDirectory` (its `postmaster.pid` names the
    /// postmaster); nil when that file cannot be read (a server on another machine or user).
    package init?(dataDirectory: String, observer: pid_t? = nil) {
        guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
              let first = text.split(separator: "\n").first, let pid = pid_t(first), pid > 0
        else { return nil }
        postmaster = pid
        self.observer = observer
    }

    /// CPU seconds so far: the postmaster's own and those of the children it reaped (ended
    /// connections), plus every live child's (backends, WAL writer, checkpointer, autovacuum)
    /// but the observer's.
    package var seconds: Double? {
        guard let own = Self.times(postmaster) else { return nil }
        var ticks = own.user + own.system + own.childrenUser + own.childrenSystem
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry), pid != postmaster, pid != observer, let child = Self.times(pid),
                  child.parent == postmaster
            else { continue }
            ticks += child.user + child.system
        }
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Fields 4 (parent) and 14-17 (user, system, and reaped children's user and system ticks)
    /// of `/proc/<pid>/stat`.
    private static func times(_ pid: pid_t) -> (parent: pid_t, user: Double, system: Double, childrenUser: Double, childrenSystem: Double)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let parent = pid_t(fields[1]), let user = Double(fields[11]), let system = Double(fields[12]),
              let childrenUser = Double(fields[13]), let childrenSystem = Double(fields[14])
        else { return nil }
        return (parent, user, system, childrenUser, childrenSystem)
    }
}

/// A `courier worker` child process started by the benchmark: the real worker path, measured
/// from outside.
package final class WorkerProcess {
    package let pid: pid_t
    package let logPath: String

    package init(arguments: [String], logPath: String) throws {
        self.logPath = logPath
        // COURIER_BENCH_WORKER runs another build's worker under the same benchmark (A/B).
        let executable =
            ProcessInfo.processInfo.environment["COURIER_BENCH_WORKER"]
            ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let pid = try Spawn.start(
            [executable, "worker"] + arguments, outputPath: logPath, append: true,
            environment: Self.environment(ProcessInfo.processInfo.environment))
        self.pid = pid
        cleanupKey = SignalCleanup.shared.add { kill(pid, SIGKILL) }
    }

    private var cleanupKey: Int?

    /// The worker's environment: the benchmark's without its `COURIER_` variables, so the
    /// worker runs with its defaults and the benchmark's flags alone, as the `Worker:` line
    /// says (a `COURIER_PER_HOST_LIMIT` left in the shell would otherwise change the figures
    /// unseen).
    package static func environment(_ inherited: [String: String]) -> [String: String] {
        inherited.filter { !$0.key.hasPrefix("COURIER_") }
    }

    package var stats: ProcessStats? { ProcessStats.read(pid: pid) }

    /// Whether it is still running.
    package var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    /// SIGTERM, then waits for it to exit; returns the exit status.
    @discardableResult
    package func stop() -> Int32 {
        kill(pid, SIGTERM)
        defer { if let cleanupKey { SignalCleanup.shared.remove(cleanupKey) } }
        return Spawn.wait(pid)
    }
}

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

/// A `courier worker` child process started by the benchmark: the real worker path, measured
/// from outside.
package final class WorkerProcess {
    package let pid: pid_t
    package let logPath: String

    package init(arguments: [String], logPath: String) throws {
        self.logPath = logPath
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let pid = try Spawn.start([executable, "worker"] + arguments, outputPath: logPath, append: true)
        self.pid = pid
        cleanupKey = SignalCleanup.shared.add { kill(pid, SIGKILL) }
    }

    private var cleanupKey: Int?

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

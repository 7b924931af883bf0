import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Starts child processes with posix_spawn and waits with waitpid.
///
/// Foundation's `Process` is not used: `pg_ctl start` leaves a server behind that inherits the
/// child's descriptors, which can keep `Process` from ever noticing the exit.
package enum Spawn {
    /// Starts `arguments` (the first is the executable's path) with stdin from /dev/null and
    /// stdout and stderr to `outputPath` (appended or truncated); returns the pid. The child gets
    /// `environment`, or this process's environment when it is nil.
    package static func start(
        _ arguments: [String], outputPath: String, append: Bool, environment: [String: String]? = nil
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] =
            (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, nil, argv, envp)
        guard status == 0 else {
            throw CLIError("cannot run \(arguments[0]): \(String(cString: strerror(status)))")
        }
        return pid
    }

    /// Waits for `pid` to exit; returns its exit code (128 + signal when killed).
    package static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What one run of the `courier` binary printed and returned.
public struct CommandResult: Sendable {
    /// Exit status.
    public var status: Int32
    /// Standard output.
    public var stdout: String
    /// Standard error.
    public var stderr: String

    /// Non-empty lines of standard error.
    public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }

    /// Standard output parsed as JSON.
    public func json() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(stdout.utf8), options: [.fragmentsAllowed])
    }
}

/// Runs the real `courier` binary the way an operator would, for CLI tests.
public enum CourierRunner {
    /// Runs `courier arguments...` with `COURIER_DATABASE_URL` set to `databaseURL` (when
    /// given), stdin from `stdin` (else /dev/null), and output captured through temporary
    /// files (pipes could fill and block a chatty command).
    public static func run(
        _ arguments: [String], databaseURL: String?, stdin: Data? = nil, environment: [String: String] = [:]
    ) throws -> CommandResult {
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "COURIER_DATABASE_URL")
        if let databaseURL { env["COURIER_DATABASE_URL"] = databaseURL }
        for (key, value) in environment { env[key] = value }
        return try runProgram(CourierBinary.path, arguments, environment: env, stdin: stdin)
    }
}

/// Runs `executable arguments...` to completion with exactly `environment`, stdin from `stdin`
/// (else empty), and its output captured through temporary files (pipes could fill and block
/// a chatty command): `courier` for CLI tests, the repository's scripts for theirs.
public func runProgram(
    _ executable: String, _ arguments: [String], environment: [String: String], stdin: Data? = nil
) throws -> CommandResult {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let outURL = directory.appendingPathComponent("out")
    let errURL = directory.appendingPathComponent("err")
    let inURL = directory.appendingPathComponent("in")
    for (url, contents) in [(outURL, Data()), (errURL, Data()), (inURL, stdin ?? Data())] {
        guard FileManager.default.createFile(atPath: url.path, contents: contents) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
        }
    }
    // posix_spawn and waitpid rather than Foundation's Process, whose waitUntilExit was seen
    // to wait forever for a child that had exited (see runShellCommand).
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, inURL.path, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outURL.path, O_WRONLY | O_TRUNC, 0)
    posix_spawn_file_actions_addopen(&actions, 2, errURL.path, O_WRONLY | O_TRUNC, 0)
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    guard spawned == 0 else {
        throw CocoaError(.executableLoad, userInfo: ["path": executable, "errno": spawned])
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return CommandResult(
        status: exitCode,
        stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
        stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
}

/// Waits for a Foundation `Process` to exit, at most `timeout`. Foundation's
/// `waitUntilExit` was seen to wait forever for a child that had already exited (its exit
/// went unnoticed); a test must fail or go on, never hang the whole run.
///
/// `isRunning` alone was seen to stay true for the whole minute after `courier stats --watch`
/// had exited: on Linux `Process` learns of the exit from a socket that the child's own
/// children, or programs this test process spawned meanwhile, may hold open
/// (swift-corelibs-foundation issue 4795). So the kernel is asked too, without reaping the
/// child, and once it has exited `Process` gets at most 2 s to notice.
public func waitForExit(_ process: Process, timeout: Duration = .seconds(60)) {
    let deadline = ContinuousClock.now + timeout
    let pid = process.processIdentifier
    while process.isRunning && !hasExited(pid) && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
    guard process.isRunning else { return }
    if !hasExited(pid) {
        kill(pid, SIGKILL)
        return
    }
    let noticed = min(deadline, ContinuousClock.now + .seconds(2))
    while process.isRunning && ContinuousClock.now < noticed { Thread.sleep(forTimeInterval: 0.02) }
}

/// Whether child `pid` has exited, asked of the kernel without reaping it (`WNOWAIT`), so
/// that its owner (`Process`, `waitpid`) still collects its status.
private func hasExited(_ pid: pid_t) -> Bool {
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 else {
        return errno == ECHILD  // already collected by its owner
    }
    return info._sifields._sigchld.si_pid == pid
}

/// Runs a tool (`systemd-analyze`, `promtool`, ...) to its end: its exit status and its
/// standard output and error together.
public func runTool(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    waitForExit(process)
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

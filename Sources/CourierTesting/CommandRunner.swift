import Foundation

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
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out")
        let errURL = directory.appendingPathComponent("err")
        let inURL = directory.appendingPathComponent("in")
        FileManager.default.createFile(atPath: outURL.path, contents: nil)
        FileManager.default.createFile(atPath: errURL.path, contents: nil)
        FileManager.default.createFile(atPath: inURL.path, contents: stdin ?? Data())

        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "COURIER_DATABASE_URL")
        if let databaseURL { env["COURIER_DATABASE_URL"] = databaseURL }
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        process.waitUntilExit()
        try out.close()
        try err.close()
        try input.close()
        return CommandResult(
            status: process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }
}

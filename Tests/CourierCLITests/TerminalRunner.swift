import CourierTesting
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `courier` with stdin on a pseudo-terminal, the way an operator at a shell runs it, so
/// tests can answer a confirmation question. Stdout and stderr still go to files.
enum TerminalRunner {
    /// Runs `courier arguments...` against `databaseURL` with `typed` already waiting on the
    /// terminal (e.g. `"y\n"`); the command reads it when it asks.
    static func run(_ arguments: [String], databaseURL: String, typed: String) throws -> Result {
        let master = try C.posixOpenpt(O_RDWR | O_NOCTTY)
        var name = [CChar](repeating: 0, count: 128)
        guard master >= 0, try C.grantpt(master) == 0, try C.unlockpt(master) == 0,
            try C.ptsnameR(master, &name, name.count) == 0
        else {
            throw TerminalError(message: "cannot open a pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        defer { close(master) }
        let slavePath = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let slave = open(slavePath, O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw TerminalError(message: "cannot open \(slavePath)") }
        defer { close(slave) }
        let bytes = Array(typed.utf8)
        guard write(master, bytes, bytes.count) == bytes.count else { throw TerminalError(message: "cannot type") }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "courier-tty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out")
        let errURL = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: CourierBinary.path)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["COURIER_DATABASE_URL"] = databaseURL
        process.environment = environment
        process.standardInput = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        process.standardOutput = out
        process.standardError = err
        try process.run()
        waitForExit(process)
        try out.close()
        try err.close()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }

    /// What the command printed and returned.
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The pseudo-terminal calls of the C library. Glibc's module map leaves them out (they
    /// sit behind `_XOPEN_SOURCE`), so they are looked up by name.
    enum C {
        private static func symbol<T>(_ name: String, as type: T.Type) throws -> T {
            // RTLD_DEFAULT: the symbols already loaded into the process, libc among them.
            guard let pointer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
                throw TerminalError(message: "\(name) not found in the C library")
            }
            return unsafeBitCast(pointer, to: type)
        }

        static func posixOpenpt(_ flags: Int32) throws -> Int32 {
            try symbol("posix_openpt", as: (@convention(c) (Int32) -> Int32).self)(flags)
        }

        static func grantpt(_ fd: Int32) throws -> Int32 {
            try symbol("grantpt", as: (@convention(c) (Int32) -> Int32).self)(fd)
        }

        static func unlockpt(_ fd: Int32) throws -> Int32 {
            try symbol("unlockpt", as: (@convention(c) (Int32) -> Int32).self)(fd)
        }

        static func ptsnameR(_ fd: Int32, _ buffer: UnsafeMutablePointer<CChar>, _ size: Int) throws -> Int32 {
            try symbol("ptsname_r", as: (@convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32).self)(
                fd, buffer, size)
        }
    }

    struct TerminalError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

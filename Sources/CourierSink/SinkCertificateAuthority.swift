import Foundation

/// A certificate authority made for one run and a server certificate it signed, for a sink
/// that speaks HTTPS (`courier bench --scenarios tls`, tests of TLS name checks): made with the
/// `openssl` command, so nothing ships a key.
public enum SinkCertificateAuthority {
    /// The files made, by name: `ca.pem` (the authority's certificate, what a client trusts),
    /// `server.pem` and `server.key` (the sink's), and the scratch files `ca.cnf`, `ca.key`,
    /// `server.csr`, `openssl.log`.
    public static let fileNames = ["ca.cnf", "ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "openssl.log"]

    /// The `openssl` command, if installed.
    public static var openssl: String? {
        ["/usr/bin/openssl", "/bin/openssl"].first(where: FileManager.default.isExecutableFile)
    }

    /// Makes an authority and a certificate for `serverName` (a DNS name) signed by it, valid
    /// two days, writing each of ``fileNames`` at `path(name)`.
    ///
    /// - Returns: The sink's files, for ``HTTPSink/start(host:port:tls:immediate:)``.
    /// - Throws: ``Failure`` when `openssl` is missing or fails.
    public static func make(serverName: String, path: (String) -> String) throws -> SinkTLS {
        guard let openssl else { throw Failure(message: "needs the openssl command (apt-get install openssl)") }
        try """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = Courier test CA
            [ca]
            basicConstraints = critical,CA:TRUE
            keyUsage = critical,keyCertSign,cRLSign
            subjectKeyIdentifier = hash
            [server]
            basicConstraints = critical,CA:FALSE
            keyUsage = critical,digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:\(serverName)
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid

            """.write(toFile: path("ca.cnf"), atomically: true, encoding: .utf8)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509", "-config", path("ca.cnf"), "-extensions", "ca"] + ec
                + ["-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2"],
            ["req", "-new", "-config", path("ca.cnf"), "-subj", "/CN=\(serverName)"] + ec
                + ["-keyout", path("server.key"), "-out", path("server.csr")],
            ["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
             "-set_serial", "2", "-days", "2", "-extfile", path("ca.cnf"), "-extensions", "server",
             "-out", path("server.pem")],
        ]
        for arguments in steps {
            let status = try run([openssl] + arguments, log: path("openssl.log"))
            guard status == 0 else {
                let output = (try? String(contentsOfFile: path("openssl.log"), encoding: .utf8)) ?? ""
                throw Failure(message: "openssl \(arguments[0]) failed: \(output.suffix(500))")
            }
        }
        return SinkTLS(certificateChainFile: path("server.pem"), privateKeyFile: path("server.key"))
    }

    /// Why no authority could be made.
    public struct Failure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Runs `arguments` with its output appended to `log`; returns the exit status.
    private static func run(_ arguments: [String], log: String) throws -> Int32 {
        if !FileManager.default.fileExists(atPath: log),
            !FileManager.default.createFile(atPath: log, contents: nil, attributes: [.posixPermissions: 0o600])
        {
            throw Failure(message: "cannot create \(log)")
        }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? output.close() }
        try output.seekToEnd()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

import CourierSink
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XCTest

/// A certificate authority made for one test: its certificate and a server certificate it
/// signed for `receiver.test`, loaded into memory; no file is left behind.
struct TestCertificateAuthority {
    /// The name the server certificate is for.
    static let serverName = "receiver.test"

    let caCertificate: NIOSSLCertificate
    let serverCertificate: NIOSSLCertificate
    let serverKey: NIOSSLPrivateKey

    /// Makes a CA and a server certificate under the temporary directory
    /// (`SinkCertificateAuthority`), loads them, removes the files. Skips (fails under
    /// `CI=true`) when `openssl` is missing.
    static func make() throws -> TestCertificateAuthority {
        guard SinkCertificateAuthority.openssl != nil else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                throw CertificateError(message: "openssl is missing (apt-get install openssl)")
            }
            throw XCTSkip("openssl is not installed (apt-get install openssl); TLS receivers not tested")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let files = try SinkCertificateAuthority.make(serverName: serverName, path: path)
        return TestCertificateAuthority(
            caCertificate: try onlyCertificate(in: path("ca.pem")),
            serverCertificate: try onlyCertificate(in: files.certificateChainFile),
            serverKey: try NIOSSLPrivateKey(file: files.privateKeyFile, format: .pem))
    }

    private static func onlyCertificate(in path: String) throws -> NIOSSLCertificate {
        let certificates = try NIOSSLCertificate.fromPEMFile(path)
        guard certificates.count == 1, let certificate = certificates.first else {
            throw CertificateError(message: "\(path) holds \(certificates.count) certificates")
        }
        return certificate
    }

    /// A client TLS configuration that trusts this CA only.
    var clientConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates([caCertificate])
        return configuration
    }

    struct CertificateError: Error {
        var message: String
    }
}

/// An HTTPS server on 127.0.0.1 with the CA's server certificate: 200 `secure` to every
/// request, connections kept alive; it counts accepted connections and requests.
final class TLSReceiver: @unchecked Sendable {
    private let channel: any Channel
    private let lock = NSLock()
    // Guarded by `lock`.
    private var accepted = 0
    private var requestCount = 0
    private var bodyByteCount = 0

    let port: Int

    private init(channel: any Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    static func start(authority: TestCertificateAuthority) async throws -> TLSReceiver {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(authority.serverCertificate)], privateKey: .privateKey(authority.serverKey))
        let context = try NIOSSLContext(configuration: configuration)
        let box = ReceiverBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                box.receiver?.count(connection: true)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        SecureAnswer(counted: { box.receiver?.count(connection: false) },
                                     bytes: { box.receiver?.count(bodyBytes: $0) }))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let receiver = TLSReceiver(channel: channel)
        box.receiver = receiver
        return receiver
    }

    var connections: Int { lock.withLock { accepted } }
    var requests: Int { lock.withLock { requestCount } }
    /// Request body bytes received, over all requests.
    var bodyBytes: Int { lock.withLock { bodyByteCount } }

    fileprivate func count(bodyBytes: Int) { lock.withLock { bodyByteCount += bodyBytes } }

    fileprivate func count(connection: Bool) {
        lock.withLock {
            if connection { accepted += 1 } else { requestCount += 1 }
        }
    }

    func stop() async throws {
        try await channel.close()
    }
}

private final class ReceiverBox: @unchecked Sendable {
    private let lock = NSLock()
    private weak var _receiver: TLSReceiver?
    var receiver: TLSReceiver? {
        get { lock.withLock { _receiver } }
        set { lock.withLock { _receiver = newValue } }
    }
}

private final class SecureAnswer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let counted: () -> Void
    private let bytes: (Int) -> Void

    init(counted: @escaping () -> Void, bytes: @escaping (Int) -> Void) {
        self.counted = counted
        self.bytes = bytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if case .body(let chunk) = part { bytes(chunk.readableBytes) }
        guard case .end = part else { return }
        counted()
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "6")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: "secure")))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

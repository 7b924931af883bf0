import AsyncHTTPClient
import NIOCore
import XCTest

@testable import RetryClient

#if canImport(Glibc)
    import Glibc
#endif

/// The mappings that the loopback tests cannot provoke on 127.0.0.1 (DNS, connect timeouts),
/// checked against the error values and descriptions NIO and AsyncHTTPClient produce.
final class TransportErrorClassificationTests: XCTestCase {
    private func kind(_ error: any Error) -> TransportError.Kind {
        AsyncHTTPClientTransport.classify(error).kind
    }

    func testHTTPClientErrors() {
        XCTAssertEqual(kind(HTTPClientError.connectTimeout), .connectTimeout)
        XCTAssertEqual(kind(HTTPClientError.readTimeout), .readTimeout)
        XCTAssertEqual(kind(HTTPClientError.deadlineExceeded), .readTimeout)
        XCTAssertEqual(kind(HTTPClientError.remoteConnectionClosed), .connectionReset)
        XCTAssertEqual(kind(HTTPClientError.invalidURL), .invalidRequest)
        XCTAssertEqual(kind(HTTPClientError.emptyHost), .invalidRequest)
        XCTAssertEqual(kind(HTTPClientError.emptyScheme), .invalidRequest)
        XCTAssertEqual(kind(HTTPClientError.unsupportedScheme("ftp")), .invalidRequest)
        XCTAssertEqual(kind(HTTPClientError.cancelled), .other)
    }

    func testIOErrorsByErrno() {
        XCTAssertEqual(kind(IOError(errnoCode: ECONNREFUSED, reason: "connect")), .connectRefused)
        XCTAssertEqual(kind(IOError(errnoCode: ECONNRESET, reason: "read")), .connectionReset)
        XCTAssertEqual(kind(IOError(errnoCode: EPIPE, reason: "write")), .connectionReset)
        XCTAssertEqual(kind(IOError(errnoCode: ENETUNREACH, reason: "connect")), .notConnected)
        XCTAssertEqual(kind(ChannelError.connectTimeout(.seconds(1))), .connectTimeout)
        XCTAssertEqual(kind(ChannelError.eof), .connectionReset)
        XCTAssertEqual(kind(CancellationError()), .other)
    }

    func testDescriptionsOfErrorsFromModulesNotImported() {
        func kind(_ text: String) -> TransportError.Kind {
            AsyncHTTPClientTransport.classify(description: text).kind
        }
        // NIOPosix's NIOConnectionError prints its (nil) DNS fields next to the real cause.
        XCTAssertEqual(
            kind(
                "NIOConnectionError(host: \"a\", port: 1, dnsAError: nil, dnsAAAAError: nil, connectionErrors: "
                    + "[SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:1, error: connection reset "
                    + "(error set): Connection refused (errno: 111))])"
            ),
            .connectRefused
        )
        XCTAssertEqual(
            kind(
                "NIOConnectionError(host: \"a\", port: 1, dnsAError: Optional(SocketAddressError.unknown), "
                    + "dnsAAAAError: nil, connectionErrors: [])"
            ),
            .dnsFailure
        )
        XCTAssertEqual(kind("SocketAddressError.UnknownHost: Name or service not known (error -2)"), .dnsFailure)
        XCTAssertEqual(kind("NIOSSL.NIOSSLError.handshakeFailed(...)"), .tlsFailure)
        XCTAssertEqual(kind("NIOSSLExtraError.failedToValidateHostname: certificate verify failed"), .tlsFailure)
        XCTAssertEqual(kind("ChannelError.connectTimeout(1 s)"), .connectTimeout)
        XCTAssertEqual(kind("something else entirely"), .other)
    }
}

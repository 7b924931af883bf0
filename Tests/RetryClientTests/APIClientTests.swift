import CourierSink
import Foundation
import RetryClient
import RetryClientTesting
import XCTest

/// The typed API client: endpoints become requests, 2xx bodies decode, failures are typed.
final class APIClientTests: XCTestCase {
    private struct Invoice: Codable, Sendable, Equatable {
        var id: Int
        var total: Int
    }

    private struct NewInvoice: Encodable, Sendable {
        var customer: String
        var lines: [Int]
    }

    func testEndpointBecomesOneRequestAndItsResponseDecodes() async throws {
        let stub = StubTransport { _, _ in json(200, #"{"id": 42, "total": 1200}"#) }
        let api = APIClient(baseURL: "https://api.example.com/v1/", transport: stub)
        let endpoint = Endpoint<Invoice>(
            method: "POST", path: "/invoices", query: [URLQueryItem(name: "expand", value: "lines & tax+")],
            headers: ["X-Tenant": "acme"], body: .json(NewInvoice(customer: "c1", lines: [1, 2])))
        let invoice = try await api.send(endpoint)
        XCTAssertEqual(invoice, Invoice(id: 42, total: 1200))
        let sent = try XCTUnwrap(stub.requests.first)
        XCTAssertEqual(stub.callCount, 1)
        XCTAssertEqual(sent.method, "POST")
        XCTAssertEqual(sent.url, "https://api.example.com/v1/invoices?expand=lines%20%26%20tax%2B")
        XCTAssertEqual(sent.headers["Content-Type"], "application/json")
        XCTAssertEqual(sent.headers["Accept"], "application/json")
        XCTAssertEqual(sent.headers["X-Tenant"], "acme")
        XCTAssertEqual(String(decoding: sent.body ?? [], as: UTF8.self), #"{"customer":"c1","lines":[1,2]}"#)
    }

    func testFormBodyKeepsFieldOrderEscapesAndLeavesOutNil() throws {
        struct Form: Encodable, Sendable {
            var grantType = "client_credentials"
            var scope: String? = "read write"
            var skipped: String? = nil
            var odd = "a&b=c/é"
            var count = 3
            var flag = true
            enum CodingKeys: String, CodingKey { case grantType = "grant_type", scope, skipped, odd, count, flag }
        }
        XCTAssertEqual(
            try FormEncoder().encodeToString(Form()),
            "grant_type=client_credentials&scope=read+write&odd=a%26b%3Dc%2F%C3%A9&count=3&flag=true")
        struct Nested: Encodable, Sendable { var inner = ["a": 1] }
        XCTAssertThrowsError(try FormEncoder().encodeToString(Nested())) { error in
            XCTAssertTrue("\(error)".contains("inner"), "\(error)")
        }
        struct List: Encodable, Sendable { var items = [1, 2] }
        XCTAssertThrowsError(try FormEncoder().encodeToString(List()))
    }

    func testFormEndpointSetsItsContentType() async throws {
        struct Form: Encodable, Sendable { var a = "1" }
        let stub = StubTransport { _, _ in response(204) }
        let api = APIClient(baseURL: "http://127.0.0.1:9/token", transport: stub)
        _ = try await api.send(Endpoint<EmptyResponse>(method: "POST", body: .form(Form())))
        XCTAssertEqual(stub.requests.first?.url, "http://127.0.0.1:9/token")
        XCTAssertEqual(stub.requests.first?.headers["Content-Type"], "application/x-www-form-urlencoded")
        XCTAssertEqual(stub.requests.first?.body, Array("a=1".utf8))
    }

    func testNon2xxThrowsItsStatusWithARedactedExcerpt() async {
        let body = #"{"error":"invalid_client","access_token":"leaked-token","hint":"client_secret=leaked-secret"}"#
        let stub = StubTransport { _, _ in json(401, body) }
        let api = APIClient(baseURL: "http://127.0.0.1:9", transport: stub)
        do {
            _ = try await api.send(Endpoint<Invoice>(path: "x"))
            XCTFail("no error")
        } catch {
            guard case .status(401, _, let excerpt, nil) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(error.errorCode, "invalid_client")
            XCTAssertFalse(excerpt.contains("leaked"), excerpt)
            XCTAssertFalse(error.description.contains("leaked"), error.description)
            XCTAssertTrue(excerpt.contains(#""access_token":"***""#), excerpt)
        }
    }

    func testExcerptIsBoundedAndPrintable() {
        let excerpt = APIError.redactedExcerpt(Array(("\u{1B}[31m" + String(repeating: "x", count: 5000)).utf8))
        XCTAssertLessThanOrEqual(excerpt.count, APIError.maximumExcerptCharacters + 1)
        XCTAssertFalse(excerpt.contains("\u{1B}"))
    }

    func testBodyOfTheWrongShapeIsADecodingErrorNamingTheField() async {
        let stub = StubTransport { _, _ in json(200, #"{"id": "forty-two", "total": 1}"#) }
        let api = APIClient(baseURL: "http://127.0.0.1:9", transport: stub)
        do {
            _ = try await api.send(Endpoint<Invoice>())
            XCTFail("no error")
        } catch {
            guard case .decoding(let type, let message, _) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(type, "Invoice")
            XCTAssertTrue(message.contains("id"), message)
        }
        let truncated = StubTransport { _, _ in
            HTTPResponseSummary(status: 200, bodyExcerpt: Array(#"{"id": 1"#.utf8), bodyTruncated: true)
        }
        do {
            _ = try await APIClient(baseURL: "http://127.0.0.1:9", transport: truncated).send(Endpoint<Invoice>())
            XCTFail("no error")
        } catch {
            guard case .decoding(_, let message, _) = error else { return XCTFail("got \(error)") }
            XCTAssertTrue(message.contains("longer"), message)
        }
    }

    func testTransportFailureAndBadURLAreTheirOwnCases() async {
        let stub = StubTransport { _, _ in throw TransportError(kind: .connectRefused, message: "Connection refused") }
        do {
            _ = try await APIClient(baseURL: "http://127.0.0.1:9", transport: stub).send(Endpoint<Invoice>())
            XCTFail("no error")
        } catch {
            guard case .transport(let transport, _) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(transport.kind, .connectRefused)
        }
        do {
            _ = try await APIClient(baseURL: "ftp://example.com", transport: stub).send(Endpoint<Invoice>())
            XCTFail("no error")
        } catch {
            guard case .invalidRequest = error else { return XCTFail("got \(error)") }
        }
        XCTAssertEqual(stub.callCount, 1, "an invalid request is never sent")
    }

    func testRequestsGoThroughTheInterceptorsAdaptersAndRetriers() async throws {
        struct Stamp: RequestAdapter {
            func adapt(_ request: OutboundRequest, context: AttemptContext) async throws -> OutboundRequest {
                var adapted = request
                adapted.headers["X-Attempt"] = String(context.attempt)
                return adapted
            }
        }
        let stub = StubTransport { _, index in index == 0 ? response(503) : json(200, #"{"id":1,"total":2}"#) }
        let api = APIClient(
            baseURL: "http://127.0.0.1:9", transport: stub,
            interceptor: Interceptor(adapters: [Stamp()], retriers: [instantPolicy()]))
        let invoice = try await api.send(Endpoint<Invoice>())
        XCTAssertEqual(invoice.id, 1)
        XCTAssertEqual(stub.requests.map { $0.headers["X-Attempt"] }, ["1", "2"])
    }

    /// The whole path on a real socket: AsyncHTTPClientTransport, a loopback server that reads
    /// the form body and answers JSON.
    func testRealLoopbackServerReceivesTheFormAndItsAnswerDecodes() async throws {
        let sink = try await HTTPSink.start { request in
            let body = String(decoding: request.body, as: UTF8.self)
            guard request.method == "POST", request.header("content-type") == "application/x-www-form-urlencoded",
                body == "grant_type=client_credentials&scope=a+b"
            else { return .respond(status: 400, body: Array(#"{"error":"invalid_request"}"#.utf8)) }
            return .respond(
                status: 200, headers: [("Content-Type", "application/json")],
                body: Array(#"{"access_token":"t-1","expires_in":3600,"token_type":"bearer"}"#.utf8))
        }
        let transport = AsyncHTTPClientTransport()
        do {
            struct Form: Encodable, Sendable {
                var grant_type = "client_credentials"
                var scope = "a b"
            }
            let api = APIClient(baseURL: sink.baseURL, transport: transport)
            let token = try await api.send(Endpoint<OAuth2TokenResponse>(method: "POST", path: "token", body: .form(Form())))
            XCTAssertEqual(token, OAuth2TokenResponse(accessToken: "t-1", expiresIn: .seconds(3600), tokenType: "bearer"))
            do {
                _ = try await api.send(Endpoint<OAuth2TokenResponse>(method: "GET", path: "token"))
                XCTFail("no error")
            } catch {
                XCTAssertEqual(error.status, 400)
                XCTAssertEqual(error.errorCode, "invalid_request")
            }
        }
        try await transport.shutdown()
        await sink.shutdown()
    }
}

/// A JSON response for stubs.
private func json(_ status: Int, _ text: String) -> HTTPResponseSummary {
    HTTPResponseSummary(
        status: status, reason: status == 200 ? "OK" : "", headers: ["Content-Type": "application/json"],
        bodyExcerpt: Array(text.utf8))
}

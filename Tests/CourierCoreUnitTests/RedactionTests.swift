import CourierCore
import XCTest

/// The redaction rules, as tables of input and expected output.
final class RedactionTests: XCTestCase {
    func testURLs() {
        let cases: [(String, String)] = [
            ("https://example.com/hook", "https://example.com/hook"),
            ("https://user:pass@example.com/hook", "https://***@example.com/hook"),
            ("https://tokenonly@example.com", "https://***@example.com"),
            ("https://example.com/x?token=abc&page=2", "https://example.com/x?token=***&page=2"),
            ("https://example.com/x?page=2&API_KEY=abc", "https://example.com/x?page=2&API_KEY=***"),
            ("https://example.com/x?access_token=abc#frag", "https://example.com/x?access_token=***#frag"),
            ("https://example.com/cb#access_token=abc&state=1", "https://example.com/cb#access_token=***&state=1"),
            ("https://example.com/x?sig=abc;session_id=9", "https://example.com/x?sig=***;session_id=***"),
            ("https://example.com/x?Pass%77ord=abc", "https://example.com/x?Pass%77ord=***"),
            ("https://example.com/x?X-Amz-Signature=abc&X-Amz-Credential=def",
             "https://example.com/x?X-Amz-Signature=***&X-Amz-Credential=***"),
            ("https://example.com:8443/x?q=1", "https://example.com:8443/x?q=1"),
            ("https://example.com/users/@me", "https://example.com/users/@me"),
            ("https://a.example/login?next=https://u:p@b.example/x?token=t&q=1",
             "https://a.example/login?next=https://***@b.example/x?token=***&q=1"),
            // Not parseable as URLs, still redacted.
            ("https://user:pa ss@exa mple.com/x", "https://***@exa mple.com/x"),
            ("https://user:pa/ss@example.com/x", "https://***@example.com/x"),
            ("https://user:p@ss@example.com:99999/x", "https://***@example.com:99999/x"),
            ("ht tp://u:secret@[::1/x?token=t", "ht tp://***@[::1/x?token=***"),
            ("https://example.com/\u{1B}[31mred\u{1B}[0m\r\n", "https://example.com/red"),
            ("", ""),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(Redaction.url(input), expected, input.debugDescription)
        }
    }

    func testSecretNames() {
        let secret = ["token", "X-Api-Key", "api_key", "ACCESS_TOKEN", "Password", "passwd", "pwd", "signature",
                      "sig", "Authorization", "x-auth", "X-Api-Credential", "Cookie", "Set-Cookie", "session",
                      "client_secret", "Proxy-Authorization", "webhook-signature"]
        let plain = ["Content-Type", "X-Tenant", "page", "User-Agent", "Accept", "webhook-id", "Host", "q"]
        for name in secret { XCTAssertTrue(Redaction.isSecretHeader(name), name) }
        for name in plain { XCTAssertFalse(Redaction.isSecretHeader(name), name) }
    }

    func testHeaderValues() {
        let cases: [(String, String, String)] = [
            ("Authorization", "Bearer abc", "<redacted, 10 bytes>"),
            ("X-Api-Credential", "s3cr3t", "<redacted, 6 bytes>"),
            ("cookie", "a=b", "<redacted, 3 bytes>"),
            ("X-Tenant", "42", "42"),
            ("X-Tenant", "4\u{1B}[2J2\u{7}", "42"),
        ]
        for (name, value, expected) in cases {
            XCTAssertEqual(Redaction.headerValue(name: name, value: value), expected, name)
        }
    }

    func testConnectionStrings() {
        let cases: [(String, String)] = [
            ("postgresql://courier:s3cr3tpw@db.internal:5432/courier", "postgresql://***@db.internal:5432/courier"),
            ("postgresql://courier@db/courier?password=s3cr3tpw&sslmode=require",
             "postgresql://***@db/courier?password=***&sslmode=require"),
            ("host=db password=s3cr3tpw dbname=courier", "host=db password=*** dbname=courier"),
            ("host=db password='s3 cr3t pw' dbname=courier", "host=db password=*** dbname=courier"),
            ("host=db password='s3cr3t", "host=db password=***"),
            ("postgresql://u:s3cr%zzpw@db/x", "postgresql://***@db/x"),
            ("host=db dbname=courier", "host=db dbname=courier"),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(Redaction.connectionString(input), expected, input)
        }
    }

    func testConnectionErrorsFromLibpqNeverEchoThePassword() {
        // The messages libpq gives for these strings (see PQconnectdb), with the password in them.
        let cases: [(conninfo: String, message: String, secret: String)] = [
            ("postgresql://u:s3cr%zzpw@localhost/db", "invalid percent-encoded token: \"s3cr%zzpw\"", "s3cr"),
            ("host=localhost password=s3cr3t pw", "missing \"=\" after \"pw\" in connection info string", "\"pw\""),
            ("postgresql://u:s3cr3tpw@[::1/db",
             "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
                + "\"postgresql://u:s3cr3tpw@[::1/db\"",
             "s3cr3tpw"),
            ("postgresq://u:s3cr3tpw@host/db",
             "missing \"=\" after \"postgresq://u:s3cr3tpw@host/db\" in connection info string",
             "s3cr3tpw"),
            ("postgresql://u:p%40ss%20word@h/db", "could not connect: password \"p@ss word\" rejected", "p@ss word"),
        ]
        for (conninfo, message, secret) in cases {
            let redacted = Redaction.connectionError(message, conninfo: conninfo)
            XCTAssertFalse(redacted.contains(secret), "\(redacted) still holds \(secret)")
            XCTAssertFalse(redacted.isEmpty)
        }
        XCTAssertEqual(
            Redaction.connectionError("invalid port number: \"99999\"", conninfo: "postgresql://u:pw@h:99999/db"),
            "invalid port number: \"99999\"")
    }

    func testMessages() {
        let cases: [(String, String)] = [
            ("POST https://u:p@h/x?token=abc failed", "POST https://***@h/x?token=*** failed"),
            ("connect failed: host=db password=hunter22 port=1", "connect failed: host=db password=*** port=1"),
            ("request header Authorization: Bearer abc", "request header Authorization: ***"),
            ("bad header X-Api-Credential: s3cr3t", "bad header X-Api-Credential: ***"),
            ("line 1\nline 2\r\n\tend", "line 1 line 2   end"),
            ("\u{1B}]0;title\u{7}clean\u{1B}[1;31m text", "clean text"),
            ("HTTP 503: upstream said no", "HTTP 503: upstream said no"),
            ("api_key='a b c' rest", "api_key=*** rest"),
            ("null\u{0}byte\u{7F}del\u{202E}bidi", "nullbytedelbidi"),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(Redaction.message(input), expected, input.debugDescription)
        }
    }

    func testTextKeepsPrintableUnicode() {
        XCTAssertEqual(Redaction.text("Zürich ✓ 東京"), "Zürich ✓ 東京")
        XCTAssertEqual(Redaction.text("a\u{9B}b\u{85}c"), "abc")
        XCTAssertEqual(Redaction.text("\u{1B}"), "")
    }
}

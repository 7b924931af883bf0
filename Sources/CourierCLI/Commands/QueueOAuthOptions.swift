import ArgumentParser
import CourierCLISupport
import CourierCore
import Foundation
import RetryClient
import CourierCLISupport

/// `--oauth-*` and `--no-oauth` of `courier queues set`: a queue's OAuth2 client credentials.
///
/// The secret is never a flag's value (it would show in shell history and process lists): it
/// comes from a file, stdin (`-`), or the environment variable `COURIER_OAUTH_CLIENT_SECRET`.
struct OAuthOptions: ParsableArguments {
    /// The environment variable read for the secret when no file is given.
    static let secretVariable = "COURIER_OAUTH_CLIENT_SECRET"

    @Option(name: .customLong("oauth-token-url"), help: "OAuth2 token endpoint (client credentials) for this queue's requests.")
    var tokenURL: String?
    @Option(name: .customLong("oauth-client-id"), help: "OAuth2 client id (with --oauth-token-url).")
    var clientID: String?
    @Option(
        name: .customLong("oauth-client-secret-file"),
        help: "Read the OAuth2 client secret from this file, or - for stdin (default: $COURIER_OAUTH_CLIENT_SECRET).")
    var secretFile: String?
    @Option(name: .customLong("oauth-scope"), help: "OAuth2 scope to ask for (space-separated).")
    var scope: String?
    @Option(name: .customLong("oauth-audience"), help: "Audience to ask for, for token servers that want one.")
    var audience: String?
    @Flag(name: .customLong("no-oauth"), help: "Remove the queue's OAuth2 credentials.")
    var remove = false

    /// The change asked for, nil when no OAuth flag was given; one clear usage error otherwise.
    func change(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> QueueOAuthChange? {
        let given = tokenURL != nil || clientID != nil || secretFile != nil || scope != nil || audience != nil
        if remove {
            guard !given else { throw CLIError.usage("give --no-oauth or the --oauth-* options, not both") }
            return .remove
        }
        guard given else { return nil }
        guard let tokenURL, let clientID else {
            throw CLIError.usage("--oauth-token-url and --oauth-client-id are needed together (with the secret from --oauth-client-secret-file or $\(Self.secretVariable))")
        }
        try Self.checkURL(tokenURL)
        try Self.checkText(clientID, flag: "--oauth-client-id", limit: 256)
        if let scope { try Self.checkText(scope, flag: "--oauth-scope", limit: 1024) }
        if let audience { try Self.checkText(audience, flag: "--oauth-audience", limit: 1024) }
        let secret = try readSecret(environment: environment)
        return .set(OAuth2ClientCredentials(tokenURL: tokenURL, clientID: clientID, clientSecret: secret, scope: scope, audience: audience))
    }

    private func readSecret(environment: [String: String]) throws -> String {
        let raw: String
        if let secretFile {
            let data: Data?
            if secretFile == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                data = FileManager.default.contents(atPath: secretFile)
            }
            guard let data else { throw CLIError.usage("--oauth-client-secret-file: cannot read \(Redaction.text(secretFile))") }
            raw = String(decoding: data, as: UTF8.self)
        } else if let value = environment[Self.secretVariable] {
            raw = value
        } else {
            throw CLIError.usage("the OAuth2 client secret is missing: give --oauth-client-secret-file PATH (or - for stdin) or set $\(Self.secretVariable)")
        }
        let secret = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        // The message never quotes the secret.
        guard !secret.isEmpty, secret.utf8.count <= 1024, secret.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F })
        else {
            throw CLIError.usage("the OAuth2 client secret must be 1 to 1024 printable ASCII characters")
        }
        return secret
    }

    /// An absolute http(s) URL of printable ASCII, as the database's check wants it.
    static func checkURL(_ url: String) throws {
        let lower = url.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), url.utf8.count <= 2048,
            url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }),
            let components = URLComponents(string: url), let host = components.host, !host.isEmpty
        else {
            throw CLIError.usage("--oauth-token-url: \(Redaction.url(Redaction.text(url))) is not an absolute http or https URL")
        }
    }

    static func checkText(_ text: String, flag: String, limit: Int) throws {
        guard !text.isEmpty, text.utf8.count <= limit, text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F })
        else {
            throw CLIError.usage("\(flag): must be 1 to \(limit) printable ASCII characters")
        }
    }

    /// `"https://id.example.com/token, client courier, scope hooks"` or `"no"`.
    static func summary(_ settings: QueueSettings?) -> String {
        guard let settings, let url = settings.oauthTokenURL else { return "no" }
        var parts = [Redaction.url(Redaction.text(url)), "client \(Redaction.text(settings.oauthClientID ?? ""))"]
        if let scope = settings.oauthScope { parts.append("scope \(Redaction.text(scope))") }
        if let audience = settings.oauthAudience { parts.append("audience \(Redaction.text(audience))") }
        return parts.joined(separator: ", ")
    }

    /// `{"token_url": ..., "client_id": ..., "scope": ..., "audience": ...}` or null; never the secret.
    static func json(_ settings: QueueSettings?) -> Any {
        guard let settings, let url = settings.oauthTokenURL else { return NSNull() }
        return [
            "token_url": Redaction.url(Redaction.text(url)), "client_id": Redaction.text(settings.oauthClientID ?? ""),
            "scope": Output.orNull(settings.oauthScope.map(Redaction.text)),
            "audience": Output.orNull(settings.oauthAudience.map(Redaction.text)),
        ] as [String: Any]
    }
}

import HTTPTypes
import Hummingbird
import Logging

/// The headers every answer carries.
enum SecurityHeaders {
    /// No inline script or style, nothing from elsewhere, no framing, forms only to here.
    static let contentSecurityPolicy =
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

    /// Sets the headers on `headers`, replacing any of the same name.
    static func apply(to headers: inout HTTPFields) {
        headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        headers[HTTPField.Name("Permissions-Policy")!] = "camera=(), microphone=(), geolocation=()"
    }
}

/// The outermost middleware: puts `SecurityHeaders` on every answer, including the router's
/// 404 and an error that escaped everything inside, which it turns into its answer here
/// (Hummingbird would otherwise answer it outside any middleware, without the headers).
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = WebRequestContext

    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = (try? error.response(from: request, context: context)) ?? PageRenderer.plain(error.status, "")
        } catch {
            logger.error("request failed", metadata: [
                "http.path": "\(Shown.text(request.uri.path))", "error": "\(Shown.failure(error))",
            ])
            response = PageRenderer.plain(.internalServerError, "Something went wrong.")
        }
        SecurityHeaders.apply(to: &response.headers)
        return response
    }
}

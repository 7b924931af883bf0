/// When a registered webhook endpoint is disabled on its own (migration 0014): the fleet-wide
/// defaults an endpoint's `disable_after` and `disable_after_dead` override.
public struct EndpointDisable: Sendable, Equatable {
    /// Disable an endpoint when every delivery failed for this long; zero: never.
    public var window: Duration
    /// Disable an endpoint after this many deliveries in a row went dead; zero: never.
    public var deadInARow: Int

    /// The defaults: five days of nothing but failures, or 100 dead deliveries in a row.
    public static let standard = EndpointDisable(window: .seconds(5 * 86_400), deadInARow: 100)

    /// A policy.
    public init(window: Duration, deadInARow: Int) {
        self.window = window
        self.deadInARow = deadInARow
    }
}

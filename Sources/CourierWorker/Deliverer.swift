import CourierCore

/// Sends one claimed job and says what happened. Never throws: every failure is a
/// ``Delivery`` whose verdict says what to do with it.
///
/// Production uses `HTTPDeliverer` (the RetryClient); the seam lets the claim machinery be
/// exercised on its own.
public protocol Deliverer: Sendable {
    /// Delivers `job` (one attempt, which may include short in-process retries).
    func deliver(_ job: ClaimedJob) async -> Delivery
}

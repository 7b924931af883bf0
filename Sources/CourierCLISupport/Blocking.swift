import Dispatch

/// Carries a non-Sendable value to the one thread that will use it.
package final class UncheckedBox<T>: @unchecked Sendable {
    package var value: T
    package init(_ value: T) { self.value = value }
}

/// Waits on the current (non-async) thread for an async operation.
package func blockingAwait<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let semaphore = DispatchSemaphore(value: 0)
    let result = UncheckedBox<Result<T, any Error>?>(nil)
    Task {
        do { result.value = .success(try await operation()) } catch { result.value = .failure(error) }
        semaphore.signal()
    }
    semaphore.wait()
    return try result.value!.get()
}

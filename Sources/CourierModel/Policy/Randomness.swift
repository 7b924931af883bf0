import Foundation

/// SplitMix64, a small, fast, seedable generator: the same seed gives the same jitter, which
/// makes backoff tests exact.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) {
        self.state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A shareable source of random numbers for jitter: the system generator, or a seeded one for
/// tests.
///
/// A policy is a value copied between tasks, so the generator lives behind a lock in a shared
/// box; copies of a seeded source draw from one sequence.
public struct RandomSource: Sendable {
    private final class Box: @unchecked Sendable {
        // Guarded by `lock`.
        private var generator: any RandomNumberGenerator
        private let lock = NSLock()

        init(_ generator: any RandomNumberGenerator) {
            self.generator = generator
        }

        func next() -> UInt64 {
            lock.lock()
            defer { lock.unlock() }
            return generator.next()
        }
    }

    private let box: Box

    /// The system's cryptographically secure generator; the default.
    public static var system: RandomSource { RandomSource(SystemRandomNumberGenerator()) }

    /// A ``SplitMix64`` generator with a fixed seed, for reproducible tests.
    public static func seeded(_ seed: UInt64) -> RandomSource { RandomSource(SplitMix64(seed: seed)) }

    /// Wraps any generator.
    public init(_ generator: any RandomNumberGenerator) {
        self.box = Box(generator)
    }

    /// The next 64 random bits.
    public func next() -> UInt64 { box.next() }
}

/// Lets a ``RandomSource`` stand wherever an `inout RandomNumberGenerator` is expected.
package struct RandomSourceGenerator: RandomNumberGenerator {
    package let source: RandomSource
    package init(source: RandomSource) { self.source = source }
    package mutating func next() -> UInt64 { source.next() }
}

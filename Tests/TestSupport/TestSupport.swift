import Foundation
import Synchronization
import Lifecycle

/// Waits (at most 20 s) for a callback-style answer: stores answer on their own threads.
public func wait<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) -> T {
    guard let answer = Blocking.wait(timeout: .seconds(20), start) else { preconditionFailure("no answer within 20 s") }
    return answer
}

/// Polls `condition` for up to `seconds` (no fixed sleeps in the pass path).
public func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// SplitMix64: reproducible randomness for tests and fuzzing.
public struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

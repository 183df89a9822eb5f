import Dispatch
import Foundation
import Synchronization

/// Waits (at most 20 s) for a callback-style answer: stores answer on their own threads.
public func wait<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) -> T {
    let box = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    start { value in
        box.withLock { $0 = value }
        done.signal()
    }
    precondition(done.wait(timeout: .now() + 20) == .success, "no answer within 20 s")
    return box.withLock { $0! }
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

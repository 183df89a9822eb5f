import Synchronization

/// The one way a thread that may block waits for a callback-style answer (a store's completion, a notification's
/// outcome): `Blocking.wait { done in store.read(body, completion: done) }` starts the call, hands it `done`, and
/// returns the value `done` was called with.
///
/// Only on threads that are allowed to block: worker pools, feed and background threads; never an event loop or
/// the cooperative pool (`OrderStore`s answer on their own threads, so the wait cannot deadlock on the caller's).
/// The first call of `done` wins and later ones are ignored; `done` may be called before `start` returns. With a
/// `timeout`, nil when no answer came in time (a late answer is then dropped, never delivered to anyone).
public enum Blocking {
    /// Starts the call and blocks this thread until it answers.
    public static func wait<T: Sendable>(_ start: (_ done: @escaping @Sendable (T) -> Void) -> Void) -> T {
        let answer = Answer<T>()
        start { answer.give($0) }
        answer.ready.wait()
        return answer.taken
    }

    /// Starts the call and blocks this thread until it answers or `timeout` passes (then nil).
    public static func wait<T: Sendable>(timeout: Duration, _ start: (_ done: @escaping @Sendable (T) -> Void) -> Void) -> T? {
        let answer = Answer<T>()
        let deadline = Monotonic.after(timeout)
        start { answer.give($0) }
        guard answer.ready.wait(until: deadline) else { return nil }
        return answer.taken
    }

    /// One answer, handed from the answering thread to the waiting one.
    private final class Answer<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
        let ready = Signal()

        func give(_ v: T) {
            let first = value.withLock { slot -> Bool in
                guard slot == nil else { return false }
                slot = v
                return true
            }
            if first { ready.signal() }
        }

        /// The answer, once `ready` was signalled.
        var taken: T { value.withLock { $0! } }
    }
}

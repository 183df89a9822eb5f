import Glibc

/// A mutex and a condition variable on CLOCK_MONOTONIC (a wall-clock step neither shortens nor lengthens a
/// timed wait): the primitive under every wait of billingd (`Signal`, `Worker`, `Blocking`).
///
/// `withLock` guards the state the waiters look at; `wait` is called inside `withLock`, in a loop on that state.
public final class Condition: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        cond = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        precondition(pthread_cond_init(cond, &attributes) == 0, "pthread_cond_init failed")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the mutex.
    public func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside `withLock`: releases the mutex until signalled (or spuriously), then takes it again.
    public func wait() { pthread_cond_wait(cond, mutex) }

    /// Inside `withLock`: as `wait`, but returns false once `deadline` (a `Monotonic.now()` value) has passed.
    public func wait(until deadline: UInt64) -> Bool {
        guard deadline != .max else {
            wait()
            return true
        }
        guard Monotonic.now() < deadline else { return false }
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT
    }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(cond) }

    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// A counting signal (a semaphore): `signal` adds one, `wait` takes one or blocks until it can. With a start
/// value of N it bounds how many callers hold a slot at once (`wait` takes a slot, `signal` gives it back).
public final class Signal: Sendable {
    private let condition = Condition()
    nonisolated(unsafe) private var count: Int

    public init(_ value: Int = 0) { count = value }

    public func signal() {
        condition.withLock {
            count += 1
            condition.signal()
        }
    }

    public func wait() {
        condition.withLock {
            while count == 0 { condition.wait() }
            count -= 1
        }
    }

    /// Takes one, or returns false once `deadline` (a `Monotonic.now()` value) has passed.
    public func wait(until deadline: UInt64) -> Bool {
        condition.withLock {
            while count == 0 {
                if !condition.wait(until: deadline) && count == 0 { return false }
            }
            count -= 1
            return true
        }
    }

    /// Takes one, or returns false after `timeout`.
    public func wait(timeout: Duration) -> Bool { wait(until: Monotonic.after(timeout)) }
}

import IO
import CNGHTTP2
import CSystem
import Glibc
import Lifecycle

/// A connection's end: close, the once-a-second sweep (idle, linger, stalled writes, the server's cap on calls), draining.
extension ServerConnection {
    func close() {
        loop.assertInEventLoop("ServerConnection")
        guard state.close() else { return }
        session?.close()
        session = nil
        bridge?.close()
        bridge = nil
        tls?.shutdown()
        tls = nil
        loop.deregister(fd)
        Glibc.close(fd)
        shared.connectionClosed(addressKey: addressKey)
        owner?.forget(fd)
    }

    /// Called once a second by the loop: the facts `ConnectionState.sweep` decides on (the header timeout of a
    /// handshake, a preface or a trickling header block; the linger; a peer that stopped reading; idleness).
    func sweep(now: UInt64) {
        guard !state.isOver else { return }
        let config = shared.configuration
        var facts = ConnectionState.Facts(now: now, acceptedAt: acceptedAt, lastActivity: lastActivity, lastWriteProgress: lastWriteProgress)
        let headerTimeout = UInt64(max(0, config.handshakeTimeoutNanoseconds))
        if state.isServing, state.lingerUntil == 0, let session {
            // Asked only of a serving session that is not ending (the check stamps streams and trims the pool).
            facts.callsExpired = session.expireCalls(now: now, headerTimeoutNanoseconds: headerTimeout)
            facts.outputWaiting = pendingOffset < pending.count || session.holdsAnswers
            facts.sessionIdle = session.isIdle
        }
        let limits = ConnectionState.Limits(
            handshakeTimeout: headerTimeout, writeStall: UInt64(max(0, config.writeStallNanoseconds)),
            idleTimeout: UInt64(max(0, config.idleTimeoutNanoseconds)))
        switch state.sweep(facts, limits) {
        case .none: break
        case .close: close()
        case .calm: terminate(NGHTTP2_ENHANCE_YOUR_CALM)
        case .idle: terminate(NGHTTP2_NO_ERROR)
        }
    }

    // MARK: Draining

    /// Tells the client to stop opening streams; answers in flight still complete.
    func beginDrain() {
        if state.beginDrain(), let session { session.beginDrain() }
    }

    /// The session has frames to send (`SessionOutput`).
    func outputPending() { scheduleFlush() }
}

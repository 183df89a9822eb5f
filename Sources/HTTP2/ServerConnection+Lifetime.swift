import IO
import CNGHTTP2
import CSystem
import Glibc
import Lifecycle

/// A connection's end: close, the once-a-second sweep (idle, linger, stalled writes, the server's cap on calls), draining.
extension ServerConnection {
    func close() {
        loop.assertInEventLoop("ServerConnection")
        guard !closed else { return }
        closed = true
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

    /// Called once a second by the loop: GOAWAY after the idle timeout, drop a peer that stopped reading.
    func sweep(now: UInt64) {
        guard !closed else { return }
        if session == nil && bridge == nil && lingerUntil == 0,
            now &- acceptedAt > UInt64(max(0, shared.configuration.handshakeTimeoutNanoseconds))
        {
            // A TLS handshake or a preface that does not come (a slow or silent client) holds no slot for long.
            return close()
        }
        if lingerUntil != 0 {
            // Ending: closed once the peer closes, or now at the latest.
            if now >= lingerUntil { close() }
            return
        }
        let headerTimeout = UInt64(max(0, shared.configuration.handshakeTimeoutNanoseconds))
        if session?.expireCalls(now: now, headerTimeoutNanoseconds: headerTimeout) == true {
            // A header block trickling in for seconds (slowloris over HTTP/2) holds no slot for long.
            terminate(NGHTTP2_ENHANCE_YOUR_CALM)
            return
        }
        let config = shared.configuration
        // Output waits (in our buffer, or answers nghttp2 holds behind a closed flow-control window)
        // and the peer has taken nothing for too long: it never reads. Drop it; its memory goes with it.
        let waiting = pendingOffset < pending.count || session?.holdsAnswers == true
        if waiting, now &- lastWriteProgress > UInt64(config.writeStallNanoseconds) {
            // GOAWAY after what waits; a peer that still reads nothing is closed at the linger deadline.
            terminate(NGHTTP2_ENHANCE_YOUR_CALM)
            return
        }
        if session?.isIdle ?? true, !draining, now &- lastActivity > UInt64(config.idleTimeoutNanoseconds) {
            terminate(NGHTTP2_NO_ERROR)
        }
    }

    // MARK: Draining

    /// Tells the client to stop opening streams; answers in flight still complete.
    func beginDrain() {
        draining = true
        guard let session, !closed else { return }
        session.beginDrain()
    }

    /// The session has frames to send (`SessionOutput`).
    func outputPending() { scheduleFlush() }
}

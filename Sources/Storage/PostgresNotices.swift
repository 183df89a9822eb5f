import CLibPQ
import Synchronization

/// libpq's notices and asynchronous errors (a NOTICE on `CREATE TABLE IF NOT EXISTS`, a FATAL when the server
/// terminates an idle connection), which libpq would otherwise print as raw lines on stderr beside the JSON log.
/// NOTICE, INFO, DEBUG and LOG are dropped; WARNING and worse go to the sink the executable installs.
public enum PostgresNotices {
    /// Receives `(severity, message)` for WARNING, ERROR, FATAL and PANIC; nil drops them too.
    private static let sink = Mutex<(@Sendable (String, String) -> Void)?>(nil)

    /// Routes warnings to `body` (billingd: its JSON log). Called once at start, before any connection opens.
    public static func route(_ body: (@Sendable (_ severity: String, _ message: String) -> Void)?) {
        sink.withLock { $0 = body }
    }

    /// Whether a notice of `severity` (libpq's non-localized field) reaches the sink.
    static func isReported(severity: String) -> Bool {
        !["NOTICE", "INFO", "DEBUG", "LOG"].contains(severity)
    }

    static func deliver(severity: String, message: String) {
        guard isReported(severity: severity) else { return }
        let body = sink.withLock { $0 }
        body?(severity, message)
    }

    /// Installs the receiver on a new connection (before any statement runs).
    static func install(on conn: OpaquePointer) {
        _ = unsafe PQsetNoticeReceiver(conn, receiveNotice, nil)
    }
}

/// libpq's notice receiver: copies the fields (libpq frees the result after the call) and never calls back into C.
private func receiveNotice(_: UnsafeMutableRawPointer?, _ result: OpaquePointer?) {
    guard let result else { return }
    func field(_ code: UInt8) -> String? {
        guard let p = unsafe PQresultErrorField(result, Int32(code)) else { return nil }
        return unsafe String(cString: p)
    }
    let severity = field(UInt8(ascii: "V")) ?? field(UInt8(ascii: "S")) ?? "WARNING"
    let message = field(UInt8(ascii: "M")) ?? ""
    PostgresNotices.deliver(severity: severity, message: message)
}

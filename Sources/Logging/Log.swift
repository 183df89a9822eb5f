import Foundation
import ProtoWire
import Synchronization
import Lifecycle

/// Log levels, lowest first.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error
    /// A switch, not a dictionary: this runs twice per logged call (a dictionary literal here was built,
    /// hashed and freed on every comparison).
    private var rank: Int {
        switch self {
        case .debug: 0
        case .info: 1
        case .warning: 2
        case .error: 3
        }
    }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// One JSON object per line on stdout. Lines are buffered and written by a
/// background thread every few milliseconds, so a call never waits on stdout.
///
/// The buffer is bounded: while stdout does not take bytes (a pipe nobody reads), lines beyond
/// `maxBufferedBytes` are dropped and counted, and once output resumes one line says how many.
public final class Logger: Sendable {
    public let level: LogLevel
    private struct Pending {
        var bytes: [UInt8] = []
        /// Lines dropped since the last "log lines dropped" line.
        var dropped = 0
    }
    private let buffer = Mutex(Pending())
    private let droppedTotal = Atomic<Int>(0)
    /// Held while writing, so a flush at exit waits for the background writer's bytes.
    private let writing = Mutex<Void>(())
    /// Writes the buffered lines every 20 ms.
    private let writer = Worker(name: "log-writer")
    private let output: Int32
    /// The most bytes of lines waiting for stdout.
    public let maxBufferedBytes: Int

    /// Lines dropped because stdout did not keep up (`billingd_log_lines_dropped_total`).
    public var droppedLines: Int { droppedTotal.load(ordering: .relaxed) }

    /// Bytes of lines waiting to be written.
    public var bufferedBytes: Int { buffer.withLock { $0.bytes.count } }

    public init(level: LogLevel, output: Int32 = 1, maxBufferedBytes: Int = 8 << 20) {
        self.level = level
        self.output = output
        self.maxBufferedBytes = maxBufferedBytes
        writer.start { [self] worker in
            while worker.pause(.milliseconds(20)) { flush() }
            flush()
        }
    }

    /// Ends the writer thread after a last flush; lines logged later are written at once, by the caller.
    public func stop() { writer.stop() }

    /// Writes buffered lines now (shutdown, tests).
    public func flush() {
        writing.withLock { _ in
            var (bytes, dropped) = buffer.withLock { b -> ([UInt8], Int) in
                let out = (b.bytes, b.dropped)
                b.bytes.removeAll(keepingCapacity: b.bytes.capacity <= 1 << 20)
                b.dropped = 0
                return out
            }
            if dropped > 0 {
                // After the lines kept: the dropped ones came later.
                bytes.append(
                    contentsOf: Self.format(
                        .warning, "log lines dropped",
                        [
                            ("count", .int(dropped)), ("reason", .string("stdout did not keep up")),
                        ]))
            }
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { write(output, $0.baseAddress! + offset, bytes.count - offset) }
                if n <= 0 { break }
                offset += n
            }
        }
    }

    /// Logs `msg` with string or number fields (values are JSON-escaped).
    /// Builds the line as bytes without Foundation formatting: this runs once per call.
    public func log(_ level: LogLevel, _ msg: String, _ fields: [(String, LogValue)] = []) {
        guard level >= self.level else { return }
        let line = Self.format(level, msg, fields)
        let kept = buffer.withLock { b -> Bool in
            guard b.bytes.count + line.count <= maxBufferedBytes else {
                b.dropped += 1
                return false
            }
            b.bytes.append(contentsOf: line)
            return true
        }
        if !kept { droppedTotal.add(1, ordering: .relaxed) }
        if writer.isStopping { flush() }
    }

    /// One line of JSON, newline included.
    package static func format(_ level: LogLevel, _ msg: String, _ fields: [(String, LogValue)]) -> [UInt8] {
        var line = [UInt8]()
        line.reserveCapacity(256)
        line.append(contentsOf: #"{"time":""#.utf8)
        Self.appendTimestamp(&line)
        line.append(contentsOf: #"","level":""#.utf8)
        line.append(contentsOf: level.rawValue.utf8)
        line.append(contentsOf: #"","msg":"#.utf8)
        JSONString.append(msg, to: &line)
        for (key, value) in fields {
            line.append(UInt8(ascii: ","))
            JSONString.append(key, to: &line)
            line.append(UInt8(ascii: ":"))
            switch value {
            case .string(let s): JSONString.append(s, to: &line)
            case .int(let n): line.append(contentsOf: String(n).utf8)
            case .double(let d): Self.appendMillis(UInt64(max(0, d * 1000)), to: &line)
            case .millis(let nanos): Self.appendMillis(nanos / 1000, to: &line)
            case .bool(let b): line.append(contentsOf: (b ? "true" : "false").utf8)
            }
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    public enum LogValue: Sendable {
        case string(String)
        case int(Int)
        /// Printed with three decimals.
        case double(Double)
        /// A duration in nanoseconds, printed as milliseconds with three decimals.
        case millis(UInt64)
        case bool(Bool)
    }

    /// `micros` as milliseconds with three decimals: 1234 -> 1.234.
    package static func appendMillis(_ micros: UInt64, to line: inout [UInt8]) {
        line.append(contentsOf: String(micros / 1000).utf8)
        line.append(UInt8(ascii: "."))
        let frac = micros % 1000
        line.append(UInt8(ascii: "0") + UInt8(frac / 100))
        line.append(UInt8(ascii: "0") + UInt8(frac / 10 % 10))
        line.append(UInt8(ascii: "0") + UInt8(frac % 10))
    }

    /// `s` as a JSON string, as log lines spell it (`JSONString.quote`).
    package static func quote(_ s: String) -> String { JSONString.quote(s) }

    /// The formatted `YYYY-MM-DDTHH:MM:SS.` of the current second, reused within the second.
    private static let secondCache = Mutex<(second: Int, prefix: [UInt8])>((-1, []))

    package static func appendTimestamp(_ line: inout [UInt8]) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let second = ts.tv_sec
        let prefix = secondCache.withLock { cache -> [UInt8] in
            if cache.second != second {
                var t = second
                var tm = tm()
                gmtime_r(&t, &tm)
                cache = (
                    second,
                    Array(
                        String(
                            format: "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900, tm.tm_mon + 1,
                            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec
                        ).utf8)
                )
            }
            return cache.prefix
        }
        line.append(contentsOf: prefix)
        let ms = Int(ts.tv_nsec / 1_000_000)
        line.append(UInt8(ascii: "0") + UInt8(ms / 100))
        line.append(UInt8(ascii: "0") + UInt8(ms / 10 % 10))
        line.append(UInt8(ascii: "0") + UInt8(ms % 10))
        line.append(UInt8(ascii: "Z"))
    }

    /// RFC 3339 UTC with milliseconds.
    package static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var tm = tm()
        gmtime_r(&t, &tm)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
            tm.tm_hour, tm.tm_min, tm.tm_sec, Int(ts.tv_nsec / 1_000_000))
    }
}

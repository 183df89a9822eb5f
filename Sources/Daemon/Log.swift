import Foundation
import Synchronization

/// Log levels, lowest first.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error
    private var rank: Int { [.debug: 0, .info: 1, .warning: 2, .error: 3][self]! }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// One JSON object per line on stdout. Lines are buffered and written by a
/// background thread every few milliseconds, so a call never waits on stdout.
public final class Logger: Sendable {
    public let level: LogLevel
    private let buffer = Mutex<[UInt8]>([])
    /// Held while writing, so a flush at exit waits for the background writer's bytes.
    private let writing = Mutex<Void>(())
    private let output: Int32

    public init(level: LogLevel, output: Int32 = 1) {
        self.level = level
        self.output = output
        let thread = Thread { [self] in
            while true {
                usleep(20_000)
                flush()
            }
        }
        thread.name = "log-writer"
        thread.start()
    }

    /// Writes buffered lines now (shutdown, tests).
    public func flush() {
        writing.withLock { _ in
            let bytes = buffer.withLock { b -> [UInt8] in
                let out = b
                b.removeAll(keepingCapacity: true)
                return out
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
    public func log(_ level: LogLevel, _ msg: String, _ fields: [(String, LogValue)] = []) {
        guard level >= self.level else { return }
        var line = "{\"time\":\"\(Self.timestamp())\",\"level\":\"\(level.rawValue)\",\"msg\":\(Self.quote(msg))"
        for (key, value) in fields {
            line += ",\(Self.quote(key)):"
            switch value {
            case .string(let s): line += Self.quote(s)
            case .int(let n): line += String(n)
            case .double(let d): line += String(format: "%.3f", d)
            case .bool(let b): line += b ? "true" : "false"
            }
        }
        line += "}\n"
        buffer.withLock { $0.append(contentsOf: line.utf8) }
    }

    public enum LogValue: Sendable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var tm = tm()
        gmtime_r(&t, &tm)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                      tm.tm_hour, tm.tm_min, tm.tm_sec, Int(ts.tv_nsec / 1_000_000))
    }
}

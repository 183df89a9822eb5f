/// A minimal ASN.1 BER/DER reader and DER writer for app receipt payloads.
///
/// Lengths are checked against the input before any slice is taken; nesting is bounded.
public enum ASN1 {
    public struct Element: Sendable {
        /// The identifier octet (class, constructed bit, tag number < 31).
        public let tag: UInt8
        /// The content octets (for indefinite lengths, up to the end-of-contents marker).
        public let content: ArraySlice<UInt8>

        public var isConstructed: Bool { tag & 0x20 != 0 }
    }

    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static let maxDepth = 16

    /// Reads consecutive elements from `bytes`.
    public static func elements(_ bytes: ArraySlice<UInt8>, depth: Int = 0) throws(ParseError) -> [Element] {
        guard depth <= maxDepth else { throw ParseError(description: "nesting too deep") }
        var out: [Element] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let (element, next) = try read(bytes, at: i, depth: depth)
            out.append(element)
            i = next
        }
        return out
    }

    /// One element at `start`; returns it and the index after it.
    public static func read(_ bytes: ArraySlice<UInt8>, at start: Int, depth: Int = 0) throws(ParseError) -> (Element, Int) {
        var i = start
        guard i < bytes.endIndex else { throw ParseError(description: "truncated tag") }
        let tag = bytes[i]
        i += 1
        guard tag & 0x1F != 0x1F else { throw ParseError(description: "high tag numbers are not used in receipts") }
        guard i < bytes.endIndex else { throw ParseError(description: "truncated length") }
        let first = bytes[i]
        i += 1
        if first == 0x80 {
            // Indefinite length (BER): constructed only, ends with 00 00 at this level.
            guard tag & 0x20 != 0, depth < maxDepth else { throw ParseError(description: "bad indefinite length") }
            var j = i
            while true {
                guard j + 1 < bytes.endIndex else { throw ParseError(description: "missing end-of-contents") }
                if bytes[j] == 0 && bytes[j + 1] == 0 { break }
                let (_, next) = try read(bytes, at: j, depth: depth + 1)
                j = next
            }
            return (Element(tag: tag, content: bytes[i..<j]), j + 2)
        }
        var length = 0
        if first & 0x80 == 0 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 4 else { throw ParseError(description: "length of \(count) octets") }
            guard i + count <= bytes.endIndex else { throw ParseError(description: "truncated length") }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[i])
                i += 1
            }
        }
        guard length <= bytes.endIndex - i else { throw ParseError(description: "length \(length) beyond the input") }
        return (Element(tag: tag, content: bytes[i..<(i + length)]), i + length)
    }

    /// An OCTET STRING's bytes: primitive (DER), or constructed of segments (BER), which may nest.
    public static func octets(_ e: Element, depth: Int = 0) throws(ParseError) -> ArraySlice<UInt8> {
        switch e.tag {
        case 0x04:
            return e.content
        case 0x24:
            var out: [UInt8] = []
            out.reserveCapacity(e.content.count)
            for segment in try elements(e.content, depth: depth + 1) {
                guard segment.tag & 0xDF == 0x04 else { throw ParseError(description: "an OCTET STRING segment is not an OCTET STRING") }
                out += try octets(segment, depth: depth + 1)
            }
            return out[...]
        default:
            throw ParseError(description: "not an OCTET STRING")
        }
    }

    /// An INTEGER's value (up to 64 bits, two's complement).
    public static func integer(_ e: Element) throws(ParseError) -> Int64 {
        guard e.tag == 0x02, !e.content.isEmpty, e.content.count <= 8 else { throw ParseError(description: "not a small INTEGER") }
        var v: Int64 = e.content.first! & 0x80 != 0 ? -1 : 0
        for b in e.content { v = v << 8 | Int64(b) }
        return v
    }

    /// A string of any of the types receipts use (UTF8String, IA5String, PrintableString, ...).
    public static func string(_ e: Element) -> String? {
        switch e.tag {
        case 0x0C, 0x16, 0x13, 0x1A, 0x14: String(validating: e.content, as: UTF8.self)
        default: nil
        }
    }

    // MARK: DER writer (test store)

    public static func encodeLength(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        var bytes: [UInt8] = []
        var v = n
        while v > 0 {
            bytes.insert(UInt8(v & 0xFF), at: 0)
            v >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    public static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + encodeLength(content.count) + content }

    public static func encodeInteger(_ value: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        var v = value
        repeat {
            bytes.insert(UInt8(truncatingIfNeeded: v), at: 0)
            v >>= 8
        } while v != 0 && v != -1
        if value >= 0 && bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        if value < 0 && bytes[0] & 0x80 == 0 { bytes.insert(0xFF, at: 0) }
        return tlv(0x02, bytes)
    }

    public static func utf8String(_ s: String) -> [UInt8] { tlv(0x0C, Array(s.utf8)) }
    public static func ia5String(_ s: String) -> [UInt8] { tlv(0x16, Array(s.utf8)) }
    public static func sequence(_ parts: [[UInt8]]) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    /// A SET OF, with members sorted as DER requires.
    public static func set(_ parts: [[UInt8]]) -> [UInt8] {
        tlv(0x31, parts.sorted { $0.lexicographicallyPrecedes($1) }.flatMap { $0 })
    }
    public static func octetString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
}

import ProtoWire

/// wiretest.Inner (tests/golden/wiretest.proto).
struct Inner: ProtoMessage, Equatable {
    var name = ""
    var value: Int64 = 0
    init() {}
    init(name: String = "", value: Int64 = 0) {
        self.name = name
        self.value = value
    }
    mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); name = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); value = try r.readInt64()
            default: try r.skip(wt)
            }
        }
    }
    var encodedSize: Int { ProtoSize.string(1, name) + ProtoSize.int64(2, value) }
    func encode(to w: inout ProtoWriter) { w.string(1, name); w.int64(2, value) }
}

/// wiretest.All: every scalar kind, nested, packed, map and repeated fields.
struct WireAll: ProtoMessage, Equatable {
    var i32: Int32 = 0
    var i64: Int64 = 0
    var u32: UInt32 = 0
    var u64: UInt64 = 0
    var s32: Int32 = 0
    var s64: Int64 = 0
    var f32: UInt32 = 0
    var f64: UInt64 = 0
    var sf32: Int32 = 0
    var sf64: Int64 = 0
    var b = false
    var s = ""
    var by: [UInt8] = []
    var d: Double = 0
    var f: Float = 0
    var inner: Inner?
    var packed: [Int32] = []
    var inners: [Inner] = []
    var labels: [String: String] = [:]
    var names: [String] = []

    init() {}

    mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: i32 = try r.readInt32(field: 1)
            case 2: i64 = try r.readInt64()
            case 3: u32 = try r.readUInt32(field: 3)
            case 4: u64 = try r.readUInt64()
            case 5: s32 = try r.readSInt32()
            case 6: s64 = try r.readSInt64()
            case 7: try expect(wt, .fixed32, field: 7); f32 = try r.readFixed32()
            case 8: try expect(wt, .fixed64, field: 8); f64 = try r.readFixed64()
            case 9: try expect(wt, .fixed32, field: 9); sf32 = Int32(bitPattern: try r.readFixed32())
            case 10: try expect(wt, .fixed64, field: 10); sf64 = Int64(bitPattern: try r.readFixed64())
            case 11: b = try r.readBool()
            case 12: s = try r.readString(field: 12)
            case 13: by = try r.readBytes()
            case 14: try expect(wt, .fixed64, field: 14); d = try r.readDouble()
            case 15: try expect(wt, .fixed32, field: 15); f = try r.readFloat()
            case 16: inner = try r.readMessage(Inner.self)
            case 17:
                var raw: [UInt64] = []
                try r.readRepeatedVarints(wt, field: 17, into: &raw)
                packed.append(contentsOf: raw.map { Int32(truncatingIfNeeded: $0) })
            case 18: inners.append(try r.readMessage(Inner.self))
            case 19:
                let e = try r.readMessage(MapEntryForTest.self)
                labels[e.key] = e.value
            case 20: names.append(try r.readString(field: 20))
            default: try r.skip(wt)
            }
        }
    }

    private var packedRaw: [UInt64] { packed.map { UInt64(bitPattern: Int64($0)) } }
    private var entries: [MapEntryForTest] { labels.keys.sorted().map { MapEntryForTest(key: $0, value: labels[$0]!) } }

    var encodedSize: Int {
        var n = ProtoSize.int32(1, i32) + ProtoSize.int64(2, i64) + ProtoSize.uint64(3, UInt64(u32)) + ProtoSize.uint64(4, u64)
        n += ProtoSize.sint64(5, Int64(s32)) + ProtoSize.sint64(6, s64) + ProtoSize.fixed32(7, f32) + ProtoSize.fixed64(8, f64)
        n += ProtoSize.fixed32(9, UInt32(bitPattern: sf32)) + ProtoSize.fixed64(10, UInt64(bitPattern: sf64))
        n += ProtoSize.bool(11, b) + ProtoSize.string(12, s) + ProtoSize.bytes(13, by) + ProtoSize.double(14, d)
        n += f.bitPattern == 0 ? 0 : ProtoWriter.tagSize(15) + 4
        if let inner { n += ProtoSize.message(16, inner) }
        n += ProtoSize.packedVarints(17, packedRaw)
        for i in inners { n += ProtoSize.message(18, i) }
        for e in entries { n += ProtoSize.message(19, e) }
        for name in names { n += ProtoWriter.tagSize(20) + ProtoWriter.varintSize(UInt64(name.utf8.count)) + name.utf8.count }
        return n
    }

    func encode(to w: inout ProtoWriter) {
        w.int32(1, i32); w.int64(2, i64); w.uint64(3, UInt64(u32)); w.uint64(4, u64)
        w.sint64(5, Int64(s32)); w.sint64(6, s64); w.fixed32(7, f32); w.fixed64(8, f64)
        w.fixed32(9, UInt32(bitPattern: sf32)); w.fixed64(10, UInt64(bitPattern: sf64))
        w.bool(11, b); w.string(12, s); w.bytesField(13, by); w.double(14, d)
        if f.bitPattern != 0 { w.writeTag(15, .fixed32); w.writeFixed32(f.bitPattern) }
        if let inner { w.message(16, inner) }
        w.packedVarints(17, packedRaw)
        for i in inners { w.message(18, i) }
        for e in entries { w.message(19, e) }
        for name in names { w.writeTag(20, .lengthDelimited); w.writeVarint(UInt64(name.utf8.count)); w.writeRaw(name.utf8) }
    }
}

struct MapEntryForTest: ProtoMessage, Equatable {
    var key = ""
    var value = ""
    init() {}
    init(key: String, value: String) {
        self.key = key
        self.value = value
    }
    mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: key = try r.readString(field: 1)
            case 2: value = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    var encodedSize: Int { ProtoSize.string(1, key) + ProtoSize.string(2, value) }
    func encode(to w: inout ProtoWriter) { w.string(1, key); w.string(2, value) }
}

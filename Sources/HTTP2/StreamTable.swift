/// A session's open streams by id: open addressing with linear probing over a power-of-two table, removal by
/// backward shift (no tombstones). Client stream ids are odd and increase, so `id >> 1` spreads them over the
/// slots without hashing: a `Dictionary<Int32, _>` spent about 400 instructions per call hashing ids with SipHash.
struct StreamTable {
    private var keys: [Int32]
    private var values: [ServerStream?]
    private var mask: Int
    private(set) var count = 0
    /// Entries not in their home slot. Client ids increase, so while the open streams' ids span less than the
    /// table, every entry sits at home and removal needs no backward shift (which otherwise walks the whole
    /// run of open streams after the hole: about 250 instructions per call with 32 streams open).
    private var displaced = 0

    init(capacity: Int = 64) {
        var size = 16
        while size < capacity { size <<= 1 }
        keys = [Int32](repeating: 0, count: size)
        values = [ServerStream?](repeating: nil, count: size)
        mask = size - 1
    }

    var isEmpty: Bool { count == 0 }

    @inline(__always)
    private func home(_ id: Int32) -> Int { Int(UInt32(bitPattern: id) >> 1) & mask }

    /// The stream with `id` (never 0), or nil.
    subscript(id id: Int32) -> ServerStream? {
        var i = home(id)
        while true {
            let key = keys[i]
            if key == id { return values[i] }
            if key == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    /// The stream with `id`, unretained (the table keeps it), or nil.
    @inline(__always)
    func ref(_ id: Int32) -> Unmanaged<ServerStream>? {
        var i = home(id)
        while true {
            let key = keys[i]
            if key == id { return values[i].map { Unmanaged.passUnretained($0) } }
            if key == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    /// Adds or replaces the stream with `id` (never 0).
    mutating func insert(_ stream: ServerStream, id: Int32) {
        if (count + 1) * 2 > keys.count { grow() }
        var i = home(id)
        while keys[i] != 0 && keys[i] != id { i = (i + 1) & mask }
        if keys[i] == 0 {
            count += 1
            if i != home(id) { displaced += 1 }
        }
        keys[i] = id
        values[i] = stream
    }

    /// Removes and returns the stream with `id`, or nil.
    @discardableResult
    mutating func remove(_ id: Int32) -> ServerStream? {
        var i = home(id)
        while keys[i] != id {
            if keys[i] == 0 { return nil }
            i = (i + 1) & mask
        }
        let removed = values[i]
        if i != home(id) { displaced -= 1 }
        keys[i] = 0
        values[i] = nil
        count -= 1
        // Every other entry at home: none of them may move into the hole.
        if displaced == 0 { return removed }
        // Backward shift: move later entries of the probe run into the hole unless their home lies in (hole, j].
        var j = i
        while true {
            j = (j + 1) & mask
            let key = keys[j]
            if key == 0 { break }
            let k = home(key)
            let stays = i <= j ? (i < k && k <= j) : (i < k || k <= j)
            if stays { continue }
            // Moving from j (not its home) to i: at home again only if i is its home.
            if i == k { displaced -= 1 }
            keys[i] = key
            values[i] = values[j]
            keys[j] = 0
            values[j] = nil
            i = j
        }
        return removed
    }

    mutating func removeAll() {
        for i in keys.indices where keys[i] != 0 {
            keys[i] = 0
            values[i] = nil
        }
        count = 0
        displaced = 0
    }

    /// Whether the displaced count matches the slots (tests).
    var displacedCountIsExact: Bool {
        keys.indices.filter { keys[$0] != 0 && home(keys[$0]) != $0 }.count == displaced
    }

    /// The streams, in slot order.
    var streams: [ServerStream] { values.compactMap { $0 } }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values
        keys = [Int32](repeating: 0, count: oldKeys.count * 2)
        values = [ServerStream?](repeating: nil, count: oldKeys.count * 2)
        mask = keys.count - 1
        count = 0
        displaced = 0
        for i in oldKeys.indices where oldKeys[i] != 0 {
            insert(oldValues[i]!, id: oldKeys[i])
        }
    }
}

@testable import HTTP2
import Testing

/// The session's stream table against a Dictionary: random inserts and removals in any order, growth, wrap-around.
@Suite("stream table")
struct StreamTableTests {
    @Test("agrees with a Dictionary over 20,000 random operations on odd, increasing ids", arguments: [16, 64])
    func model(_ capacity: Int) {
        var table = StreamTable(capacity: capacity)
        var model: [Int32: ServerStream] = [:]
        var rng = SystemRandomNumberGenerator()
        var next: Int32 = 1
        for step in 0..<20_000 {
            if model.isEmpty || (model.count < 1_100 && Int.random(in: 0..<3, using: &rng) != 0) {
                let stream = ServerStream(id: next, maxMessageBytes: 16)
                table.insert(stream, id: next)
                model[next] = stream
                next += 2
            } else {
                let id = model.keys.randomElement(using: &rng)!
                #expect(table.remove(id) === model.removeValue(forKey: id), "step \(step)")
            }
            #expect(table.count == model.count)
            if step % 97 == 0 {
                for (id, stream) in model { #expect(table[id: id] === stream, "step \(step), id \(id)") }
                #expect(table.displacedCountIsExact, "step \(step)")
                #expect(table[id: next] == nil)
                #expect(table.remove(next) == nil)
                #expect(Set(table.streams.map { ObjectIdentifier($0) }) == Set(model.values.map { ObjectIdentifier($0) }))
            }
        }
        table.removeAll()
        #expect(table.isEmpty && table.streams.isEmpty)
    }

    @Test("ids that share a home slot and wrap past the end stay reachable after removals")
    func collisions() {
        var table = StreamTable(capacity: 16)  // 16 slots: ids 31, 63, 95 all start at slot 15 and wrap
        let ids: [Int32] = [31, 63, 95, 1, 33]
        let streams = ids.map { ServerStream(id: $0, maxMessageBytes: 16) }
        for (id, s) in zip(ids, streams) { table.insert(s, id: id) }
        #expect(table.remove(31) === streams[0])
        #expect(table[id: 63] === streams[1] && table[id: 95] === streams[2] && table[id: 1] === streams[3] && table[id: 33] === streams[4])
        #expect(table.remove(1) === streams[3])
        #expect(table[id: 95] === streams[2] && table[id: 33] === streams[4])
        #expect(table.displacedCountIsExact)
    }
}

import ProtoWire
import Testing
import TestSupport

@Suite("Base64")
struct Base64Tests {
    @Test("RFC 4648 vectors, padded and not; the URL alphabet")
    func vectors() {
        let cases = [("", "", ""), ("f", "Zg==", "Zg"), ("fo", "Zm8=", "Zm8"), ("foo", "Zm9v", "Zm9v"), ("foob", "Zm9vYg==", "Zm9vYg")]
        for (text, padded, url) in cases {
            #expect(Base64.encode(Array(text.utf8), padded: true) == padded)
            #expect(Base64.encodeURL(Array(text.utf8)) == url)
        }
        #expect(Base64.encode([0xFB, 0xFF, 0xBF]) == "+/+/" && Base64.encodeURL([0xFB, 0xFF, 0xBF]) == "-_-_")
    }

    @Test("encodeURL is encode with - and _, and both decode back", arguments: 0..<64)
    func agree(_ length: Int) {
        var rng = SplitMix(seed: UInt64(length) &+ 7)
        let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let url = Base64.encodeURL(bytes)
        #expect(url == String(Base64.encode(bytes).map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }))
        #expect(Base64.decode(url) == bytes && Base64.decode(Base64.encode(bytes, padded: true)) == bytes)
    }
}

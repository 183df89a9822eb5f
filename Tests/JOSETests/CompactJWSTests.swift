import JOSE
import ProtoWire
import Testing

@Suite("CompactJWS: split, decode and join RFC 7515's compact form")
struct CompactJWSTests {
    @Test("join then split gives back the header, payload, signature and the signing input")
    func roundTrip() throws {
        let header = CompactJWS.jwtHeader(algorithm: "ES256", keyID: "K\"1")
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"K\"1","typ":"JWT"}"#)
        var signed: [UInt8] = []
        let text = CompactJWS.join(header: header, payload: Array(#"{"sub":"a"}"#.utf8)) { (input: [UInt8]) -> [UInt8] in
            signed = input
            return [0xFF, 0x00, 0x7E]
        }
        let parts = try CompactJWS.split(text, maxBytes: 1024)
        #expect(parts.header == header)
        #expect(parts.payload == Array(#"{"sub":"a"}"#.utf8))
        #expect(parts.signature == [0xFF, 0x00, 0x7E])
        #expect(parts.signingInput == signed)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"), "unpadded base64url: \(text)")
    }

    @Test("a header without a key id has no kid member")
    func noKeyID() {
        #expect(String(decoding: CompactJWS.jwtHeader(algorithm: "RS256", keyID: ""), as: UTF8.self) == #"{"alg":"RS256","typ":"JWT"}"#)
    }

    @Test("refusals: empty, too long, two or four parts, an empty part, a part not base64url")
    func refusals() {
        #expect(throws: CompactJWS.Failure.empty) { try CompactJWS.split("", maxBytes: 10) }
        #expect(throws: CompactJWS.Failure.tooLong(limit: 4)) { try CompactJWS.split("YQ.YQ.YQ", maxBytes: 4) }
        #expect(throws: CompactJWS.Failure.shape(parts: 2)) { try CompactJWS.split("YQ.YQ", maxBytes: 100) }
        #expect(throws: CompactJWS.Failure.shape(parts: 4)) { try CompactJWS.split("YQ.YQ.YQ.YQ", maxBytes: 100) }
        #expect(throws: CompactJWS.Failure.shape(parts: 3)) { try CompactJWS.split("YQ..YQ", maxBytes: 100) }
        #expect(throws: CompactJWS.Failure.notBase64URL) { try CompactJWS.split("YQ.Y!Q.YQ", maxBytes: 100) }
    }
}

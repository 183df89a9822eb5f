import ProtoJSON
import ProtoWire
import Testing

/// The registry of scripts/golden/jsontest.proto.
func testRegistry(ignoresUnknownFields: Bool = true) throws -> Registry {
    try Registry(base64Files: TestDescriptors.files, ignoresUnknownFields: ignoresUnknownFields)
}

/// JSON -> binary -> JSON.
func canonical(_ type: String, _ json: String, _ registry: Registry) throws -> String {
    let binary = try registry.toBinary("jsontest." + type, json: Array(json.utf8))
    return String(decoding: try registry.toJSON("jsontest." + type, binary: binary), as: UTF8.self)
}

@Suite("Proto3 JSON mapping")
struct MappingTests {
    /// Canonical JSON reads and writes back byte for byte: each case is one rule of the mapping.
    static let canonicalCases: [(String, String)] = [
        ("Scalars", "{}"),
        (
            "Scalars",
            #"{"i32":-2147483648,"i64":"-9223372036854775808","u32":4294967295,"u64":"18446744073709551615","s32":-5,"#
                + #""s64":"-6","f32":7,"f64":"8","sf32":-9,"sf64":"-10","flag":true,"#
                + #""text":"héllo \"q\" \\ \n\u0001 😀","data":"AAEC/w==","dbl":1.5,"flt":0.25,"color":"COLOR_GREEN","#
                + #""inner":{"name":"n","value":"3"}}"#
        ),
        ("Scalars", #"{"i64":"9223372036854775807","s64":"9223372036854775807","sf64":"-9223372036854775808"}"#),
        ("Scalars", #"{"dbl":"NaN","flt":"-Infinity"}"#),
        ("Scalars", #"{"dbl":"Infinity","flt":"NaN"}"#),
        ("Scalars", #"{"dbl":1e-300,"flt":3.4028235e+38}"#),
        ("Scalars", #"{"dbl":-0.0}"#),
        ("Scalars", #"{"inner":{}}"#),
        ("Scalars", #"{"color":5}"#),
        (
            "Repeated",
            #"{"i32":[1,-1,0],"i64":["0","-1"],"u64":["18446744073709551615"],"f32":[1,0],"sf64":["-2"],"#
                + #""flag":[true,false],"text":["a",""],"data":["","AA=="],"dbl":[0.5,"NaN"],"flt":[-1.5],"#
                + #""color":["COLOR_RED",7,"COLOR_UNSPECIFIED"],"inner":[{},{"name":"x"}],"unpacked":[1,2]}"#
        ),
        (
            "Maps",
            #"{"labels":{"a":"1","b":""},"byId":{"-1":{"name":"x"},"0":{}},"colors":{"9223372036854775807":"COLOR_RED"},"#
                + #""flags":{"true":"AQ==","false":""},"weights":{"18446744073709551615":2.5},"counts":{"-3":"4"}}"#
        ),
        ("Presence", #"{"maybeInt":0,"maybeText":"","maybeColor":"COLOR_UNSPECIFIED","choiceNumber":"0"}"#),
        ("Presence", #"{"choiceInner":{}}"#),
        ("Presence", #"{"choiceColor":"COLOR_UNSPECIFIED","plain":1}"#),
        (
            "Holder",
            #"{"any":{"@type":"type.googleapis.com/jsontest.Inner","name":"x","value":"1"},"#
                + #""anys":[{},{"@type":"type.googleapis.com/google.protobuf.Any","#
                + #""value":{"@type":"type.googleapis.com/jsontest.Scalars","i32":1}}]}"#
        ),
        ("Recursive", #"{"child":{"child":{"depth":2}}}"#),
        ("Names", #"{"snakeCaseName":"a","nameWith2Digits":"b","custom":"c"}"#),
    ]

    @Test("canonical JSON round-trips byte for byte", arguments: canonicalCases)
    func roundTrip(_ type: String, _ json: String) throws {
        #expect(try canonical(type, json, testRegistry()) == json)
    }

    /// Input the mapping accepts, and the canonical JSON it means.
    static let lenientCases: [(String, String, String)] = [
        (
            "Names", #"{"snake_case_name":"a","name_with_2_digits":"b","explicit":"c"}"#,
            #"{"snakeCaseName":"a","nameWith2Digits":"b","custom":"c"}"#
        ),
        (
            "Scalars",
            #"{"i32":"12","i64":12,"u64":1e3,"s32":1.0,"f64":"18446744073709551615","flt":"1.5","dbl":"-2e-3","color":1,"#
                + #""data":"_-8","text":"\u00e9\ud83d\ude00\/","unknownField":{"x":[1,2]},"flag":false,"inner":null}"#,
            #"{"i32":12,"i64":"12","u64":"1000","s32":1,"f64":"18446744073709551615","text":"é😀/","data":"/+8=","#
                + #""dbl":-0.002,"flt":1.5,"color":"COLOR_RED"}"#
        ),
        ("Scalars", #"{"color":"2","sf32":"-0","u32":-0}"#, #"{"color":"COLOR_GREEN"}"#),
        ("Scalars", #"{"color":"COLOR_PURPLE","i32":1}"#, #"{"i32":1}"#),
        ("Scalars", #"{"i32":0,"text":"","flag":false,"color":"COLOR_UNSPECIFIED","data":"","dbl":0}"#, "{}"),
        ("Scalars", " \n\t{ \"i32\" : 1 }\r\n", #"{"i32":1}"#),
        ("Scalars", #"{"data":"AAEC/w","i64":"-0"}"#, #"{"data":"AAEC/w=="}"#),
        ("Repeated", #"{"color":["COLOR_PURPLE","COLOR_RED"],"i32":null,"text":[]}"#, #"{"color":["COLOR_RED"]}"#),
        ("Maps", #"{"labels":null,"byId":{}}"#, "{}"),
        ("Presence", #"{"choiceText":null,"choiceNumber":"7"}"#, #"{"choiceNumber":"7"}"#),
        ("Holder", #"{"any":{"value":"1","@type":"x/jsontest.Inner"}}"#, #"{"any":{"@type":"x/jsontest.Inner","value":"1"}}"#),
    ]

    @Test("lenient input reads to the canonical JSON", arguments: lenientCases)
    func lenient(_ type: String, _ input: String, _ expected: String) throws {
        #expect(try canonical(type, input, testRegistry()) == expected)
    }

    @Test("fields are written in number order, repeated scalars packed unless [packed = false]")
    func binaryLayout() throws {
        let registry = try testRegistry()
        let scalars = try registry.toBinary("jsontest.Scalars", json: Array(#"{"text":"a","i32":1,"dbl":1}"#.utf8))
        #expect(scalars == [0x08, 0x01, 0x62, 0x01, 0x61, 0x71, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F])
        let repeated = try registry.toBinary("jsontest.Repeated", json: Array(#"{"unpacked":[1,2],"i32":[3,-1]}"#.utf8))
        let minusOne: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        #expect(repeated == [0x0A, 11, 0x03] + minusOne + [0x90, 0x01, 0x01, 0x90, 0x01, 0x02])
        // Explicit presence writes zero values; implicit presence does not.
        let presence = try registry.toBinary("jsontest.Presence", json: Array(#"{"maybeInt":0,"plain":0,"choiceText":""}"#.utf8))
        #expect(presence == [0x08, 0x00, 0x22, 0x00])
        // A map entry is written with key and value.
        let maps = try registry.toBinary("jsontest.Maps", json: Array(#"{"labels":{"":""}}"#.utf8))
        #expect(maps == [0x0A, 0x04, 0x0A, 0x00, 0x12, 0x00])
    }

    @Test("binary input: last value wins, messages merge, oneof members replace each other, packed or not")
    func wireRules() throws {
        let registry = try testRegistry()
        func json(_ type: String, _ bytes: [UInt8]) throws -> String {
            String(decoding: try registry.toJSON("jsontest." + type, binary: bytes), as: UTF8.self)
        }
        #expect(try json("Scalars", [0x08, 0x01, 0x08, 0x02]) == #"{"i32":2}"#)
        #expect(try json("Scalars", [0x08, 0x01, 0x08, 0x00]) == "{}")
        #expect(try json("Scalars", [0x8A, 0x01, 0x03, 0x0A, 0x01, 0x61, 0x8A, 0x01, 0x02, 0x10, 0x05]) == #"{"inner":{"name":"a","value":"5"}}"#)
        #expect(try json("Presence", [0x22, 0x01, 0x61, 0x30, 0x03]) == #"{"choiceNumber":"3"}"#)
        #expect(try json("Repeated", [0x08, 0x01, 0x0A, 0x02, 0x02, 0x03, 0x90, 0x01, 0x04, 0x92, 0x01, 0x01, 0x05]) == #"{"i32":[1,2,3],"unpacked":[4,5]}"#)
        // A known field with a wire type its declaration does not allow is an unknown field; so is field 99.
        #expect(try json("Scalars", [0x0D, 1, 2, 3, 4, 0x98, 0x06, 0x01]) == "{}")
        // int32 values sign-extended to ten bytes, and an enum number the schema lacks.
        #expect(try json("Scalars", [0x08, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x80, 0x01, 0x09]) == #"{"i32":-2,"color":9}"#)
        // Map entries with a key or value missing take the defaults; a later equal key wins.
        #expect(try json("Maps", [0x0A, 0x00, 0x12, 0x02, 0x08, 0x05, 0x0A, 0x03, 0x12, 0x01, 0x7A]) == #"{"labels":{"":"z"},"byId":{"5":{}}}"#)
        #expect(try json("Maps", [0x1A, 0x02, 0x08, 0x01, 0x22, 0x02, 0x08, 0x01]) == #"{"colors":{"1":"COLOR_UNSPECIFIED"},"flags":{"true":""}}"#)
    }

    @Test("the billing schemas: names both ways, int64 as strings, enums, oneofs, google.rpc.Status with Any and map")
    func billing() throws {
        let registry = try Registry(base64Files: BillingDescriptors.files.values)
        let names = registry.messageNames
        for name in [
            "billing.v1.Order", "billing.v1.Event", "billing.admin.v1.LookUpOrderResponse", "grpc.health.v1.HealthCheckResponse",
            "google.rpc.Status", "google.rpc.ErrorInfo", "google.protobuf.Any",
        ] {
            #expect(names.contains(name))
        }
        #expect(!names.contains("google.rpc.ErrorInfo.MetadataEntry"))
        let cases: [(String, String, String)] = [
            (
                "billing.v1.Order", #"{"order_id":"o","create_time_ms":5,"state":2,"quantity":"3","store":"STORE_APP_STORE"}"#,
                #"{"orderId":"o","state":"ORDER_STATE_COMPLETED","createTimeMs":"5","quantity":3,"store":"STORE_APP_STORE"}"#
            ),
            ("billing.v1.SubmitReceiptRequest", #"{"orderId":"o","googlePlay":{}}"#, #"{"orderId":"o","googlePlay":{}}"#),
            ("billing.v1.ListEventsResponse", #"{"nextCursor":"18446744073709551615"}"#, #"{"nextCursor":"18446744073709551615"}"#),
            ("grpc.health.v1.HealthCheckResponse", #"{"status":"SERVING"}"#, #"{"status":"SERVING"}"#),
            (
                "google.rpc.Status",
                #"{"code":9,"message":"m","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"R","#
                    + #""domain":"billing","metadata":{"k":"v"}}]}"#,
                #"{"code":9,"message":"m","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"R","#
                    + #""domain":"billing","metadata":{"k":"v"}}]}"#
            ),
        ]
        for (type, input, expected) in cases {
            let binary = try registry.toBinary(type, json: Array(input.utf8))
            #expect(String(decoding: try registry.toJSON(type, binary: binary), as: UTF8.self) == expected)
            #expect(try registry.toJSON("." + type, binary: binary) == registry.toJSON(type, binary: binary))
        }
        // billing.v1.Order field by field: order_id 1, state 4, create_time_ms 5.
        #expect(
            try registry.toBinary("billing.v1.Order", json: Array(#"{"createTimeMs":"5","state":"ORDER_STATE_PENDING","orderId":"o"}"#.utf8))
                == [0x0A, 0x01, 0x6F, 0x20, 0x01, 0x28, 0x05])
    }
}

import Foundation
import ProtoWire
public import RPC

/// gRPC server reflection (grpc.reflection.v1 and v1alpha ServerReflectionInfo), so grpcurl and ghz can
/// call billingd without proto files: it lists the services and hands out the FileDescriptorProtos of
/// `schemas/` (generated into ReflectionData.swift by scripts/golden/make_descriptors.py).
public enum Reflection {
    public static let methods = [
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ]

    public static func register(in router: inout Router) {
        for method in methods {
            router.registerBidiStreaming(method) { _, writer in
                StreamReceiver(
                    onMessage: { bytes in
                        guard !writer.isDone else { return }
                        do throws(WireError) {
                            writer.send(answer(try Request(decoding: bytes), raw: bytes))
                        } catch {
                            writer.finish(.undecodable(error.description))
                        }
                    }, onEnd: { writer.finish() })
            }
        }
    }

    /// ServerReflectionRequest: `host` = 1 and one of the requests 3-7.
    struct Request: ProtoMessage {
        enum Kind: Equatable {
            case none, fileByFilename(String), fileContainingSymbol(String), fileContainingExtension, extensionNumbers(String), listServices
        }
        var host = ""
        var kind = Kind.none
        init() {}
        mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
            while let (field, wt) = try r.nextTag() {
                switch field {
                case 1: try expect(wt, .lengthDelimited, field: 1); host = try r.readString(field: 1)
                case 3: try expect(wt, .lengthDelimited, field: 3); kind = .fileByFilename(try r.readString(field: 3))
                case 4: try expect(wt, .lengthDelimited, field: 4); kind = .fileContainingSymbol(try r.readString(field: 4))
                case 5: try expect(wt, .lengthDelimited, field: 5); _ = try r.readBytes(); kind = .fileContainingExtension
                case 6: try expect(wt, .lengthDelimited, field: 6); kind = .extensionNumbers(try r.readString(field: 6))
                case 7: try expect(wt, .lengthDelimited, field: 7); _ = try r.readString(field: 7); kind = .listServices
                default: try r.skip(wt)
                }
            }
        }
        var encodedSize: Int { 0 }
        func encode(to w: inout ProtoWriter) {}
    }

    /// ServerReflectionResponse, written field by field: valid_host = 1, original_request = 2, then one of
    /// file_descriptor_response = 4, all_extension_numbers_response = 5, list_services_response = 6, error_response = 7.
    struct Response: ProtoMessage {
        var host = ""
        var original: [UInt8] = []
        /// The encoded oneof member and its field number.
        var field = 7
        var member: [UInt8] = []
        init() {}
        mutating func decodeFields(from r: inout ProtoReader) throws(WireError) { while let (_, wt) = try r.nextTag() { try r.skip(wt) } }
        var encodedSize: Int { ProtoSize.string(1, host) + raw(2, original) + raw(field, member) }
        func encode(to w: inout ProtoWriter) {
            w.string(1, host)
            w.writeTag(2, .lengthDelimited); w.writeVarint(UInt64(original.count)); w.writeRaw(original)
            w.writeTag(field, .lengthDelimited); w.writeVarint(UInt64(member.count)); w.writeRaw(member)
        }
        private func raw(_ f: Int, _ bytes: [UInt8]) -> Int {
            ProtoWriter.tagSize(f) + ProtoWriter.varintSize(UInt64(bytes.count)) + bytes.count
        }
    }

    static func bytesField(_ field: Int, _ bytes: [UInt8]) -> [UInt8] {
        var w = ProtoWriter(capacity: bytes.count + 8)
        w.writeTag(field, .lengthDelimited); w.writeVarint(UInt64(bytes.count)); w.writeRaw(bytes)
        return w.finish()
    }

    static func file(_ name: String) -> [UInt8]? {
        ReflectionData.files[name].flatMap { Base64.decode($0) }
    }

    static func answer(_ request: Request, raw: [UInt8]) -> Response {
        var r = Response()
        r.host = request.host
        r.original = raw
        func notFound(_ message: String) {
            var w = ProtoWriter(capacity: message.utf8.count + 8)
            w.int32(1, StatusCode.notFound.rawValue)
            w.string(2, message)
            r.field = 7
            r.member = w.finish()
        }
        func files(_ names: [String]) {
            // FileDescriptorResponse { repeated bytes file_descriptor_proto = 1 }
            r.field = 4
            r.member = names.compactMap(file).flatMap { bytesField(1, $0) }
        }
        switch request.kind {
        case .listServices:
            // ListServiceResponse { repeated ServiceResponse service = 1 { string name = 1 } }
            r.field = 6
            r.member = ReflectionData.services.flatMap { name -> [UInt8] in
                var w = ProtoWriter(capacity: name.utf8.count + 4)
                w.string(1, name)
                return bytesField(1, w.finish())
            }
        case .fileByFilename(let name):
            if file(name) != nil { files([name]) } else { notFound("file \(name) is not served here") }
        case .fileContainingSymbol(let symbol):
            if let name = ReflectionData.symbols[symbol] { files([name]) } else { notFound("symbol \(symbol) is not served here") }
        case .extensionNumbers(let type):
            if ReflectionData.symbols[type] != nil {
                // ExtensionNumberResponse { base_type_name = 1 }: proto3 types have no extensions.
                var w = ProtoWriter(capacity: type.utf8.count + 4)
                w.string(1, type)
                r.field = 5
                r.member = w.finish()
            } else {
                notFound("type \(type) is not served here")
            }
        case .fileContainingExtension:
            notFound("no extensions are served here")
        case .none:
            var w = ProtoWriter(capacity: 64)
            w.int32(1, StatusCode.invalidArgument.rawValue)
            w.string(2, "empty reflection request")
            r.field = 7
            r.member = w.finish()
        }
        return r
    }
}

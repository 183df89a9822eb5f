import Foundation
import ProtoJSON
import ProtoWire

/// `billingctl proto-json ...`: the canonical proto3 JSON mapping of billingd's messages, offline.
///
/// Parses its own arguments (it needs none of the connection options), so `main.swift` hands it the words
/// after `proto-json`.
enum ProtoJSONCommand {
    static let usage = """
          proto-json to-json|to-binary TYPE [--lines] [--strict] [--descriptor-set FILE]   the canonical proto3 JSON of
                TYPE (billing.v1.Order, billing.admin.v1.LookUpOrderResponse, google.rpc.Status, ...): binary on stdin
                -> JSON on stdout, or JSON -> binary; --lines: one base64 message or JSON text per line in and out, a
                failed line answered `!reason`; --strict: unknown JSON fields and enum names are errors;
                --descriptor-set: types from a FileDescriptorSet (protoc --include_imports) instead of billingd's own
        """

    static func run(_ arguments: [String]) throws {
        var positional: [String] = []
        var lines = false
        var strict = false
        var descriptorSet: String?
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--lines": lines = true
            case "--strict": strict = true
            case "--descriptor-set":
                guard i + 1 < arguments.count else { throw Usage(message: "--descriptor-set needs a file") }
                i += 1
                descriptorSet = arguments[i]
            case let a where a.hasPrefix("-"): throw Usage(message: "unknown flag \(a) for proto-json")
            case let a: positional.append(a)
            }
            i += 1
        }
        guard positional.count == 2, positional[0] == "to-json" || positional[0] == "to-binary" else {
            throw Usage(message: "proto-json needs to-json or to-binary and a message type")
        }
        let registry: Registry
        if let descriptorSet {
            guard let data = FileManager.default.contents(atPath: descriptorSet) else { throw Usage(message: "cannot read \(descriptorSet)") }
            registry = try Registry(descriptorSet: [UInt8](data), ignoresUnknownFields: !strict)
        } else {
            registry = try Registry(base64Files: BillingDescriptors.files.values, ignoresUnknownFields: !strict)
        }
        let type = positional[1]
        let toJSON = positional[0] == "to-json"
        let input = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        if !lines {
            if toJSON {
                FileHandle.standardOutput.write(Data(try registry.toJSON(type, binary: input) + [0x0A]))
            } else {
                FileHandle.standardOutput.write(Data(try registry.toBinary(type, json: input)))
            }
            return
        }
        var out: [UInt8] = []
        var failed = 0
        var rows = input.split(separator: 0x0A, omittingEmptySubsequences: false)
        if rows.last?.isEmpty == true { rows.removeLast() }
        for row in rows {
            var line = Array(row)
            if line.last == 0x0D { line.removeLast() }
            do {
                if toJSON {
                    guard let binary = Base64.decode(String(decoding: line, as: UTF8.self)) else {
                        throw ProtoJSONError.invalidField(path: "", reason: "the line is not base64")
                    }
                    out += try registry.toJSON(type, binary: binary)
                } else {
                    out += Array(Base64.encode(try registry.toBinary(type, json: line), padded: true).utf8)
                }
            } catch {
                failed += 1
                out += Array(("!\(error)").utf8)
            }
            out.append(0x0A)
        }
        FileHandle.standardOutput.write(Data(out))
        if failed > 0 {
            FileHandle.standardError.write(Data("billingctl: \(failed) of \(rows.count) lines failed\n".utf8))
            exit(1)
        }
    }
}

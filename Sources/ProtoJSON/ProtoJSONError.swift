public import ProtoWire

/// Why a message could not be converted between the binary and the JSON encodings.
///
/// A `path` names the field where it went wrong, in JSON names from the top-level message:
/// `order.createTimeMs`, `events[2].type`, `metadata["k"]`.
public enum ProtoJSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The registry holds no message of this name.
    case unknownMessage(String)
    /// A serialized FileDescriptorProto could not be read, or names a type the registry lacks.
    case invalidDescriptor(String)
    /// The input is not JSON (RFC 8259); `offset` is the byte where reading stopped.
    case invalidJSON(offset: Int, reason: String)
    /// A JSON value does not fit the field it is given for.
    case invalidField(path: String, reason: String)
    /// The binary input is not a valid encoding of the message.
    case invalidBinary(path: String, WireError)
    /// Messages nest deeper than the limit.
    case tooDeep(path: String)
    /// The input or the output would pass its byte limit.
    case tooLarge(limit: Int)
    /// A well-known type whose special JSON form this module does not implement (only `Any` is).
    case unsupportedType(path: String, typeName: String)

    public var description: String {
        switch self {
        case .unknownMessage(let name): "unknown message type \(name)"
        case .invalidDescriptor(let reason): "invalid descriptor: \(reason)"
        case .invalidJSON(let offset, let reason): "invalid JSON at byte \(offset): \(reason)"
        case .invalidField(let path, let reason): Self.located(path, reason)
        case .invalidBinary(let path, let error): Self.located(path, "\(error)")
        case .tooDeep(let path): Self.located(path, "messages nest too deep")
        case .tooLarge(let limit): "more than \(limit) bytes"
        case .unsupportedType(let path, let name): Self.located(path, "\(name) has no JSON mapping here (only google.protobuf.Any among the well-known types)")
        }
    }

    private static func located(_ path: String, _ reason: String) -> String {
        path.isEmpty ? reason : path + ": " + reason
    }

    /// The same error one level further out: `component` goes in front of the path.
    func within(_ component: String) -> ProtoJSONError {
        func join(_ path: String) -> String {
            if path.isEmpty { return component }
            return path.hasPrefix("[") ? component + path : component + "." + path
        }
        switch self {
        case .invalidField(let path, let reason): return .invalidField(path: join(path), reason: reason)
        case .invalidBinary(let path, let error): return .invalidBinary(path: join(path), error)
        case .tooDeep(let path): return .tooDeep(path: join(path))
        case .unsupportedType(let path, let name): return .unsupportedType(path: join(path), typeName: name)
        default: return self
        }
    }
}

/// Byte and depth bounds for one conversion.
public struct ProtoJSONLimits: Sendable {
    /// The deepest nesting of messages accepted (the top-level message is depth 0).
    public var maxDepth: Int
    /// The largest input accepted, in bytes.
    public var maxInputBytes: Int
    /// The largest output produced, in bytes (binary fields of a few bytes can become long JSON names).
    public var maxOutputBytes: Int

    public init(maxDepth: Int = 100, maxInputBytes: Int = 16 << 20, maxOutputBytes: Int = 64 << 20) {
        self.maxDepth = maxDepth
        self.maxInputBytes = maxInputBytes
        self.maxOutputBytes = maxOutputBytes
    }

    public static let `default` = ProtoJSONLimits()
}

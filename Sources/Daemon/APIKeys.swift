import Crypto
import Foundation
import RPC
import Synchronization

/// API keys (`--api-keys`, CONFIG.md): the file holds SHA-256 digests, never keys.
struct APIKeys: Sendable {
    struct Key: Sendable {
        var name: String
        var digest: [UInt8]
        var methods: [String]

        /// `billing.v1.Billing/GetOrder`, `billing.v1.Billing/*`, or `*`.
        func allows(_ method: String) -> Bool {
            methods.contains { pattern in
                if pattern == "*" || pattern == method { return true }
                if pattern.hasSuffix("/*") { return method.hasPrefix(String(pattern.dropLast())) }
                return false
            }
        }
    }

    let keys: [Key]

    struct LoadError: Error, CustomStringConvertible { var description: String }

    static func load(path: String) throws(LoadError) -> APIKeys {
        // Read through a handle: Foundation's whole-file readers answer nil for an empty device such as /dev/null.
        guard let handle = FileHandle(forReadingAtPath: path) else { throw LoadError(description: "cannot read \(path)") }
        let data: Data
        do {
            data = try handle.readToEnd() ?? Data()  // nil: nothing to read
        } catch {
            throw LoadError(description: "cannot read \(path)")
        }
        if data.allSatisfy({ [0x20, 0x0A, 0x0D, 0x09].contains($0) }) {
            throw LoadError(description: "\(path) is empty: it must hold {\"keys\": [...]} with at least one key")
        }
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let list = root["keys"] as? [[String: Any]] else {
            throw LoadError(description: "\(path) is not {\"keys\": [{\"name\", \"sha256\", \"methods\"}]}")
        }
        var keys: [Key] = []
        for (i, entry) in list.enumerated() {
            guard let name = entry["name"] as? String, !name.isEmpty else { throw LoadError(description: "key \(i) has no name") }
            guard let hex = entry["sha256"] as? String, let digest = Self.hex(hex), digest.count == 32 else {
                throw LoadError(description: "key \(name): sha256 must be 64 hex digits (the SHA-256 of the key, not the key)")
            }
            guard let methods = entry["methods"] as? [String], !methods.isEmpty else {
                throw LoadError(description: "key \(name): methods must list full method names, Service/*, or *")
            }
            keys.append(Key(name: name, digest: digest, methods: methods))
        }
        guard !keys.isEmpty else { throw LoadError(description: "\(path) lists no keys") }
        return APIKeys(keys: keys)
    }

    /// The first method pattern that names no method in `known` (the router's full names): a typo would
    /// otherwise deny its calls silently. `*` and `Service/*` of a known service are accepted.
    func unknownMethod(known: [String]) -> (key: String, pattern: String)? {
        let services = Set(known.compactMap { $0.split(separator: "/").first.map(String.init) })
        for key in keys {
            for pattern in key.methods where pattern != "*" && !known.contains(pattern) {
                if pattern.hasSuffix("/*") && services.contains(String(pattern.dropLast(2))) { continue }
                return (key.name, pattern)
            }
        }
        return nil
    }

    static func hex(_ s: String) -> [UInt8]? {
        let c = Array(s.lowercased().utf8)
        guard c.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: c.count, by: 2) {
            guard let b = UInt8(String(decoding: c[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
        }
        return out
    }

    /// The key a call presents, compared in constant time against every configured digest.
    func key(for context: CallContext) -> Key? {
        guard let header = context.metadata("authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let digest = Digest.sha256(Array(parts[1].utf8))
        var found: Key?
        for key in keys {
            var diff: UInt8 = 0
            for i in 0..<32 { diff |= key.digest[i] ^ digest[i] }
            if diff == 0 && found == nil { found = key }
        }
        return found
    }

    /// Methods that need no key: health, for load balancers and Kubernetes probes.
    static let open: Set<String> = ["grpc.health.v1.Health/Check", "grpc.health.v1.Health/Watch"]

    /// The router's check for every call, unknown methods included: health needs no key; otherwise
    /// UNAUTHENTICATED or PERMISSION_DENIED.
    func check(_ context: CallContext) -> RPCError? {
        if Self.open.contains(context.method) { return nil }
        guard let key = key(for: context) else {
            return RPCError(
                code: .unauthenticated, message: "a valid API key is required: authorization: Bearer <key>",
                reason: .unauthenticated)
        }
        context.note("api_key", key.name)
        guard key.allows(context.method) else {
            return RPCError(
                code: .permissionDenied, message: "API key \(key.name) may not call \(context.method)",
                reason: .permissionDenied, metadata: ["key": key.name])
        }
        return nil
    }
}

/// The keys every call is checked against, replaced whole when the key file is read again (SIGHUP): a call sees
/// the old table or the new one, never a mix.
final class KeyTable: Sendable {
    private let current: Mutex<APIKeys>

    init(_ keys: APIKeys) { current = Mutex(keys) }

    func check(_ context: CallContext) -> RPCError? { current.withLock { $0.check(context) } }

    /// The name of the key a call presents, or nil.
    func name(for context: CallContext) -> String? { current.withLock { $0.key(for: context)?.name } }

    func replace(_ keys: APIKeys) { current.withLock { $0 = keys } }
}

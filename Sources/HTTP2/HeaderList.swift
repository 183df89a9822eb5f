package import CNGHTTP2

/// A block of header fields laid out once in C memory as `nghttp2_nv`s.
///
/// The common blocks are built at start and live for the process;
/// per-call blocks live for the submit call that copies them.
package final class HeaderList: @unchecked Sendable {
    // Sendable: immutable after init; nghttp2 only reads it.
    package let nva: UnsafeMutablePointer<nghttp2_nv>
    package let count: Int
    private let storage: UnsafeMutableRawPointer

    /// `lasting`: the list lives as long as the sessions that submit it (the process's static lists), so
    /// nghttp2 may point at its bytes instead of copying them per submit (NGHTTP2_NV_FLAG_NO_COPY_NAME and
    /// _VALUE, as the C anchor does; names are lowercase, as nghttp2 then requires).
    package init(_ fields: [(String, String)], lasting: Bool = false) {
        var total = 0
        for (n, v) in fields { total += n.utf8.count + v.utf8.count }
        storage = .allocate(byteCount: max(total, 1), alignment: 1)
        nva = .allocate(capacity: max(fields.count, 1))
        count = fields.count
        var offset = 0
        for (i, (name, value)) in fields.enumerated() {
            let namePtr = storage.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
            for (j, b) in name.utf8.enumerated() { namePtr[j] = b }
            offset += name.utf8.count
            let valuePtr = storage.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
            for (j, b) in value.utf8.enumerated() { valuePtr[j] = b }
            offset += value.utf8.count
            nva[i] = nghttp2_nv(
                name: namePtr, value: valuePtr, namelen: name.utf8.count, valuelen: value.utf8.count,
                flags: lasting ? UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue) : UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        }
    }

    deinit {
        storage.deallocate()
        nva.deallocate()
    }

    static let ok = HeaderList([(":status", "200"), ("content-type", "application/grpc")], lasting: true)
    static let okTrailers = HeaderList([("grpc-status", "0")], lasting: true)
}

/// What a request's header block said, as far as the server reads it: gathered field by field while the
/// block arrives (on the session, see `H2ServerSession.reading`), then handed to its stream whole.
struct RequestHead {
    var method = ""
    var path = ""
    var contentType = ""
    var timeout = ""
    var metadata: [(name: String, value: String)] = []
    /// The block's size as `--max-header-list-bytes` counts it (name + value + 32 per field).
    var headerBytes = 0
    /// The block went over `--max-header-list-bytes`: answered RESOURCE_EXHAUSTED, never dispatched.
    var tooLarge = false
    /// Request pseudo-header fields seen (PseudoField bits) and whether a regular field came (RequestFieldCheck).
    var pseudoFields: UInt8 = 0
    var sawRegularField = false

    /// Makes the head empty again for the next block, keeping the metadata's buffer. A field already empty
    /// is not assigned (no release call for it): most blocks leave the timeout, and many the metadata, empty.
    mutating func reset() {
        if !method.isEmpty { method = "" }
        if !path.isEmpty { path = "" }
        if !contentType.isEmpty { contentType = "" }
        if !timeout.isEmpty { timeout = "" }
        // Popped one by one: `removeAll(keepingCapacity:)` goes through the generic `replaceSubrange` (about
        // 220 instructions for one field); a block carries few fields.
        while metadata.popLast() != nil {}
        headerBytes = 0
        tooLarge = false
        pseudoFields = 0
        sawRegularField = false
    }
}

public import Crypto
import ProtoWire
import Synchronization

/// Apple's marker OIDs: on the receipt/JWS signing leaf, and on the WWDR intermediate.
public enum AppleOID {
    public static let receiptSigningLeaf = "1.2.840.113635.100.6.11.1"
    public static let wwdrIntermediate = "1.2.840.113635.100.6.2.1"
}

/// What a verifier trusts and accepts.
public struct VerifierSettings: Sendable {
    /// Configured roots; the root inside x5c is never trusted.
    public var anchors: TrustAnchors
    /// Bundle ids served; empty accepts any (local development only).
    public var bundleIDs: Set<String>
    /// Checked for production data that carries an appAppleId.
    public var appAppleID: Int64?
    public var environments: Set<AppStoreEnvironment>
    /// Apple's libraries decode Xcode / LocalTesting data without checking signature or chain.
    /// Off in billingd, which instead requires such data to chain to a configured root.
    public var decodeXcodeWithoutVerification = false
    /// The time used when signed data carries no date, in milliseconds since 1970.
    public var now: @Sendable () -> Int64

    public init(
        anchors: TrustAnchors, bundleIDs: Set<String>, appAppleID: Int64? = nil,
        environments: Set<AppStoreEnvironment>, now: @escaping @Sendable () -> Int64
    ) {
        self.anchors = anchors
        self.bundleIDs = bundleIDs
        self.appAppleID = appAppleID
        self.environments = environments
        self.now = now
    }
}

/// Verifies StoreKit 2 signed data the way Apple's App Store Server Library does, offline:
/// three x5c certificates, ES256, leaf and intermediate marker OIDs, chain to a configured root
/// valid at the payload's signedDate, then bundle id, environment and (production) appAppleId.
///
/// Verified chains are cached by their JWS header (`JWS.headerID`) with the window in which all three
/// certificates are valid, so the steady-state cost of a JWS is one ES256 verification.
public final class SignedDataVerifier: Sendable {
    public let settings: VerifierSettings
    private let cache = Mutex<[UInt64: CachedChain]>([:])
    private let chainCount = Atomic<Int>(0)
    /// Chain verifications that missed the cache (for tests and metrics).
    public var chainVerifications: Int { chainCount.load(ordering: .relaxed) }

    struct CachedChain {
        let leafKey: PublicKey
        let validFrom: Int64
        let validUntil: Int64
    }

    static let maxCachedChains = 256

    public init(settings: VerifierSettings) {
        self.settings = settings
    }

    public func verifyTransaction(_ signed: String) -> Result<TransactionPayload, VerificationFailure> {
        verify(signed, date: { $0.millis("signedDate") }) { fields throws(VerificationFailure) in
            let p = TransactionPayload(fields)
            try checkBundle(p.bundleID)
            try checkEnvironment(p.environment)
            return p
        }
    }

    public func verifyRenewalInfo(_ signed: String) -> Result<RenewalInfoPayload, VerificationFailure> {
        verify(signed, date: { $0.millis("signedDate") }) { fields throws(VerificationFailure) in
            let p = RenewalInfoPayload(fields)
            try checkEnvironment(p.environment)
            return p
        }
    }

    public func verifyNotification(_ signed: String) -> Result<NotificationPayload, VerificationFailure> {
        verify(signed, date: { $0.millis("signedDate") }) { fields throws(VerificationFailure) in
            let p = NotificationPayload(fields)
            let scope = p.scope
            try checkBundle(scope.bundleID, appAppleID: .some(scope.appAppleID), environment: scope.environment)
            try checkEnvironment(scope.environment)
            return p
        }
    }

    public func verifyAppTransaction(_ signed: String) -> Result<AppTransactionPayload, VerificationFailure> {
        verify(signed, date: { $0.millis("receiptCreationDate") }) { fields throws(VerificationFailure) in
            let p = AppTransactionPayload(fields)
            try checkBundle(p.bundleID, appAppleID: .some(p.appAppleID), environment: p.receiptType)
            try checkEnvironment(p.receiptType)
            return p
        }
    }

    // MARK: Checks

    /// Bundle id always; appAppleId only for data that carries one (notifications, app transactions).
    private func checkBundle(_ bundleID: String?, appAppleID: Int64?? = nil, environment: String? = nil) throws(VerificationFailure) {
        if !settings.bundleIDs.isEmpty {
            guard let bundleID, settings.bundleIDs.contains(bundleID) else {
                throw .wrongApp("bundle id \(bundleID ?? "(none)") is not served here")
            }
        }
        // Apple checks appAppleId when the verifier is for production; billingd, which may accept several
        // environments, checks it for production data and whenever production is the only one accepted.
        let production = environment == AppStoreEnvironment.production.rawValue || settings.environments == [.production]
        if production, let carried = appAppleID, let expected = settings.appAppleID, carried != expected {
            throw .wrongApp("appAppleId \(carried.map(String.init) ?? "(none)") is not \(expected)")
        }
    }

    private func checkEnvironment(_ environment: String?) throws(VerificationFailure) {
        guard let environment, let env = AppStoreEnvironment(rawValue: environment) else {
            throw .environmentNotAllowed("environment \(environment ?? "(none)") is not accepted")
        }
        guard settings.environments.contains(env) else {
            throw .environmentNotAllowed("environment \(environment) is not accepted")
        }
    }

    // MARK: Signature and chain

    private func verify<P>(
        _ signed: String, date: (JSONFields) -> Int64?,
        decode: (JSONFields) throws(VerificationFailure) -> P
    ) -> Result<P, VerificationFailure> {
        do throws(VerificationFailure) {
            let jws = try JWS.parse(signed)
            let fields = try JSONFields(bytes: jws.payload)
            let environment =
                fields.string("environment") ?? fields.object("data")?.string("environment")
                ?? fields.object("appData")?.string("environment") ?? fields.object("summary")?.string("environment")
                ?? fields.string("receiptType")
            let unsignedXcode =
                settings.decodeXcodeWithoutVerification
                && (environment == AppStoreEnvironment.xcode.rawValue || environment == AppStoreEnvironment.localTesting.rawValue)
            if !unsignedXcode {
                try checkSignature(jws, at: date(fields) ?? settings.now())
            }
            return .success(try decode(fields))
        } catch {
            return .failure(error)
        }
    }

    /// Whether the certificate chain of `compact` was verified and is cached: checking it then costs one
    /// ES256 signature. (The cached window is checked again at verification.)
    public func hasVerifiedChain(_ compact: String) -> Bool {
        guard let id = JWS.cachedHeaderID(compact) else { return false }
        return cache.withLock { $0[id] != nil }
    }

    private func checkSignature(_ jws: JWS, at dateMs: Int64) throws(VerificationFailure) {
        guard jws.algorithm == "ES256" else { throw .untrusted("alg \(jws.algorithm) is not ES256") }
        guard jws.x5c.count == 3 else {
            throw .untrusted("x5c holds \(jws.x5c.count) certificates; App Store data carries leaf, intermediate and root")
        }
        let seconds = dateMs / 1000
        // Keyed by the header's parse-cache id: the same id means a byte-identical header, so the same x5c.
        let key = jws.headerID
        var leafKey: PublicKey?
        if let hit = cache.withLock({ $0[key] }), hit.validFrom <= seconds, seconds <= hit.validUntil {
            leafKey = hit.leafKey
        }
        if leafKey == nil {
            let entry = try verifyChain(jws.x5c, at: seconds)
            cache.withLock { c in
                if c.count >= Self.maxCachedChains { c.removeAll(keepingCapacity: true) }
                c[key] = entry
            }
            leafKey = entry.leafKey
        }
        let ok = jws.signingInput.withUnsafeBytes { leafKey!.verifyES256(signature: jws.signature, message: $0) }
        guard ok else { throw .untrusted("the ES256 signature does not verify with the leaf certificate") }
    }

    private func verifyChain(_ x5c: [String], at seconds: Int64) throws(VerificationFailure) -> CachedChain {
        chainCount.add(1, ordering: .relaxed)
        var certs: [Certificate] = []
        for (i, text) in x5c.prefix(2).enumerated() {
            guard let der = Base64.decode(text) else { throw .untrusted("x5c[\(i)] is not base64") }
            do {
                certs.append(try Certificate(der: der))
            } catch {
                throw .untrusted("x5c[\(i)] is not a DER certificate")
            }
        }
        let leaf = certs[0], intermediate = certs[1]
        let chain: [Certificate]
        switch settings.anchors.verify(leaf: leaf, intermediates: [intermediate], at: seconds) {
        case .success(let c): chain = c
        case .failure(let e): throw .untrusted("certificate chain: \(e)")
        }
        guard chain.count == 3, chain[1].der == intermediate.der else {
            throw .untrusted("the chain must be leaf, x5c[1], configured root")
        }
        guard leaf.hasExtension(oid: AppleOID.receiptSigningLeaf) else {
            throw .untrusted("the leaf lacks Apple's marker OID \(AppleOID.receiptSigningLeaf)")
        }
        guard intermediate.hasExtension(oid: AppleOID.wwdrIntermediate) else {
            throw .untrusted("the intermediate lacks Apple's marker OID \(AppleOID.wwdrIntermediate)")
        }
        guard let key = leaf.publicKey, key.isP256 else { throw .untrusted("the leaf key is not EC P-256") }
        let from = chain.map(\.notBefore).max() ?? 0
        let until = chain.map(\.notAfter).min() ?? 0
        return CachedChain(leafKey: key, validFrom: from, validUntil: until)
    }
}

/// Proof of payment, verified: implemented over the App Store verifiers outside this module.
public protocol ProofVerifier: Sendable {
    /// One StoreKit 2 signed transaction.
    func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError>
    /// Every in-app record of a StoreKit 1 app receipt.
    func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError>
    /// Whether `jws`'s certificate chain is verified and cached now, so that checking it costs one ES256
    /// signature (cheap enough for an event loop); false sends the check to a worker pool.
    func hasVerifiedChain(signedTransaction jws: String) -> Bool
}

extension ProofVerifier {
    public func hasVerifiedChain(signedTransaction jws: String) -> Bool { false }
}

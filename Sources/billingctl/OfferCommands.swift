import BillingAPI

/// `billingctl offer sign`: SignOffer, printed as proto3 JSON.
enum OfferCommands {
    /// Its lines in billingctl's usage.
    static let usage = """
          offer sign --kind promotional|promotional-jws|introductory-eligibility --product ID [--offer ID] [--order ID]
                [--transaction-id ID] [--bundle-id ID] [--allow-introductory-offer]   SignOffer: the signature as JSON
        """

    /// `--kind` values.
    static let kinds: [String: OfferSignatureKind] = [
        "promotional": .promotional, "promotional-jws": .promotionalJWS, "introductory-eligibility": .introductoryEligibility,
    ]

    /// `offer sign`: one SignOffer call; the answer on stdout, a refusal as JSON on stderr (exit 1).
    static func run(_ options: Options) throws {
        guard options.positional.first == "sign", options.positional.count == 1 else { throw Usage(message: "offer takes one subcommand: sign") }
        guard let kindName = options.named["kind"], let kind = kinds[kindName] else {
            throw Usage(message: "offer sign needs --kind promotional, promotional-jws or introductory-eligibility")
        }
        guard let product = options.named["product"] else { throw Usage(message: "offer sign needs --product") }
        var req = SignOfferRequest()
        req.kind = kind
        req.productID = product
        req.offerID = options.named["offer"] ?? ""
        req.orderID = options.named["order"] ?? ""
        req.transactionID = options.named["transaction-id"] ?? ""
        req.bundleID = options.named["bundle-id"] ?? ""
        req.allowIntroductoryOffer = options.named["allow-introductory-offer"] == "true"
        let r = try call(options, "billing.v1.Billing/SignOffer", req, SignOfferResponse.self)
        print(json(r))
    }

    /// Proto3 JSON: lowerCamelCase names, int64 as a string, empty fields left out.
    static func json(_ r: SignOfferResponse) -> String {
        JSON.object([
            ("compactJws", r.compactJWS.isEmpty ? nil : JSON.quote(r.compactJWS)),
            ("keyId", r.keyID.isEmpty ? nil : JSON.quote(r.keyID)),
            ("nonce", r.nonce.isEmpty ? nil : JSON.quote(r.nonce)),
            ("timestampMs", r.timestampMs == 0 ? nil : JSON.quote(String(r.timestampMs))),
            ("signature", r.signature.isEmpty ? nil : JSON.quote(r.signature)),
        ])
    }
}

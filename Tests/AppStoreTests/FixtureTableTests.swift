import AppStore
import Crypto
import Foundation
import Testing

/// One row of expectations.json `jws`.
struct JWSRow: Sendable, CustomTestStringConvertible {
    let file: String
    let kind: String
    let roots: [String]
    let environment: String
    let bundleID: String?
    let appAppleID: Int64?
    let expect: String
    let decoded: [String: String]
    /// Nested JWS (a notification's transaction and renewal info): field path and expected fields.
    let nested: [(field: String, decoded: [String: String])]
    var testDescription: String { file }

    static var all: [JWSRow] {
        guard Fixtures.available else { return [] }
        return (Fixtures.expectations["jws"] as? [[String: Any]] ?? []).map { row in
            let verifier = row["verifier"] as? [String: Any] ?? [:]
            let expect = row["expect"] as? [String: Any] ?? [:]
            var decoded: [String: String] = [:]
            var top = row["decoded"] as? [String: Any] ?? [:]
            let nestedRows = top.removeValue(forKey: "nested") as? [[String: Any]] ?? []
            flatten(top, prefix: "", into: &decoded)
            let nested = nestedRows.map { n -> (field: String, decoded: [String: String]) in
                var d: [String: String] = [:]
                flatten(n["decoded"] as? [String: Any] ?? [:], prefix: "", into: &d)
                return (n["field"] as? String ?? "", d)
            }
            return JWSRow(
                file: row["file"] as! String, kind: row["kind"] as! String, roots: row["trustRoots"] as? [String] ?? [],
                environment: verifier["environment"] as? String ?? "",
                bundleID: verifier["bundleId"] as? String, appAppleID: (verifier["appAppleId"] as? NSNumber)?.int64Value,
                expect: (expect["offline"] ?? expect["xcodeVerifier"]) as? String ?? "", decoded: decoded, nested: nested)
        }
    }

    static func flatten(_ o: [String: Any], prefix: String, into out: inout [String: String]) {
        for (k, v) in o {
            if let nested = v as? [String: Any] {
                flatten(nested, prefix: prefix + k + ".", into: &out)
            } else if let n = v as? NSNumber {
                out[prefix + k] = n.stringValue
            } else {
                out[prefix + k] = "\(v)"
            }
        }
    }
}

/// Reads a decoded payload's field by its JSON name (`transactionId` -> `transactionID`, `data.bundleId`).
func field(_ value: Any, _ path: String) -> String? {
    var current: Any = value
    for part in path.split(separator: ".") {
        let swiftName = String(part).replacingOccurrences(of: "Id", with: "ID").replacingOccurrences(of: "IDs", with: "IDs")
        guard let child = Mirror(reflecting: current).children.first(where: { $0.label == swiftName || $0.label == String(part) }) else {
            return nil
        }
        let mirror = Mirror(reflecting: child.value)
        if mirror.displayStyle == .optional {
            guard let inner = mirror.children.first?.value else { return nil }
            current = inner
        } else {
            current = child.value
        }
    }
    if let b = current as? Bool { return b ? "1" : "0" }
    return "\(current)"
}

@Suite("expectations.json: StoreKit 2 signed data")
struct JWSFixtureTests {
    @Test("every JWS fixture gets its expected verdict and decoded fields", arguments: JWSRow.all)
    func row(_ row: JWSRow) throws {
        guard Fixtures.require() else { return }
        let env = AppStoreEnvironment(rawValue: row.environment)!
        var settings = Fixtures.settings(roots: row.roots, environments: [env], bundle: row.bundleID, appAppleID: row.appAppleID)
        if row.expect.contains("decode only") { settings.decodeXcodeWithoutVerification = true }
        let verifier = SignedDataVerifier(settings: settings)
        let jws = Fixtures.text(row.file)
        let result: Result<Any, VerificationFailure>
        switch row.kind {
        case "transaction": result = verifier.verifyTransaction(jws).map { $0 as Any }
        case "renewalInfo": result = verifier.verifyRenewalInfo(jws).map { $0 as Any }
        case "notification": result = verifier.verifyNotification(jws).map { $0 as Any }
        case "appTransaction": result = verifier.verifyAppTransaction(jws).map { $0 as Any }
        default: Issue.record("unknown kind \(row.kind)"); return
        }
        switch (row.expect, result) {
        case (let e, .success(let payload)) where e.hasPrefix("VALID"):
            for (path, expected) in row.nested {
                guard let inner = field(payload, path) else { Issue.record("no \(path)"); continue }
                let decoded: Any?
                if path.hasSuffix("RenewalInfo") {
                    decoded = try? verifier.verifyRenewalInfo(inner).get()
                } else {
                    decoded = try? verifier.verifyTransaction(inner).get()
                }
                guard let decoded else { Issue.record("nested \(path) did not verify"); continue }
                for (key, value) in expected {
                    let actual = field(decoded, key)
                    #expect(actual == value, "\(path).\(key): \(actual ?? "nil") != \(value)")
                }
            }
            for (key, expected) in row.decoded {
                let actual = field(payload, key)
                if expected == "<JWS>" {
                    #expect(actual?.hasPrefix("eyJ") == true, "\(key) is not a JWS")
                    continue
                }
                #expect(
                    actual == expected || (Double(actual ?? "") != nil && Double(actual!) == Double(expected)),
                    "\(key): \(actual ?? "nil") != \(expected)")
            }
        case (let e, .failure(.wrongApp)) where e.hasPrefix("INVALID_APP_IDENTIFIER"): break
        case (let e, .failure(.environmentNotAllowed)) where e.hasPrefix("INVALID_ENVIRONMENT"): break
        case (let e, .failure(.untrusted)) where e.hasPrefix("VERIFICATION_FAILURE") || e.hasPrefix("REJECT"): break
        case (let e, .failure(.malformed)) where e.hasPrefix("REJECT"): break
        default:
            Issue.record("expected \(row.expect), got \(result)")
        }
    }

    @Test("real Apple JWS: production verifier -> environment; other bundle -> wrong app; test root -> untrusted")
    func realVariants() {
        guard Fixtures.require() else { return }
        let jws = Fixtures.text("real-jws/sandbox-session-pro/standalone/txn-2000001024998954-RENEWAL.jws")
        let production = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleRootCA-G3.cer"], environments: [.production], bundle: "com.loki-project.loki-messenger",
                appAppleID: 1_470_168_868))
        guard case .failure(.environmentNotAllowed) = production.verifyTransaction(jws) else { Issue.record("production"); return }
        let other = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleRootCA-G3.cer"], environments: [.sandbox], bundle: "com.example.other"))
        guard case .failure(.wrongApp) = other.verifyTransaction(jws) else { Issue.record("bundle"); return }
        let testRoot = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["apple-library/certs/testCA.der"], environments: [.sandbox], bundle: "com.loki-project.loki-messenger"))
        guard case .failure(.untrusted) = testRoot.verifyTransaction(jws) else { Issue.record("root"); return }
    }

    @Test("Apple's notification variants: production env and appAppleId")
    func notificationVariants() {
        guard Fixtures.require() else { return }
        let jws = Fixtures.text("apple-library/mock_signed_data/testNotification")
        let prod = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["apple-library/certs/testCA.der"], environments: [.production], bundle: "com.example", appAppleID: 1234))
        guard case .failure(.environmentNotAllowed) = prod.verifyNotification(jws) else { Issue.record("env"); return }
        let tx = Fixtures.text("apple-library/mock_signed_data/transactionInfo")
        let wrongBundle = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["apple-library/certs/testCA.der"], environments: [.sandbox], bundle: "com.example.x"))
        guard case .failure(.wrongApp) = wrongBundle.verifyTransaction(tx) else { Issue.record("bundle"); return }
    }

    @Test("real leaf 2023 at now is expired; at signedDate it verifies")
    func expiredLeaf() {
        guard Fixtures.require() else { return }
        let jws = Fixtures.text("real-jws/sandbox-test-notification-leaf2023.jws")
        let verifier = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleRootCA-G3.cer"], environments: [.sandbox], bundle: "com.loki-project.loki-messenger"))
        guard case .success = verifier.verifyNotification(jws) else { Issue.record("offline at signedDate"); return }
    }

    @Test("the chain cache: one chain verification for many JWS from one leaf")
    func chainCache() {
        guard Fixtures.require() else { return }
        let verifier = SignedDataVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleRootCA-G3.cer"], environments: [.sandbox], bundle: "com.loki-project.loki-messenger"))
        let files = ["01-DID_RENEW", "02-SUBSCRIBED-RESUBSCRIBE", "03-DID_CHANGE_RENEWAL_STATUS-AUTO_RENEW_DISABLED", "14-REFUND"]
        for f in files {
            guard case .success = verifier.verifyNotification(Fixtures.text("real-jws/sandbox-session-pro/notifications/\(f).jws")) else {
                Issue.record("\(f)"); return
            }
        }
        #expect(verifier.chainVerifications == 1)
    }
}

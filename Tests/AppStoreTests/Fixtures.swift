import AppStore
import Crypto
import Foundation
import Testing

/// ../shared/fixtures/appstore, beside the repository. A fresh clone has none: tests that need it
/// skip with a message there, but never when CI=true.
enum Fixtures {
    static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/fixtures/appstore")

    static var available: Bool { FileManager.default.fileExists(atPath: root.appendingPathComponent("expectations.json").path) }

    /// True when the fixtures are there; records an issue when CI=true and they are not.
    static func require() -> Bool {
        if available { return true }
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            Issue.record("CI=true but \(root.path) is missing")
        } else {
            print("skipping: \(root.path) not found (App Store fixtures live in ../shared)")
        }
        return false
    }

    static func bytes(_ path: String) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: root.appendingPathComponent(path)))) ?? []
    }

    static func text(_ path: String) -> String {
        String(decoding: bytes(path), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func certificate(_ path: String) -> Certificate { try! Certificate.parse(bytes(path)) }

    static var expectations: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent("expectations.json")))) as? [String: Any] ?? [:]
    }

    static func settings(
        roots: [String], environments: Set<AppStoreEnvironment>, bundle: String?, appAppleID: Int64? = nil,
        now: Int64 = 1_795_910_400_000
    ) -> VerifierSettings {
        VerifierSettings(
            anchors: TrustAnchors(roots: roots.map(certificate)), bundleIDs: bundle.map { [$0] } ?? [],
            appAppleID: appAppleID, environments: environments, now: { now })
    }
}

public import Foundation

/// The kinds of product the App Store sells.
public enum ProductKind: String, Sendable, Equatable, CaseIterable {
    case consumable
    case nonConsumable = "non_consumable"
    case autoRenewableSubscription = "auto_renewable_subscription"
    case nonRenewingSubscription = "non_renewing_subscription"
}

/// The products this service sells (`--catalog`, CONFIG.md): id, kind, and a duration for non-renewing subscriptions.
public struct Catalog: Sendable, Equatable {
    public struct Product: Sendable, Equatable {
        public var id: String
        public var kind: ProductKind
        public var durationDays: Int?
    }

    public private(set) var products: [String: Product]

    public init(products: [Product]) {
        var map: [String: Product] = [:]
        for p in products { map[p.id] = p }
        self.products = map
    }

    public func product(_ id: String) -> Product? { products[id] }

    /// Why a catalog file was refused.
    public struct LoadError: Error, CustomStringConvertible {
        public var description: String
    }

    private struct File: Decodable {
        struct Entry: Decodable {
            var id: String
            var type: String
            var duration_days: Int?
        }
        var products: [Entry]
    }

    /// Parses the catalog JSON; every problem names the product it is in.
    public init(json: Data) throws(LoadError) {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: json)
        } catch {
            throw LoadError(description: "not a catalog: expected {\"products\": [{\"id\", \"type\"}]} (\(error))")
        }
        var list: [Product] = []
        var seen = Set<String>()
        for entry in file.products {
            guard !entry.id.isEmpty, entry.id.utf8.count <= 255 else { throw LoadError(description: "a product id is empty or too long") }
            guard let kind = ProductKind(rawValue: entry.type) else {
                throw LoadError(
                    description: "product \(entry.id): type '\(entry.type)' is not one of \(ProductKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            guard seen.insert(entry.id).inserted else { throw LoadError(description: "product \(entry.id) is listed twice") }
            if let days = entry.duration_days, days <= 0 { throw LoadError(description: "product \(entry.id): duration_days must be positive") }
            list.append(Product(id: entry.id, kind: kind, durationDays: entry.duration_days))
        }
        self.init(products: list)
    }
}

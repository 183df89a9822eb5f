/// Opens and reads orders: validation and idempotency rules over an `OrderStore`.
public final class OrderService: Sendable {
    /// Limits on request fields, in UTF-8 bytes.
    public enum Limits {
        public static let accountID = 128
        public static let productID = 255
        public static let idempotencyKey = 128
        public static let maxQuantity = 1000
    }

    public let store: any OrderStore
    public let catalog: Catalog?
    private let clock: any WallClock

    public init(store: any OrderStore, catalog: Catalog? = nil, clock: any WallClock = SystemClock()) {
        self.store = store
        self.catalog = catalog
        self.clock = clock
    }

    /// A request to open an order, as the caller sent it.
    public struct CreateRequest: Sendable {
        public var accountID: String
        public var productID: String
        public var idempotencyKey: String
        public var quantity: Int

        public init(accountID: String, productID: String, idempotencyKey: String = "", quantity: Int = 0) {
            self.accountID = accountID
            self.productID = productID
            self.idempotencyKey = idempotencyKey
            self.quantity = quantity
        }
    }

    /// Validates a request and returns the order to insert (not yet stored).
    public func validate(_ request: CreateRequest) throws(BillingError) -> NewOrder {
        try Self.checkAccountID(request.accountID, required: true)
        try Self.checkText(request.productID, field: "product_id", max: Limits.productID, required: true)
        try Self.checkText(request.idempotencyKey, field: "idempotency_key", max: Limits.idempotencyKey, required: false)
        let quantity = request.quantity == 0 ? 1 : request.quantity
        guard quantity >= 1, quantity <= Limits.maxQuantity else {
            throw .invalidField(field: "quantity", problem: "must be between 1 and \(Limits.maxQuantity) (0 means 1)")
        }
        if let catalog, catalog.product(request.productID) == nil {
            throw .productNotFound(productID: request.productID)
        }
        let now = clock.nowMilliseconds()
        return NewOrder(
            id: OrderID.make(milliseconds: now), accountID: request.accountID, productID: request.productID, quantity: quantity,
            idempotencyKey: request.idempotencyKey.isEmpty ? nil : request.idempotencyKey,
            createTimeMs: now)
    }

    /// Text fields: required ones non-empty, all within `max` bytes and free of control characters.
    public static func checkText(_ value: String, field: String, max: Int, required: Bool) throws(BillingError) {
        if value.isEmpty {
            if required { throw .invalidField(field: field, problem: "is required") }
            return
        }
        guard value.utf8.count <= max else { throw .invalidField(field: field, problem: "is longer than \(max) bytes") }
        // U+0000-U+001F and U+007F are single bytes in UTF-8 and no other character's bytes fall there.
        if Self.utf8Contains(value, where: { $0 < 0x20 || $0 == 0x7F }) {
            throw .invalidField(field: field, problem: "contains control characters")
        }
    }

    /// Whether any UTF-8 byte of `value` matches, over its contiguous bytes (iterating `unicodeScalars`, and asking each
    /// scalar its general category, cost about 3,000 instructions a CreateOrder).
    @inline(__always)
    static func utf8Contains(_ value: String, where match: (UInt8) -> Bool) -> Bool {
        var value = value
        return value.withUTF8 { bytes in bytes.contains(where: match) }
    }

    /// An account id: `checkText`'s rules, and nothing a person cannot see or that reorders the text around it.
    ///
    /// Refused anywhere in the id: Unicode general categories Cc (C0 and C1 controls), Cf (format characters:
    /// bidi overrides and isolates such as U+202E, zero-width characters such as U+200B, U+FEFF), Zl (U+2028) and
    /// Zp (U+2029); at either end: white space (Unicode White_Space, U+0020 and U+00A0 among them).
    public static func checkAccountID(_ value: String, required: Bool) throws(BillingError) {
        try checkText(value, field: "account_id", max: Limits.accountID, required: required)
        // Printable ASCII that neither begins nor ends with a space has none of the characters below.
        if !utf8Contains(value, where: { $0 < 0x20 || $0 > 0x7E }), value.utf8.first != 0x20, value.utf8.last != 0x20 { return }
        for scalar in value.unicodeScalars {
            let category: String? =
                switch scalar.properties.generalCategory {
                case .control: "a control character (Unicode Cc)"
                case .format: "a format character (Unicode Cf)"
                case .lineSeparator: "a line separator (Unicode Zl)"
                case .paragraphSeparator: "a paragraph separator (Unicode Zp)"
                default: nil
                }
            if let category { throw .invalidField(field: "account_id", problem: "contains \(codePoint(scalar)), \(category)") }
        }
        if let end = [value.unicodeScalars.first, value.unicodeScalars.last].compactMap({ $0 }).first(where: \.properties.isWhitespace) {
            throw .invalidField(field: "account_id", problem: "begins or ends with white space (\(codePoint(end)))")
        }
    }

    /// `U+202E`: how a refused character is named (never the character itself, which may reorder the message).
    private static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// Opens an order, or answers the one an idempotency key already made with the same fields.
    public func createOrder(
        _ request: CreateRequest, abandoned: @escaping @Sendable () -> Bool = { false },
        completion: @escaping @Sendable (Result<Order, BillingError>) -> Void
    ) {
        let new: NewOrder
        do {
            new = try validate(request)
        } catch {
            completion(.failure(error))
            return
        }
        store.create(new, abandoned: abandoned) { result in
            switch result {
            case .success(.created(let order)):
                completion(.success(order))
            case .success(.existing(let order)):
                if order.productID == new.productID && order.quantity == new.quantity {
                    completion(.success(order))
                } else {
                    completion(.failure(.idempotencyKeyReused(key: new.idempotencyKey ?? "")))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Reads an order; ids are accepted in either case and looked up in canonical form.
    public func getOrder(id: String, completion: @escaping @Sendable (Result<Order, BillingError>) -> Void) {
        if id.isEmpty {
            completion(.failure(.invalidField(field: "order_id", problem: "is required")))
            return
        }
        guard let canonical = OrderID.canonical(id) else {
            completion(.failure(.invalidField(field: "order_id", problem: "is not a UUID")))
            return
        }
        getOrder(canonicalID: canonical, completion: completion)
    }

    /// Reads an order by an id `OrderID.canonical` already returned (the caller checked it).
    public func getOrder(canonicalID canonical: String, completion: @escaping @Sendable (Result<Order, BillingError>) -> Void) {
        store.order(id: canonical) { result in
            switch result {
            case .success(let order?): completion(.success(order))
            case .success(nil): completion(.failure(.orderNotFound(orderID: canonical)))
            case .failure(let error): completion(.failure(error))
            }
        }
    }
}

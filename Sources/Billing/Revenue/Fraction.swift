/// An exact non-negative fraction for Revenue's conversions: an amount times every factor (exchange rates, the
/// commission, a prorated share, a period's monthly factor) is multiplied out exactly and rounded once, half away
/// from zero (DESIGN "Revenue, defined"). Int128, reduced by the greatest common divisor at each product, holds
/// an amount up to 10^15 milliunits times any factors of the sizes ECB rates and percentages have.
public struct Fraction: Sendable, Equatable, CustomStringConvertible {
    public private(set) var numerator: Int128
    public private(set) var denominator: Int128

    public static let one = Fraction(1, 1)

    public init(_ numerator: Int128, _ denominator: Int128) {
        precondition(denominator > 0, "a fraction's denominator is positive")
        let g = Self.gcd(numerator < 0 ? -numerator : numerator, denominator)
        self.numerator = g > 1 ? numerator / g : numerator
        self.denominator = g > 1 ? denominator / g : denominator
    }

    public init(_ value: Int64) { self.init(Int128(value), 1) }

    /// A plain decimal ("1.0523", "160.12", "15", "0.5"): digits with at most one point, at most 18 digits.
    /// nil for anything else (signs, exponents, thousands separators).
    public init?(decimal text: Substring) {
        var mantissa: Int128 = 0, scale: Int128 = 1, digits = 0, seenPoint = false
        for c in text.utf8 {
            if c == UInt8(ascii: ".") {
                guard !seenPoint else { return nil }
                seenPoint = true
                continue
            }
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            digits += 1
            guard digits <= 18 else { return nil }
            mantissa = mantissa * 10 + Int128(c - UInt8(ascii: "0"))
            if seenPoint { scale *= 10 }
        }
        guard digits > 0 else { return nil }
        self.init(mantissa, scale)
    }

    public var isZero: Bool { numerator == 0 }

    public static func * (a: Fraction, b: Fraction) -> Fraction {
        // Cross-reduce first so that the products stay small.
        let g1 = gcd(magnitude(a.numerator), b.denominator), g2 = gcd(magnitude(b.numerator), a.denominator)
        let n = (a.numerator / max(g1, 1)) * (b.numerator / max(g2, 1))
        let d = (a.denominator / max(g2, 1)) * (b.denominator / max(g1, 1))
        return Fraction(n, d)
    }

    public static func / (a: Fraction, b: Fraction) -> Fraction {
        precondition(!b.isZero, "division by a zero fraction")
        return a * Fraction(b.denominator, b.numerator)
    }

    /// `amount` times this fraction, rounded once, half away from zero, to a whole number.
    public func times(_ amount: Int64) -> Int64 {
        // Without reducing first: the product of a reduced rate and an amount fits 128 bits by far; only when it
        // would not, the reduced product.
        let (n, overflow) = numerator.multipliedReportingOverflow(by: Int128(amount))
        if overflow { return (self * Fraction(amount)).rounded }
        let m = Self.magnitude(n), d = denominator
        let (twice, o2) = m.multipliedReportingOverflow(by: 2)
        if o2 { return (self * Fraction(amount)).rounded }
        let q = (twice + d) / (2 * d)
        let signed: Int128 = n < 0 ? -q : q
        return signed > Int128(Int64.max) ? .max : signed < Int128(Int64.min) ? .min : Int64(signed)
    }

    /// Rounded half away from zero.
    public var rounded: Int64 {
        let n = Self.magnitude(numerator), d = denominator
        let q: Int128 = (2 * n + d) / (2 * d)
        let signed: Int128 = numerator < 0 ? -q : q
        return signed > Int128(Int64.max) ? .max : signed < Int128(Int64.min) ? .min : Int64(signed)
    }

    public var description: String { "\(numerator)/\(denominator)" }

    private static func magnitude(_ v: Int128) -> Int128 { v < 0 ? -v : v }

    static func gcd(_ a: Int128, _ b: Int128) -> Int128 {
        var (x, y) = (a, b)
        while y != 0 { (x, y) = (y, x % y) }
        return x
    }
}

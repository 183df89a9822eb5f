import Foundation

/// One flag of billingd: its name, its environment twin, what it takes, its `--help` line, and how it sets the
/// configuration. `Configuration.flagTable` lists them all, in `--help` order; parsing, `--help`, the twins and the
/// docs check (`IntegrationTests/test_docs_truth.py` reads `--help`) all derive from it.
struct Flag: Sendable {
    enum Kind: Sendable, Equatable {
        /// `--dev`: true when given bare (or `--dev=false`, or a twin's value).
        case toggle
        /// `--listen HOST:PORT`: one value, given once.
        case value(String)
        /// `--bundle-id ID`: given again adds a value; its twin is a comma-separated list.
        case repeatable(String)
    }

    let name: String
    let kind: Kind
    /// The `--help` text after the flag and its placeholder.
    let help: String
    /// Sets the flag's values (never empty; one unless `.repeatable`) into the configuration being built.
    let set: @Sendable (inout Configuration.Draft, [String]) throws(Configuration.Invalid) -> Void

    init(
        _ name: String, kind: Kind, _ help: String,
        set: @escaping @Sendable (inout Configuration.Draft, [String]) throws(Configuration.Invalid) -> Void
    ) {
        self.name = name
        self.kind = kind
        self.help = help
        self.set = set
    }

    /// A flag that sets one value.
    init(
        _ name: String, _ placeholder: String, _ help: String,
        one: @escaping @Sendable (inout Configuration.Draft, String) throws(Configuration.Invalid) -> Void
    ) {
        self.init(name, kind: .value(placeholder), help) { draft, values throws(Configuration.Invalid) in try one(&draft, values[values.count - 1]) }
    }

    /// `BILLING_` and the name in capitals, dashes as underscores (`--max-in-flight`: `BILLING_MAX_IN_FLIGHT`).
    var twin: String { "BILLING_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }

    var takesValue: Bool { kind != .toggle }

    /// The flag's `--help` line.
    var usageLine: String {
        var head = "  --" + name
        switch kind {
        case .toggle: break
        case .value(let p), .repeatable(let p): head += " " + p
        }
        let pad = head.count < 31 ? String(repeating: " ", count: 31 - head.count) : "   "
        return head + pad + help
    }
}

/// The value checks flags share: each throws the flag's one line.
enum Check {
    typealias Invalid = Configuration.Invalid

    static func int(_ flag: String, _ s: String, _ range: ClosedRange<Int>) throws(Invalid) -> Int {
        guard let n = Int(s), range.contains(n) else {
            throw Invalid(flag: flag, problem: "'\(s)' is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    static func seconds(_ flag: String, _ s: String, _ range: ClosedRange<Double>) throws(Invalid) -> Double {
        guard let d = Double(s), range.contains(d) else {
            throw Invalid(flag: flag, problem: "'\(s)' is not a number of seconds from \(range.lowerBound) to \(range.upperBound)")
        }
        return d
    }

    static func bool(_ flag: String, _ s: String) throws(Invalid) -> Bool {
        switch s.lowercased() {
        case "true", "1", "yes", "on": return true
        case "false", "0", "no", "off", "": return false
        default: throw Invalid(flag: flag, problem: "'\(s)' is not true or false")
        }
    }

    static func file(_ flag: String, _ path: String) throws(Invalid) -> String {
        guard FileManager.default.isReadableFile(atPath: path) else { throw Invalid(flag: flag, problem: "cannot read '\(path)'") }
        return path
    }

    static func hostPort(_ flag: String, _ s: String) throws(Invalid) -> String {
        guard let colon = s.lastIndex(of: ":"), let port = Int(s[s.index(after: colon)...]), (0...65535).contains(port),
            colon != s.startIndex || s.hasPrefix(":")
        else {
            throw Invalid(flag: flag, problem: "'\(s)' is not HOST:PORT")
        }
        return s
    }

    /// A key id as App Store Connect shows it: letters and digits.
    static func keyID(_ flag: String, _ s: String) throws(Invalid) -> String {
        guard !s.isEmpty, s.utf8.count <= 64, s.allSatisfy({ $0.isLetter || $0.isNumber }) else {
            throw Invalid(flag: flag, problem: "'\(s.prefix(64))' is not a key id (letters and digits, as App Store Connect shows it)")
        }
        return s
    }

    static func uuid(_ flag: String, _ s: String) throws(Invalid) -> String {
        guard UUID(uuidString: s) != nil else { throw Invalid(flag: flag, problem: "'\(s.prefix(64))' is not a UUID") }
        return s
    }

    /// A comma-separated list, each item trimmed, empty items dropped.
    static func list(_ s: String) -> [String] {
        s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

extension Configuration {
    /// Every flag by name (`help` and `version` are answered before parsing, by `Daemon.main`).
    static let flagsByName: [String: Flag] = Dictionary(uniqueKeysWithValues: flagTable.map { ($0.name, $0) })

    /// Parses `arguments` (without the program name) over `environment`; flags beat their twins.
    public static func parse(_ arguments: [String], environment: [String: String]) throws(Invalid) -> Configuration {
        var values: [String: [String]] = [:]
        // Environment twins first, so flags replace them.
        for flag in flagTable where flag.name != "help" && flag.name != "version" {
            guard let value = environment[flag.twin] else { continue }
            if case .repeatable = flag.kind {
                values[flag.name] = Check.list(value)
            } else {
                values[flag.name] = [value]
            }
        }
        var fromFlags = Set<String>()
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            guard arg.hasPrefix("--") else { throw Invalid(flag: arg, problem: "unexpected argument; flags start with --") }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let flag = flagsByName[name] else { throw Invalid(flag: name, problem: "unknown flag (see billingd --help)") }
            let value: String
            if flag.takesValue {
                if let inline {
                    value = inline
                } else {
                    guard i + 1 < arguments.count else { throw Invalid(flag: name, problem: "needs a value") }
                    i += 1
                    value = arguments[i]
                }
            } else {
                value = inline ?? "true"
            }
            if !fromFlags.contains(name) {
                values[name] = []
                fromFlags.insert(name)
            }
            if case .value = flag.kind, values[name]!.count == 1 { throw Invalid(flag: name, problem: "given twice") }
            values[name]!.append(value)
            i += 1
        }
        var draft = Draft()
        // In the table's order: a flag whose check reads another (`--google-play-api-url` and `--dev`) comes after it.
        for flag in flagTable {
            guard let given = values[flag.name], !given.isEmpty else { continue }
            try flag.set(&draft, given)
        }
        try draft.checkTogether()
        return draft.configuration
    }

    /// `billingd --help`: the table's lines under one heading.
    public static var usage: String {
        (["usage: billingd [flags]   (each flag also reads BILLING_<FLAG> from the environment; every flag: docs/CONFIGURATION.md)"]
            + flagTable.filter { $0.name != "help" && $0.name != "version" }.map(\.usageLine)).joined(separator: "\n")
    }
}

import Billing
import Foundation
@testable import Storage
import Testing
import TestSupport

/// Schema steps are kept by number and name (`billing_schema_migrations`), read back by Debian's sqlite3 and psql.
@Suite("Named schema steps, SQLite and PostgreSQL", .serialized)
struct NamedMigrationTests {
    static let names = Schema.steps(.sqlite).map(\.name)

    static func temporaryPath() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-named-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("billing.db").path
    }

    @Test("the steps have distinct names of lower-case words, the same on both databases")
    func names() {
        #expect(Set(Self.names).count == Self.names.count)
        #expect(Schema.steps(.postgres).map(\.name) == Self.names)
        for name in Self.names { #expect(name.allSatisfy { $0 == "_" || ("a"..."z").contains($0) }, "\(name)") }
        #expect(Self.names.prefix(3) == ["orders", "transactions", "after_sale"])
    }

    @Test("a new database records every step with its name and when it was applied")
    func fresh() throws {
        let path = try Self.temporaryPath()
        try SQLiteOrderStore(path: path).close()
        let rows = try sqliteCLI(path, "SELECT version || ' ' || name || ' ' || (applied_time_ms > 0) FROM billing_schema_migrations ORDER BY version")
        #expect(rows == Self.names.enumerated().map { "\($0.offset + 1) \($0.element) 1\n" }.joined())
        if let url = PostgresTestDatabase.create() {
            try PostgresOrderStore(url: url, poolSize: 1).close()
            let pg = try psqlCLI(url, "SELECT version || ' ' || name FROM billing_schema_migrations ORDER BY version")
            #expect(pg == Self.names.enumerated().map { "\($0.offset + 1) \($0.element)\n" }.joined())
        }
    }

    @Test("a database from before names were kept gets the names of the steps it had (applied time unknown: 0), then the rest")
    func fromNumbersOnly() throws {
        let path = try Self.temporaryPath()
        _ = try runCLI("/usr/bin/sqlite3", [path, ".read \(SchemaUpgradeTests.fixtures)/schema6.sqlite.sql"])
        try SQLiteOrderStore(path: path).close()
        let rows = try sqliteCLI(path, "SELECT name || ' ' || (applied_time_ms > 0) FROM billing_schema_migrations ORDER BY version")
        #expect(rows == Self.names.enumerated().map { "\($0.element) \($0.offset >= 6 ? 1 : 0)\n" }.joined())
        if let url = PostgresTestDatabase.create() {
            _ = try runCLI("/usr/bin/psql", [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", "\(SchemaUpgradeTests.fixtures)/schema6.postgres.sql"])
            try PostgresOrderStore(url: url, poolSize: 1).close()
            let pg = try psqlCLI(url, "SELECT name FROM billing_schema_migrations ORDER BY version")
            #expect(pg == Self.names.map { "\($0)\n" }.joined())
        }
    }

    @Test("a database migrated by another build (a step of another name) is refused by name, and left as it was")
    func otherBuild() throws {
        let path = try Self.temporaryPath()
        try SQLiteOrderStore(path: path).close()
        _ = try sqliteCLI(path, "UPDATE billing_schema_migrations SET name = 'stripe_customers' WHERE version = 3")
        let before = try sqliteCLI(path, ".dump")
        let error = #expect(throws: StorageError.self) { try SQLiteOrderStore(path: path) }
        #expect(error == .schemaMismatch(version: 3, found: "stripe_customers", expected: "after_sale"))
        #expect(error?.description.contains("migrated by another build") == true)
        #expect(try sqliteCLI(path, ".dump") == before)
        if let url = PostgresTestDatabase.create() {
            try PostgresOrderStore(url: url, poolSize: 1).close()
            _ = try psqlCLI(url, "UPDATE billing_schema_migrations SET name = 'stripe_customers' WHERE version = 3")
            let pgError = #expect(throws: StorageError.self) { try PostgresOrderStore(url: url, poolSize: 1) }
            #expect(pgError == .schemaMismatch(version: 3, found: "stripe_customers", expected: "after_sale"))
        }
    }
}

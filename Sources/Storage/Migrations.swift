import Billing

/// Versioned schema changes, applied in order inside one transaction each. `PRAGMA user_version` records how many;
/// `billing_schema_migrations` which, by number and name (GRDB's `grdb_migrations` is the model): opening checks that
/// every recorded step is this build's step of that number, so a database migrated by a different build (a fork, a
/// branch) is refused by name rather than misread.
enum SQLiteMigrations {
    static let steps = Schema.steps(.sqlite)

    static func migrate(_ db: SQLiteConnection) throws(StorageError) {
        let current = try db.userVersion()
        guard current <= steps.count else {
            throw .schemaTooNew(found: current, known: steps.count)
        }
        try db.execute("BEGIN IMMEDIATE")
        do {
            // Databases from before names were kept: the bookkeeping table, filled for the steps they have.
            try db.execute(Schema.sqliteBookkeeping)
            let recorded = try db.query("SELECT version, name FROM billing_schema_migrations ORDER BY version", []) { ($0.int(0), $0.optionalText(1)) }
            try Schema.check(recorded, current: current)
            for version in recorded.count..<current {
                try db.update(
                    "INSERT INTO billing_schema_migrations (version, name, applied_time_ms) VALUES ($1, $2, 0)",
                    [.int(Int64(version + 1)), .text(steps[version].name)])
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
        for batch in Schema.batches(from: current, count: steps.count) {
            try db.execute("BEGIN IMMEDIATE")
            do {
                for version in batch {
                    try db.execute(steps[version].sql)
                    try db.update(
                        "INSERT INTO billing_schema_migrations (version, name, applied_time_ms) VALUES ($1, $2, $3)",
                        [.int(Int64(version + 1)), .text(steps[version].name), .int(SystemClock().nowMilliseconds())])
                }
                if Schema.recomputes(from: current, batch: batch) { try SQLLedger(db: db).recomputeEntitlements() }
                try db.execute("PRAGMA user_version = \(batch.upperBound)")
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }
}

/// Versioned schema for PostgreSQL, applied under an advisory lock so replicas may start at once; each step's
/// number and name in `billing_schema_migrations`, checked at every start as for SQLite.
enum PostgresMigrations {
    static let lockKey: Int64 = 0x6269_6C6C_696E_6764  // "billingd"

    static let steps = Schema.steps(.postgres)

    static func migrate(_ db: PGConnection) throws(StorageError) {
        try db.execute("SELECT pg_advisory_lock(\(lockKey))")
        defer { _ = try? db.execute("SELECT pg_advisory_unlock(\(lockKey))") }
        try db.execute("CREATE TABLE IF NOT EXISTS billing_schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        // Names from this build on; a release before kept numbers only (and still inserts numbers only during a
        // rolling upgrade: the column may be NULL, and is filled here at the next start).
        try db.execute("ALTER TABLE billing_schema_migrations ADD COLUMN IF NOT EXISTS name TEXT")
        let current = try db.query("SELECT COALESCE(MAX(version), 0) FROM billing_schema_migrations", [], { $0.int(0) }).first ?? 0
        guard current <= steps.count else {
            throw .schemaTooNew(found: current, known: steps.count)
        }
        try db.execute("BEGIN")
        do throws(StorageError) {
            for version in 0..<current {
                try db.update(
                    "UPDATE billing_schema_migrations SET name = $2 WHERE version = $1 AND name IS NULL",
                    [.int(Int64(version + 1)), .text(steps[version].name)])
            }
            let recorded = try db.query("SELECT version, name FROM billing_schema_migrations ORDER BY version", []) { ($0.int(0), $0.optionalText(1)) }
            try Schema.check(recorded, current: current)
            try db.execute("COMMIT")
        } catch {
            _ = try? db.execute("ROLLBACK")
            throw error
        }
        for batch in Schema.batches(from: current, count: steps.count) {
            try db.execute("BEGIN")
            do throws(StorageError) {
                for version in batch {
                    try db.execute(steps[version].sql)
                    try db.update(
                        "INSERT INTO billing_schema_migrations (version, name) VALUES ($1, $2)", [.int(Int64(version + 1)), .text(steps[version].name)])
                }
                if Schema.recomputes(from: current, batch: batch) { try SQLLedger(db: db).recomputeEntitlements() }
                try db.execute("COMMIT")
            } catch {
                _ = try? db.execute("ROLLBACK")
                throw error
            }
        }
    }
}

extension Schema {
    /// SQLite's record of the steps applied (PostgreSQL's has `applied_at` as a timestamp). `applied_time_ms` is 0 for
    /// the steps a database had before names were kept.
    static let sqliteBookkeeping =
        "CREATE TABLE IF NOT EXISTS billing_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_time_ms INTEGER NOT NULL)"

    /// Refuses a database whose recorded steps are not this build's: a version recorded twice or out of order, or a
    /// step whose name differs from this build's step of that number (it was migrated by another build). `recorded`
    /// is (version, name) by version; a NULL name (a replica of the release before, mid-upgrade) is not checked.
    static func check(_ recorded: [(Int, String?)], current: Int) throws(StorageError) {
        let known = steps(.sqlite)
        for (index, (version, name)) in recorded.enumerated() {
            guard version == index + 1, version <= current else {
                throw .schemaMismatch(version: version, found: name ?? "", expected: version <= known.count ? known[version - 1].name : "")
            }
            if let name, name != known[version - 1].name {
                throw .schemaMismatch(version: version, found: name, expected: known[version - 1].name)
            }
        }
    }

    /// The transactions an upgrade from version `current` runs the remaining steps in: one step each, except that a
    /// database from before step 7 (which changed how an entitlement is computed) takes every remaining step in one
    /// transaction that ends by recomputing every entitlement from its transactions. The recompute is today's code,
    /// which reads and writes today's columns (step 12's `paused`, ...): it may run only once every step is applied,
    /// and in the same transaction, so that a crash leaves either the old database or the whole upgrade.
    static func batches(from current: Int, count: Int) -> [Range<Int>] {
        guard current < count else { return [] }
        if current >= 1 && current <= 6 { return [current..<count] }
        return (current..<count).map { $0..<($0 + 1) }
    }

    /// Whether `batch` ends with the entitlements recomputed (an upgrade across step 7 of a database that has some).
    static func recomputes(from current: Int, batch: Range<Int>) -> Bool {
        current >= 1 && current <= 6 && batch.contains(6)
    }
}

/// Versioned schema changes, applied in order inside one transaction each; `PRAGMA user_version` records the last.
enum SQLiteMigrations {
    static let steps = Schema.steps(.sqlite)

    static func migrate(_ db: SQLiteConnection) throws(StorageError) {
        let current = try db.userVersion()
        guard current <= steps.count else {
            throw .schemaTooNew(found: current, known: steps.count)
        }
        for batch in Schema.batches(from: current, count: steps.count) {
            try db.execute("BEGIN IMMEDIATE")
            do {
                for version in batch { try db.execute(steps[version]) }
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

/// Versioned schema for PostgreSQL, applied under an advisory lock so replicas may start at once.
enum PostgresMigrations {
    static let lockKey: Int64 = 0x6269_6C6C_696E_6764  // "billingd"

    static let steps = Schema.steps(.postgres)

    static func migrate(_ db: PGConnection) throws(StorageError) {
        try db.execute("SELECT pg_advisory_lock(\(lockKey))")
        defer { _ = try? db.execute("SELECT pg_advisory_unlock(\(lockKey))") }
        try db.execute("CREATE TABLE IF NOT EXISTS billing_schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        let current = try db.query("SELECT COALESCE(MAX(version), 0) FROM billing_schema_migrations", [], { $0.int(0) }).first ?? 0
        guard current <= steps.count else {
            throw .schemaTooNew(found: current, known: steps.count)
        }
        for batch in Schema.batches(from: current, count: steps.count) {
            try db.execute("BEGIN")
            do throws(StorageError) {
                for version in batch {
                    try db.execute(steps[version])
                    try db.update("INSERT INTO billing_schema_migrations (version) VALUES ($1)", [.int(Int64(version + 1))])
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

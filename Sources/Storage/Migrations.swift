/// Versioned schema changes, applied in order inside one transaction each; `PRAGMA user_version` records the last.
enum SQLiteMigrations {
    static let steps = Schema.steps(.sqlite)

    static func migrate(_ db: SQLiteConnection) throws(StorageError) {
        let current = try db.userVersion()
        guard current <= steps.count else {
            throw .schemaTooNew(found: current, known: steps.count)
        }
        for version in current..<steps.count {
            try db.execute("BEGIN IMMEDIATE")
            do {
                try db.execute(steps[version])
                // Step 3 added the entitlement table and step 7 changed how an entitlement is computed: a database
                // from before step 7 gets every entitlement (re)computed from its transactions, in the same transaction.
                if version == 6 && current >= 1 { try SQLLedger(db: db).recomputeEntitlements() }
                try db.execute("PRAGMA user_version = \(version + 1)")
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
        for version in current..<steps.count {
            try db.execute("BEGIN")
            do throws(StorageError) {
                try db.execute(steps[version])
                // Step 3 added the entitlement table and step 7 changed how an entitlement is computed: a database
                // from before step 7 gets every entitlement (re)computed from its transactions, in the same transaction.
                if version == 6 && current >= 1 { try SQLLedger(db: db).recomputeEntitlements() }
                try db.update("INSERT INTO billing_schema_migrations (version) VALUES ($1)", [.int(Int64(version + 1))])
                try db.execute("COMMIT")
            } catch {
                _ = try? db.execute("ROLLBACK")
                throw error
            }
        }
    }
}

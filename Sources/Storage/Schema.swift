/// The tables both stores keep, written once. The dialects differ in three spellings only:
/// the integer type of millisecond times, SQLite's `WITHOUT ROWID` on tables keyed by text,
/// and PostgreSQL's surrogate key on the append-only event table.
enum SQLDialect {
    case sqlite, postgres

    fileprivate var milliseconds: String { self == .sqlite ? "INTEGER" : "BIGINT" }
    fileprivate var endKeyedTable: String { self == .sqlite ? ") WITHOUT ROWID;" : ");" }
    fileprivate var eventKey: String { self == .sqlite ? "" : "id BIGSERIAL PRIMARY KEY,\n    " }
    /// The feed's cursor: SQLite's single writer commits in rowid order, so the rowid is the cursor;
    /// PostgreSQL commits concurrently: up to step 9 a sequencer numbered committed rows afterwards, from step 10
    /// a writer numbers its events last in its transaction, from `feed_counter` (`FeedCursors`).
    fileprivate var feedKey: String {
        self == .sqlite
            ? "feed_cursor INTEGER PRIMARY KEY AUTOINCREMENT,"
            : "id BIGSERIAL PRIMARY KEY,\n    feed_cursor BIGINT UNIQUE,\n    txid BIGINT NOT NULL DEFAULT txid_current(),"
    }
    fileprivate var feedIndexes: String {
        self == .sqlite ? "" : "CREATE INDEX events_unsequenced ON events (txid, id) WHERE feed_cursor IS NULL;"
    }
    /// Step 6, PostgreSQL only: an event is inserted without its cursor and numbered by the sequencer's UPDATE
    /// just after, so the cursor indexes hold only numbered rows. Inserting NULL entries that no query reads cost
    /// two index entries per event (about 12% of PostgreSQL's CPU per CreateOrder).
    fileprivate var partialFeedIndexes: String {
        self == .sqlite
            ? "-- 6: PostgreSQL only (SQLite's cursor is the rowid)."
            : """
            ALTER TABLE events DROP CONSTRAINT events_feed_cursor_key;
            CREATE UNIQUE INDEX events_feed_cursor ON events (feed_cursor) WHERE feed_cursor IS NOT NULL;
            DROP INDEX events_account;
            CREATE INDEX events_account ON events (account_id, feed_cursor) WHERE feed_cursor IS NOT NULL;
            """
    }
    /// Step 10, PostgreSQL only: events are written once, with their cursors. `feed_counter` holds the last cursor
    /// given; a writer takes it (`UPDATE ... RETURNING`) as the last thing before COMMIT and inserts its events
    /// numbered from it (`FeedCursors`). Events an earlier version left unnumbered (committed, the sequencer not yet
    /// run) are numbered here once, as the sequencer would have: after the largest cursor, by (txid, id). The
    /// table lock waits for writers in flight and keeps new ones out until this commits, so none is left behind.
    /// A replica of the previous version still running during a rolling upgrade inserts events without a cursor:
    /// the trigger numbers each from the counter at its INSERT (the row lock then held to its COMMIT keeps the
    /// commit order), so its sequencer finds nothing to do (`events_unsequenced` stays for that query, empty). The
    /// trigger's WHEN is false for this version's rows: the function never runs for them.
    fileprivate var feedCounter: String {
        self == .sqlite
            ? "-- 10: PostgreSQL only (SQLite's cursor is the rowid)."
            : """
            LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
            CREATE TABLE feed_counter (
                one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
                last BIGINT NOT NULL
            );
            UPDATE events e SET feed_cursor = n.c
            FROM (SELECT id, (SELECT COALESCE(MAX(feed_cursor), 0) FROM events) + row_number() OVER (ORDER BY txid, id) AS c
                  FROM events WHERE feed_cursor IS NULL) n
            WHERE e.id = n.id;
            INSERT INTO feed_counter (last) SELECT COALESCE(MAX(feed_cursor), 0) FROM events;
            CREATE FUNCTION billing_number_event() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE feed_counter SET last = last + 1 RETURNING last INTO NEW.feed_cursor;
                PERFORM pg_notify('billing_events', '');
                RETURN NEW;
            END
            $$;
            CREATE TRIGGER events_number BEFORE INSERT ON events
                FOR EACH ROW WHEN (NEW.feed_cursor IS NULL) EXECUTE FUNCTION billing_number_event();
            """
    }
}

enum Schema {
    /// One change of the schema: its name, kept in the database beside its number (`billing_schema_migrations`),
    /// and its statements. A name is never changed nor reused once released; a new change is a new step at the end.
    struct Step: Sendable {
        let name: String
        let sql: String
        init(_ name: String, _ sql: String) {
            self.name = name
            self.sql = sql
        }
    }

    /// Versioned schema changes, in order; a database records which it has applied, by number and name.
    static func steps(_ dialect: SQLDialect) -> [Step] {
        let ms = dialect.milliseconds
        return [
            // 1: orders, their idempotency keys and their state history.
            Step(
                "orders",
                """
                CREATE TABLE orders (
                    order_id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    quantity INTEGER NOT NULL CHECK (quantity >= 1),
                    state INTEGER NOT NULL,
                    idempotency_key TEXT,
                    create_time_ms \(ms) NOT NULL,
                    update_time_ms \(ms) NOT NULL,
                    transaction_id TEXT,
                    environment INTEGER
                \(dialect.endKeyedTable)
                CREATE UNIQUE INDEX orders_account_idempotency ON orders (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
                CREATE TABLE order_events (
                    \(dialect.eventKey)order_id TEXT NOT NULL REFERENCES orders (order_id),
                    from_state INTEGER,
                    to_state INTEGER NOT NULL,
                    time_ms \(ms) NOT NULL,
                    cause TEXT NOT NULL
                );
                CREATE INDEX order_events_order ON order_events (order_id);
                """),
            // 2: store transactions: unique, owned by an account, tied to the order they paid.
            Step(
                "transactions",
                """
                CREATE TABLE transactions (
                    transaction_id TEXT PRIMARY KEY,
                    original_transaction_id TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    order_id TEXT REFERENCES orders (order_id),
                    product_id TEXT NOT NULL,
                    product_kind TEXT,
                    purchase_time_ms \(ms) NOT NULL,
                    expires_time_ms \(ms) NOT NULL DEFAULT 0,
                    revocation_time_ms \(ms) NOT NULL DEFAULT 0,
                    quantity INTEGER NOT NULL,
                    environment INTEGER NOT NULL,
                    app_account_token TEXT,
                    bundle_id TEXT NOT NULL
                \(dialect.endKeyedTable)
                CREATE INDEX transactions_account ON transactions (account_id);
                CREATE UNIQUE INDEX transactions_order ON transactions (order_id) WHERE order_id IS NOT NULL;
                CREATE UNIQUE INDEX orders_transaction ON orders (transaction_id) WHERE transaction_id IS NOT NULL;
                """),
            // 3: after the sale: newer signed views of transactions, entitlements kept current, renewal
            // state, notifications by UUID, and the event feed.
            Step(
                "after_sale",
                """
                ALTER TABLE transactions ADD COLUMN signed_time_ms \(ms) NOT NULL DEFAULT 0;
                ALTER TABLE transactions ADD COLUMN revocation_reason INTEGER;
                CREATE INDEX transactions_original ON transactions (original_transaction_id);
                CREATE TABLE entitlements (
                    account_id TEXT NOT NULL,
                    entitlement_key TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    product_kind TEXT NOT NULL,
                    original_transaction_id TEXT NOT NULL,
                    latest_transaction_id TEXT NOT NULL,
                    purchase_time_ms \(ms) NOT NULL,
                    expires_time_ms \(ms) NOT NULL,
                    revocation_time_ms \(ms) NOT NULL,
                    grace_period_expires_ms \(ms) NOT NULL,
                    auto_renew INTEGER NOT NULL,
                    environment INTEGER NOT NULL,
                    order_id TEXT,
                    ended INTEGER NOT NULL,
                    PRIMARY KEY (account_id, entitlement_key)
                \(dialect.endKeyedTable)
                CREATE TABLE renewals (
                    original_transaction_id TEXT PRIMARY KEY,
                    auto_renew INTEGER NOT NULL,
                    grace_period_expires_ms \(ms) NOT NULL,
                    signed_time_ms \(ms) NOT NULL,
                    ended_signed_time_ms \(ms) NOT NULL
                \(dialect.endKeyedTable)
                CREATE TABLE notifications (
                    notification_uuid TEXT NOT NULL UNIQUE,
                    notification_type TEXT NOT NULL,
                    subtype TEXT,
                    signed_time_ms \(ms) NOT NULL,
                    result TEXT NOT NULL,
                    applied_time_ms \(ms) NOT NULL,
                    transaction_id TEXT,
                    signed_payload TEXT NOT NULL
                );
                CREATE TABLE events (
                    \(dialect.feedKey)
                    event_type INTEGER NOT NULL,
                    time_ms \(ms) NOT NULL,
                    account_id TEXT NOT NULL,
                    cause TEXT NOT NULL,
                    notification_uuid TEXT,
                    transaction_id TEXT,
                    order_snapshot TEXT,
                    entitlement_snapshot TEXT
                );
                CREATE INDEX events_account ON events (account_id, feed_cursor);
                \(dialect.feedIndexes)
                """),
            // 4: where a reconciliation with the App Store Server API's notification history starts.
            Step(
                "notifications_by_signed_time",
                """
                CREATE INDEX notifications_signed_time ON notifications (signed_time_ms);
                """),
            // 5: the JWS header of a notification (alg and the x5c chain, about 2.7 KiB, the same on every
            // notification until Apple rotates its certificates) is kept once, by SHA-256. A row with
            // `header_digest` holds the rest of the JWS in `signed_payload` (from its first dot); rows from before
            // hold the whole JWS and no digest. `notification_payloads` gives every notification's whole JWS back.
            Step(
                "jws_headers",
                """
                CREATE TABLE jws_headers (
                    digest TEXT PRIMARY KEY,
                    header TEXT NOT NULL
                \(dialect.endKeyedTable)
                ALTER TABLE notifications ADD COLUMN header_digest TEXT;
                CREATE VIEW notification_payloads AS
                    SELECT n.notification_uuid,
                           CASE WHEN n.header_digest IS NULL THEN n.signed_payload ELSE h.header || n.signed_payload END AS signed_payload
                    FROM notifications n LEFT JOIN jws_headers h ON h.digest = n.header_digest;
                """),
            // 6: the feed's cursor indexes hold numbered events only (see `partialFeedIndexes`). On a large events
            // table this rebuilds two indexes once, at the first start of this version.
            Step(
                "partial_feed_indexes",
                dialect.partialFeedIndexes),
            // 7: the subscription model. Orders keep how many units were refunded and the store that paid them;
            // transactions keep what the store signed (ownership, upgrade, how they were revoked, price, offer,
            // subscription group); entitlements and renewals the subscription's state inputs. Existing rows:
            // ownership PURCHASED, App Store, prices unknown; their entitlements are recomputed after this step.
            // The history index (account, newest purchase first) replaces the account index it starts with.
            Step(
                "subscription_model",
                """
                ALTER TABLE orders ADD COLUMN refunded_quantity INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE orders ADD COLUMN store INTEGER;
                UPDATE orders SET refunded_quantity = quantity WHERE state = 3;
                UPDATE orders SET store = 1 WHERE transaction_id IS NOT NULL;
                ALTER TABLE transactions ADD COLUMN store INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE transactions ADD COLUMN ownership INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE transactions ADD COLUMN upgraded INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE transactions ADD COLUMN revocation_type INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE transactions ADD COLUMN revocation_percentage INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE transactions ADD COLUMN price_milliunits \(ms) NOT NULL DEFAULT 0;
                ALTER TABLE transactions ADD COLUMN currency TEXT NOT NULL DEFAULT '';
                ALTER TABLE transactions ADD COLUMN storefront TEXT NOT NULL DEFAULT '';
                ALTER TABLE transactions ADD COLUMN offer_id TEXT NOT NULL DEFAULT '';
                ALTER TABLE transactions ADD COLUMN offer_type TEXT NOT NULL DEFAULT '';
                ALTER TABLE transactions ADD COLUMN subscription_group_id TEXT NOT NULL DEFAULT '';
                CREATE INDEX transactions_history ON transactions (account_id, purchase_time_ms DESC, transaction_id DESC);
                DROP INDEX transactions_account;
                ALTER TABLE entitlements ADD COLUMN upgraded INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE entitlements ADD COLUMN billing_retry INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE entitlements ADD COLUMN ownership INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE entitlements ADD COLUMN store INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE entitlements ADD COLUMN subscription_group_id TEXT NOT NULL DEFAULT '';
                ALTER TABLE entitlements ADD COLUMN pending_product_id TEXT NOT NULL DEFAULT '';
                ALTER TABLE renewals ADD COLUMN billing_retry INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE renewals ADD COLUMN auto_renew_product_id TEXT NOT NULL DEFAULT '';
                """),
            // 8: the customers whose refund history reconciliation reads (fetched by transaction id in a restore),
            // one per environment and id, the least recently read first.
            Step(
                "refund_watches",
                """
                CREATE TABLE refund_watches (
                    environment INTEGER NOT NULL,
                    transaction_id TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    added_time_ms \(ms) NOT NULL,
                    checked_time_ms \(ms) NOT NULL DEFAULT 0,
                    PRIMARY KEY (environment, transaction_id)
                \(dialect.endKeyedTable)
                CREATE INDEX refund_watches_checked ON refund_watches (checked_time_ms);
                """),
            // 9: where webhook delivery stands (one row): the last event delivered, the replica that sends and
            // until when (a lease another replica takes over once it runs out), the last failure.
            Step(
                "webhook_cursor",
                """
                CREATE TABLE webhook_cursor (
                    id INTEGER NOT NULL PRIMARY KEY,
                    delivered_cursor \(ms) NOT NULL DEFAULT 0,
                    holder TEXT NOT NULL DEFAULT '',
                    lease_until_ms \(ms) NOT NULL DEFAULT 0,
                    failures INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT NOT NULL DEFAULT '',
                    last_attempt_ms \(ms) NOT NULL DEFAULT 0,
                    last_delivery_ms \(ms) NOT NULL DEFAULT 0
                );
                """),
            // 10: the feed written once: cursors given at insert, last in the writer's transaction (see `feedCounter`).
            Step(
                "feed_counter",
                dialect.feedCounter),
            // 11: Google Play purchases to acknowledge (and consume), queued with the write that recorded them as
            // paid; `done` once Google has everything asked of it.
            Step(
                "play_acknowledgements",
                """
                CREATE TABLE play_acknowledgements (
                    purchase_token TEXT NOT NULL PRIMARY KEY,
                    package_name TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    subscription INTEGER NOT NULL,
                    consume INTEGER NOT NULL,
                    transaction_id TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    created_ms \(ms) NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_ms \(ms) NOT NULL DEFAULT 0,
                    last_error TEXT NOT NULL DEFAULT '',
                    acknowledged_ms \(ms) NOT NULL DEFAULT 0,
                    consumed_ms \(ms) NOT NULL DEFAULT 0,
                    done INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX play_acknowledgements_due ON play_acknowledgements (done, next_attempt_ms);
                """),
            // 12: Google Play subscriptions paused by the user (the renewal state says so; the entitlement is PAUSED).
            Step(
                "paused_renewals",
                """
                ALTER TABLE renewals ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE entitlements ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
                """),
            // 13: a Google Play transaction's purchase token, so that GetTransaction (and support) finds it by the one id
            // an Android app holds; filled for purchases recorded before from the acknowledgement queue (which holds
            // each token with the transaction it first paid). Indexed only where there is one (App Store rows: '').
            Step(
                "purchase_tokens",
                """
                ALTER TABLE transactions ADD COLUMN purchase_token TEXT NOT NULL DEFAULT '';
                UPDATE transactions SET purchase_token = (
                    SELECT a.purchase_token FROM play_acknowledgements a WHERE a.transaction_id = transactions.transaction_id)
                WHERE store = 2 AND EXISTS (SELECT 1 FROM play_acknowledgements a WHERE a.transaction_id = transactions.transaction_id);
                CREATE INDEX transactions_purchase_token ON transactions (purchase_token, purchase_time_ms) WHERE purchase_token <> '';
                """),
            // 14: support. The audit trail (append-only), read newest first, by account, operator or method; the
            // indexes support's lookups need: an account's orders, a transaction's appAccountToken.
            Step(
                "audit_trail",
                """
                CREATE TABLE audit_entries (
                    audit_id TEXT PRIMARY KEY,
                    time_ms \(ms) NOT NULL,
                    operator TEXT NOT NULL,
                    method TEXT NOT NULL,
                    account_id TEXT NOT NULL,
                    target TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    request_json TEXT NOT NULL
                );
                CREATE INDEX audit_entries_time ON audit_entries (time_ms, audit_id);
                CREATE INDEX audit_entries_account ON audit_entries (account_id, time_ms, audit_id);
                CREATE INDEX audit_entries_operator ON audit_entries (operator, time_ms, audit_id);
                CREATE INDEX audit_entries_method ON audit_entries (method, time_ms, audit_id);
                CREATE INDEX orders_account ON orders (account_id, create_time_ms);
                CREATE INDEX transactions_app_account_token ON transactions (app_account_token) WHERE app_account_token IS NOT NULL;
                """),
            // 15: support's grants (entitlements of STORE_GRANT, with who gave them and why), read by account, by
            // idempotency key, and by the expiry sweep (only grants whose expiry is still to be noted are indexed);
            // the indexes erasure rewrites by: the audit trail's target, an account's acknowledgements and watches.
            Step(
                "grants",
                """
                CREATE TABLE grants (
                    grant_id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL,
                    product_id TEXT NOT NULL,
                    start_time_ms \(ms) NOT NULL,
                    expires_time_ms \(ms) NOT NULL,
                    revocation_time_ms \(ms) NOT NULL DEFAULT 0,
                    reason TEXT NOT NULL,
                    operator TEXT NOT NULL,
                    idempotency_key TEXT,
                    expiry_noted INTEGER NOT NULL DEFAULT 0
                \(dialect.endKeyedTable)
                CREATE INDEX grants_account ON grants (account_id, start_time_ms);
                CREATE UNIQUE INDEX grants_account_idempotency ON grants (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
                CREATE INDEX grants_due ON grants (expires_time_ms) WHERE expiry_noted = 0 AND revocation_time_ms = 0 AND expires_time_ms > 0;
                CREATE INDEX audit_entries_target ON audit_entries (target);
                CREATE INDEX play_acknowledgements_account ON play_acknowledgements (account_id);
                CREATE INDEX refund_watches_account ON refund_watches (account_id);
                """),
            // 16: the audit trail's insert made cheaper (every Support call writes one): its ids are UUID v7 whose
            // millisecond is the entry's time_ms, so the primary key orders the trail as (time_ms, audit_id) does and
            // the time index is redundant; the operator and method filters walk that order (newest first) instead of
            // an index each. Three B-tree inserts fewer per entry (bench/README.md, "Support").
            Step(
                "audit_by_primary_key",
                """
                DROP INDEX audit_entries_time;
                DROP INDEX audit_entries_operator;
                DROP INDEX audit_entries_method;
                """),
        ]
    }
}

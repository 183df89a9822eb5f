import Billing
import Synchronization

/// The CreateOrders of one PostgreSQL batch, written by one statement that is the whole transaction.
///
/// One `INSERT ... ON CONFLICT DO NOTHING` of every new order, and in the same statement the
/// ORDER_CREATED event of each order it did insert, numbered from the feed counter taken once the
/// orders are in (`FeedCursors`), so an order never exists without its event and no event is written
/// for an order that was not. An order it did not insert lost to an order
/// with the same idempotency key (committed by another replica, or earlier in this same batch): it
/// is answered with that order, read back by key, exactly as when the key is found first on its own.
/// Rows go in (account, key) order, so two batches sharing keys lock them in the same order.
/// The per-order path costs five round trips (savepoint, key lookup, two inserts, release); this
/// costs one per batch, plus a read or two per order it did not insert.
enum BulkCreate {
    /// One CreateOrder waiting in a batch.
    struct Request: Sendable {
        let order: NewOrder
        let abandoned: @Sendable () -> Bool
        let completion: @Sendable (Result<CreateOutcome, BillingError>) -> Void
    }

    /// Order columns as `OrderRow.values` gives them, then event columns as `SQLLedger.values`, with their types.
    static let orderTypes = ["text", "text", "text", "integer", "integer", "text", "bigint", "bigint", "text", "integer"]
    static let eventTypes = FeedCursors.types
    static let eventColumns = FeedCursors.columns

    /// The statement for `rows` orders (prepared once per size and connection). It must be the whole transaction,
    /// so that the feed counter's row is held only from its events to its COMMIT.
    static func statement(rows: Int) -> String {
        precondition(rows >= 1)
        let types = orderTypes + eventTypes
        let width = types.count
        var values: [String] = []
        values.reserveCapacity(rows)
        for row in 0..<rows {
            let cells = (0..<width).map { "$\(row * width + $0 + 1)::\(types[$0])" }
            values.append("(\(cells.joined(separator: ", ")), \(row))")
        }
        let o = (0..<orderTypes.count).map { "o\($0)" }.joined(separator: ", ")
        let e = (0..<eventTypes.count).map { "i.e\($0)" }.joined(separator: ", ")
        let inputColumns = (0..<orderTypes.count).map { "o\($0)" } + (0..<eventTypes.count).map { "e\($0)" } + ["ord"]
        // `fresh` needs every row of `inserted`, so the counter is taken once all the orders are in; the NOTIFY (sent
        // at COMMIT) only when there are events.
        return """
            WITH input (\(inputColumns.joined(separator: ", "))) AS (VALUES \(values.joined(separator: ", "))),
            inserted AS (INSERT INTO orders (\(OrderRow.columns)) SELECT \(o) FROM input ORDER BY o1, o5, ord ON CONFLICT DO NOTHING RETURNING order_id),
            fresh AS (SELECT i.*, row_number() OVER (ORDER BY i.ord) AS n, count(*) OVER () AS k
                      FROM input i JOIN inserted ON inserted.order_id = i.o0),
            counter AS (UPDATE feed_counter SET last = last + (SELECT count(*) FROM fresh) WHERE EXISTS (SELECT 1 FROM fresh)
                        RETURNING last, pg_notify('\(FeedCursors.channel)', '')::text),
            created AS (INSERT INTO events (feed_cursor, \(eventColumns)) SELECT counter.last - i.k + i.n, \(e) FROM fresh i, counter)
            SELECT order_id FROM inserted
            """
    }

    private static let statements = Mutex<[Int: String]>([:])

    static func cachedStatement(rows: Int) -> String {
        statements.withLock { cache in
            if let known = cache[rows] { return known }
            let made = statement(rows: rows)
            cache[rows] = made
            return made
        }
    }

    /// Writes `requests` (those whose caller has not gone) and appends one answer per request.
    ///
    /// The statement is the whole transaction (no BEGIN), so once it returns its orders are durable and must
    /// be answered `.created` whatever happens next. The reads that follow (for requests it did not insert)
    /// then fail alone: such a request is answered UNAVAILABLE by itself, nothing having been written for it.
    static func run(_ requests: [Request], on db: PGConnection, into answers: inout [@Sendable () -> Void]) throws(StorageError) {
        var live: [Request] = []
        live.reserveCapacity(requests.count)
        var ids = Set<String>()
        for request in requests {
            if request.abandoned() {
                let completion = request.completion
                answers.append { completion(.failure(.abandoned)) }
            } else {
                live.append(request)
            }
        }
        guard !live.isEmpty else { return }
        // One row per order id: a second request with the same id (never made by the service) is left out
        // and answered by reading the row back, like any request the statement did not insert.
        var rows: [Request] = []
        rows.reserveCapacity(live.count)
        for request in live where ids.insert(request.order.id).inserted { rows.append(request) }
        var values: [SQLValue] = []
        values.reserveCapacity(rows.count * (orderTypes.count + eventTypes.count))
        for request in rows {
            values += OrderRow.values(request.order.pendingOrder)
            values += OrderRow.createdEvent(request.order)
        }
        var inserted = Set(try db.query(cachedStatement(rows: rows.count), values, { $0.text(0) }))
        for request in live {
            let completion = request.completion
            if inserted.remove(request.order.id) != nil {
                answers.append(created(request))
                continue
            }
            do throws(StorageError) {
                // Not inserted: the row with its id may be its own (written by an earlier try of this batch whose
                // answer was lost with the connection), else its key was used first, else its id was taken.
                if let row = try db.query(OrderRow.selectByID, [.text(request.order.id)], { OrderRow.decode($0) }).first,
                    row == request.order.pendingOrder
                {
                    answers.append(created(request))
                } else if let key = request.order.idempotencyKey,
                    let found = try db.query(OrderRow.selectByKey, [.text(request.order.accountID), .text(key)], { OrderRow.decode($0) }).first
                {
                    answers.append { completion(.success(.existing(found))) }
                } else {
                    let id = request.order.id
                    answers.append { completion(.failure(.storage(.orderIDTaken(orderID: id)))) }
                }
            } catch {
                answers.append { completion(.failure(.storage(error))) }
            }
        }
    }

    private static func created(_ request: Request) -> @Sendable () -> Void {
        let stored = request.order.pendingOrder
        let completion = request.completion
        return { completion(.success(.created(stored))) }
    }
}

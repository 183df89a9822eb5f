public import Billing
import BillingAPI
import Foundation
import ProtoWire
public import RPC
import Synchronization
import Lifecycle

/// Revenue's books and what commits changed since they were last brought up to date.
final class RevenueIndex: Sendable {
    /// Each environment's book, once read.
    let books = Mutex<[StoreEnvironment: RevenueBook]>([:])
    private let pending = Mutex(RevenueChanges())
    /// The store tells what each commit changed (else every answer reads everything).
    let tracks = Atomic<Bool>(false)
    var tracksChanges: Bool { tracks.load(ordering: .acquiring) }

    /// A commit's changes (a store thread; never waits for a computation).
    func note(_ changes: RevenueChanges) {
        pending.withLock { p in
            guard !p.all else { return }
            if changes.all || p.transactionIDs.count > 100_000 {
                p = .everything
                return
            }
            p.transactionIDs += changes.transactionIDs
            p.originalTransactionIDs += changes.originalTransactionIDs
        }
    }

    /// The changes noted so far, and none left.
    func take() -> RevenueChanges {
        pending.withLock { p in
            defer { p = RevenueChanges() }; return p
        }
    }

    /// Changes that could not be applied (the database failed): kept for the next answer.
    func putBack(_ changes: RevenueChanges) { note(changes) }
}

import Foundation
import Lifecycle
import Synchronization

/// When the writer checkpoints itself, between groups. Past `walLimitBytes` (1 MiB) it does, and
/// `journal_size_limit` truncates the WAL back to that size when it restarts, so a nearly full disk keeps room
/// for a checkpoint to grow the database file (docs/FAULTS.md). While the file system has `roomyFreeBytes` free,
/// the WAL may reach `walRoomyLimitBytes` (16 MiB) and is kept at that size: fewer, larger checkpoints copy a page
/// that many commits rewrote (index leaves) once, and a WAL rewritten in place needs no new blocks (per
/// notification: pwrite64 10 -> 7, pread64 2.6 -> 1.5, fdatasync 0.05 -> 0.03, 7 us less system time).
/// Writer thread only.
final class WALPolicy {
    let walPath: String
    /// The file system had room when last looked at (statvfs runs only once the WAL is past 1 MiB).
    private(set) var roomy = false

    init(walPath: String) { self.walPath = walPath }

    /// Pure: whether a WAL of `walBytes` calls for a checkpoint now.
    static func needsCheckpoint(walBytes: Int, roomy: Bool) -> Bool {
        walBytes > (roomy ? SQLiteOrderStore.walRoomyLimitBytes : SQLiteOrderStore.walLimitBytes)
    }

    func afterGroup(committed: Bool, on db: SQLiteConnection) {
        let wal = SQLiteOrderStore.fileSize(walPath)
        if wal > SQLiteOrderStore.walLimitBytes {
            let now = SQLiteOrderStore.hasRoom(walPath)
            if now != roomy {
                roomy = now
                let limit = now ? SQLiteOrderStore.walRoomyLimitBytes : SQLiteOrderStore.walLimitBytes
                try? db.execute("PRAGMA journal_size_limit=\(limit)")
            }
        }
        if !committed || Self.needsCheckpoint(walBytes: wal, roomy: roomy) {
            try? db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        }
    }
}

/// Copies the WAL back into the database file on its own thread and connection (PASSIVE: it never blocks
/// the writer or readers), every 200 ms while there is something to copy, so commits never pay for it.
final class Checkpointer: Sendable {
    private let worker: Worker

    init(path: String) throws(StorageError) {
        let opened = try SQLiteConnection(path: path)
        try opened.execute("PRAGMA busy_timeout=5000")
        let connection = Confined(opened)  // from here on, the checkpoint thread's alone
        worker = Worker(name: "sqlite-checkpoint") { worker in
            while worker.pause(.milliseconds(200)) {
                try? connection.value.execute("PRAGMA wal_checkpoint(PASSIVE)")
            }
            // A last full copy, so a clean stop leaves a small WAL.
            try? connection.value.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.value.close()
        }
        worker.start()
    }

    func stop() { worker.stop() }
}

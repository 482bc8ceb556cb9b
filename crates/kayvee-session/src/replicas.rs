//! The primary's side of replication on the wire: a full sync streamed from an O(1) snapshot
//! into a replica's output, a chunk at a time while the loop keeps serving, and the
//! replication stream handed to every replica (held behind the RDB while its sync runs).
//! The state (IDs, offsets, backlog, the replica table) is the engine's
//! (`kayvee_engine::repl`); docs/decisions.md ("Replication") has the design.

use alloc::vec::Vec;
use kayvee_engine::Snapshot;
use kayvee_rdb::{RdbWriter, WriteOptions};

/// Pending output below which the next RDB chunk is written into a syncing replica's output.
pub(crate) const SYNC_LOW_WATER: usize = 256 * 1024;

/// A replica's full sync under way.
pub(crate) struct Sync {
    /// The RDB writer over the snapshot taken at the sync's offset.
    writer: RdbWriter,
    /// The diskless form's delimiter (`$EOF:<mark>` ... `<mark>`).
    mark: [u8; 40],
    /// Stream bytes that arrived during the sync: they follow the RDB.
    pub held: Vec<u8>,
    /// The RDB and its closing mark are in the output: the held stream waits for the
    /// replica's first `REPLCONF ACK` (it finds the mark at the end of what it read, so no
    /// stream byte may follow the mark before it answers), as Redis's diskless sync does.
    pub rdb_sent: bool,
}

impl Sync {
    /// A diskless sync of `snapshot`: writes the `$EOF:<mark>` header into `out`.
    pub fn diskless(
        snapshot: Snapshot,
        opts: WriteOptions,
        mark: [u8; 40],
        out: &mut Vec<u8>,
    ) -> Self {
        out.extend_from_slice(b"$EOF:");
        out.extend_from_slice(&mark);
        out.extend_from_slice(b"\r\n");
        Sync {
            writer: RdbWriter::new(snapshot, opts),
            mark,
            held: Vec::new(),
            rdb_sent: false,
        }
    }

    /// Writes RDB chunks into `out` while it holds less than [`SYNC_LOW_WATER`] pending
    /// bytes (`pending` of them now), then the closing mark ([`Sync::rdb_sent`]).
    pub fn pump(&mut self, out: &mut Vec<u8>, mut pending: usize) {
        while pending < SYNC_LOW_WATER && !self.rdb_sent {
            let before = out.len();
            if !self.writer.next_chunk(out) {
                out.extend_from_slice(&self.mark);
                self.rdb_sent = true;
                return;
            }
            pending += out.len() - before;
        }
    }
}

/// The disk form of a full sync (SYNC, replicas without `capa eof`): `$<len>\r\n` and the whole
/// RDB of `snapshot`, whose length must be known first.
pub(crate) fn disk_payload(snapshot: Snapshot, opts: WriteOptions, out: &mut Vec<u8>) {
    let rdb = RdbWriter::new(snapshot, opts).write_all();
    out.extend_from_slice(alloc::format!("${}\r\n", rdb.len()).as_bytes());
    out.extend_from_slice(&rdb);
}

/// 40 delimiter bytes for the diskless form, from the engine's random source.
pub(crate) fn eof_mark(mut next: impl FnMut() -> u64) -> [u8; 40] {
    let mut mark = [0u8; 40];
    for b in &mut mark {
        *b = b"0123456789abcdef"[(next() % 16) as usize];
    }
    mark
}

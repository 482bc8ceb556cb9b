//! The primary's side of replication on the wire: a full sync streamed from an O(1) snapshot
//! into a replica's output, a chunk at a time while the loop keeps serving (the stream that
//! arrives meanwhile waits in the engine's backlog, pinned from the replica's start on).
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
    /// The stream offset of the first byte that follows the RDB (the bytes that arrive
    /// meanwhile stay in the engine's backlog, pinned there for every syncing replica).
    pub stream_start: u64,
    /// The RDB and its closing mark are in the output: the held stream waits for the
    /// replica's first `REPLCONF ACK` (it finds the mark at the end of what it read, so no
    /// stream byte may follow the mark before it answers), as Redis's diskless sync does.
    pub rdb_sent: bool,
    /// Unix us before which nothing is written (`repl-diskless-sync-delay` after the PSYNC).
    start_us: u64,
    /// What goes out first at the start: the PSYNC's `+FULLRESYNC` line, which Redis sends
    /// only when the RDB starts (the replica is in its handshake until then).
    preamble: Vec<u8>,
    /// Unix us of the last newline keep-alive sent while the start waits.
    keepalive_us: u64,
    /// Unix us at which the `$EOF:` header went out (None: not yet).
    started_us: Option<u64>,
}

impl Sync {
    /// A diskless sync of `snapshot` whose `$EOF:<mark>` header goes into the output at the
    /// first [`Sync::pump`] from `start_us` on: Redis waits `repl-diskless-sync-delay` for
    /// more replicas to share its RDB child; the snapshot is taken at the PSYNC here, so the
    /// offset stays exact.
    pub fn diskless(
        snapshot: Snapshot,
        opts: WriteOptions,
        mark: [u8; 40],
        start_us: u64,
        preamble: Vec<u8>,
        stream_start: u64,
    ) -> Self {
        Sync {
            preamble,
            keepalive_us: 0,
            writer: RdbWriter::new(snapshot, opts),
            mark,
            stream_start,
            rdb_sent: false,
            start_us,
            started_us: None,
        }
    }

    /// Writes RDB chunks into `out` while it holds less than [`SYNC_LOW_WATER`] pending
    /// bytes (`pending` of them now), then the closing mark ([`Sync::rdb_sent`]). With
    /// `key_delay_us` (`rdb-key-save-delay`, the test suite's slow primary: Redis's child
    /// sleeps that long after each key) no more keys go out by `now_us` than that pace allows.
    pub fn pump(&mut self, out: &mut Vec<u8>, mut pending: usize, now_us: u64, key_delay_us: u64) {
        if now_us < self.start_us {
            // A newline a second keeps the link alive, as Redis does for a waiting replica.
            if now_us.saturating_sub(self.keepalive_us) >= 1_000_000 {
                out.push(b'\n');
                self.keepalive_us = now_us;
            }
            return;
        }
        let started_us = *self.started_us.get_or_insert_with(|| {
            out.append(&mut self.preamble);
            out.extend_from_slice(b"$EOF:");
            out.extend_from_slice(&self.mark);
            out.extend_from_slice(b"\r\n");
            now_us
        });
        let keys_due = (now_us - started_us)
            .checked_div(key_delay_us)
            .map_or(u64::MAX, |n| n + 1);
        while pending < SYNC_LOW_WATER && !self.rdb_sent {
            if self.writer.keys_written() >= keys_due {
                return;
            }
            let before = out.len();
            let more = if key_delay_us > 0 {
                self.writer.next_step(out)
            } else {
                self.writer.next_chunk(out)
            };
            if !more {
                out.extend_from_slice(&self.mark);
                self.rdb_sent = true;
                return;
            }
            pending += out.len() - before;
        }
    }

    /// Whether the payload is not all out yet (the cron pumps a paced one on).
    pub fn sending(&self) -> bool {
        !self.rdb_sent
    }

    /// Whether the payload started (its delay is over).
    pub fn started(&self) -> bool {
        self.started_us.is_some()
    }

    /// Starts at the next [`Sync::pump`], whatever the delay (`repl-diskless-sync-max-replicas`
    /// replicas wait).
    pub fn start_now(&mut self) {
        self.start_us = 0;
    }
}

/// The disk form of a full sync (SYNC, replicas without `capa eof`): `$<len>\r\n` and the whole
/// RDB of `snapshot`, whose length must be known first.
pub(crate) fn disk_payload(snapshot: Snapshot, opts: WriteOptions, out: &mut Vec<u8>) {
    let rdb = RdbWriter::new(snapshot, opts).write_all();
    out.extend_from_slice(alloc::format!("${}\r\n", rdb.len()).as_bytes());
    out.extend_from_slice(&rdb);
}

/// Cuts the PSYNC's `+FULLRESYNC` line, the last thing in the output (after `sent` bytes
/// already written), out of it.
pub(crate) fn take_fullresync(out: &mut Vec<u8>, sent: usize) -> Vec<u8> {
    const LINE: &[u8] = b"+FULLRESYNC ";
    match out[sent..].windows(LINE.len()).rposition(|w| w == LINE) {
        Some(at) => out.split_off(sent + at),
        None => Vec::new(),
    }
}

/// 40 delimiter bytes for the diskless form, from the engine's random source.
pub(crate) fn eof_mark(mut next: impl FnMut() -> u64) -> [u8; 40] {
    let mut mark = [0u8; 40];
    for b in &mut mark {
        *b = b"0123456789abcdef"[(next() % 16) as usize];
    }
    mark
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_engine::{ArgvBuf, Config, Engine, Now, Protocol, ReplyTree};

    /// A snapshot of three keys.
    fn snapshot() -> Snapshot {
        let now = Now::from_ms(1_000);
        let mut e = Engine::new(Config::default(), 1, now);
        let conn = kayvee_engine::ConnInfo {
            transport: kayvee_engine::Transport::Tcp {
                addr: "127.0.0.1:40001".into(),
                laddr: "127.0.0.1:6379".into(),
            },
            fd: 8,
        };
        let h = e.connect(conn, now);
        for k in ["a", "b", "c"] {
            let argv = ArgvBuf::from_args(["SET", k, "v"]);
            e.execute(h, &argv.argv(), now, &mut ReplyTree::new(Protocol::Resp2));
        }
        e.snapshot(now)
    }

    #[test]
    fn a_paced_sync_waits_for_its_start_then_sends_keys_at_the_key_delay() {
        let preamble = b"+FULLRESYNC id 1\r\n".to_vec();
        let mark = [b'm'; 40];
        let opts = WriteOptions::default();
        let mut sync = Sync::diskless(snapshot(), opts, mark, 5_000_000, preamble, 1);
        let mut out = Vec::new();
        sync.pump(&mut out, 0, 500_000, 1000);
        assert!(out.is_empty());
        sync.pump(&mut out, 0, 1_500_000, 1000);
        assert_eq!(out, b"\n", "a keep-alive a second");
        out.clear();
        sync.pump(&mut out, 0, 5_000_000, 1000);
        assert!(out.starts_with(b"+FULLRESYNC id 1\r\n$EOF:mmmm"));
        assert_eq!(sync.writer.keys_written(), 1);
        sync.pump(&mut out, 0, 5_001_000, 1000);
        assert_eq!(sync.writer.keys_written(), 2);
        assert!(sync.sending());
        sync.pump(&mut out, 0, 6_000_000, 1000);
        assert!(!sync.sending() && sync.rdb_sent);
        assert!(out.ends_with(&mark));
    }

    #[test]
    fn the_fullresync_line_is_cut_from_the_output() {
        let mut out = b"+OK\r\n+FULLRESYNC abc 7\r\n".to_vec();
        assert_eq!(take_fullresync(&mut out, 0), b"+FULLRESYNC abc 7\r\n");
        assert_eq!(out, b"+OK\r\n");
        assert!(take_fullresync(&mut out, 0).is_empty());
    }
}

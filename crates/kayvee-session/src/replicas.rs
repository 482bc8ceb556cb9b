//! The primary's side of replication on the wire: a full sync streamed from an O(1) snapshot
//! into a replica's output, a chunk at a time while the loop keeps serving (the stream that
//! arrives meanwhile waits in the engine's backlog, pinned from the replica's start on).
//! The state (IDs, offsets, backlog, the replica table) is the engine's
//! (`kayvee_engine::repl`); docs/decisions.md ("Replication") has the design.

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use kayvee_engine::Snapshot;
use kayvee_rdb::{RdbWriter, WriteOptions};

/// Pending output below which the next RDB chunk is written into a syncing replica's output.
pub(crate) const SYNC_LOW_WATER: usize = 256 * 1024;

/// The RDB file a disk-based full sync sends (`repl-diskless-sync no`): the shell's background
/// save wrote it, and the shell opens it for the driver ([`crate::Driver::replica_save_finished`]),
/// as Redis's primary reads the file its child wrote into each waiting replica.
pub trait SyncFile {
    /// The file's length in bytes (the payload's `$<len>`).
    fn size(&self) -> u64;
    /// Reads from `offset` into `buf`; `None` on an error (the replica is dropped).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Option<usize>;
}

/// The background save disk-based syncs wait for (`crate::filesync`).
pub(crate) struct ReplicaSave {
    /// The stream offset right after its snapshot (each waiting replica's stream start).
    pub stream_start: u64,
    /// The snapshot, until the shell takes it to write.
    pub snapshot: Option<Snapshot>,
}

/// A saved file shared by every replica that waited for its save.
pub(crate) type SharedFile = Rc<RefCell<Box<dyn SyncFile>>>;

/// Where a full sync's RDB comes from.
enum Source {
    /// Written from the snapshot in the loop, in the diskless form `$EOF:<mark>` ... `<mark>`.
    Snapshot {
        writer: Box<RdbWriter>,
        mark: [u8; 40],
    },
    /// The file of a background save (`$<len>` and its bytes); `None` while the save runs.
    File { file: Option<SharedFile>, sent: u64 },
}

/// A replica's full sync under way.
pub(crate) struct Sync {
    source: Source,
    /// The stream offset of the first byte that follows the RDB (the bytes that arrive
    /// meanwhile stay in the engine's backlog, pinned there for every syncing replica).
    pub stream_start: u64,
    /// The RDB (and the diskless form's closing mark) is in the output. A diskless payload's
    /// held stream waits for the replica's first `REPLCONF ACK` (it finds the mark at the end
    /// of what it read, so no stream byte may follow the mark before it answers), as Redis's
    /// diskless sync does; a file's follows at once.
    pub rdb_sent: bool,
    /// Unix us before which nothing is written (`repl-diskless-sync-delay` after the PSYNC).
    start_us: u64,
    /// What goes out first at the start: the PSYNC's `+FULLRESYNC` line, which Redis sends
    /// only when the RDB starts (the replica is in its handshake until then).
    preamble: Vec<u8>,
    /// Unix us of the last newline keep-alive sent while the start waits.
    keepalive_us: u64,
    /// Unix us at which the payload's header went out (None: not yet).
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
            source: Source::Snapshot {
                writer: Box::new(RdbWriter::new(snapshot, opts)),
                mark,
            },
            stream_start,
            rdb_sent: false,
            start_us,
            started_us: None,
        }
    }

    /// A disk-based sync waiting for the background save of the snapshot taken at
    /// `stream_start - 1` ([`Sync::file_saved`] hands it the file).
    pub fn from_file(stream_start: u64) -> Self {
        Sync {
            preamble: Vec::new(),
            keepalive_us: 0,
            source: Source::File {
                file: None,
                sent: 0,
            },
            stream_start,
            rdb_sent: false,
            start_us: 0,
            started_us: None,
        }
    }

    /// Whether this sync waits for a background save's file (or sends one).
    pub fn is_file(&self) -> bool {
        matches!(self.source, Source::File { .. })
    }

    /// Whether this sync still waits for its background save to end.
    pub fn awaits_file(&self) -> bool {
        matches!(self.source, Source::File { file: None, .. })
    }

    /// The background save this sync waited for wrote `file`.
    pub fn file_saved(&mut self, saved: SharedFile) {
        if let Source::File { file, .. } = &mut self.source {
            *file = Some(saved);
        }
    }

    /// Writes RDB chunks into `out` while it holds less than [`SYNC_LOW_WATER`] pending
    /// bytes (`pending` of them now), then the closing mark ([`Sync::rdb_sent`]). With
    /// `key_delay_us` (`rdb-key-save-delay`, the test suite's slow primary: Redis's child
    /// sleeps that long after each key) no more keys go out by `now_us` than that pace allows
    /// (a file's save thread keeps that pace itself).
    ///
    /// `spent` says, before each chunk, whether the time the loop granted the sync is used up
    /// ([`Pace`]); the return value is true when the pump stopped for that reason only (the
    /// replica could take more). `Err` when the file cannot be read: the replica is dropped.
    pub fn pump(
        &mut self,
        out: &mut Vec<u8>,
        mut pending: usize,
        now_us: u64,
        key_delay_us: u64,
        spent: &mut dyn FnMut() -> bool,
    ) -> Result<bool, ()> {
        let waits = now_us < self.start_us || self.awaits_file();
        if waits {
            // A newline a second keeps the link alive, as Redis does for a waiting replica.
            if now_us.saturating_sub(self.keepalive_us) >= 1_000_000 {
                out.push(b'\n');
                self.keepalive_us = now_us;
            }
            return Ok(false);
        }
        let started_us = *self.started_us.get_or_insert_with(|| {
            out.append(&mut self.preamble);
            match &self.source {
                Source::Snapshot { mark, .. } => {
                    out.extend_from_slice(b"$EOF:");
                    out.extend_from_slice(mark);
                    out.extend_from_slice(b"\r\n");
                }
                Source::File { file, .. } => {
                    let len = file.as_ref().map_or(0, |f| f.borrow().size());
                    out.extend_from_slice(alloc::format!("${len}\r\n").as_bytes());
                }
            }
            now_us
        });
        match &mut self.source {
            Source::Snapshot { writer, mark } => {
                let keys_due = (now_us - started_us)
                    .checked_div(key_delay_us)
                    .map_or(u64::MAX, |n| n + 1);
                while pending < SYNC_LOW_WATER && !self.rdb_sent {
                    if writer.keys_written() >= keys_due {
                        return Ok(false);
                    }
                    if spent() {
                        return Ok(true);
                    }
                    let before = out.len();
                    let more = if key_delay_us > 0 {
                        writer.next_step(out)
                    } else {
                        writer.next_chunk(out)
                    };
                    if !more {
                        out.extend_from_slice(mark);
                        self.rdb_sent = true;
                        return Ok(false);
                    }
                    pending += out.len() - before;
                }
            }
            Source::File { file, sent } => {
                let Some(file) = file else {
                    return Ok(false);
                };
                let mut file = file.borrow_mut();
                let len = file.size();
                while pending < SYNC_LOW_WATER && *sent < len {
                    if spent() {
                        return Ok(true);
                    }
                    let piece = (len - *sent).min(FILE_PIECE as u64) as usize;
                    let at = out.len();
                    out.resize(at + piece, 0);
                    let n = match file.read_at(*sent, &mut out[at..]) {
                        Some(n) if n > 0 => n,
                        _ => {
                            out.truncate(at);
                            return Err(());
                        }
                    };
                    out.truncate(at + n);
                    *sent += n as u64;
                    pending += n;
                }
                self.rdb_sent = *sent >= len;
            }
        }
        Ok(false)
    }

    /// Whether the payload is not all out yet (the cron pumps a paced or waiting one on).
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

    /// The keys the diskless writer has written (tests).
    #[cfg(test)]
    fn keys_written(&self) -> u64 {
        match &self.source {
            Source::Snapshot { writer, .. } => writer.keys_written(),
            Source::File { .. } => 0,
        }
    }
}

/// How much of a saved file goes into a replica's output at once.
const FILE_PIECE: usize = 16 * 1024;

/// How much of the loop's time full syncs may take (`repl-sync-share`): the primary
/// serialises the snapshot on its loop (no fork), so a sync as fast as the replica reads
/// would take most of a busy loop from its clients. While commands run, the syncs are owed
/// the share of the time that passes, as a credit they spend (each grant's time is measured
/// and taken off). Once no command has run for [`IDLE_AFTER_US`] and the shell has looked at
/// its connections since the last grant (a new loop pass), the loop is quiet and the syncs
/// take slices of it uncharged, so an idle primary syncs at full speed.
#[derive(Default)]
pub(crate) struct Pace {
    credit_us: i64,
    /// When the credit was last counted (unix us).
    counted_us: u64,
    /// The commands run by the last look, and when that count last moved.
    commands: u64,
    active_us: u64,
    /// The loop pass of the last grant.
    grant_pass: u64,
    /// The grant under way is quiet time: not charged.
    quiet: bool,
}

/// No command for this long: the loop may be quiet (a pipelining client's gap between two
/// batches is shorter, so a sync does not slip into it).
const IDLE_AFTER_US: u64 = 500;
/// The longest grant at once: what a sync may hold up a client that arrives meanwhile.
const GRANT_MAX_US: i64 = 2_000;
/// The credit's bounds: a long stretch without syncs does not bank a burst, a long step does
/// not starve them for long.
const CREDIT_MAX_US: i64 = 10_000;
const CREDIT_MIN_US: i64 = -50_000;

impl Pace {
    /// The time (us) full syncs may take from `now_us`, in loop pass `pass`, with `commands`
    /// run so far and the `share` in percent (100: no limit).
    pub fn grant(&mut self, now_us: u64, pass: u64, commands: u64, share: u32) -> u64 {
        // The first look owes nothing (no time was counted before it).
        let passed = match self.counted_us {
            0 => 0,
            at => now_us.saturating_sub(at),
        };
        self.counted_us = now_us;
        if commands != self.commands {
            self.commands = commands;
            self.active_us = now_us;
        }
        let new_pass = core::mem::replace(&mut self.grant_pass, pass) != pass;
        if share >= 100 {
            self.quiet = true;
            return u64::MAX;
        }
        self.quiet = new_pass && now_us.saturating_sub(self.active_us) >= IDLE_AFTER_US;
        if self.quiet {
            return GRANT_MAX_US as u64;
        }
        let owed = passed.min(CREDIT_MAX_US as u64 * 100) * u64::from(share) / 100;
        self.credit_us = (self.credit_us + owed as i64).clamp(CREDIT_MIN_US, CREDIT_MAX_US);
        self.credit_us.clamp(0, GRANT_MAX_US) as u64
    }

    /// How long after a grant that ran out the syncs should look again: once the credit is
    /// owed back at `share`, or once the loop could be quiet, whichever comes first.
    pub fn wait_us(&self, share: u32) -> u64 {
        let owed = (-self.credit_us).max(0) as u64 * 100 / u64::from(share.max(1));
        owed.clamp(1, IDLE_AFTER_US)
    }

    /// The last grant ended at `now_us`, `us` after it began.
    pub fn spent(&mut self, now_us: u64, us: u64) {
        if self.quiet {
            // Quiet time is the syncs' own: it earns no credit.
            self.counted_us = self.counted_us.max(now_us);
        } else {
            self.credit_us = (self.credit_us - us as i64).max(CREDIT_MIN_US);
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
        sync.pump(&mut out, 0, 500_000, 1000, &mut || false)
            .unwrap();
        assert!(out.is_empty());
        sync.pump(&mut out, 0, 1_500_000, 1000, &mut || false)
            .unwrap();
        assert_eq!(out, b"\n", "a keep-alive a second");
        out.clear();
        sync.pump(&mut out, 0, 5_000_000, 1000, &mut || false)
            .unwrap();
        assert!(out.starts_with(b"+FULLRESYNC id 1\r\n$EOF:mmmm"));
        assert_eq!(sync.keys_written(), 1);
        sync.pump(&mut out, 0, 5_001_000, 1000, &mut || false)
            .unwrap();
        assert_eq!(sync.keys_written(), 2);
        assert!(sync.sending());
        sync.pump(&mut out, 0, 6_000_000, 1000, &mut || false)
            .unwrap();
        assert!(!sync.sending() && sync.rdb_sent);
        assert!(out.ends_with(&mark));
    }

    /// A file in memory.
    struct Bytes(Vec<u8>);

    impl SyncFile for Bytes {
        fn size(&self) -> u64 {
            self.0.len() as u64
        }

        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Option<usize> {
            let rest = self.0.get(offset as usize..)?;
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Some(n)
        }
    }

    #[test]
    fn a_file_sync_keeps_the_link_alive_until_its_save_ends_then_sends_the_file_by_length() {
        let mut sync = Sync::from_file(8);
        let mut out = Vec::new();
        sync.pump(&mut out, 0, 1_000_000, 0, &mut || false).unwrap();
        sync.pump(&mut out, 0, 1_500_000, 0, &mut || false).unwrap();
        assert_eq!(out, b"\n", "a keep-alive a second while the save runs");
        assert!(sync.awaits_file() && !sync.started());
        let payload: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        sync.file_saved(Rc::new(RefCell::new(Box::new(Bytes(payload.clone())))));
        out.clear();
        // The replica's output is full: only the header and one piece go out.
        sync.pump(&mut out, SYNC_LOW_WATER - 1, 2_000_000, 0, &mut || false)
            .unwrap();
        assert!(out.starts_with(b"$40000\r\n"));
        assert!(sync.sending());
        sync.pump(&mut out, 0, 2_000_001, 0, &mut || false).unwrap();
        assert!(sync.rdb_sent && !sync.sending());
        assert_eq!(&out[b"$40000\r\n".len()..], &payload[..]);
    }

    #[test]
    fn a_file_that_cannot_be_read_fails_the_sync() {
        let mut sync = Sync::from_file(1);
        sync.file_saved(Rc::new(RefCell::new(Box::new(Short))));
        let mut out = Vec::new();
        assert!(sync.pump(&mut out, 0, 1, 0, &mut || false).is_err());
    }

    /// A file shorter than it says.
    struct Short;

    impl SyncFile for Short {
        fn size(&self) -> u64 {
            100
        }

        fn read_at(&mut self, _: u64, _: &mut [u8]) -> Option<usize> {
            Some(0)
        }
    }

    #[test]
    fn the_fullresync_line_is_cut_from_the_output() {
        let mut out = b"+OK\r\n+FULLRESYNC abc 7\r\n".to_vec();
        assert_eq!(take_fullresync(&mut out, 0), b"+FULLRESYNC abc 7\r\n");
        assert_eq!(out, b"+OK\r\n");
        assert!(take_fullresync(&mut out, 0).is_empty());
    }

    /// A loop kept busy by commands: over a second of 1 ms passes, each with commands run and
    /// a sync that uses whatever it is granted, the syncs get about the share.
    #[test]
    fn a_busy_loop_grants_its_syncs_about_their_share() {
        let mut pace = Pace::default();
        let (mut now, mut commands, mut took) = (1_000_000u64, 0u64, 0u64);
        for pass in 1..=1000u64 {
            commands += 50;
            let grant = pace.grant(now, pass, commands, 20);
            let used = grant.min(3_000);
            now += used;
            took += used;
            pace.spent(now, used);
            now += 1_000 - used.min(1_000); // the rest of the pass serves the commands
        }
        let share = took * 100 / (now - 1_000_000);
        assert!(
            (15..=21).contains(&share),
            "the syncs took {share}% of a busy loop"
        );
    }

    /// No command for a while: a new pass grants a quiet slice, uncharged; a second look in the
    /// same pass does not (the quiet time was the sync's own), and a command ends the quiet.
    #[test]
    fn a_quiet_loop_grants_slices_in_new_passes_only() {
        let mut pace = Pace::default();
        assert_eq!(pace.grant(1_000, 1, 10, 20), 0, "busy, no credit yet");
        pace.spent(1_000, 0);
        let now = 1_000 + IDLE_AFTER_US;
        assert_eq!(pace.grant(now, 2, 10, 20), GRANT_MAX_US as u64, "quiet");
        pace.spent(now + 2_000, 2_000);
        assert_eq!(pace.credit_us, 0, "quiet time is not charged");
        assert!(
            pace.grant(now + 2_000, 2, 10, 20) < GRANT_MAX_US as u64,
            "same pass"
        );
        pace.spent(now + 2_000, 0);
        assert_eq!(
            pace.grant(now + 2_100, 3, 10, 20),
            GRANT_MAX_US as u64,
            "next pass"
        );
        pace.spent(now + 2_100, 0);
        assert!(
            pace.grant(now + 2_200, 4, 11, 20) < GRANT_MAX_US as u64,
            "a command ran"
        );
        pace.spent(now + 2_200, 0);
        assert_eq!(
            pace.grant(now + 2_300, 5, 11, 100),
            u64::MAX,
            "100: no limit"
        );
    }

    /// A grant that ran out asks to be looked at again once the credit is owed back, never
    /// later than the loop could turn quiet.
    #[test]
    fn a_held_sync_looks_again_when_its_credit_is_owed_back() {
        let mut pace = Pace::default();
        pace.grant(1_000, 1, 1, 20);
        pace.spent(1_000, 0);
        let grant = pace.grant(1_500, 2, 2, 20); // 500 us passed: 100 us owed
        assert_eq!(grant, 100);
        pace.spent(1_660, 160); // the chunk overran by 60 us
        assert_eq!(pace.wait_us(20), 300, "60 us owed back at a fifth");
        pace.spent(1_660, 1_000);
        assert_eq!(pace.wait_us(20), IDLE_AFTER_US, "capped at the quiet mark");
    }
}

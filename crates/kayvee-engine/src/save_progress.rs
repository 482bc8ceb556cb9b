//! What INFO reports of a background save or AOF rewrite while it runs, and after: Redis's
//! child-info fields (`current_save_keys_processed`, `current_save_keys_total`,
//! `current_fork_perc`, `current_cow_size`, `current_cow_peak`, `current_cow_size_age`,
//! `rdb_last_cow_size`, `aof_last_cow_size`), with Kayvee's meaning.
//!
//! Kayvee forks no child: the shell serialises an O(1) snapshot on a thread. That thread
//! publishes its [`WriterProgress`]: the keys it wrote (the total is the snapshot's key count
//! when the writing started) and how far it let go of the snapshot (the RDB writer releases
//! what it wrote, `PMap::release_below`).
//!
//! Copy-on-write memory has an analogue: the bytes the snapshot keeps alive that the live
//! keyspace no longer shares. A snapshot shares every value with the keyspace until a write
//! replaces or deletes it; from then on only the snapshot holds the old value, until the writer
//! has written it and lets it go. The estimate follows the key event stream (the drain hands
//! every event here while a writer runs): the first change of a key the snapshot still holds
//! (written, opened for an in-place write, deleted, expired, evicted) adds the snapshot's value
//! as MEMORY USAGE sizes it (its slot and heap, collections sampled), once per key; when the
//! writer lets go of it, it is taken off again. So:
//! - a key created after the snapshot, changed again, or already written out adds nothing;
//! - a string whose storage the keyspace still shares (a TTL change, an in-place write that
//!   left it as it was) adds nothing yet;
//! - a persistent collection changed in place (a big hash, set, sorted set or list, a stream)
//!   shares all but the nodes on the written path: it adds its slot and at most one page
//!   ([`IN_PLACE_PAGE`]), as a forked Redis copies the pages it writes.
//!
//! Left out (the figure is an estimate): the keyspace's own trie nodes copied on a write's
//! path; a database flushed (FLUSHDB; FLUSHALL stops the save) or replaced by a load is no
//! longer followed; a key renamed or moved counts as deleted although its value lives on.
//! With no writer running nothing listens: the keyspace records no event for this.
//!
//! To know what the snapshot still holds, the engine keeps its own O(1) clone of the
//! snapshot's keys and lets go of it as the writer does (at each event and each cron), so the
//! clone pins nothing the writer released for longer than that.

use crate::db::{Db, DbSnapshot, Key};
use crate::events::KeyEvent;
use crate::value::usage::{entry_usage, is_persistent, slot_usage, DEFAULT_SAMPLES};
use crate::value::Entry;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use kayvee_pds::PMap;

/// What a persistent collection changed in place adds at most beyond its slot: one page, the
/// unit a forked Redis copies.
pub const IN_PLACE_PAGE: usize = 4096;

/// What is being written from a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// A background save (BGSAVE, a save point).
    Rdb,
    /// An AOF rewrite's base (BGREWRITEAOF, an automatic rewrite).
    Aof,
}

/// The low bits of [`WriterProgress`]'s released position that hold the database (plus one;
/// 0: nothing released); the cursor keeps the high bits, rounded down.
const DB_BITS: u64 = 0xFFFF;

/// What the writing thread publishes, shared with the engine.
#[derive(Debug, Default)]
pub struct WriterProgress {
    /// Keys written so far.
    keys: AtomicU64,
    /// How far the snapshot is let go of, packed in one word (see [`DB_BITS`]).
    released: AtomicU64,
}

impl WriterProgress {
    /// The thread wrote `keys` keys (after each key or chunk).
    #[inline]
    pub fn set_keys(&self, keys: u64) {
        self.keys.store(keys, Ordering::Relaxed);
    }

    /// The thread let go of its snapshot up to `(db, cursor)`: every database before `db`,
    /// and the keys of `db` whose hash is below `cursor` (as `PMap::release_below`). The
    /// cursor is published rounded down (the engine may let go a little later).
    #[inline]
    pub fn set_released(&self, (db, cursor): (usize, u64)) {
        if (db as u64) < DB_BITS {
            let packed = (cursor & !DB_BITS) | (db as u64 + 1);
            self.released.store(packed, Ordering::Relaxed);
        }
    }

    /// Keys written so far.
    #[inline]
    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }

    /// Where the snapshot is let go of: `(db, cursor)`, `(0, 0)` for nothing yet.
    fn released(&self) -> (usize, u64) {
        match self.released.load(Ordering::Relaxed) {
            0 => (0, 0),
            p => (((p & DB_BITS) - 1) as usize, p & !DB_BITS),
        }
    }
}

/// One writer under way.
struct Running {
    writer: Writer,
    progress: Arc<WriterProgress>,
    /// Keys in the snapshot when it started.
    keys_total: u64,
    /// By the snapshot's database index: what the snapshot still holds of its keys (None once
    /// written, flushed or replaced).
    snap: Vec<Option<PMap<Key, Entry>>>,
    /// By the snapshot's database index: the counted keys the snapshot still holds, by hash
    /// then key, with the bytes each added.
    counted: Vec<BTreeMap<(u64, Key), u64>>,
    /// The snapshot's database index of each live database (SWAPDB moves them).
    of_live: Vec<usize>,
    /// How far this clone is let go of (see [`WriterProgress::set_released`]).
    released: (usize, u64),
    /// The estimate, in bytes, and its highest value.
    cow: u64,
    peak: u64,
    /// The estimate at the last [`SaveProgress::refresh`], and when it last changed (unix ms, 0
    /// before it ever did).
    seen: u64,
    changed_ms: u64,
}

impl Running {
    /// Lets go of what the writer released since the last call: those keys' counted bytes are
    /// freed now.
    fn catch_up(&mut self) {
        let (db, cursor) = self.progress.released();
        if (db, cursor) <= self.released {
            return;
        }
        let n = self.snap.len();
        for d in self.released.0..db.min(n) {
            self.snap[d] = None;
            let gone: u64 = self.counted[d].values().sum();
            self.counted[d].clear();
            self.cow -= gone;
        }
        if db < n && cursor > 0 {
            if let Some(snap) = &mut self.snap[db] {
                snap.release_below(cursor);
            }
            let kept = self.counted[db].split_off(&(cursor, Key::new()));
            let gone: u64 = self.counted[db].values().sum();
            self.counted[db] = kept;
            self.cow -= gone;
        }
        self.released = (db, cursor);
    }

    /// The first change of `key` of live database `live_db`, `live` being its state now.
    fn changed(&mut self, live_db: usize, key: &[u8], live: &Db) {
        self.catch_up();
        let Some(&db) = self.of_live.get(live_db) else {
            return;
        };
        let Some(Some(snap)) = self.snap.get(db) else {
            return;
        };
        let hash = snap.hash_of(key);
        if (db, hash) < self.released {
            return; // written out and let go already
        }
        let Some(old) = snap.get(key) else {
            return;
        };
        let id = (hash, Key::from_slice(key));
        if self.counted[db].contains_key(&id) {
            return;
        }
        let now = live.keys.get(key);
        if now.is_some_and(|e| e.same_string(old)) {
            return;
        }
        let in_place = is_persistent(old)
            && now.is_some_and(|e| {
                is_persistent(e) && e.value().type_name() == old.value().type_name()
            });
        let full = entry_usage(key, old, DEFAULT_SAMPLES);
        let bytes = match in_place {
            true => full.min(slot_usage(key) + IN_PLACE_PAGE),
            false => full,
        } as u64;
        self.counted[db].insert(id, bytes);
        self.cow += bytes;
        self.peak = self.peak.max(self.cow);
    }
}

/// What INFO shows of the writer under way (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Current {
    /// Keys written so far.
    pub keys_processed: u64,
    /// Keys in the snapshot when it started.
    pub keys_total: u64,
    /// The copy-on-write analogue, in bytes.
    pub cow: u64,
    /// Its highest value during this writer.
    pub cow_peak: u64,
    /// Seconds since the figure last changed (0 before it ever did).
    pub cow_age_s: u64,
}

impl Current {
    /// `current_fork_perc`: the share of the snapshot's keys written, in percent.
    pub fn percent(&self) -> f64 {
        match self.keys_total {
            0 => 0.0,
            total => self.keys_processed as f64 * 100.0 / total as f64,
        }
    }
}

/// The writers under way and the last figures (the engine's table, `Core::save_progress`).
#[derive(Default)]
pub struct SaveProgress {
    /// In the order they started; at most one per [`Writer`] (Kayvee has no one-child rule:
    /// a BGSAVE may run during a rewrite). INFO's `current_*` follow the first.
    running: Vec<Running>,
    /// The peak figure of the last background save that succeeded.
    pub rdb_last_cow_size: u64,
    /// The peak figure of the last AOF rewrite that succeeded.
    pub aof_last_cow_size: u64,
}

impl SaveProgress {
    /// `writer` starts writing a snapshot of `dbs`: returns what its thread publishes. The
    /// key events must be listened to from now on (see [`Self::listening`]).
    pub fn start(&mut self, writer: Writer, dbs: &[DbSnapshot]) -> Arc<WriterProgress> {
        self.running.retain(|r| r.writer != writer);
        let progress = Arc::new(WriterProgress::default());
        self.running.push(Running {
            writer,
            progress: progress.clone(),
            keys_total: dbs.iter().map(|d| d.keys.len() as u64).sum(),
            snap: dbs.iter().map(|d| Some(d.keys.clone())).collect(),
            counted: dbs.iter().map(|_| BTreeMap::new()).collect(),
            of_live: (0..dbs.len()).collect(),
            released: (0, 0),
            cow: 0,
            peak: 0,
            seen: 0,
            changed_ms: 0,
        });
        progress
    }

    /// `writer` ended; a success's peak figure becomes `rdb_last_cow_size` /
    /// `aof_last_cow_size` (a failed or stopped one leaves them, as a Redis child that did not
    /// finish reports none). The snapshot's keys it held are released.
    pub fn end(&mut self, writer: Writer, ok: bool) {
        let Some(i) = self.running.iter().position(|r| r.writer == writer) else {
            return;
        };
        let r = self.running.remove(i);
        if ok {
            match writer {
                Writer::Rdb => self.rdb_last_cow_size = r.peak,
                Writer::Aof => self.aof_last_cow_size = r.peak,
            }
        }
    }

    /// Whether a writer runs: the key events it needs must be recorded.
    #[inline]
    pub fn listening(&self) -> bool {
        !self.running.is_empty()
    }

    /// One key event of live database `db`, whose state after the command is `live`.
    pub fn on_key_event(&mut self, db: usize, event: &KeyEvent, live: &Db) {
        match event {
            KeyEvent::Modified(k)
            | KeyEvent::Opened(k, _)
            | KeyEvent::Expired(k)
            | KeyEvent::Evicted(k) => {
                for r in &mut self.running {
                    r.changed(db, k, live);
                }
            }
            KeyEvent::Flushed(_) => self.unfollow(db),
            KeyEvent::Created(_) | KeyEvent::Missed(_) => {}
        }
    }

    /// SWAPDB `a` `b`: each snapshot database follows its data to its new index.
    pub fn swapped(&mut self, a: usize, b: usize) {
        for r in &mut self.running {
            if a < r.of_live.len() && b < r.of_live.len() {
                r.of_live.swap(a, b);
            }
        }
    }

    /// The databases were replaced (a load): none is followed any more.
    pub fn dbs_replaced(&mut self) {
        for r in &mut self.running {
            r.snap.iter_mut().for_each(|s| *s = None);
        }
    }

    /// Stops following live database `db` (flushed). What it counted stays until the writer
    /// lets go of it.
    fn unfollow(&mut self, db: usize) {
        for r in &mut self.running {
            if let Some(s) = r.of_live.get(db).and_then(|&d| r.snap.get_mut(d)) {
                *s = None;
            }
        }
    }

    /// Lets go of what the writers released and notes at `now_ms` whether the figures changed
    /// (the cron and INFO call it), for `current_cow_size_age`.
    pub fn refresh(&mut self, now_ms: u64) {
        for r in &mut self.running {
            r.catch_up();
            if r.cow != r.seen {
                r.seen = r.cow;
                r.changed_ms = now_ms;
            }
        }
    }

    /// The writer INFO follows, if one runs.
    pub fn current(&self, now_ms: u64) -> Option<Current> {
        let r = self.running.first()?;
        let age_ms = match r.changed_ms {
            0 => 0,
            at => now_ms.saturating_sub(at),
        };
        Some(Current {
            keys_processed: r.progress.keys().min(r.keys_total),
            keys_total: r.keys_total,
            cow: r.cow,
            cow_peak: r.peak,
            cow_age_s: age_ms / 1000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::listen;
    use crate::value::Value;
    use alloc::format;
    use kayvee_pds::SmallBytes;

    fn s(n: usize) -> Value {
        Value::Str(SmallBytes::from_slice(&alloc::vec![b'A'; n]))
    }

    /// A database of `n` keys `k0..` holding 500-byte strings, recording what a writer needs.
    fn db(n: usize) -> Db {
        let mut db = Db::new(9);
        for i in 0..n {
            db.set(format!("k{i}").as_bytes(), s(500), 0, false);
        }
        db.events.set_listen(listen::CHANGES);
        db
    }

    /// Hands the recorded events of live database `index` to `p`, as the drain does.
    fn drain_as(p: &mut SaveProgress, db: &mut Db, index: usize) {
        for e in db.events.take() {
            p.on_key_event(index, &e, db);
        }
    }

    fn drain(p: &mut SaveProgress, db: &mut Db) {
        drain_as(p, db, 0)
    }

    fn cow(p: &SaveProgress) -> u64 {
        p.current(0).map_or(0, |c| c.cow)
    }

    fn usage(db: &Db, key: &str) -> u64 {
        let e = db.keys.get(key.as_bytes()).unwrap();
        entry_usage(key.as_bytes(), e, DEFAULT_SAMPLES) as u64
    }

    #[test]
    fn an_overwrite_during_a_save_counts_the_old_value_once() {
        let mut d = db(10);
        let mut p = SaveProgress::default();
        let progress = p.start(Writer::Rdb, &[d.snapshot()]);
        let one = usage(&d, "k1");
        assert!(one >= 500);
        d.set(b"k1", s(500), 0, false);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), one);
        // Written again: the value it replaces is the new one, not the snapshot's.
        d.set(b"k1", s(500), 0, false);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), one);
        // A key created after the snapshot, then overwritten and deleted: nothing.
        d.set(b"new", s(500), 0, false);
        d.set(b"new", s(600), 0, false);
        d.remove(b"new", 0);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), one);
        // A deletion and an in-place write (SETRANGE's path) of snapshot keys count.
        d.remove(b"k2", 0);
        let e = d.lookup_write(b"k3", 0).unwrap();
        let mut bytes = e.take_str().unwrap();
        bytes[0] = b'B';
        e.set_value(Value::Str(SmallBytes::from_slice(&bytes)));
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), 3 * one);
        // Progress.
        progress.set_keys(4);
        let c = p.current(0).unwrap();
        assert_eq!((c.keys_processed, c.keys_total), (4, 10));
        assert_eq!(c.percent(), 40.0);
        assert_eq!(c.cow_peak, 3 * one);
        p.end(Writer::Rdb, true);
        assert_eq!(p.rdb_last_cow_size, 3 * one);
        assert_eq!(p.aof_last_cow_size, 0);
        assert!(p.current(0).is_none());
    }

    #[test]
    fn nothing_counts_without_a_save_or_for_a_shared_string() {
        let mut d = db(4);
        let mut p = SaveProgress::default();
        d.set(b"k1", s(500), 0, false);
        drain(&mut p, &mut d);
        assert!(p.current(0).is_none());
        assert!(!p.listening());
        p.start(Writer::Aof, &[d.snapshot()]);
        assert!(p.listening());
        // A TTL leaves the value shared: nothing yet; its overwrite then counts.
        d.set_expire(b"k0", 1_000_000);
        d.lookup_write(b"k0", 0);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), 0);
        d.set(b"k0", s(10), 0, false);
        drain(&mut p, &mut d);
        assert!(cow(&p) >= 500);
        // A failed rewrite keeps the last figure.
        p.end(Writer::Aof, false);
        assert_eq!(p.aof_last_cow_size, 0);
        assert!(!p.listening());
    }

    #[test]
    fn what_the_writer_let_go_of_counts_no_more() {
        let mut d = db(10);
        let mut p = SaveProgress::default();
        let progress = p.start(Writer::Rdb, &[d.snapshot(), Db::new(9).snapshot()]);
        // The two keys first in hash order, and a cursor between them.
        let mut by_hash: Vec<(u64, alloc::string::String)> = (0..10)
            .map(|i| format!("k{i}"))
            .map(|k| (d.keys.hash_of(k.as_bytes()), k))
            .collect();
        by_hash.sort();
        let ((ha, a), (hb, b)) = (by_hash[0].clone(), by_hash[1].clone());
        let cursor = (ha | DB_BITS) + 1;
        assert!(cursor <= hb, "pick other keys");
        let (ua, ub) = (usage(&d, &a), usage(&d, &b));
        d.set(b.as_bytes(), s(3), 0, false);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), ub);
        progress.set_released((0, cursor));
        // `a` is written out: its overwrite frees its old value, nothing counts.
        d.set(a.as_bytes(), s(3), 0, false);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), ub);
        assert!(ua > 0);
        // Past database 0: `b`'s old value is freed too.
        progress.set_released((1, 0));
        p.refresh(1_000);
        assert_eq!(cow(&p), 0);
        assert_eq!(p.current(1_000).unwrap().cow_peak, ub);
        d.remove(b"k5", 0);
        drain(&mut p, &mut d);
        assert_eq!(cow(&p), 0);
        p.end(Writer::Rdb, true);
        assert_eq!(p.rdb_last_cow_size, ub);
    }

    #[test]
    fn flushed_and_swapped_databases() {
        let mut d = db(4);
        let mut p = SaveProgress::default();
        p.start(Writer::Rdb, &[d.snapshot(), Db::new(9).snapshot()]);
        p.swapped(0, 1);
        // The data moved to index 1: an event of index 0 on `k1` finds nothing.
        d.set(b"k1", s(5), 0, false);
        drain_as(&mut p, &mut d, 0);
        assert_eq!(cow(&p), 0);
        d.set(b"k2", s(5), 0, false);
        drain_as(&mut p, &mut d, 1);
        assert!(cow(&p) >= 500);
        // Flushed: no longer followed; what was counted stays until the writer lets go.
        let before = cow(&p);
        d.clear();
        drain_as(&mut p, &mut d, 1);
        d.set(b"k3", s(5), 0, false);
        drain_as(&mut p, &mut d, 1);
        assert_eq!(cow(&p), before);
    }

    #[test]
    fn the_age_counts_from_the_last_change() {
        let mut d = db(2);
        let mut p = SaveProgress::default();
        p.start(Writer::Rdb, &[d.snapshot()]);
        p.refresh(1_000);
        assert_eq!(p.current(5_000).unwrap().cow_age_s, 0);
        d.remove(b"k0", 0);
        drain(&mut p, &mut d);
        p.refresh(2_000);
        p.refresh(3_000);
        assert_eq!(p.current(5_500).unwrap().cow_age_s, 3);
    }
}

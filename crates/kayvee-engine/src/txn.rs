//! Transactions' engine side: the per-client MULTI queue and WATCH list, the per-database record
//! of watched keys, and the bookkeeping that marks watchers dirty when a watched key is
//! modified. The commands themselves (MULTI, EXEC, DISCARD, WATCH, UNWATCH) are in
//! [`crate::cmd::txn`]; the queueing of commands while in MULTI is in [`crate::dispatch`].
//!
//! How a modification is detected (Redis 7.0.15 semantics, checked against the real server):
//! every `Db` method that writes a key ([`crate::Db::set`], `insert_entry`, `remove`,
//! `set_expire`, `persist`, `clear`) notes the key when it is watched; a write through
//! `Db::lookup_write` (collections mutated in place) keeps the value it had before, and after
//! the command the value is compared: a changed value counts as a modification. So no-op writes
//! (SADD of a present member, SETNX on a present key, DEL of a missing key) invalidate nothing,
//! as in Redis. Expiry is a modification in 7.0.15 when the key was live at WATCH time: its
//! deletion (lazy or active) is noted, and EXEC also checks for watched keys whose TTL passed but
//! that are not deleted yet. FLUSHDB of a watched key that does not exist is no modification.
//! Known deviation: an in-place rewrite with an equal value
//! (HSET of the same value, LSET of the same element) is seen as no change, where Redis
//! invalidates; handlers that care call [`touch`].
//!
//! Architecture invariant: `(db, key)` is in a client's `watched` list if and only if that
//! client's handle is in `dbs[db].watch.clients[key]`.

use crate::argv::ArgvBuf;
use crate::client::{Handle, PerClient};
use crate::db::{Db, Key};
use crate::value::Value;
use crate::Core;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// A client's transaction state (kept in [`Transactions`], by handle).
#[derive(Clone, Debug, Default)]
pub struct ClientTxn {
    /// Inside MULTI: commands are queued, blocking ones answer their timeout reply instead of
    /// blocking.
    pub multi: bool,
    /// Commands queued since MULTI, in order.
    pub queue: Vec<ArgvBuf>,
    /// A command was refused at queue time: EXEC answers EXECABORT (Redis's `DIRTY_EXEC`).
    pub errored: bool,
    /// A watched key was modified: EXEC answers null (Redis's `DIRTY_CAS`).
    pub dirty: bool,
    /// The keys this client watches: (db, key, whether it had already expired at WATCH time).
    pub watched: Vec<(usize, Key, bool)>,
    /// Bytes held by the queue (`CLIENT LIST multi-mem=`).
    pub queued_bytes: usize,
}

/// Every client's transaction state, in `Core::txn`.
#[derive(Clone, Debug, Default)]
pub struct Transactions {
    per: PerClient<ClientTxn>,
    /// Number of clients that WATCH at least one key (nothing to settle when none does).
    watching: usize,
}

impl Transactions {
    /// The transaction state of `h`, if it ever had one.
    #[inline]
    pub fn of(&self, h: Handle) -> Option<&ClientTxn> {
        self.per.get(h)
    }

    /// Whether `h` is inside MULTI.
    #[inline]
    pub fn in_multi(&self, h: Handle) -> bool {
        self.per.get(h).is_some_and(|t| t.multi)
    }

    /// MULTI: `h` starts queueing.
    pub fn begin(&mut self, h: Handle) {
        self.per.entry(h).multi = true;
    }

    /// EXEC: takes the queue of `h`.
    pub fn take_queue(&mut self, h: Handle) -> Vec<ArgvBuf> {
        core::mem::take(&mut self.per.entry(h).queue)
    }
}

/// Watch bookkeeping kept in each [`Db`].
#[derive(Clone, Debug, Default)]
pub struct DbWatch {
    /// Watched key to the clients watching it.
    pub clients: BTreeMap<Key, Vec<Handle>>,
    /// Watched keys written since the last [`settle`], and whether by expiry.
    pub touched: Vec<(Key, bool)>,
    /// Watched keys opened by `lookup_write` since the last [`settle`], with their value then.
    pub probes: Vec<(Key, Value)>,
    /// Some client tracks keys (`CLIENT TRACKING`): every written key is noted in
    /// `track_writes` for [`crate::tracking::after_command`].
    pub track_all: bool,
    /// Keys written, expired or deleted since the last tracking pass (while `track_all`).
    pub track_writes: Vec<Key>,
    /// The database was flushed since the last tracking pass (while `track_all`).
    pub track_flushed: bool,
}

impl DbWatch {
    /// Whether some client watches `key` (cheap when nobody watches anything).
    #[inline]
    pub fn is_watched(&self, key: &[u8]) -> bool {
        !self.clients.is_empty() && self.clients.contains_key(key)
    }

    /// Notes a write to `key` if it is watched.
    #[inline]
    pub fn note_write(&mut self, key: &[u8]) {
        if self.track_all {
            self.track_writes.push(Key::from_slice(key));
        }
        if self.is_watched(key) {
            self.touched.push((Key::from_slice(key), false));
        }
    }

    /// Notes the deletion of `key` by expiry if it is watched.
    #[inline]
    pub fn note_expired(&mut self, key: &[u8]) {
        if self.track_all {
            self.track_writes.push(Key::from_slice(key));
        }
        if self.is_watched(key) {
            self.touched.push((Key::from_slice(key), true));
        }
    }

    /// Keeps `value` as `key`'s value before an in-place write, if `key` is watched and has no
    /// probe yet.
    #[inline]
    pub fn probe(&mut self, key: &[u8], value: &Value) {
        if self.track_all {
            self.track_writes.push(Key::from_slice(key));
        }
        if self.is_watched(key) && !self.probes.iter().any(|(k, _)| k[..] == *key) {
            self.probes.push((Key::from_slice(key), value.clone()));
        }
    }

    /// Whether there is something for [`settle`] to look at.
    #[inline]
    fn pending(&self) -> bool {
        !self.touched.is_empty() || !self.probes.is_empty()
    }
}

/// Marks `key` of `db` modified for its watchers: for handlers whose in-place write may leave
/// an equal value that Redis still counts as a modification (HSET, LSET of the same value).
pub fn touch(db: &mut Db, key: &[u8]) {
    db.watch.note_write(key);
}

/// Notes every watched key of `db` that exists (FLUSHDB, FLUSHALL: Redis touches only the
/// watched keys the flush really removes).
pub fn touch_existing(db: &mut Db) {
    db.watch.track_flushed |= db.watch.track_all;
    if db.watch.clients.is_empty() {
        return;
    }
    let present: Vec<(Key, bool)> = db
        .watch
        .clients
        .keys()
        .filter(|k| db.keys.get(&k[..]).is_some())
        .map(|k| (k.clone(), false))
        .collect();
    db.watch.touched.extend(present);
}

/// SWAPDB's part: notes the watched keys of `a` and of `b` that exist in either database
/// (call before the swap; the watch records stay with their database index).
pub fn touch_swap(dbs: &mut [Db], a: usize, b: usize) {
    for (this, other) in [(a, b), (b, a)] {
        let hit: Vec<(Key, bool)> = dbs[this]
            .watch
            .clients
            .keys()
            .filter(|k| {
                dbs[this].keys.get(&k[..]).is_some() || dbs[other].keys.get(&k[..]).is_some()
            })
            .map(|k| (k.clone(), false))
            .collect();
        dbs[this].watch.touched.extend(hit);
    }
}

/// Turns the databases' notes into dirty flags on the watching clients: a noted write always,
/// a probe when the value differs now (or the key is gone). Runs after every command.
pub fn settle(core: &mut Core) {
    if core.txn.watching == 0 {
        return;
    }
    for (i, db) in core.dbs.iter_mut().enumerate() {
        if !db.watch.pending() {
            continue;
        }
        let probes = core::mem::take(&mut db.watch.probes);
        for (k, before) in probes {
            if db.keys.get(&k[..]).map(|e| &e.value) != Some(&before) {
                db.watch.touched.push((k, false));
            }
        }
        for (k, by_expiry) in core::mem::take(&mut db.watch.touched) {
            for h in db.watch.clients.get(&k).into_iter().flatten() {
                mark_dirty(core.txn.per.entry(*h), i, &k, by_expiry);
            }
        }
    }
}

/// Marks a watcher dirty, except for the expiry of a key that had already expired when it was
/// watched (logically no change, as Redis 7.0 judges; the key then counts as live again).
fn mark_dirty(t: &mut ClientTxn, db: usize, key: &Key, by_expiry: bool) {
    if by_expiry {
        let rec = t.watched.iter_mut().find(|(d, k, _)| *d == db && k == key);
        if let Some((_, _, expired @ true)) = rec {
            *expired = false;
            return;
        }
    }
    t.dirty = true;
}

/// EXEC's last check: whether a key `h` watches, live at WATCH time, has passed its TTL without
/// being deleted yet.
pub fn watched_key_expired(core: &Core, h: Handle, now_ms: u64) -> bool {
    let Some(t) = core.txn.of(h) else {
        return false;
    };
    t.watched.iter().any(|(db, key, expired)| {
        !expired && core.dbs[*db].expire_at(key).is_some_and(|at| at <= now_ms)
    })
}

/// WATCH's work for one key: records that client `h` watches `key` of `db` (once), and whether
/// the key had already expired (its TTL passed, not yet deleted).
pub fn watch(core: &mut Core, h: Handle, db: usize, key: &[u8], now_ms: u64) {
    let t = core.txn.per.entry(h);
    if t.watched.iter().any(|(d, k, _)| *d == db && k[..] == *key) {
        return;
    }
    if t.watched.is_empty() {
        core.txn.watching += 1;
    }
    let expired = core.dbs[db].expire_at(key).is_some_and(|at| at <= now_ms);
    let t = core.txn.per.entry(h);
    t.watched.push((db, Key::from_slice(key), expired));
    core.dbs[db]
        .watch
        .clients
        .entry(Key::from_slice(key))
        .or_default()
        .push(h);
}

/// Forgets every key client `h` watches and its dirty flag (EXEC, DISCARD, UNWATCH, RESET,
/// disconnect).
pub fn unwatch_all(core: &mut Core, h: Handle) {
    let t = core.txn.per.entry(h);
    t.dirty = false;
    if t.watched.is_empty() {
        return;
    }
    let watched = core::mem::take(&mut t.watched);
    core.txn.watching -= 1;
    for (db, key, _) in watched {
        let w = &mut core.dbs[db].watch;
        if let Some(list) = w.clients.get_mut(&key) {
            list.retain(|x| *x != h);
            if list.is_empty() {
                w.clients.remove(&key);
            }
        }
    }
}

/// Leaves MULTI: drops the queue and the error flag and unwatches (EXEC, DISCARD, RESET).
pub fn discard(core: &mut Core, h: Handle) {
    if core.txn.of(h).is_some() {
        let t = core.txn.per.entry(h);
        t.multi = false;
        t.queue = Vec::new();
        t.errored = false;
        t.queued_bytes = 0;
    }
    unwatch_all(core, h);
}

/// Forgets client `h` (disconnect): leaves MULTI, unwatches, drops its state.
pub fn remove(core: &mut Core, h: Handle) {
    discard(core, h);
    core.txn.per.take(h);
}

/// Queues a command for EXEC.
pub fn queue(txns: &mut Transactions, h: Handle, argv: &crate::Argv<'_>) {
    let t = txns.per.entry(h);
    let bytes: usize = argv.iter().map(<[u8]>::len).sum();
    t.queued_bytes += bytes + 16 * argv.len();
    t.queue.push(ArgvBuf::from_args(argv.iter()));
}

/// Marks the transaction of `h` (if in MULTI) as failed at queue time.
pub fn flag_error(txns: &mut Transactions, h: Handle) {
    if txns.in_multi(h) {
        txns.per.entry(h).errored = true;
    }
}

/// The commands that run at once inside MULTI instead of being queued.
pub fn runs_in_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use kayvee_pds::SmallBytes;

    fn s(v: &str) -> Value {
        Value::Str(SmallBytes::from_slice(v.as_bytes()))
    }

    #[test]
    fn unwatched_keys_leave_no_notes() {
        let mut db = Db::new(1);
        db.set(b"k", s("v"), 0, false);
        db.watch.note_write(b"k");
        db.watch.probe(b"k", &s("v"));
        assert!(!db.watch.pending());
    }

    #[test]
    fn notes_and_probes_only_watched_keys_once() {
        let mut db = Db::new(1);
        db.watch
            .clients
            .insert(Key::from_slice(b"k"), alloc::vec![Handle(3)]);
        db.watch.probe(b"k", &s("a"));
        db.watch.probe(b"k", &s("b"));
        db.watch.probe(b"x", &s("b"));
        assert_eq!(db.watch.probes.len(), 1);
        assert_eq!(db.watch.probes[0].1, s("a"));
        db.watch.note_write(b"x");
        assert!(db.watch.touched.is_empty());
        db.watch.note_write(b"k");
        assert_eq!(db.watch.touched.len(), 1);
    }

    #[test]
    fn flush_touches_only_present_keys() {
        let mut db = Db::new(1);
        for k in [&b"here"[..], b"gone"] {
            db.watch
                .clients
                .insert(Key::from_slice(k), alloc::vec![Handle(0)]);
        }
        db.keys
            .insert(Key::from_slice(b"here"), crate::Entry::new(s("v"), 0));
        touch_existing(&mut db);
        assert_eq!(
            db.watch.touched,
            alloc::vec![(Key::from_slice(b"here"), false)]
        );
    }
}

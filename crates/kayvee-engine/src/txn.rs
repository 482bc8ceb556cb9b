//! Transactions' engine side: the per-client MULTI queue and WATCH list, the per-database record
//! of watched keys, and the bookkeeping that marks watchers dirty when a watched key is
//! modified. The commands themselves (MULTI, EXEC, DISCARD, WATCH, UNWATCH) are in
//! [`crate::cmd::txn`]; the queueing of commands while in MULTI is in [`crate::dispatch`].
//!
//! How a modification is detected (Redis 7.0.15 semantics, checked against the real server):
//! WATCH listens to the key event stream ([`crate::events`]). A write through a `Db` method
//! ([`crate::Db::set`], `insert_entry`, `remove`, `set_expire`, `persist`) is a modification of a
//! watched key; a write through `Db::lookup_write` (collections mutated in place) carries the
//! value it had before, and after the command the value is compared: a changed value counts as
//! a modification. So no-op writes (SADD of a present member, SETNX on a present key, DEL of a
//! missing key) invalidate nothing, as in Redis. Expiry is a modification in 7.0.15 when the key
//! was live at WATCH time: its deletion (lazy or active) is an event, and EXEC also checks for
//! watched keys whose TTL passed but that are not deleted yet. FLUSHDB of a watched key that
//! does not exist is no modification. Known deviation: an in-place rewrite with an equal value
//! (HSET of the same value, LSET of the same element) is seen as no change, where Redis
//! invalidates; handlers that care call [`crate::Db::modified`].
//!
//! Architecture invariant: `(db, key)` is in a client's `watched` list if and only if that
//! client's handle is in `Core::watches`' list for `(db, key)`.

use crate::argv::ArgvBuf;
use crate::client::{Handle, PerClient};
use crate::db::Key;
use crate::events::KeyEvent;
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

/// Every client's transaction state, in `Core::txn` (the watched keys' side is
/// [`Watches`], in `Core::watches`).
#[derive(Clone, Debug, Default)]
pub struct Transactions {
    per: PerClient<ClientTxn>,
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

/// The server's WATCH state, kept in `Core` (it stays with the database index on SWAPDB).
#[derive(Clone, Debug, Default)]
pub struct Watches {
    /// Per database index: watched key to the clients watching it.
    keys: Vec<BTreeMap<Key, Vec<Handle>>>,
    /// Number of clients that WATCH at least one key.
    clients: usize,
    /// Watched keys modified since the last [`settle`]: (db, key, whether by expiry).
    touched: Vec<(usize, Key, bool)>,
    /// Watched keys opened for an in-place write since the last [`settle`], with their value
    /// before.
    probes: Vec<(usize, Key, Value)>,
    /// Watched keys a coming flush finds stale (TTL passed, not yet deleted), noted by
    /// [`before_flush`]: the flush is their expiry, not a change.
    stale: Vec<(usize, Key)>,
}

impl Watches {
    /// Whether some client watches a key (then WATCH listens to key events).
    #[inline]
    pub fn active(&self) -> bool {
        self.clients != 0
    }

    /// Number of clients watching keys.
    pub fn client_count(&self) -> usize {
        self.clients
    }

    /// Whether some client watches `key` of `db`.
    #[inline]
    fn is_watched(&self, db: usize, key: &[u8]) -> bool {
        self.keys.get(db).is_some_and(|m| m.contains_key(key))
    }

    /// Notes a modification of `key` of `db` if it is watched.
    fn note(&mut self, db: usize, key: &[u8], by_expiry: bool) {
        if self.is_watched(db, key) {
            self.touched.push((db, Key::from_slice(key), by_expiry));
        }
    }

    /// Keeps `before` as the value of `key` of `db` before an in-place write, if it is watched
    /// and has no probe yet.
    fn probe(&mut self, db: usize, key: &Key, before: Option<&Value>) {
        let Some(before) = before.filter(|_| self.is_watched(db, key)) else {
            return;
        };
        if !self.probes.iter().any(|(d, k, _)| *d == db && k == key) {
            self.probes.push((db, key.clone(), before.clone()));
        }
    }

    /// FLUSHDB / FLUSHALL: notes every watched key of `db` that existed (`old`, the keyspace
    /// before the flush): Redis touches only the watched keys the flush really removes.
    fn flushed(&mut self, db: usize, old: &kayvee_pds::PMap<Key, crate::Entry>) {
        let stale = core::mem::take(&mut self.stale);
        let Some(map) = self.keys.get(db) else {
            return;
        };
        let present: Vec<(usize, Key, bool)> = map
            .keys()
            .filter(|k| old.get(&k[..]).is_some())
            .map(|k| (db, k.clone(), stale.iter().any(|(d, s)| *d == db && s == k)))
            .collect();
        self.touched.extend(present);
        self.stale = stale.into_iter().filter(|(d, _)| *d != db).collect();
    }
}

/// WATCH's consumer of the key event stream (see [`crate::events`]).
pub fn on_key_event(core: &mut Core, db: usize, event: &KeyEvent) {
    let w = &mut core.watches;
    if !w.active() {
        return;
    }
    match event {
        KeyEvent::Modified(k) | KeyEvent::Evicted(k) => w.note(db, k, false),
        KeyEvent::Expired(k) => w.note(db, k, true),
        KeyEvent::Opened(k, before) => w.probe(db, k, before.as_ref()),
        KeyEvent::Flushed(old) => w.flushed(db, old),
        KeyEvent::Created(_) | KeyEvent::Missed(_) => {}
    }
}

/// FLUSHDB / FLUSHALL's part before `db` is emptied: notes its watched keys whose TTL has
/// passed, so that the flush touches them as an expiry (a watcher that saw the key already
/// expired keeps its transaction, as in Redis 7.0).
pub fn before_flush(core: &mut Core, db: usize, now_ms: u64) {
    let w = &mut core.watches;
    let Some(map) = w.keys.get(db) else {
        return;
    };
    let d = &core.dbs[db];
    let stale = map
        .keys()
        .filter(|k| d.expire_at(k).is_some_and(|at| at <= now_ms))
        .map(|k| (db, k.clone()));
    w.stale.extend(stale);
}

/// SWAPDB's part: notes the watched keys of `a` and of `b` that exist in either database
/// (call before the swap; the watch records stay with their database index).
pub fn touch_swap(core: &mut Core, a: usize, b: usize, now_ms: u64) {
    let (w, dbs, per) = (&mut core.watches, &core.dbs, &mut core.txn.per);
    let present = |db: usize, k: &Key| dbs[db].keys.get(&k[..]).is_some();
    let live =
        |db: usize, k: &Key| present(db, k) && dbs[db].expire_at(k).is_none_or(|at| at > now_ms);
    for (this, other) in [(a, b), (b, a)] {
        let Some(map) = w.keys.get(this) else {
            continue;
        };
        for (k, watchers) in map {
            if live(this, k) || live(other, k) {
                w.touched.push((this, k.clone(), false));
            } else if present(this, k) && !present(other, k) {
                // A stale key swapped for nothing: its expiry.
                w.touched.push((this, k.clone(), true));
            } else if present(other, k) {
                // A stale key comes in (for nothing or for another stale key): no logical
                // change for a watcher that saw no live key, which now counts it as expired
                // (EXEC does not abort on it); one that saw it live is dirty.
                for h in watchers {
                    let t = per.entry(*h);
                    match t
                        .watched
                        .iter_mut()
                        .find(|(d, wk, _)| *d == this && wk == k)
                    {
                        Some((_, _, expired)) if *expired || !present(this, k) => {
                            *expired = true;
                        }
                        _ => t.dirty = true,
                    }
                }
            }
        }
    }
}

/// Turns the noted modifications into dirty flags on the watching clients: a noted write
/// always, a probe when the value differs now (or the key is gone). Runs after every command.
pub fn settle(core: &mut Core) {
    let w = &mut core.watches;
    if !w.active() || (w.touched.is_empty() && w.probes.is_empty()) {
        return;
    }
    for (db, k, before) in core::mem::take(&mut w.probes) {
        if core.dbs[db].keys.get(&k[..]).map(|e| &e.value) != Some(&before) {
            w.touched.push((db, k, false));
        }
    }
    for (db, k, by_expiry) in core::mem::take(&mut w.touched) {
        let watchers = w.keys.get(db).and_then(|m| m.get(&k));
        for h in watchers.into_iter().flatten() {
            mark_dirty(core.txn.per.entry(*h), db, &k, by_expiry);
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
    let expired = core.dbs[db].expire_at(key).is_some_and(|at| at <= now_ms);
    let t = core.txn.per.entry(h);
    if t.watched.iter().any(|(d, k, _)| *d == db && k[..] == *key) {
        return;
    }
    let first = t.watched.is_empty();
    t.watched.push((db, Key::from_slice(key), expired));
    let w = &mut core.watches;
    if w.keys.len() <= db {
        w.keys.resize_with(db + 1, Default::default);
    }
    w.keys[db].entry(Key::from_slice(key)).or_default().push(h);
    if first {
        w.clients += 1;
        if w.clients == 1 {
            crate::events::sync(core);
        }
    }
}

/// Forgets every key client `h` watches and its dirty flag (EXEC, DISCARD, UNWATCH, RESET,
/// disconnect).
pub fn unwatch_all(core: &mut Core, h: Handle) {
    if core.txn.of(h).is_none() {
        return;
    }
    let t = core.txn.per.entry(h);
    t.dirty = false;
    if t.watched.is_empty() {
        return;
    }
    let watched = core::mem::take(&mut t.watched);
    let w = &mut core.watches;
    w.clients -= 1;
    for (db, key, _) in watched {
        let Some(map) = w.keys.get_mut(db) else {
            continue;
        };
        if let Some(list) = map.get_mut(&key) {
            list.retain(|x| *x != h);
            if list.is_empty() {
                map.remove(&key);
            }
        }
    }
    if !w.active() {
        // Nothing is watched: forget notes no one will settle, and stop listening.
        (w.touched, w.probes) = Default::default();
        crate::events::sync(core);
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
    use kayvee_pds::SmallBytes;

    fn s(v: &str) -> Value {
        Value::Str(SmallBytes::from_slice(v.as_bytes()))
    }

    fn watching(db: usize, key: &[u8]) -> Watches {
        let mut w = Watches::default();
        w.keys.resize_with(db + 1, Default::default);
        w.keys[db].insert(Key::from_slice(key), alloc::vec![Handle(3)]);
        w.clients = 1;
        w
    }

    #[test]
    fn notes_and_probes_only_watched_keys_once() {
        let mut w = watching(0, b"k");
        let (a, b) = (s("a"), s("b"));
        w.probe(0, &Key::from_slice(b"k"), Some(&a));
        w.probe(0, &Key::from_slice(b"k"), Some(&b));
        w.probe(0, &Key::from_slice(b"x"), Some(&b));
        w.probe(1, &Key::from_slice(b"k"), Some(&b));
        assert_eq!(w.probes.len(), 1);
        assert_eq!(w.probes[0].2, a);
        w.note(0, b"x", false);
        w.note(1, b"k", false);
        assert!(w.touched.is_empty());
        w.note(0, b"k", false);
        assert_eq!(w.touched.len(), 1);
    }

    #[test]
    fn flush_touches_only_present_keys() {
        let mut w = watching(0, b"here");
        w.keys[0].insert(Key::from_slice(b"gone"), alloc::vec![Handle(0)]);
        let mut old = kayvee_pds::PMap::with_seed(1);
        old.insert(Key::from_slice(b"here"), crate::Entry::new(s("v"), 0));
        w.flushed(0, &old);
        assert_eq!(w.touched, alloc::vec![(0, Key::from_slice(b"here"), false)]);
    }
}

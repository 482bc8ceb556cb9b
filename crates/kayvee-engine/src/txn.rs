//! Transactions' engine side: the per-client MULTI queue and WATCH list, the per-database record
//! of watched keys, and the bookkeeping that marks watchers dirty when a watched key is
//! modified. The commands themselves (MULTI, EXEC, DISCARD, WATCH, UNWATCH) are in
//! `crate::cmd::txn`; the queueing of commands while in MULTI and EXEC are in
//! `crate::dispatch`. The functions here take this feature's two tables ([`Transactions`],
//! [`Watches`]) and the databases; the ones that start or stop WATCH listening to key events
//! say so, and their caller re-syncs what the keyspace records (`crate::drain`).
//!
//! How a modification is detected (Redis 7.0.15 semantics, checked against the real server):
//! WATCH listens to the key event stream ([`crate::events`], [`Watches::on_key_event`]). A
//! write through a `Db` method ([`crate::Db::set`], `insert_entry`, `remove`, `set_expire`,
//! `persist`) is a modification of a watched key; a write through `Db::lookup_write` (collections mutated in place) carries the
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
//! client's handle is in [`Watches`]' list for `(db, key)`.

use crate::argv::ArgvBuf;
use crate::client::{Handle, PerClient};
use crate::db::{Db, Key};
use crate::events::KeyEvent;
use crate::value::{Entry, Value};
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

    /// Memory `h`'s transaction state holds, for client eviction: the queued commands'
    /// bytes and slots, and a slot per watched key (the key's bytes are shared with the
    /// watched-keys table or short: Redis too counts only its list nodes here).
    #[inline]
    pub fn memory(&self, h: Handle) -> usize {
        self.per.get(h).map_or(0, |t| {
            t.queued_bytes
                + t.queue.len() * core::mem::size_of::<ArgvBuf>()
                + t.watched.len() * core::mem::size_of::<(usize, Key, bool)>()
        })
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
    /// Watched keys a coming flush finds stale (TTL passed, not yet deleted), noted by
    /// [`before_flush`]: the flush is their expiry, not a change.
    stale: Vec<(usize, Key)>,
    /// Watched keys opened for an in-place write since the last [`settle`], with their value
    /// before.
    probes: Vec<(usize, Key, Value)>,
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
    fn flushed(&mut self, db: usize, old: &kayvee_pds::PMap<Key, Entry>) {
        let Some(map) = self.keys.get(db) else {
            return;
        };
        let stale = core::mem::take(&mut self.stale);
        let present: Vec<(usize, Key, bool)> = map
            .keys()
            .filter(|k| old.get(&k[..]).is_some())
            .map(|k| (db, k.clone(), stale.iter().any(|(d, s)| *d == db && s == k)))
            .collect();
        self.touched.extend(present);
        self.stale = stale.into_iter().filter(|(d, _)| *d != db).collect();
    }
}

impl Watches {
    /// WATCH's consumer of the key event stream (an event of database `db`).
    pub fn on_key_event(&mut self, db: usize, event: &KeyEvent) {
        if !self.active() {
            return;
        }
        match event {
            KeyEvent::Modified(k) | KeyEvent::Evicted(k) => self.note(db, k, false),
            KeyEvent::Expired(k) => self.note(db, k, true),
            KeyEvent::Opened(k, before) => self.probe(db, k, before.as_ref()),
            KeyEvent::Flushed(old) => self.flushed(db, old),
            KeyEvent::Created(_) | KeyEvent::Missed(_) => {}
        }
    }
}

/// FLUSHDB / FLUSHALL's part before `db` is emptied: notes its watched keys whose TTL has
/// passed, so that the flush touches them as an expiry (a watcher that saw the key already
/// expired keeps its transaction, as in Redis 7.0).
pub fn before_flush(w: &mut Watches, dbs: &[Db], db: usize, now_ms: u64) {
    let Some(map) = w.keys.get(db) else {
        return;
    };
    let d = &dbs[db];
    let stale = map
        .keys()
        .filter(|k| d.expire_at(k).is_some_and(|at| at <= now_ms))
        .map(|k| (db, k.clone()));
    w.stale.extend(stale);
}

/// SWAPDB's part (call before the swap; the watch records stay with their database index): a
/// watched key of `a` or `b` live in either database is touched; a stale one swapped for
/// nothing expires; a stale one coming in changes nothing for a watcher that saw no live key
/// (it now counts it as expired, so EXEC does not abort on it), as Redis 7.0 judges.
pub fn touch_swap(
    txns: &mut Transactions,
    w: &mut Watches,
    dbs: &[Db],
    a: usize,
    b: usize,
    now_ms: u64,
) {
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
                for h in watchers {
                    let t = txns.per.entry(*h);
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
#[inline]
pub fn settle(txns: &mut Transactions, w: &mut Watches, dbs: &[Db]) {
    if !w.active() || (w.touched.is_empty() && w.probes.is_empty()) {
        return;
    }
    settle_noted(txns, w, dbs);
}

/// [`settle`] past its test (out of line: the test runs after every command).
#[inline(never)]
fn settle_noted(txns: &mut Transactions, w: &mut Watches, dbs: &[Db]) {
    for (db, k, before) in core::mem::take(&mut w.probes) {
        if dbs[db].keys.get(&k[..]).map(|e| e.value()) != Some(before.view()) {
            w.touched.push((db, k, false));
        }
    }
    for (db, k, by_expiry) in core::mem::take(&mut w.touched) {
        let watchers = w.keys.get(db).and_then(|m| m.get(&k));
        for h in watchers.into_iter().flatten() {
            mark_dirty(txns.per.entry(*h), db, &k, by_expiry);
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
pub fn watched_key_expired(txns: &Transactions, dbs: &[Db], h: Handle, now_ms: u64) -> bool {
    let Some(t) = txns.of(h) else {
        return false;
    };
    t.watched.iter().any(|(db, key, expired)| {
        !expired && dbs[*db].expire_at(key).is_some_and(|at| at <= now_ms)
    })
}

/// WATCH's work for one key: records that client `h` watches `key` of `db` (once), and whether
/// the key had already expired in `dbs` (its TTL passed, not yet deleted). True when WATCH
/// starts listening to key events (the first client watching).
pub fn watch(
    txns: &mut Transactions,
    w: &mut Watches,
    dbs: &[Db],
    h: Handle,
    db: usize,
    key: &[u8],
    now_ms: u64,
) -> bool {
    let expired = dbs[db].expire_at(key).is_some_and(|at| at <= now_ms);
    let t = txns.per.entry(h);
    if t.watched.iter().any(|(d, k, _)| *d == db && k[..] == *key) {
        return false;
    }
    let first = t.watched.is_empty();
    t.watched.push((db, Key::from_slice(key), expired));
    if w.keys.len() <= db {
        w.keys.resize_with(db + 1, Default::default);
    }
    w.keys[db].entry(Key::from_slice(key)).or_default().push(h);
    if first {
        w.clients += 1;
        return w.clients == 1;
    }
    false
}

/// Forgets every key client `h` watches and its dirty flag (EXEC, DISCARD, UNWATCH, RESET,
/// disconnect). True when WATCH stops listening to key events (no client watches any more).
pub fn unwatch_all(txns: &mut Transactions, w: &mut Watches, h: Handle) -> bool {
    if txns.of(h).is_none() {
        return false;
    }
    let t = txns.per.entry(h);
    t.dirty = false;
    if t.watched.is_empty() {
        return false;
    }
    let watched = core::mem::take(&mut t.watched);
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
        return true;
    }
    false
}

/// Leaves MULTI: drops the queue and the error flag and unwatches (EXEC, DISCARD, RESET).
/// True when WATCH stops listening to key events (see [`unwatch_all`]).
pub fn discard(txns: &mut Transactions, w: &mut Watches, h: Handle) -> bool {
    if txns.of(h).is_some() {
        let t = txns.per.entry(h);
        t.multi = false;
        t.queue = Vec::new();
        t.errored = false;
        t.queued_bytes = 0;
    }
    unwatch_all(txns, w, h)
}

/// Forgets client `h` (disconnect): leaves MULTI, unwatches, drops its state. True when WATCH
/// stops listening to key events.
pub fn remove(txns: &mut Transactions, w: &mut Watches, h: Handle) -> bool {
    let stopped = discard(txns, w, h);
    txns.per.take(h);
    stopped
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

/// The commands that run at once inside MULTI instead of being queued, by full name (a
/// subcommand such as `slowlog|reset` is queued).
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
        old.insert(Key::from_slice(b"here"), Entry::new(s("v"), 0));
        w.flushed(0, &old);
        assert_eq!(w.touched, alloc::vec![(0, Key::from_slice(b"here"), false)]);
    }
}

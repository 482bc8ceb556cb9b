//! One numbered database: the keyspace (a persistent hash map from key to [`Entry`]) and the
//! `expires` map (key to absolute unix time in ms), as Redis keeps them.
//!
//! Expiry is lazy on access (every lookup here checks the TTL) plus the active cycle in
//! [`Db::active_expire_step`]. Taking a [`DbSnapshot`] is O(1): two pointer copies.
//!
//! Every change of a key is recorded in the database's event log ([`crate::events`]), the one
//! place WATCH, client tracking, keyspace notifications and propagation learn of it.

use crate::events::{listen, KeyEvent};
use crate::value::{Entry, Meta, Value};
use kayvee_pds::PMap;

pub use crate::value::Key;

/// A database.
#[derive(Clone)]
pub struct Db {
    pub(crate) keys: PMap<Key, Entry>,
    pub(crate) expires: PMap<Key, u64>,
    /// Counters for INFO (keyspace_hits/misses, expired_keys), summed over databases.
    pub(crate) stats: DbStats,
    /// Where the next active-expiry step resumes in `expires` (a [`PMap::scan`] cursor).
    pub(crate) expire_cursor: u64,
    /// Key events since the last drain (see [`crate::events`]).
    pub(crate) events: crate::events::Log,
    /// How lookups record accesses (LRU time, LFU counter), from the configuration (see
    /// [`crate::evict::sync`]).
    pub(crate) touch: crate::touch::Touch,
    /// How a key past its TTL is treated (a replica's rules; set by dispatch per command).
    pub(crate) expiry: Expiry,
    /// A background save to tell before a key changes (see [`crate::save_hook`]).
    pub(crate) save: Option<crate::save_hook::Hook>,
}

/// How a key past its TTL is treated, as Redis's `expireIfNeeded`: a primary deletes it
/// (and propagates `DEL`); a replica's clients do not see it but it stays until its
/// primary's `DEL` arrives (a write lookup still deletes it, on a writable replica); the
/// replica's primary (the master client) sees it as it is, since its commands were valid on
/// the primary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expiry {
    /// A primary.
    #[default]
    Delete,
    /// A replica's client.
    Hide,
    /// A replica's primary.
    Keep,
}

/// Counters a database keeps for INFO.
#[derive(Clone, Copy, Debug, Default)]
pub struct DbStats {
    /// Lookups that found the key.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Keys deleted because their TTL passed (lazily or actively).
    pub expired: u64,
}

/// An immutable, O(1) snapshot of one database.
#[derive(Clone)]
pub struct DbSnapshot {
    /// Key to entry.
    pub keys: PMap<Key, Entry>,
    /// Key to absolute expiry time (unix ms).
    pub expires: PMap<Key, u64>,
}

impl Db {
    /// An empty database; `seed` keys the hash function.
    pub fn new(seed: u64) -> Self {
        Db {
            keys: PMap::with_seed(seed),
            expires: PMap::with_seed(seed),
            stats: DbStats::default(),
            expire_cursor: 0,
            events: Default::default(),
            touch: Default::default(),
            expiry: Expiry::Delete,
            save: None,
        }
    }

    /// Installs (None: removes) a background save's hook; `index` is this
    /// database's index in the save's snapshot (see [`crate::save_hook`]).
    pub fn set_save_hook(
        &mut self,
        index: usize,
        to: Option<alloc::sync::Arc<dyn crate::save_hook::SaveHook>>,
    ) {
        self.save = to.map(|to| crate::save_hook::Hook { db: index, to });
    }

    /// Tells a background save, if one listens, that `key` is about to change.
    #[inline]
    fn before_change(&self, key: &[u8]) {
        if let Some(hook) = &self.save {
            hook.to.before_write(hook.db, key, self.view());
        }
    }

    /// Tells a background save, if one listens, that this database is about to be emptied or
    /// replaced whole (see [`crate::save_hook`]): whoever replaces a database calls it first.
    pub fn replacing(&self) {
        if let Some(hook) = &self.save {
            hook.to.before_replace(hook.db, self.view());
        }
    }

    /// The database as it is: what a background save's hook and walk read.
    pub fn view(&self) -> crate::save_hook::DbView<'_> {
        crate::save_hook::DbView {
            keys: &self.keys,
            expires: &self.expires,
        }
    }

    /// Number of keys (expired but not yet reclaimed ones included, as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// An O(1) snapshot.
    pub fn snapshot(&self) -> DbSnapshot {
        DbSnapshot {
            keys: self.keys.clone(),
            expires: self.expires.clone(),
        }
    }

    /// The key's absolute expiry time in unix ms, if it has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<u64> {
        self.expires.get(key).copied()
    }

    /// Whether the key is past its TTL and must be treated as absent (see [`Expiry`]):
    /// deleted first on a primary, left in place on a replica.
    pub fn expire_if_needed(&mut self, key: &[u8], now_ms: u64) -> bool {
        match self.expires.get(key) {
            Some(&at) if at <= now_ms => match self.expiry {
                Expiry::Delete => self.expire_now(key),
                Expiry::Hide => true,
                Expiry::Keep => false,
            },
            _ => false,
        }
    }

    /// [`Db::expire_if_needed`] for a write: a replica's own client deletes the key too.
    fn expire_for_write(&mut self, key: &[u8], now_ms: u64) -> bool {
        match self.expires.get(key) {
            Some(&at) if at <= now_ms && self.expiry != Expiry::Keep => self.expire_now(key),
            _ => false,
        }
    }

    /// Deletes `key` if its TTL passed, whoever looks (a writable replica expiring the keys
    /// its own clients gave a TTL); whether it did.
    pub fn expire_own(&mut self, key: &[u8], now_ms: u64) -> bool {
        match self.expires.get(key) {
            Some(&at) if at <= now_ms => self.expire_now(key),
            _ => false,
        }
    }

    /// Deletes an expired key; true.
    fn expire_now(&mut self, key: &[u8]) -> bool {
        self.before_change(key);
        self.keys.remove(key);
        self.expires.remove(key);
        self.stats.expired += 1;
        self.events.key(listen::EXPIRED, key, KeyEvent::Expired);
        true
    }

    /// Whether the key exists (not expired), without counting a hit or touching it.
    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.peek(key, now_ms).is_some()
    }

    /// Reads a key without updating access time or hit counters (TYPE-like internal reads).
    pub fn peek(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        if !self.expires.is_empty() && self.expire_if_needed(key, now_ms) {
            return None;
        }
        self.keys.get(key)
    }

    /// A read lookup, as Redis's `lookupKeyRead`: expires lazily, counts a hit or a miss
    /// (INFO keyspace_hits/misses), and records the access time.
    pub fn lookup_read(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        if !self.expires.is_empty() && self.expire_if_needed(key, now_ms) {
            return self.missed(key);
        }
        // The access time is written only when its second changed (and the LFU counter only
        // when it moves): most reads write nothing, and a read copies no node a snapshot
        // shares within the same second. The touch changes no saved field: a background
        // save is not told.
        let clock = crate::value::lru_clock(now_ms);
        let found = if self.touch.lfu {
            let (touch, r) = (self.touch, self.touch.draw());
            self.keys.get_touch(
                key,
                |e: &Entry| touch.accessed(e.meta(), now_ms, r) != e.meta(),
                |e| *e.meta_mut() = touch.accessed(e.meta(), now_ms, r),
            )
        } else {
            self.keys.get_touch(
                key,
                |e: &Entry| e.meta().clock() != clock,
                |e| e.meta_mut().set_clock(clock),
            )
        };
        match found {
            Some(_) => self.stats.hits += 1,
            None => {
                self.stats.misses += 1;
                self.events.key(listen::MISSED, key, KeyEvent::Missed);
            }
        }
        found
    }

    /// A write lookup, as Redis's `lookupKeyWrite`: expires lazily and records the access, but
    /// counts no hit or miss; gives mutable access (copying only the shared nodes on the path,
    /// when a snapshot holds them).
    pub fn lookup_write(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        if !self.expires.is_empty() {
            self.expire_for_write(key, now_ms);
        }
        let r = if self.touch.lfu {
            self.touch.draw()
        } else {
            0.0
        };
        self.before_change(key);
        let e = self.keys.get_mut(key)?;
        if self.touch.lfu {
            *e.meta_mut() = self.touch.accessed(e.meta(), now_ms, r);
        } else {
            e.meta_mut().set_clock(crate::value::lru_clock(now_ms));
        }
        let before = self
            .events
            .wants(listen::OPENED_VALUE)
            .then(|| e.to_value());
        self.events.record(listen::OPENED, || {
            KeyEvent::Opened(Key::from_slice(key), before)
        });
        Some(e)
    }

    /// Stores `value` under `key`, replacing any value. The TTL is removed unless `keep_ttl`.
    /// One hash-trie operation on the common path (the old value had no TTL).
    pub fn set(&mut self, key: &[u8], value: Value, now_ms: u64, keep_ttl: bool) {
        let entry = self.new_entry(value, now_ms);
        self.set_new(key, entry, now_ms, keep_ttl);
    }

    /// [`Db::set`] of a string value, built straight into its entry (SET's path: no
    /// intermediate [`Value`]).
    pub fn set_str(&mut self, key: &[u8], bytes: &[u8], now_ms: u64, keep_ttl: bool) {
        let entry = Entry::from_str_bytes(bytes, self.touch.fresh(now_ms));
        self.set_new(key, entry, now_ms, keep_ttl);
    }

    /// The body of [`Db::set`]: stores a new key's `entry`, keeping the old LFU counter.
    #[inline]
    fn set_new(&mut self, key: &[u8], entry: Entry, now_ms: u64, keep_ttl: bool) {
        self.modified(key);
        let old = self.keys.insert(Key::from_slice(key), entry);
        if let Some(hook) = &self.save {
            // The save learns of the change after it, with the old value the insert found.
            let ttl = match &old {
                Some(e) if e.meta().has(Meta::HAS_EXPIRE) => self.expires.get(key).copied(),
                _ => None,
            };
            hook.to
                .replaced(hook.db, key, old.as_ref(), ttl, self.view());
        }
        let Some(old) = old else {
            self.events.key(listen::CREATED, key, KeyEvent::Created);
            return;
        };
        if self.touch.lfu {
            // Redis's `setKey` looks the key up for writing (one access) and `dbOverwrite`
            // keeps its LFU counter.
            let (touch, r) = (self.touch, self.touch.draw());
            let counted = touch.accessed(old.meta(), now_ms, r);
            if let Some(e) = self.keys.get_mut(key) {
                e.meta_mut().set_clock(counted.clock());
            }
        }
        if !old.meta().has(Meta::HAS_EXPIRE) {
            return;
        }
        // An old value past its TTL had expired: it is counted and logged as such, and the
        // new value is a new key (without that TTL even under KEEPTTL), as in Redis.
        let expired =
            self.expiry != Expiry::Keep && self.expires.get(key).is_some_and(|&at| at <= now_ms);
        if expired {
            self.stats.expired += 1;
            self.events.key(listen::EXPIRED, key, KeyEvent::Expired);
            self.events.key(listen::CREATED, key, KeyEvent::Created);
        }
        if keep_ttl && !expired {
            if let Some(e) = self.keys.get_mut(key) {
                e.meta_mut().set_flag(Meta::HAS_EXPIRE, true);
            }
        } else {
            self.expires.remove(key);
        }
    }

    /// A new key's entry holding `value`, its clock stamped for this database's
    /// `maxmemory-policy` (as Redis's `createObject`).
    pub fn new_entry(&self, value: Value, now_ms: u64) -> Entry {
        Entry::with_meta(value, self.touch.fresh(now_ms))
    }

    /// Inserts an entry as is (its HAS_EXPIRE flag is recomputed) and sets or clears the TTL.
    pub fn insert_entry(&mut self, key: &[u8], mut entry: Entry, expire_at_ms: Option<u64>) {
        self.modified(key);
        self.before_change(key);
        entry
            .meta_mut()
            .set_flag(Meta::HAS_EXPIRE, expire_at_ms.is_some());
        match expire_at_ms {
            Some(at) => {
                self.expires.insert(Key::from_slice(key), at);
            }
            None => {
                self.expires.remove(key);
            }
        }
        if self.keys.insert(Key::from_slice(key), entry).is_none() {
            self.events.key(listen::CREATED, key, KeyEvent::Created);
        }
    }

    /// Deletes a key; returns the entry and its TTL if it existed (expired keys count as absent).
    pub fn remove(&mut self, key: &[u8], now_ms: u64) -> Option<(Entry, Option<u64>)> {
        self.remove_as(key, now_ms, listen::MODIFIED, KeyEvent::Modified)
    }

    /// Deletes a key for `maxmemory` ([`crate::evict`]): [`Db::remove`] recorded as an eviction.
    pub fn evict(&mut self, key: &[u8], now_ms: u64) -> Option<(Entry, Option<u64>)> {
        self.remove_as(key, now_ms, listen::EVICTED, KeyEvent::Evicted)
    }

    /// [`Db::remove`], recording the deletion as an event of `kind`.
    fn remove_as(
        &mut self,
        key: &[u8],
        now_ms: u64,
        kind: u8,
        make: fn(Key) -> KeyEvent,
    ) -> Option<(Entry, Option<u64>)> {
        if !self.expires.is_empty() && self.expire_for_write(key, now_ms) {
            return None;
        }
        self.before_change(key);
        let (_, entry) = self.keys.remove(key)?;
        self.events.key(kind, key, make);
        let ttl = if entry.meta().has(Meta::HAS_EXPIRE) {
            self.expires.remove(key).map(|(_, at)| at)
        } else {
            None
        };
        Some((entry, ttl))
    }

    /// Stores a command's result (SINTERSTORE, ZUNIONSTORE, SORT STORE, BITOP...) without a
    /// TTL, as Redis's `setKey`: an old value past its TTL is expired first (so the result is a
    /// new key, for keyspace notifications).
    pub fn store_result(&mut self, key: &[u8], entry: Entry, now_ms: u64) {
        if !self.expires.is_empty() {
            self.expire_for_write(key, now_ms);
        }
        self.insert_entry(key, entry, None);
    }

    /// Deletes a key even when its TTL has passed, without expiring it first, as Redis's
    /// `dbDelete` (what a store command with an empty result does); returns whether it existed.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        self.before_change(key);
        let Some((_, entry)) = self.keys.remove(key) else {
            return false;
        };
        self.modified(key);
        if entry.meta().has(Meta::HAS_EXPIRE) {
            self.expires.remove(key);
        }
        true
    }

    /// Sets the absolute expiry time of an existing key; returns false when the key is absent.
    pub fn set_expire(&mut self, key: &[u8], at_ms: u64) -> bool {
        self.before_change(key);
        let Some(e) = self.keys.get_mut(key) else {
            return false;
        };
        e.meta_mut().set_flag(Meta::HAS_EXPIRE, true);
        self.expires.insert(Key::from_slice(key), at_ms);
        self.modified(key);
        true
    }

    /// Removes the TTL of a key; returns whether there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        self.before_change(key);
        let Some(e) = self.keys.get_mut(key) else {
            return false;
        };
        if !e.meta().has(Meta::HAS_EXPIRE) {
            return false;
        }
        e.meta_mut().set_flag(Meta::HAS_EXPIRE, false);
        self.expires.remove(key);
        self.modified(key);
        true
    }

    /// Drops every key (O(1): the old version is freed when no snapshot holds it).
    pub fn clear(&mut self) {
        self.replacing();
        if self.events.wants(listen::FLUSHED) {
            let old = self.keys.clone();
            self.events
                .record(listen::FLUSHED, || KeyEvent::Flushed(old));
        }
        self.keys.clear();
        self.expires.clear();
    }

    /// Records that a command modified `key` (Redis's `signalModifiedKey`). The write methods
    /// here call it; a handler calls it itself when an in-place write may leave an equal value
    /// that Redis still counts as a modification (HSET, LSET of the same value).
    #[inline]
    pub fn modified(&mut self, key: &[u8]) {
        self.events.key(listen::MODIFIED, key, KeyEvent::Modified);
    }

    /// A read lookup that leaves the access time alone (Redis's `LOOKUP_NOTOUCH`, as EXISTS,
    /// TYPE, TTL and OBJECT use): expires lazily and counts a hit or a miss.
    pub fn lookup_notouch(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        if !self.expires.is_empty() && self.expire_if_needed(key, now_ms) {
            return self.missed(key);
        }
        let found = self.keys.get(key);
        match found {
            Some(_) => self.stats.hits += 1,
            None => {
                self.stats.misses += 1;
                self.events.key(listen::MISSED, key, KeyEvent::Missed);
            }
        }
        found
    }

    /// A random live key (RANDOMKEY). Expired keys drawn on the way are deleted and the draw is
    /// repeated, so the answer is `None` only when no live key is left.
    pub fn random_key(&mut self, now_ms: u64, rnd: &mut impl FnMut() -> u64) -> Option<Key> {
        // A replica deletes nothing: when every key it draws is logically expired it answers
        // one of them after a while, as Redis does.
        let mut tries = 0;
        loop {
            let key = self.keys.random(rnd())?.0.clone();
            tries += 1;
            let hidden_max = self.expiry == Expiry::Hide && tries >= 100;
            if self.expires.is_empty() || !self.expire_if_needed(&key, now_ms) || hidden_max {
                return Some(key);
            }
        }
    }

    /// Counts a miss for `key`; None.
    fn missed<T>(&mut self, key: &[u8]) -> Option<T> {
        self.stats.misses += 1;
        self.events.key(listen::MISSED, key, KeyEvent::Missed);
        None
    }

    /// One SCAN step: visits keys from `cursor` in hash order (at least `count` of them, see
    /// [`PMap::scan`]) and returns the next cursor (0 = done) and the visited keys that pass
    /// `filter` and have not expired. Expired keys that pass `filter` are deleted, as Redis's
    /// SCAN and KEYS do.
    pub fn scan(
        &mut self,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut filter: impl FnMut(&[u8]) -> bool,
    ) -> (u64, alloc::vec::Vec<Key>) {
        let mut found = alloc::vec::Vec::new();
        let next = self.keys.scan(cursor, count, |k, _| {
            if filter(k) {
                found.push(k.clone());
            }
        });
        if !self.expires.is_empty() {
            found.retain(|k| !self.expire_if_needed(k, now_ms));
        }
        (next, found)
    }

    /// Every live key passing `filter` (KEYS). Expired keys are skipped but, as in Redis 7.0's
    /// KEYS, not deleted.
    pub fn keys_matching(
        &self,
        now_ms: u64,
        mut filter: impl FnMut(&[u8]) -> bool,
    ) -> alloc::vec::Vec<Key> {
        self.keys
            .iter()
            .filter(|(k, _)| {
                filter(k) && !matches!(self.expires.get(&k[..]), Some(&at) if at <= now_ms)
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// One step of active expiry that walks `expires` in hash order from where the last step
    /// stopped (as Redis 7 walks its buckets): checks at least `count` keys with a TTL and
    /// deletes the expired ones. Returns (checked, expired). Unlike random sampling, repeated
    /// steps reach every key, so a small database is fully cleaned by one cycle.
    pub fn active_expire_step(&mut self, now_ms: u64, count: usize) -> (usize, usize) {
        let mut checked = 0;
        let mut due = alloc::vec::Vec::new();
        self.expire_cursor = self.expires.scan(self.expire_cursor, count, |k, &at| {
            checked += 1;
            if at <= now_ms {
                due.push(k.clone());
            }
        });
        for k in due.iter() {
            self.before_change(&k[..]);
            self.keys.remove(&k[..]);
            self.expires.remove(&k[..]);
            self.events
                .record(listen::EXPIRED, || KeyEvent::Expired(k.clone()));
        }
        self.stats.expired += due.len() as u64;
        (checked, due.len())
    }

    /// Panics when keyspace and expires disagree (every TTL belongs to a key flagged HAS_EXPIRE).
    pub fn check_invariants(&self) {
        self.keys.check_invariants();
        self.expires.check_invariants();
        for (k, _) in self.expires.iter() {
            let e = self.keys.get(&k[..]).expect("TTL for a missing key");
            assert!(e.meta().has(Meta::HAS_EXPIRE), "TTL without flag");
        }
        let flagged = self
            .keys
            .iter()
            .filter(|(_, e)| e.meta().has(Meta::HAS_EXPIRE))
            .count();
        assert_eq!(flagged, self.expires.len(), "flag without TTL");
    }
}

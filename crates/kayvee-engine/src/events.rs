//! Key events: the one stream of "this key changed" facts the keyspace records (the role of
//! Redis's `signalModifiedKey`, `signalFlushedDb` and the keyspace-level notifications).
//!
//! Each database (`crate::db::Db`) records events in its [`Log`] as its methods change keys: a
//! write ([`KeyEvent::Modified`]), an in-place write opened by `lookup_write`
//! ([`KeyEvent::Opened`]), a key created, expired (lazily or by the active cycle), evicted,
//! missed by a read, a flush. The keyspace knows nothing of the features: it records only the
//! kinds some feature listens to (the mask [`Log::set_listen`] sets), so with no listener a
//! write costs one test.
//!
//! This module is the stream's type only. Which kinds are recorded and the one place that
//! hands the events to the features (WATCH, client tracking, keyspace notifications,
//! propagation) are [`crate::drain`]'s, above the features.

use crate::value::{Entry, Key, Value};
use alloc::vec::Vec;
use kayvee_pds::PMap;

/// One fact about a key of a database, as the keyspace records it.
#[derive(Clone)]
pub enum KeyEvent {
    /// The key was written or deleted by a command (Redis's `signalModifiedKey`).
    Modified(Key),
    /// A command opened the key's value for an in-place write (`lookup_write`): a modification
    /// when the value differs afterwards. Holds the value before, when a listener asked for it
    /// ([`listen::OPENED_VALUE`]).
    Opened(Key, Option<Value>),
    /// The key was created (it did not exist, or had expired).
    Created(Key),
    /// The key was deleted because its TTL passed (lazily or by the active cycle).
    Expired(Key),
    /// The key was deleted for `maxmemory`.
    Evicted(Key),
    /// A read lookup did not find the key (a keyspace miss).
    Missed(Key),
    /// The database was emptied (FLUSHDB, FLUSHALL); holds the keyspace as it was (an O(1)
    /// snapshot) for consumers that must know which keys existed.
    Flushed(PMap<Key, Entry>),
}

/// The event kinds, as bits of a listening mask.
pub mod listen {
    /// [`super::KeyEvent::Modified`].
    pub const MODIFIED: u8 = 1 << 0;
    /// [`super::KeyEvent::Opened`].
    pub const OPENED: u8 = 1 << 1;
    /// [`super::KeyEvent::Opened`] with the value before the write (WATCH, while a client
    /// watches a key). It costs a clone per in-place write: a copy for a string, O(1) for a
    /// collection (a persistent structure), whose write then copies the nodes on its path.
    pub const OPENED_VALUE: u8 = 1 << 2;
    /// [`super::KeyEvent::Created`].
    pub const CREATED: u8 = 1 << 3;
    /// [`super::KeyEvent::Expired`].
    pub const EXPIRED: u8 = 1 << 4;
    /// [`super::KeyEvent::Evicted`].
    pub const EVICTED: u8 = 1 << 5;
    /// [`super::KeyEvent::Missed`].
    pub const MISSED: u8 = 1 << 6;
    /// [`super::KeyEvent::Flushed`].
    pub const FLUSHED: u8 = 1 << 7;
    /// What a feature that must see every change of a key listens to (WATCH, tracking).
    pub const CHANGES: u8 = MODIFIED | OPENED | EXPIRED | EVICTED | FLUSHED;
}

/// A database's event log: the events recorded since the last drain, and which kinds to
/// record at all.
#[derive(Clone, Default)]
pub struct Log {
    /// Bits of [`listen`]: the kinds some consumer wants (see [`Log::set_listen`]).
    listen: u8,
    /// In order.
    entries: Vec<KeyEvent>,
}

impl Log {
    /// Whether events of `kind` (a [`listen`] bit) are recorded.
    #[inline]
    pub fn wants(&self, kind: u8) -> bool {
        self.listen & kind != 0
    }

    /// Records `event` (of `kind`) if it is wanted; `event` is built only then.
    #[inline]
    pub(crate) fn record(&mut self, kind: u8, event: impl FnOnce() -> KeyEvent) {
        if self.wants(kind) {
            self.entries.push(event());
        }
    }

    /// Records a key event of `kind` on `key`.
    #[inline]
    pub(crate) fn key(&mut self, kind: u8, key: &[u8], make: fn(Key) -> KeyEvent) {
        if self.wants(kind) {
            self.entries.push(make(Key::from_slice(key)));
        }
    }

    /// Drops the keyspace miss just recorded for `key`: Redis's `LOOKUP_NONOTIFY`, for the
    /// lookups that count a miss but send no event (OBJECT).
    pub(crate) fn forget_miss(&mut self, key: &[u8]) {
        if matches!(self.entries.last(), Some(KeyEvent::Missed(k)) if &k[..] == key) {
            self.entries.pop();
        }
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of events waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The kinds recorded (bits of [`listen`]).
    #[inline]
    pub fn listening(&self) -> u8 {
        self.listen
    }

    /// Records the kinds `mask` (bits of [`listen`]) from now on; with none, the waiting
    /// events are dropped.
    pub fn set_listen(&mut self, mask: u8) {
        self.listen = mask;
        if mask == 0 {
            self.entries.clear();
        }
    }

    /// Takes the waiting events, in order (the drain).
    pub fn take(&mut self) -> Vec<KeyEvent> {
        core::mem::take(&mut self.entries)
    }

    /// Gives back the drained buffer `entries` (emptied) to keep its allocation, unless an event
    /// was recorded meanwhile.
    pub fn give_back(&mut self, mut entries: Vec<KeyEvent>) {
        if self.entries.is_empty() {
            entries.clear();
            self.entries = entries;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use kayvee_pds::SmallBytes;

    fn s(v: &str) -> Value {
        Value::Str(SmallBytes::from_slice(v.as_bytes()))
    }

    /// The recorded events as `kind:key` words.
    fn words(db: &Db) -> Vec<alloc::string::String> {
        let word = |kind: &str, k: &[u8]| {
            alloc::format!("{kind}:{}", alloc::string::String::from_utf8_lossy(k))
        };
        db.events
            .entries
            .iter()
            .map(|e| match e {
                KeyEvent::Modified(k) => word("modified", k),
                KeyEvent::Opened(k, before) => word(
                    if before.is_some() {
                        "opened="
                    } else {
                        "opened"
                    },
                    k,
                ),
                KeyEvent::Created(k) => word("created", k),
                KeyEvent::Expired(k) => word("expired", k),
                KeyEvent::Evicted(k) => word("evicted", k),
                KeyEvent::Missed(k) => word("missed", k),
                KeyEvent::Flushed(old) => alloc::format!("flushed:{}", old.len()),
            })
            .collect()
    }

    #[test]
    fn nothing_is_recorded_without_a_listener() {
        let mut db = Db::new(1);
        db.set(b"k", s("v"), 0, false);
        db.lookup_write(b"k", 0);
        db.lookup_read(b"nothere", 0);
        db.clear();
        assert!(db.events.is_empty());
    }

    #[test]
    fn changes_are_recorded_in_order_as_listened_to() {
        let mut db = Db::new(1);
        db.events.listen = listen::CHANGES | listen::CREATED;
        db.set(b"k", s("v"), 0, false);
        db.set(b"k", s("w"), 0, false);
        db.lookup_write(b"k", 0);
        db.set_expire(b"k", 10);
        db.lookup_read(b"k", 20);
        db.lookup_read(b"nothere", 20);
        db.set(b"a", s("v"), 20, false);
        db.evict(b"a", 20);
        db.set(b"b", s("v"), 20, false);
        db.clear();
        let want = [
            "modified:k",
            "created:k",
            "modified:k",
            "opened:k",
            "modified:k",
            "expired:k",
            "modified:a",
            "created:a",
            "evicted:a",
            "modified:b",
            "created:b",
            "flushed:1",
        ];
        assert_eq!(words(&db), want);
    }

    #[test]
    fn watch_gets_the_value_before_an_in_place_write_and_misses_can_be_forgotten() {
        let mut db = Db::new(1);
        db.set(b"k", s("v"), 0, false);
        db.events.listen = listen::OPENED | listen::OPENED_VALUE | listen::MISSED;
        db.lookup_write(b"k", 0);
        db.lookup_read(b"x", 0);
        db.events.forget_miss(b"y");
        assert_eq!(words(&db), ["opened=:k", "missed:x"]);
        db.events.forget_miss(b"x");
        assert_eq!(words(&db), ["opened=:k"]);
    }
}

//! A background save's undo log: the save walks the live keyspace instead of a snapshot, and
//! the keyspace tells it before it changes a key, so the save can keep the key's value as it
//! was at the save's start (an O(1) clone of a persistent value) when its walk has not passed
//! that key yet. With no snapshot holding the trie, a write changes its nodes in place: it
//! copies no node, and the save's extra memory is the old values of the keys changed ahead of
//! its walk. Unlike a snapshot's copy-on-write (or writing a copied part out at once), the
//! cost of a write is the same whatever the save's pace, so the save can be paced slowly.
//!
//! The engine only calls the hook; the save (the shell's RDB writer) keeps the old values and
//! the walk's position. Each `Db` holds the hook with the save's index of its
//! database. A database emptied or replaced whole (FLUSHDB, FLUSHALL, SWAPDB, a load) is
//! handed to the hook first, as it is: the save then walks that version (one pointer copy, a
//! snapshot of that one database) with the old values it kept. With no save installed a write
//! pays one branch.

use crate::value::{Entry, Key};
use alloc::sync::Arc;
use kayvee_pds::PMap;

/// A database as it is when the hook is called: its keyspace and its TTLs.
#[derive(Clone, Copy)]
pub struct DbView<'a> {
    pub keys: &'a PMap<Key, Entry>,
    pub expires: &'a PMap<Key, u64>,
}

/// What a background save does before the keyspace changes. Shared (a database may be built
/// or loaded on another thread, so the hook is `Send + Sync`): the implementor locks its
/// writer, uncontended on the engine's thread.
pub trait SaveHook: Send + Sync {
    /// Database `index` (the save's index of it), now `db`, is about to change `key`
    /// (written, deleted, expired, its TTL changed, or opened for an in-place write).
    fn before_write(&self, index: usize, key: &[u8], db: DbView<'_>);
    /// Database `index`, now `db`, stored a new value for `key` in place of `old` (None: the
    /// key was new), whose TTL was `ttl`: `before_write` with the old value at hand (SET's
    /// path, which finds it anyway).
    fn replaced(
        &self,
        index: usize,
        key: &[u8],
        old: Option<&Entry>,
        ttl: Option<u64>,
        db: DbView<'_>,
    );
    /// Database `index`, now `db`, is about to be emptied or replaced whole.
    fn before_replace(&self, index: usize, db: DbView<'_>);
}

/// The hook as a database holds it.
#[derive(Clone)]
pub(crate) struct Hook {
    /// The save's index of the database.
    pub db: usize,
    pub to: Arc<dyn SaveHook>,
}

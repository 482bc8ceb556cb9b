//! A background save's write-ahead: the keyspace tells the save, before it changes a key, so
//! the save can write the snapshot's part holding that key out first and let go of it
//! (`PMap::detach_around`). The write then finds its trie nodes unshared and changes them in
//! place: no node is copied and no old value is kept for the save, so the save's extra memory
//! no longer grows with the writes it serves, however slowly it is paced.
//!
//! The engine only calls the hook; the save (the shell's RDB writer) owns the snapshot and the
//! bytes. Each [`crate::db::Db`] holds the hook with the snapshot's index of its database
//! (SWAPDB moves it with the database). With no save installed a write pays one branch.

use alloc::sync::Arc;

/// What a background save does before the keyspace changes a key. Shared (a database may be
/// built or loaded on another thread, so the hook is `Send + Sync`): the implementor locks its
/// writer, uncontended on the engine's thread.
pub trait WriteAhead: Send + Sync {
    /// Database `db` of the snapshot (by its index when the snapshot was taken) is about to
    /// change `key` (written, deleted, expired, or opened for an in-place write).
    fn before_write(&self, db: usize, key: &[u8]);
}

/// The hook as a database holds it.
#[derive(Clone)]
pub(crate) struct Hook {
    /// The snapshot's index of the database.
    pub db: usize,
    pub to: Arc<dyn WriteAhead>,
}

impl Hook {
    #[inline]
    pub fn before_write(&self, key: &[u8]) {
        self.to.before_write(self.db, key);
    }
}

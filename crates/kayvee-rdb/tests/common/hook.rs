//! The save hook as a shell builds it for a writer of the live databases: the writer behind
//! a lock (shared by the live-writer tests and the writer's benchmark).

use kayvee_engine::save_hook::{DbView, SaveHook};
use kayvee_engine::value::Entry;
use kayvee_rdb::RdbWriter;
use std::sync::Mutex;

/// The writer behind a lock.
pub struct Hook(pub Mutex<RdbWriter>);

impl SaveHook for Hook {
    fn before_write(&self, index: usize, key: &[u8], db: DbView<'_>) {
        self.0.lock().unwrap().before_write(index, key, db);
    }
    fn replaced(
        &self,
        index: usize,
        key: &[u8],
        old: Option<&Entry>,
        ttl: Option<u64>,
        db: DbView<'_>,
    ) {
        self.0.lock().unwrap().replaced(index, key, old, ttl, db);
    }
    fn before_replace(&self, index: usize, db: DbView<'_>) {
        self.0.lock().unwrap().before_replace(index, db);
    }
}

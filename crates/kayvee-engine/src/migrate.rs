//! MIGRATE's state between its two halves, and the cache of links to target instances.
//!
//! MIGRATE needs a connection to another server, which only a shell can open: the command
//! builds the bytes to send (AUTH, SELECT, one `RESTORE` per key, as Redis's `migrateCommand`)
//! and leaves an [`crate::Outcome::Migrate`] with a [`crate::outcome::MigrateJob`]; the shell sends them,
//! reads the replies and hands them back, and the engine finishes the command (deletes the keys
//! the target acknowledged, replies). Between the halves the client's [`Pending`] waits here.
//!
//! Redis keeps the connection to each target (`host:port`) for 10 seconds after its last use
//! (`migrate_cached_sockets` in INFO) and remembers the database it last selected there, so a
//! SELECT is sent only when it changes. The engine keeps that bookkeeping ([`Links`]); the shell
//! keeps the sockets and closes those whose name [`Links::names`] no longer lists.

use crate::client::Handle;
use crate::value::Key;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// How long a cached link lives after its last use (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
pub const LINK_TTL_MS: u64 = 10_000;

/// Most links kept (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`): a new one evicts a random other.
pub const LINKS_MAX: usize = 64;

/// The MIGRATE half waiting for the shell.
#[derive(Clone, Debug)]
pub struct Pending {
    /// The link's name.
    pub name: String,
    /// The target database.
    pub db: usize,
    /// The keys sent, in order (one RESTORE reply each).
    pub keys: Vec<Key>,
    /// COPY: keep the local keys.
    pub copy: bool,
    /// An AUTH reply comes first.
    pub auth: bool,
    /// A SELECT reply comes next.
    pub select: bool,
}

/// One cached link.
#[derive(Clone, Copy, Debug)]
struct Link {
    /// The database the last successful MIGRATE selected there (None: unknown).
    db: Option<usize>,
    /// Unix ms of its last use.
    last_use_ms: u64,
}

/// The cached links and the pending halves.
#[derive(Default)]
pub struct Links {
    links: BTreeMap<String, Link>,
    pending: BTreeMap<Handle, Pending>,
    /// The job the last MIGRATE handed the shell ([`crate::outcome::Outcome::Migrate`]).
    pub job: Option<crate::outcome::MigrateJob>,
}

impl Links {
    /// The database last selected on link `name`, if it is cached and known.
    pub fn selected(&self, name: &str) -> Option<usize> {
        self.links.get(name).and_then(|l| l.db)
    }

    /// Notes a use of link `name` (cached from now on), evicting another at the cap.
    pub fn touch(&mut self, name: &str, now_ms: u64, victim: u64) {
        if let Some(l) = self.links.get_mut(name) {
            l.last_use_ms = now_ms;
            return;
        }
        if self.links.len() >= LINKS_MAX {
            let drop = self.links.keys().nth(victim as usize % LINKS_MAX).cloned();
            drop.map(|k| self.links.remove(&k));
        }
        let link = Link {
            db: None,
            last_use_ms: now_ms,
        };
        self.links.insert(name.into(), link);
    }

    /// The target answered: `db` is selected on link `name` (None: unknown after an error).
    pub fn set_selected(&mut self, name: &str, db: Option<usize>) {
        if let Some(l) = self.links.get_mut(name) {
            l.db = db;
        }
    }

    /// Forgets link `name` (an I/O error closed it).
    pub fn close(&mut self, name: &str) {
        self.links.remove(name);
    }

    /// Forgets the links idle for [`LINK_TTL_MS`] (the cron).
    pub fn expire(&mut self, now_ms: u64) {
        self.links
            .retain(|_, l| now_ms.saturating_sub(l.last_use_ms) <= LINK_TTL_MS);
    }

    /// The cached links' names: the shell keeps a socket for each, and only those.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.links.keys().map(String::as_str)
    }

    /// How many links are cached (INFO `migrate_cached_sockets`).
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether no link is cached.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Client `h`'s MIGRATE waits for the shell.
    pub fn wait(&mut self, h: Handle, p: Pending) {
        self.pending.insert(h, p);
    }

    /// Client `h`'s waiting half, taken.
    pub fn take(&mut self, h: Handle) -> Option<Pending> {
        self.pending.remove(&h)
    }

    /// Forgets client `h` (disconnected).
    pub fn remove(&mut self, h: Handle) {
        self.pending.remove(&h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_expire_after_their_ttl() {
        let mut l = Links::default();
        l.touch("a:1", 1000, 0);
        l.set_selected("a:1", Some(9));
        assert_eq!(l.selected("a:1"), Some(9));
        l.expire(1000 + LINK_TTL_MS);
        assert_eq!(l.len(), 1);
        l.expire(1001 + LINK_TTL_MS);
        assert!(l.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut l = Links::default();
        for i in 0..LINKS_MAX + 5 {
            l.touch(&alloc::format!("h:{i}"), 0, i as u64);
        }
        assert_eq!(l.len(), LINKS_MAX);
    }
}

//! The Xenstore store: Xen's configuration database as a persistent trie, with OXenstored's
//! transaction coalescing (the OXenstored paper; docs/misc/xenstore.txt; ground truth in the
//! project's xenstore-protocol notes), watches, permissions, quotas and domains.
//!
//! Sans-IO: [`Xenstored::handle`] takes a connection id, a transaction id, a parsed [`Op`] and
//! the time ([`Now`]), returns a [`Reply`], and queues [`WatchEvent`]s. Bytes are the
//! `kayvee-xswire` codec's business, sockets the daemon's. This crate knows nothing of Redis:
//! it depends on `kayvee-pds` only.
//!
//! Architecture invariant: a node that more than one version holds is never mutated; an
//! update copies every shared node on the path from the root to the changed node (path
//! copying) and changes in place only the nodes no other version holds (reference count 1,
//! invisible to every snapshot). So an unchanged subtree is the same `Arc` in every version
//! that holds it, and a snapshot never changes. Commits rely on that pointer equality.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod control;
pub mod domain;
pub mod error;
pub mod exec;
pub mod node;
pub mod op;
pub mod path;
pub mod perms;
pub mod store;
pub mod txn;
pub mod watch;
pub mod xenstored;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;

pub use error::XsError;
pub use op::{Op, Reply};
pub use store::{Actor, Quota, Store};
pub use txn::ConflictPolicy;
pub use xenstored::{
    ConnId, DomainChange, LogLine, Severity, WatchEvent, Xenstored, XsConfig, XsStats,
};

/// The current time, passed into every call that needs it: the store reads no clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Now {
    /// Unix time in milliseconds.
    pub unix_ms: u64,
}

impl Now {
    /// From unix milliseconds.
    pub fn from_ms(ms: u64) -> Self {
        Now { unix_ms: ms }
    }
    /// Unix time in milliseconds.
    pub fn ms(self) -> u64 {
        self.unix_ms
    }
    /// Unix time in whole seconds.
    pub fn secs(self) -> u64 {
        self.unix_ms / 1000
    }
}

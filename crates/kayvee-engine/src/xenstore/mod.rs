//! The Xenstore face of the engine: Xen's configuration database as a persistent trie, with
//! OXenstored's transaction coalescing (the OXenstored paper; docs/misc/xenstore.txt;
//! ground truth in the project's xenstore-protocol notes).
//!
//! Sans-IO like the rest of the engine: [`Xenstored::handle`] takes a connection id, a
//! transaction id, a parsed [`Op`] and the time, returns a [`Reply`], and queues
//! [`WatchEvent`]s. Bytes are the `kayvee-xswire` codec's business, sockets the daemon's.
//!
//! Architecture invariant: a [`store::Store`] version is never mutated in place; every update
//! path-copies from the changed node to the root, so an unchanged subtree is the same `Arc`
//! in every version that holds it. Commits rely on that pointer equality.

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
pub use xenstored::{ConnId, LogLine, Severity, WatchEvent, Xenstored, XsConfig, XsStats};

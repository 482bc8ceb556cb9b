//! Persistent (immutable, structurally shared) data structures for the Kayvee engine.
//!
//! Every structure here has the same contract:
//! - `clone()` is O(1): it copies one pointer and bumps one reference count. A clone is a
//!   *snapshot*: later writes to either copy never show through to the other.
//! - A write to a node that no snapshot shares mutates that node in place (no copy on the common
//!   path); a write to a shared node copies only the path from the root to that node.
//! - `check_invariants()` verifies the structure's internal invariants; tests and fuzzers call it.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod bytelist;
pub mod bytes;
pub mod list;
pub mod map;
mod map_traits;
pub mod ordset;

pub use bytelist::PByteList;
pub use bytes::SmallBytes;
pub use list::PList;
pub use map::PMap;
pub use ordset::POrdSet;

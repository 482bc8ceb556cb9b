//! The Redis connection layer every Kayvee shell drives: everything between a socket and
//! [`kayvee_engine::Engine::execute`], as a sans-IO state machine.
//!
//! A shell (kayvee-server's epoll loop, the unikernel's smoltcp loop, the transcript runner)
//! owns sockets, readiness, threads, files and idling. It hands the [`Driver`] the bytes it
//! read ([`Driver::receive`]), and takes back the bytes to write ([`Driver::take_dirty`],
//! [`Driver::flush`]), the connections to close, the requests only it can carry out
//! ([`Request`]: shutdown, save, config rewrite, ACL file) and the time of the next deadline
//! ([`Driver::poll_at`]), as smoltcp's `Interface::poll`/`poll_at` do for a network stack.
//!
//! The driver owns, once for every shell:
//! - each connection's input buffer and RESP decoder, with `proto-max-bulk-len` and
//!   `client-query-buffer-limit` read from the live configuration;
//! - decode -> execute -> [`kayvee_engine::Outcome`], with per-command timing (SLOWLOG,
//!   INFO commandstats) through the shell's [`Clock`];
//! - delivery of pub/sub messages, keyspace notifications, tracking invalidations, MONITOR
//!   lines and blocked clients' wakeups, to a fixpoint and in one order, and the resumption of a
//!   woken client's pipelined input;
//! - output buffering, `client-output-buffer-limit` and the high-water mark above which a
//!   connection's further commands wait ([`OUTPUT_PAUSE`]) while its peer reads (a peer that
//!   takes no output for 100 ms may be blocked writing its pipeline to us: the mark is lifted
//!   for it until its output drains, so neither side waits for the other);
//! - client eviction (`maxmemory-clients`, `CLIENT NO-EVICT`): each client's memory (its
//!   buffers and what the engine holds for it), the total, and the closing of the biggest
//!   clients while the total is above the limit (the pause mark is off meanwhile, as Redis
//!   has none);
//! - the cron at `hz` (engine cron, idle `timeout`, idle buffers, CLIENT LIST's I/O fields) and
//!   blocked clients' deadlines;
//! - the adaptive busy-poll policy ([`BusyPoll`]) the shells consult before they sleep.
//!
//! Architecture invariant: `no_std` + alloc, no `unsafe`, no clock: time comes from the
//! shell's [`Clock`].
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod busy;
mod clock;
mod driver;
mod filesync;
pub mod link;
mod master;
mod replicas;
mod session;
mod upstream;
mod wait;

pub use busy::BusyPoll;
pub use clock::BusyIo;
pub use driver::{Answer, Clock, Driver, Flushed, Notice, Polled, Request};
pub use replicas::SyncFile;
pub use session::{INPUT_INITIAL, OUTPUT_PAUSE, REPLY_BUFFER};

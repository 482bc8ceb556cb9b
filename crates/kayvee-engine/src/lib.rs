//! The Kayvee engine: a sans-IO state machine holding the databases and running commands.
//!
//! Arguments and the current time come in ([`Engine::execute`]); replies go out through a
//! [`ReplySink`] and requests to the shell come back as an [`Outcome`]. The engine reads no clock,
//! opens no socket or file and draws no randomness of its own: the shell passes time in, and the
//! seed at construction. The same engine runs in the Linux server and in the unikernel.
//!
//! This file holds only module declarations and the re-exports that make the public API
//! (`kayvee_engine::Engine`, `Now`, `Cx`...): the engine is [`engine`], one command's run is
//! [`dispatch`], a handler's context is [`cx`]. Keep it so: `cargo xtask circles` resolves a
//! re-export to the module that defines the name and counts the crate root as no module.
//!
//! The modules form layers, each naming only the ones below it (ARCHITECTURE.md has what each
//! owns): the foundations (values, arguments, replies, configuration, the command metadata in
//! [`command`]...); the per-connection basics ([`client`], [`outbox`]) and the keyspace
//! ([`db`], with the key event stream's type in [`events`] and the access stamps in
//! [`touch`]); the features, each on its own state ([`txn`], [`tracking`], [`notify`],
//! [`pubsub`], [`blocking`], [`pause`], [`monitor`], [`acl`], [`aof`], [`persist`],
//! [`evict`], [`expire`]); and on top [`cx`], [`drain`], the commands with their handler table
//! ([`cmd`]), [`dispatch`] and [`engine`].
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod acl;
pub mod aof;
pub mod argv;
pub mod blocking;
pub mod client;
pub mod cmd;
pub mod command;
mod command_docs;
pub mod config;
pub mod cx;
pub mod db;
pub mod debug;
pub mod dispatch;
pub mod drain;
pub mod engine;
pub mod error;
pub mod events;
pub mod evict;
pub mod expire;
pub mod geohash;
pub mod hll;
pub mod host;
pub mod keyspec;
pub mod latency;
pub mod migrate;
pub mod monitor;
pub mod notify;
pub mod outbox;
pub mod outcome;
pub mod pause;
pub mod persist;
pub mod pubsub;
pub mod repl;
pub mod reply;
pub mod rng;
pub mod save_hook;
pub mod save_progress;
#[cfg(feature = "scripting")]
pub mod script;
pub mod script_wait;
pub mod shutdown;
pub mod slowlog;
pub mod stats;
pub mod time;
pub mod touch;
pub mod tracking;
pub mod txn;
pub mod util;
pub mod value;

pub use argv::{Argv, ArgvBuf};
pub use client::{Client, ClientTable, ConnInfo, Handle, Transport};
pub use cmd::spec::CommandSpec;
pub use command::{CommandId, CommandInfo, CommandTable};
pub use config::Config;
pub use cx::{Core, Cx};
pub use db::{Db, DbSnapshot};
pub use engine::{Engine, Snapshot};
pub use error::{CmdResult, Error};
pub use host::HostInfo;
pub use outcome::Outcome;
pub use reply::{Discard, Protocol, Reply, ReplySink, ReplyTree};
pub use rng::Rng;
pub use script_wait::{Answered, Busy, ScriptWait};
pub use shutdown::{ShutdownFlags, ShutdownSignal};
pub use stats::Stats;
pub use time::Now;
pub use value::{Entry, Value, ValueMut, ValueRef};

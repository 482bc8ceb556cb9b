//! Command implementations, one module per group. Each module exports `COMMANDS`, its slice of
//! the command table; [`GROUPS`] lists them all.
//!
//! A big group is a directory split by concept (`string/`, `list/`, `hash/`, `set/`, `zset/`,
//! `keys/`): its `mod.rs` holds the group's table and the helpers its files share, and the
//! sibling files never import each other (`cargo xtask circles` checks it). Helpers several
//! groups share live in modules that import no command module: `coll` (SCAN-family and
//! random-count arguments, sampling), `double` (C `strtod` and `%.17g`, for scores and SORT),
//! `long_double` (x87 extended precision, for INCRBYFLOAT and HINCRBYFLOAT), `block` (the
//! blocking commands' timeout and wait), `notify` (a command's keyspace notifications).
//!
//! The commands are the top of the engine's layers (ARCHITECTURE.md): handlers take a
//! [`crate::Cx`] and may reach every table of `Core` and the glue in [`crate::drain`]. The row
//! type of the tables, [`spec::CommandSpec`] (with the handler), and the handlers by command id
//! ([`spec::Commands`]) are in `spec`; the metadata every layer reads is [`crate::command`].

use spec::CommandSpec;

pub mod acl;
pub mod aof;
pub mod bitfield;
pub mod bits;
pub mod block;
pub mod client;
pub mod cluster;
pub(crate) mod coll;
pub mod config_cmd;
pub mod connection;
pub mod debug;
pub mod double;
pub mod expire;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod info;
pub mod introspect;
pub mod keys;
pub mod latency;
pub mod list;
pub mod lolwut;
pub(crate) mod long_double;
pub mod memory;
pub mod migrate;
pub mod monitor;
#[cfg(not(feature = "scripting"))]
pub mod no_script;
pub mod notify;
pub mod persist;
pub mod pubsub;
pub mod repl;
#[cfg(feature = "scripting")]
pub mod script;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod spec;
pub mod stream;
pub mod string;
pub mod txn;
pub mod zset;

/// Every group's table, joined by [`spec::Commands::new`].
pub const GROUPS: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    client::COMMANDS,
    info::COMMANDS,
    server::COMMANDS,
    config_cmd::COMMANDS,
    aof::COMMANDS,
    introspect::COMMANDS,
    string::COMMANDS,
    bits::COMMANDS,
    bitfield::COMMANDS,
    hll::COMMANDS,
    keys::COMMANDS,
    expire::COMMANDS,
    list::COMMANDS,
    zset::COMMANDS,
    geo::COMMANDS,
    stream::COMMANDS,
    sort::COMMANDS,
    hash::COMMANDS,
    set::COMMANDS,
    txn::COMMANDS,
    pubsub::COMMANDS,
    persist::COMMANDS,
    repl::COMMANDS,
    memory::COMMANDS,
    migrate::COMMANDS,
    slowlog::COMMANDS,
    lolwut::COMMANDS,
    latency::COMMANDS,
    acl::COMMANDS,
    monitor::COMMANDS,
    cluster::COMMANDS,
    #[cfg(feature = "scripting")]
    script::COMMANDS,
    #[cfg(not(feature = "scripting"))]
    no_script::COMMANDS,
];

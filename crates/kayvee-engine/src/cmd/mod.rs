//! Command implementations, one module per group. Each module exports `COMMANDS`, its slice of
//! the command table; [`GROUPS`] lists them all.

use crate::command::CommandSpec;

pub mod bits;
pub mod connection;
pub mod expire;
pub mod keys;
pub mod server;
pub mod string;
pub(crate) mod string_ld;
pub(crate) mod string_num;
pub(crate) mod string_opts;

/// Every group's table, joined by [`crate::CommandTable::new`].
pub const GROUPS: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    string::COMMANDS,
    bits::COMMANDS,
    keys::COMMANDS,
    expire::COMMANDS,
];

//! The shutdown sequence's states, as in Redis 7.0: a signal asks for a shutdown that the cron
//! starts ([`crate::Engine::ask_shutdown`]); a shutdown with lagging replicas first waits up to
//! `shutdown-timeout` seconds for them (writes held, `REPLCONF GETACK *` sent, SHUTDOWN's
//! clients blocked) and goes on once every replica acknowledged the whole stream or the time is
//! up; SHUTDOWN ABORT cancels either. The shell carries out only the final save and exit. The
//! steps are in [`crate::cmd::server`].

use crate::client::Handle;
use alloc::vec::Vec;

/// The signal that asked for a shutdown ([`crate::Engine::ask_shutdown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGTERM: `shutdown-on-sigterm` decides the save.
    Term,
    /// SIGINT: `shutdown-on-sigint` decides the save.
    Int,
}

/// How a shutdown ends: SHUTDOWN's options, or `shutdown-on-sigterm` / `shutdown-on-sigint`'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownFlags {
    /// `Some(true)` = SAVE, `Some(false)` = NOSAVE, `None` = per the configured save points.
    pub save: Option<bool>,
    /// FORCE: the server exits even when saving the RDB fails or the first AOF rewrite still
    /// runs (Redis 7.0 refuses to exit then without it).
    pub force: bool,
}

/// The reply of the clients whose SHUTDOWN did not happen (aborted, or the save failed).
pub const FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// A shutdown waiting for lagging replicas.
#[derive(Clone, Debug, Default)]
pub struct ShutdownWait {
    /// When the wait ends whatever the replicas acknowledged (unix ms).
    pub deadline_ms: u64,
    /// The save choice and FORCE the shutdown goes on with.
    pub flags: ShutdownFlags,
    /// The clients blocked in SHUTDOWN meanwhile.
    pub waiters: Vec<Handle>,
}

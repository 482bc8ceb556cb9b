//! The shutdown sequence's states (see [`crate::Engine::ask_shutdown`]).

/// The signal that asked for a shutdown ([`crate::Engine::ask_shutdown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGTERM: `shutdown-on-sigterm` decides the save.
    Term,
    /// SIGINT: `shutdown-on-sigint` decides the save.
    Int,
}

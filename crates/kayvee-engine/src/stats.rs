//! Counters for INFO: commands, connections, errors, per-command call statistics.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// Per command (or subcommand) counters, `cmdstat_<name>` in INFO.
#[derive(Clone, Copy, Debug, Default)]
pub struct CmdStat {
    /// Successful and failed calls.
    pub calls: u64,
    /// Total microseconds spent (measured by the shell).
    pub usec: u64,
    /// Calls refused before running (arity, auth...).
    pub rejected_calls: u64,
    /// Calls that ran and replied with an error.
    pub failed_calls: u64,
}

/// Server-wide counters.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Commands run.
    pub total_commands_processed: u64,
    /// Connections accepted.
    pub total_connections_received: u64,
    /// Connections refused (maxclients).
    pub rejected_connections: u64,
    /// Bytes read from clients.
    pub total_net_input_bytes: u64,
    /// Bytes written to clients.
    pub total_net_output_bytes: u64,
    /// Error replies sent.
    pub total_error_replies: u64,
    /// Per-command counters, indexed by `CommandId`.
    pub commands: Vec<CmdStat>,
    /// Error replies by their code (`ERR`, `WRONGTYPE`...), `errorstat_<code>` in INFO.
    pub errors: BTreeMap<String, u64>,
    /// Changes to the dataset since the last save (Redis's `server.dirty`): write commands add
    /// the number of keys they changed; INFO reports it as `rdb_changes_since_last_save`.
    pub dirty: u64,
    /// Keys evicted (maxmemory).
    pub evicted_keys: u64,
    /// Unix ms when these counters were last reset (CONFIG RESETSTAT) or the server started.
    pub reset_ms: u64,
}

impl Stats {
    /// Records one error reply by its code (the text up to the first space).
    pub fn count_error(&mut self, text: &str) {
        self.total_error_replies += 1;
        let code = text.split(' ').next().unwrap_or("ERR");
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(code.into(), 1);
            }
        }
    }
}

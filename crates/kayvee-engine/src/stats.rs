//! Counters for INFO: commands, connections, errors, per-command call statistics; and the
//! sending of an error reply, which counts it.

use crate::error::Error;
use crate::reply::ReplySink;
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
    /// Background jobs started on a snapshot (BGSAVE, AOF rewrites, full syncs): INFO's
    /// `total_forks`, Redis's count of the child processes it forks for the same jobs.
    pub total_forks: u64,
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
    /// Reply buffers the cron shrank after their peak fell (INFO's `reply_buffer_shrinks`).
    pub reply_buffer_shrinks: u64,
    /// Reply buffers the cron grew after they filled (INFO's `reply_buffer_expands`).
    pub reply_buffer_expands: u64,
    /// Per-command counters, indexed by `CommandId`.
    pub commands: Vec<CmdStat>,
    /// Error replies by their code (`ERR`, `WRONGTYPE`...), `errorstat_<code>` in INFO.
    pub errors: BTreeMap<String, u64>,
    /// Changes to the dataset since the last save (Redis's `server.dirty`): write commands add
    /// the number of keys they changed; INFO reports it as `rdb_changes_since_last_save`.
    pub dirty: u64,
    /// Keys evicted (maxmemory).
    pub evicted_keys: u64,
    /// Connections closed by client eviction (`maxmemory-clients`; the shell's connection
    /// layer evicts and counts).
    pub evicted_clients: u64,
    /// Values freed as Redis would free them on its lazy-free thread (`lazyfreed_objects`):
    /// UNLINK's (and DEL's under `lazyfree-lazy-user-del`) of a [`free_effort`] above
    /// [`LAZYFREE_THRESHOLD`], and every key of an asynchronous FLUSHDB / FLUSHALL. Kayvee
    /// frees them at once, so `lazyfree_pending_objects` is always 0.
    ///
    /// [`free_effort`]: crate::value::usage::free_effort
    /// [`LAZYFREE_THRESHOLD`]: crate::value::usage::LAZYFREE_THRESHOLD
    pub lazyfreed_objects: u64,
    /// Unix ms when these counters were last reset (CONFIG RESETSTAT) or the server started.
    pub reset_ms: u64,
    /// `instantaneous_ops_per_sec`: commands per second over the last samples.
    pub inst_ops: InstMetric,
    /// `instantaneous_input_kbps`: bytes read per second.
    pub inst_input: InstMetric,
    /// `instantaneous_output_kbps`: bytes written per second.
    pub inst_output: InstMetric,
}

/// Samples an `INFO` `instantaneous_*` figure keeps, one per [`SAMPLE_PERIOD_MS`].
const METRIC_SAMPLES: usize = 16;
/// How often the cron samples them (Redis: every 100 ms of its serverCron).
pub const SAMPLE_PERIOD_MS: u64 = 100;

/// A rate averaged over the last [`METRIC_SAMPLES`] samples of a growing counter, as Redis
/// computes its `instantaneous_*` INFO fields.
#[derive(Clone, Debug, Default)]
pub struct InstMetric {
    samples: [u64; METRIC_SAMPLES],
    next: usize,
    last_ms: u64,
    last_count: u64,
}

impl InstMetric {
    /// Records the rate of `count` since the previous sample (the first call only sets the base).
    pub fn sample(&mut self, now_ms: u64, count: u64) {
        if self.last_ms != 0 {
            let elapsed = now_ms.saturating_sub(self.last_ms);
            let delta = count.saturating_sub(self.last_count);
            self.samples[self.next] = match elapsed {
                0 => 0,
                t => delta.saturating_mul(1000) / t,
            };
            self.next = (self.next + 1) % METRIC_SAMPLES;
        }
        self.last_ms = now_ms.max(1);
        self.last_count = count;
    }

    /// The mean of the samples, per second (missing samples count as 0, as in Redis).
    pub fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / METRIC_SAMPLES as u64
    }
}

impl Stats {
    /// Samples the `instantaneous_*` rates when [`SAMPLE_PERIOD_MS`] has passed since the last
    /// sample; the engine's cron calls it.
    pub fn sample_metrics(&mut self, now_ms: u64) {
        if now_ms < self.inst_ops.last_ms.saturating_add(SAMPLE_PERIOD_MS) {
            return;
        }
        self.inst_ops.sample(now_ms, self.total_commands_processed);
        self.inst_input.sample(now_ms, self.total_net_input_bytes);
        self.inst_output.sample(now_ms, self.total_net_output_bytes);
    }

    /// Records one error reply by its code, as Redis 7.0 reads it: the text up to its first
    /// space when that is among the first 31 bytes, else `ERR`.
    pub fn count_error(&mut self, text: &str) {
        self.total_error_replies += 1;
        let code = match text.bytes().take(31).position(|b| b == b' ') {
            Some(end) => &text[..end],
            None => "ERR",
        };
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(code.into(), 1);
            }
        }
    }
}

/// Counts an error reply and sends it (raw bytes for [`Error::Bytes`], text otherwise).
pub fn send_error(stats: &mut Stats, e: &Error, out: &mut dyn ReplySink) {
    match e {
        Error::Bytes(b) => {
            stats.count_error(&String::from_utf8_lossy(b));
            out.error_bytes(b);
        }
        e => {
            let text = alloc::format!("{e}");
            stats.count_error(&text);
            out.error(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instantaneous_rates_average_the_last_sixteen_samples() {
        let mut st = Stats::default();
        st.sample_metrics(1_000);
        assert_eq!(st.inst_ops.per_sec(), 0);
        // 50 commands and 10 KiB in each 100 ms: 500/s, 100 KiB/s once 16 samples are in.
        for i in 1..=16u64 {
            st.total_commands_processed += 50;
            st.total_net_input_bytes += 10 * 1024;
            st.sample_metrics(1_000 + i * 100);
            if i == 8 {
                assert_eq!(st.inst_ops.per_sec(), 250, "half the samples in");
            }
        }
        assert_eq!(st.inst_ops.per_sec(), 500);
        assert_eq!(st.inst_input.per_sec(), 100 * 1024);
        assert_eq!(st.inst_output.per_sec(), 0);
        // Too soon for another sample: nothing changes.
        st.total_commands_processed += 1_000;
        st.sample_metrics(2_650);
        assert_eq!(st.inst_ops.per_sec(), 500);
        // The next sample takes the burst in; then idle samples bring the rate down to 0.
        st.sample_metrics(2_700);
        assert_eq!(st.inst_ops.per_sec(), (15 * 500 + 10_000) / 16);
        for i in 1..=16u64 {
            st.sample_metrics(2_700 + i * 100);
        }
        assert_eq!(st.inst_ops.per_sec(), 0);
    }
}

//! Persistence state the engine keeps for SAVE, BGSAVE, LASTSAVE, save points, INFO
//! persistence and MISCONF, and the seam to the value codec DUMP and RESTORE use.
//!
//! The engine writes no file: SAVE and BGSAVE answer with [`crate::Outcome::Save`], the shell
//! takes an O(1) [`crate::Snapshot`], serialises it (on a thread for BGSAVE) and reports the
//! end with [`crate::Engine::save_finished`]. The RDB format lives in the `kayvee-rdb` crate,
//! which depends on this one; it reaches DUMP and RESTORE through [`ValueCodec`], installed by
//! the shell with [`crate::Engine::set_codec`].

use crate::value::{Value, ValueRef};
use alloc::string::String;
use alloc::vec::Vec;

/// Seconds a failed background save waits before a save point may retry it, as Redis's
/// `CONFIG_BGSAVE_RETRY_DELAY`.
pub const BGSAVE_RETRY_DELAY_MS: u64 = 5_000;

/// The error write commands (and PING) get while the last background save failed, with
/// `stop-writes-on-bgsave-error yes` and save points configured (Redis 7.0.15's text).
pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently \
unable to persist to disk. Commands that may modify the data set are disabled, because this \
instance is configured to report errors during writes if RDB snapshotting fails \
(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Why a DUMP payload was refused by RESTORE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// Too short, a newer RDB version, or a wrong CRC-64.
    VersionOrChecksum,
    /// The checksum matched (or was not checked) but the object inside does not parse.
    BadFormat,
    /// The object parses but fails a structure check (duplicate members, wrong counts, bad
    /// lengths inside a compact encoding...): answered as `BadFormat`, and the text (Redis's,
    /// such as "Hash listpack integrity check failed.") goes to the log at warning level.
    Integrity(&'static str),
    /// A hash listpack with a field twice, read without deep sanitization: Redis meets the
    /// duplicate converting the listpack and logs its hex dump ("listpack with dup elements
    /// dump") before it panics; Kayvee logs the same dump ([`hex_dump`]) and answers
    /// `BadFormat`.
    ListpackDups(Vec<u8>),
}

/// Redis's `serverLogHexDump`: the line `<what> (hexdump of <n> bytes):`, then the bytes in
/// lowercase hex, 32 a line.
pub fn hex_dump(what: &str, bytes: &[u8]) -> Vec<String> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut lines = alloc::vec![alloc::format!("{what} (hexdump of {} bytes):", bytes.len())];
    for chunk in bytes.chunks(32) {
        let line = chunk
            .iter()
            .flat_map(|&b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
            .map(char::from)
            .collect();
        lines.push(line);
    }
    lines
}

/// Serialises single values as DUMP payloads (RDB object, RDB version, CRC-64) and back.
pub trait ValueCodec: Send + Sync {
    /// The DUMP payload of `value`; `compress` is `rdbcompression` (LZF for long strings).
    fn dump(&self, value: ValueRef<'_>, compress: bool) -> Vec<u8>;
    /// The value in a DUMP payload; `seed` keys the hash maps of collections;
    /// `skip_checksum` (DEBUG SET-SKIP-CHECKSUM-VALIDATION 1) leaves the CRC-64 unchecked
    /// (the version still is); without `deep` (`sanitize-dump-payload` not asking for it), a
    /// stream whose nodes pass only the header checks is kept as [`Stream::corrupt`].
    ///
    /// [`Stream::corrupt`]: crate::value::Stream::corrupt
    fn restore(
        &self,
        payload: &[u8],
        seed: u64,
        skip_checksum: bool,
        deep: bool,
    ) -> Result<Value, RestoreError>;
    /// FUNCTION DUMP's payload of the libraries `codes` (their RDB function records, the RDB
    /// version, the CRC-64). A codec without it gives an empty payload.
    fn dump_functions(&self, codes: &[Vec<u8>], compress: bool) -> Vec<u8> {
        let _ = (codes, compress);
        Vec::new()
    }
    /// The libraries' code in a FUNCTION RESTORE payload, or Redis's error text (without the
    /// `ERR ` prefix).
    fn restore_functions(&self, payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
        let _ = payload;
        Err("DUMP payload version or checksum are wrong")
    }
}

/// What the engine remembers about saves (Redis's `server.lastsave`, `rdb_child_pid`...).
#[derive(Default)]
pub struct Persistence {
    /// DUMP / RESTORE's codec (None: those commands answer an error).
    pub codec: Option<&'static dyn ValueCodec>,
    /// The shell's log, `log(level, message)` with Redis's levels (0 debug .. 3 warning), for
    /// RESTORE's integrity-check reports (None: they go nowhere).
    pub log: Option<fn(u8, &[u8])>,
    /// Unix ms of the last successful save (or of the start / load).
    pub last_save_ms: u64,
    /// Unix ms at which the running background save started.
    pub bgsave_started_ms: Option<u64>,
    /// BGSAVE SCHEDULE asked for a save once the running one ends.
    pub bgsave_scheduled: bool,
    /// Whether the last background save failed.
    pub last_bgsave_failed: bool,
    /// Duration of the last background save in seconds (-1 = none yet).
    pub last_bgsave_time_s: i64,
    /// Unix ms of the last background save attempt (for the retry delay).
    pub last_bgsave_try_ms: u64,
    /// Saves started (INFO `rdb_saves`).
    pub saves: u64,
    /// `stats.dirty` when the running save started: what a success subtracts.
    pub dirty_at_start: u64,
    /// Keys the last load read, and the expired ones it dropped.
    pub last_load_keys_loaded: u64,
    /// Expired keys the last load dropped.
    pub last_load_keys_expired: u64,
    /// The startup load under way, while the shell reads the file and clients may connect,
    /// or a replica's load of its primary's payload as it comes (`repl-diskless-load`).
    pub loading: Option<Loading>,
    /// Why the shell must stop the running background save: FLUSHALL, or a save for replicas
    /// none of which waits for it any more (Redis kills its child: the save ends without
    /// counting as failed). Read with [`crate::Engine::take_bgsave_abort_reason`].
    pub abort_bgsave: Option<&'static str>,
    /// A replica's `swapdb` load of a payload from its own primary runs while the old data
    /// stays readable (INFO `async_loading`); only `no-async-loading` commands are refused.
    pub async_loading: bool,
    /// Per database, the sizes Redis's keyspace and expires tables had when the running
    /// background save or rewrite started: Redis grows no table while its child runs (unless
    /// one holds over five entries a slot), which DEBUG HTSTATS reports.
    pub child_tables: alloc::vec::Vec<[u64; 2]>,
}

/// Progress of a startup load (INFO's `loading_*` fields).
#[derive(Clone, Debug, Default)]
pub struct Loading {
    /// Unix ms when it started.
    pub start_ms: u64,
    /// Size of the file.
    pub total_bytes: u64,
    /// `used-mem` recorded in the file's header (0 if unknown).
    pub rdb_used_mem: u64,
    /// Bytes read so far.
    pub loaded_bytes: u64,
    /// The payload of a full sync from the primary, not a file: the link's end ends it.
    pub from_primary: bool,
}

/// The error for commands that may not run during a load.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";

impl Persistence {
    /// Fresh state at startup: the last save is "now", as Redis sets `lastsave` at boot.
    pub fn new(now_ms: u64) -> Self {
        Persistence {
            last_save_ms: now_ms,
            last_bgsave_time_s: -1,
            ..Default::default()
        }
    }

    /// Whether a background save runs.
    pub fn bgsave_in_progress(&self) -> bool {
        self.bgsave_started_ms.is_some()
    }
}

/// Whether Redis would hold this value in its big encoding (`hashtable`, `skiplist`) after
/// loading it: more entries or longer elements than the listpack / intset limits allow.
/// The limits are the configured ones (`hash-max-listpack-*`, `set-max-intset-entries`,
/// `zset-max-listpack-*`), as Redis applies them when it loads a key.
pub fn loads_big(value: &Value, config: &crate::Config) -> bool {
    match value {
        Value::Str(_) | Value::List(_) | Value::Stream(_) => false,
        Value::Hash(h) => {
            let max = config.hash_max_listpack_value as usize;
            h.len() as u64 > config.hash_max_listpack_entries
                || h.iter().any(|(f, v)| f.len() > max || v.len() > max)
        }
        Value::Set(s) => {
            s.len() as u64 > config.set_max_intset_entries
                || s.iter().any(|m| crate::util::parse_i64(&m).is_none())
        }
        Value::ZSet(z) => {
            z.len() as u64 > config.zset_max_listpack_entries
                || z.iter()
                    .any(|e| e.1.len() as u64 > config.zset_max_listpack_value)
        }
    }
}

/// Whether one of the `save` points asks for a background save now, as Redis's cron checks
/// them: enough changes, enough time since the last save, and no failure in the last
/// [`BGSAVE_RETRY_DELAY_MS`].
pub fn save_point_due(points: &[(i64, i64)], p: &Persistence, dirty: u64, now_ms: u64) -> bool {
    let since_ms = now_ms.saturating_sub(p.last_save_ms);
    let retry_ok = !p.last_bgsave_failed
        || now_ms.saturating_sub(p.last_bgsave_try_ms) > BGSAVE_RETRY_DELAY_MS;
    retry_ok
        && points.iter().any(|&(secs, changes)| {
            dirty >= changes.max(0) as u64 && since_ms > secs.max(0) as u64 * 1000
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_points_need_changes_time_and_retry_delay() {
        let mut p = Persistence::new(1_000_000);
        let points = [(3600, 1), (60, 100)];
        assert!(!save_point_due(&points, &p, 0, 1_000_000 + 4_000_000));
        assert!(save_point_due(&points, &p, 1, 1_000_000 + 3_601_000));
        assert!(!save_point_due(&points, &p, 99, 1_000_000 + 61_000));
        assert!(save_point_due(&points, &p, 100, 1_000_000 + 61_000));
        p.last_bgsave_failed = true;
        p.last_bgsave_try_ms = 1_058_000;
        assert!(!save_point_due(&points, &p, 100, 1_061_000));
        assert!(save_point_due(&points, &p, 100, 1_063_001));
        assert!(!save_point_due(&[], &p, 1000, 9_000_000));
    }
}

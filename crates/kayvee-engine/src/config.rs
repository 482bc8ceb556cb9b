//! Server configuration: every parameter Kayvee honours, with Redis 7.0's names, defaults, value
//! syntax and error texts. The config file ([`Config::apply_file`]), the command line
//! ([`Config::apply`]), `CONFIG SET` ([`Config::set_many`]), `CONFIG GET` ([`Config::get_matching`])
//! and `CONFIG REWRITE` ([`Config::rewrite`]) all go through one parameter table ([`all`]:
//! [`table::PARAMS`], then the rest of Redis 7.0's in [`extra::PARAMS`]), so validation and
//! texts are shared.

pub mod extra;
pub mod keyspace_events;
pub mod proc_title;
pub mod rewrite;
pub mod syntax;
pub mod table;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// `busy-poll-us` by default: long enough to bridge the gaps between the requests of
/// concurrent clients, short enough that an idle server sleeps at once.
pub const DEFAULT_BUSY_POLL_US: u32 = 50;

/// `repl-sync-share` by default: no limit. A paced sync keeps more of a busy primary's write
/// rate but lasts longer, and the snapshot holds the values written meanwhile for longer
/// (docs/decisions.md has the figures), so the trade is the user's to make.
pub const DEFAULT_REPL_SYNC_SHARE: u32 = 100;

/// The configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP port (0 = no TCP).
    pub port: u16,
    /// Addresses to listen on.
    pub bind: Vec<String>,
    /// Unix socket path (empty = none).
    pub unixsocket: String,
    /// Unix socket permissions (octal in the file).
    pub unixsocketperm: u32,
    /// `requirepass` (None = no password).
    pub requirepass: Option<SmallBytes>,
    /// `aclfile`: the ACL file ACL LOAD / SAVE use (empty = none).
    pub aclfile: String,
    /// The `user` lines of the config file (rules after `user`), applied at startup.
    pub users: Vec<String>,
    /// The `rename-command old new` lines, in lower case, applied to the command table at
    /// startup: `old` answers to `new` only (to nothing when `new` is empty). A chain
    /// (`a b`, then `b c`) is kept as one rename (`a c`).
    pub rename_commands: Vec<(String, String)>,
    /// `replicaof host port` (`slaveof`) in the file or on the command line: the primary to
    /// follow from the start.
    pub replicaof: Option<(String, u16)>,
    /// Number of databases.
    pub databases: usize,
    /// Maximum connected clients.
    pub maxclients: u64,
    /// Close idle clients after this many seconds (0 = never).
    pub timeout_s: u64,
    /// TCP keepalive interval in seconds (0 = off).
    pub tcp_keepalive_s: u64,
    /// debug, verbose, notice, warning, nothing.
    pub loglevel: String,
    /// Log file (empty = standard output).
    pub logfile: String,
    /// Background task frequency (active expiry...), per second.
    pub hz: u32,
    /// `busy-poll-us` (Kayvee's own): after a loop pass that served events, how long the
    /// Linux shell keeps polling without sleeping before it blocks in epoll again; 0 = never.
    /// A vCPU that goes idle between requests costs the next request a wakeup (an IPI, and
    /// on a VM a halt and a host reschedule); see docs/decisions.md.
    pub busy_poll_us: u32,
    /// `repl-sync-share` (Kayvee's own): the percent of the loop's time that replicas' full
    /// syncs may take while commands keep the loop busy (the snapshot is serialised on the
    /// loop, not in a forked child); a quiet loop gives them all of its time; 100 (the
    /// default) = as fast as the replicas read. See docs/decisions.md.
    pub repl_sync_share: u32,
    /// `tracking-table-max-keys`: keys the tracking table holds before it evicts some (each
    /// evicted key is invalidated for its readers); 0 = no limit.
    pub tracking_table_max_keys: u64,
    /// Largest bulk string a client may send.
    pub proto_max_bulk_len: u64,
    /// Largest query buffer per client.
    pub client_query_buffer_limit: u64,
    /// `client-output-buffer-limit`: (hard bytes, soft bytes, soft seconds) for the `normal`,
    /// `replica` and `pubsub` classes, in that order; 0 disables a limit.
    pub client_output_buffer_limit: [OutputLimit; 3],
    /// Memory limit in bytes (0 = none).
    pub maxmemory: u64,
    /// Client eviction's limit on the clients' memory (`maxmemory-clients`): bytes, or
    /// `-N` for N% of `maxmemory`; 0: off. See [`Config::maxmemory_clients_bytes`].
    pub maxmemory_clients: i64,
    /// Eviction policy name.
    pub maxmemory_policy: String,
    /// Keys sampled per database and eviction step (`maxmemory-samples`).
    pub maxmemory_samples: u32,
    /// How long one eviction run may go on, 0..=100 (`maxmemory-eviction-tenacity`).
    pub maxmemory_eviction_tenacity: u32,
    /// Slows the LFU counter's growth (`lfu-log-factor`).
    pub lfu_log_factor: u32,
    /// Minutes per LFU counter decrement (`lfu-decay-time`).
    pub lfu_decay_time: u32,
    /// Working directory for persistence files.
    pub dir: String,
    /// RDB file name.
    pub dbfilename: String,
    /// Save points (`seconds changes` pairs); empty = no snapshots.
    pub save: String,
    /// The shell's default `save` (kayvee-server: Redis 7's points), which CONFIG REWRITE
    /// leaves out; not a parameter.
    pub save_default: String,
    /// Append-only file.
    pub appendonly: bool,
    /// Base name of the AOF files (`appendfilename`).
    pub appendfilename: String,
    /// Directory of the AOF files inside `dir` (`appenddirname`).
    pub appenddirname: String,
    /// `always`, `everysec` or `no` (`appendfsync`).
    pub appendfsync: String,
    /// Write the AOF base as an RDB file (`aof-use-rdb-preamble`).
    pub aof_use_rdb_preamble: bool,
    /// Print the start-up logo even when standard output is no terminal (`always-show-logo`).
    pub always_show_logo: bool,
    /// Load a truncated AOF up to its last complete command (`aof-load-truncated`).
    pub aof_load_truncated: bool,
    /// `aof-timestamp-enabled` (accepted; Kayvee writes no timestamp annotations).
    pub aof_timestamp_enabled: bool,
    /// Rewrite when the AOF grew by this percentage over its base (`auto-aof-rewrite-percentage`).
    pub auto_aof_rewrite_percentage: i64,
    /// ... and is at least this big (`auto-aof-rewrite-min-size`).
    pub auto_aof_rewrite_min_size: u64,
    /// Skip fsync while a rewrite runs (`no-appendfsync-on-rewrite`).
    pub no_appendfsync_on_rewrite: bool,
    /// LZF-compress long strings in RDB files and DUMP payloads (`rdbcompression`).
    pub rdbcompression: bool,
    /// End RDB files with a CRC-64 (`rdbchecksum`; 0 when off).
    pub rdbchecksum: bool,
    /// Refuse writes while the last background save failed (`stop-writes-on-bgsave-error`).
    pub stop_writes_on_bgsave_error: bool,
    /// A primary refuses writes with fewer good replicas than this (`min-replicas-to-write`;
    /// 0: never). A field, not a name lookup: every command checks it.
    pub min_replicas_to_write: i64,
    /// A good replica's last ACK is at most this many seconds old (`min-replicas-max-lag`).
    pub min_replicas_max_lag: i64,
    /// Refuse non-loopback clients when no password is set and bound beyond loopback.
    pub protected_mode: bool,
    /// Who may run DEBUG (`enable-debug-command`): `no`, `yes` or `local` (loopback and Unix
    /// socket clients only).
    pub enable_debug_command: String,
    /// PID file (empty = none).
    pub pidfile: String,
    /// Active expiry effort, 1..=10.
    pub active_expire_effort: u32,
    /// Slow log threshold in microseconds.
    pub slowlog_log_slower_than: i64,
    /// Slow log length.
    pub slowlog_max_len: u64,
    /// Sorted sets stay `listpack` up to this many members (`zset-max-listpack-entries`).
    pub zset_max_listpack_entries: u64,
    /// `stream-node-max-bytes`: a stream node (listpack) stops taking entries near this size.
    pub stream_node_max_bytes: u64,
    /// `stream-node-max-entries`: ... or at this many entries (0: no limit).
    pub stream_node_max_entries: u64,
    /// ... and while every member is at most this many bytes (`zset-max-listpack-value`).
    pub zset_max_listpack_value: u64,
    /// A sparse HyperLogLog becomes dense past this many bytes (`hll-sparse-max-bytes`).
    pub hll_sparse_max_bytes: u64,
    /// `hash-max-listpack-entries`: a hash with more fields is reported as `hashtable`.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value`: a longer field or value makes a hash `hashtable`.
    pub hash_max_listpack_value: u64,
    /// `set-max-intset-entries`: an all-integer set with more members is `hashtable`.
    pub set_max_intset_entries: u64,
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`): accepted, no effect yet.
    pub list_max_listpack_size: i64,
    /// `list-compress-depth`: accepted, no effect (list chunks are not compressed).
    pub list_compress_depth: u64,
    /// `notify-keyspace-events` as class bits (see [`keyspace_events::class`]; 0 = off).
    pub notify_keyspace_events: u32,
    /// `latency-monitor-threshold` in milliseconds: events at least this long are recorded
    /// for LATENCY (0 = the monitor is off).
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command latency histograms for `INFO latencystats`.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: the percentiles `INFO latencystats` shows, as
    /// shown (`50 99 99.9`).
    pub latency_tracking_info_percentiles: String,
    /// `enable-protected-configs`: `no`, `yes` or `local`; who may change `dir`,
    /// `dbfilename`... with `CONFIG SET`.
    pub enable_protected_configs: String,
    /// The parameters Kayvee accepts but does not act on yet ([`extra`]), by name, once set.
    pub extra: BTreeMap<&'static str, table::Val>,
    /// The config file this configuration was loaded from (for CONFIG REWRITE).
    pub config_file: Option<String>,
    /// Successful CONFIG SETs so far: a shell that follows a parameter compares this one
    /// number after each command instead of the parameter.
    pub sets: u64,
    /// The text [`Config::apply_file`] read (and the last `CONFIG REWRITE` wrote): what
    /// [`crate::Engine::rewrite_config`] rewrites, since the engine reads no files.
    pub config_file_text: Option<String>,
    /// Whether a `save` directive was applied at startup: the first one replaces the default
    /// save points and later ones add to them, as Redis reads several `save` lines.
    pub save_loaded: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            // Redis 7.0's default: every interface, protected mode refusing non-loopback
            // clients while no password is set.
            bind: vec!["*".into(), "-::*".into()],
            unixsocket: String::new(),
            unixsocketperm: 0,
            requirepass: None,
            aclfile: String::new(),
            users: Vec::new(),
            rename_commands: Vec::new(),
            replicaof: None,
            databases: 16,
            maxclients: 10000,
            timeout_s: 0,
            tcp_keepalive_s: 300,
            loglevel: "notice".into(),
            logfile: String::new(),
            hz: 10,
            busy_poll_us: DEFAULT_BUSY_POLL_US,
            repl_sync_share: DEFAULT_REPL_SYNC_SHARE,
            tracking_table_max_keys: 1_000_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            client_output_buffer_limit: [
                OutputLimit::default(),
                OutputLimit {
                    hard_bytes: 256 << 20,
                    soft_bytes: 64 << 20,
                    soft_s: 60,
                },
                OutputLimit {
                    hard_bytes: 32 << 20,
                    soft_bytes: 8 << 20,
                    soft_s: 60,
                },
            ],
            maxmemory: 0,
            maxmemory_clients: 0,
            maxmemory_policy: "noeviction".into(),
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            save: String::new(),
            save_default: String::new(),
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: "everysec".into(),
            aof_use_rdb_preamble: true,
            always_show_logo: false,
            aof_load_truncated: true,
            aof_timestamp_enabled: false,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            no_appendfsync_on_rewrite: false,
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            protected_mode: true,
            enable_debug_command: "no".into(),
            pidfile: String::new(),
            active_expire_effort: 1,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            zset_max_listpack_entries: 128,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            zset_max_listpack_value: 64,
            hll_sparse_max_bytes: 3000,
            // Debian's redis-server 7.0.15 answers 512 (not the 128 of upstream's redis.conf).
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            notify_keyspace_events: 0,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: "50 99 99.9".into(),
            enable_protected_configs: "no".into(),
            extra: BTreeMap::new(),
            config_file: None,
            sets: 0,
            config_file_text: None,
            save_loaded: false,
        }
    }
}

/// Every parameter: this table's, then [`extra`]'s.
pub fn all() -> impl Iterator<Item = &'static table::Param> {
    table::PARAMS.iter().chain(extra::PARAMS)
}

/// Every alias: (alias, the parameter's name).
fn all_aliases() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    table::ALIASES.iter().chain(extra::ALIASES)
}

/// Finds a parameter by its name or an alias, case-insensitively.
pub fn find(name: &[u8]) -> Option<&'static table::Param> {
    let name = all_aliases()
        .find(|(alias, _)| alias.as_bytes().eq_ignore_ascii_case(name))
        .map_or(name, |(_, own)| own.as_bytes());
    all().find(|p| p.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Parameters read by name (those kept in [`Config::extra`]: replication's, for one).
impl Config {
    /// Client eviction's limit in bytes (0: off): `maxmemory-clients` as given, or its
    /// percentage of `maxmemory` (off while `maxmemory` is 0).
    #[inline]
    pub fn maxmemory_clients_bytes(&self) -> u64 {
        match self.maxmemory_clients {
            pct if pct < 0 => {
                let pct = u128::from(pct.unsigned_abs());
                u64::try_from(u128::from(self.maxmemory) * pct / 100).unwrap_or(u64::MAX)
            }
            bytes => bytes as u64,
        }
    }

    /// An integer or memory parameter's value (0 for an unknown name or another kind).
    pub fn int_param(&self, name: &str) -> i64 {
        match find(name.as_bytes()).map(|p| (p.get)(self)) {
            Some(table::Val::Int(v)) => v,
            Some(table::Val::Mem(v)) => i64::try_from(v).unwrap_or(i64::MAX),
            _ => 0,
        }
    }

    /// A yes/no parameter's value (false for an unknown name or another kind).
    pub fn bool_param(&self, name: &str) -> bool {
        matches!(
            find(name.as_bytes()).map(|p| (p.get)(self)),
            Some(table::Val::Bool(true))
        )
    }

    /// A string parameter's value (empty for an unknown name or another kind).
    pub fn str_param(&self, name: &str) -> Vec<u8> {
        match find(name.as_bytes()).map(|p| (p.get)(self)) {
            Some(table::Val::Str(v)) => v,
            _ => Vec::new(),
        }
    }
}

/// The aliases of parameter `name`.
pub fn aliases_of(name: &str) -> impl Iterator<Item = &'static str> + '_ {
    all_aliases()
        .filter(move |(_, own)| *own == name)
        .map(|(alias, _)| *alias)
}

/// A rejected configuration value or file line; Display is the message for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

/// One class of `client-output-buffer-limit`: a client is disconnected once its pending output
/// exceeds `hard_bytes`, or stays above `soft_bytes` for more than `soft_s` seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Hard limit in bytes (0 = none).
    pub hard_bytes: u64,
    /// Soft limit in bytes (0 = none).
    pub soft_bytes: u64,
    /// How long the soft limit may be exceeded, in seconds.
    pub soft_s: u64,
}

/// The class names of `client-output-buffer-limit`, by index (`slave` is `replica`'s alias).
pub const OUTPUT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The first line of every config file error, as Redis 7.0.15 prints it.
const FATAL_HEADER: &str = "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***";

/// Characters that make a `CONFIG GET` argument a pattern rather than a name.
const GLOB_CHARS: &[u8] = b"*?[";

impl Config {
    /// Applies one directive (`name` with its values), as a config-file line or a
    /// `--name value...` command-line option gives it. Unknown names and bad values are errors
    /// whose text is Redis's reason (`Bad directive or wrong number of arguments`, `argument
    /// must be a memory value`...). Immutable parameters are accepted here (startup), unlike
    /// `CONFIG SET`.
    pub fn apply(&mut self, name: &str, values: &[&str]) -> Result<(), ConfigError> {
        let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        self.apply_bytes(name.as_bytes(), &values)
            .map_err(ConfigError)
    }

    /// [`Config::apply`] on raw bytes (a quoted config value may hold any byte).
    fn apply_bytes(&mut self, name: &[u8], values: &[&[u8]]) -> Result<(), String> {
        if name.eq_ignore_ascii_case(b"include") {
            return Err("include is not supported: Kayvee reads one config file".into());
        }
        if name.eq_ignore_ascii_case(b"user") && !values.is_empty() {
            let words: Vec<String> = values
                .iter()
                .map(|v| String::from_utf8_lossy(v).into())
                .collect();
            self.users.push(words.join(" "));
            return Ok(());
        }
        if let ([old, new], true) = (values, name.eq_ignore_ascii_case(b"rename-command")) {
            return self.rename_command(old, new);
        }
        // A multi-argument parameter given its arguments in one (`--shutdown-on-sigint "nosave
        // force"`, `--client-output-buffer-limit "replica 0 0 0"`, `--replicaof "host port"`)
        // takes them split at spaces, as Redis 7.0's MULTI_ARG configs.
        let replicaof =
            name.eq_ignore_ascii_case(b"replicaof") || name.eq_ignore_ascii_case(b"slaveof");
        let param = find(name);
        let multi_arg = replicaof || param.is_some_and(|p| p.kind.multi_arg());
        let split: Vec<&[u8]>;
        let values = match values {
            [one] if multi_arg && one.contains(&b' ') => {
                split = one
                    .split(|&b| b == b' ')
                    .filter(|w| !w.is_empty())
                    .collect();
                &split[..]
            }
            _ => values,
        };
        if replicaof && values.len() == 2 {
            let host = String::from_utf8_lossy(values[0]).into_owned();
            let port = core::str::from_utf8(values[1])
                .ok()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or("Invalid master port")?;
            self.replicaof = Some((host, port));
            return Ok(());
        }
        let param = param.ok_or("Bad directive or wrong number of arguments")?;
        let mut val = param.kind.parse(values)?;
        if let table::Val::Save(points) = &mut val {
            // The first `save` line replaces the defaults; later ones add (`save ""` clears).
            if self.save_loaded && values != [b"".as_slice()] {
                let mut all = self.save_points();
                all.append(points);
                *points = all;
            }
            self.save_loaded = true;
        }
        (param.put)(self, val);
        Ok(())
    }

    /// `rename-command old new` (config file only, as in Redis): `old` must name a command
    /// now (a Redis 7.0 command not renamed away, or an earlier rename's new name), `new`
    /// must not (Redis's errors otherwise).
    fn rename_command(&mut self, old: &[u8], new: &[u8]) -> Result<(), String> {
        let lower = |b: &[u8]| String::from_utf8_lossy(b).to_ascii_lowercase();
        let (old, new) = (lower(old), lower(new));
        let renamed_away = |c: &Config, n: &str| c.rename_commands.iter().any(|(o, _)| o == n);
        let exists = |c: &Config, n: &str| {
            let own = !crate::command_docs::doc_fields(n).is_empty() && !n.contains('|');
            (own && !renamed_away(c, n)) || c.rename_commands.iter().any(|(_, t)| t == n)
        };
        if old.is_empty() || !exists(self, &old) {
            return Err("No such command in rename-command".into());
        }
        if !new.is_empty() && new != old && exists(self, &new) {
            return Err("Target command name already exists".into());
        }
        match self.rename_commands.iter_mut().find(|(_, t)| *t == old) {
            Some((_, target)) => *target = new,
            None => self.rename_commands.push((old, new)),
        }
        Ok(())
    }

    /// Applies a whole file in redis.conf syntax: one directive a line, `#` comments, blank
    /// lines, quoted values as `sdssplitargs` reads them. An error is Redis's fatal message
    /// naming the line number and text. The text is kept for `CONFIG REWRITE`.
    pub fn apply_file(&mut self, text: &str) -> Result<(), ConfigError> {
        for (i, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            if let Err(reason) = self.apply_line(line) {
                return Err(ConfigError(alloc::format!(
                    "{FATAL_HEADER}\nReading the configuration file, at line {}\n>>> '{line}'\n{reason}",
                    i + 1
                )));
            }
        }
        self.config_file_text = Some(text.into());
        Ok(())
    }

    /// Applies one trimmed config file line.
    fn apply_line(&mut self, line: &str) -> Result<(), String> {
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let args = syntax::split_args(line.as_bytes())
            .map_err(|_| String::from("Unbalanced quotes in configuration line"))?;
        let Some((name, values)) = args.split_first() else {
            return Ok(());
        };
        let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        self.apply_bytes(name, &values)
    }

    /// The `save` points as `(seconds, changes)` pairs.
    pub fn save_points(&self) -> Vec<(i64, i64)> {
        let words: Vec<&[u8]> = self.save.split(' ').map(str::as_bytes).collect();
        syntax::parse_save(&words).unwrap_or_default()
    }

    /// `CONFIG GET`: every parameter matching one of the patterns (glob, case-insensitive), in
    /// table order, each once, with its value as Redis renders it. An argument without glob
    /// characters is looked up as a name, and the reply names it as the client spelled it.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for p in all() {
            let hidden = extra::is_hidden(p.name);
            for name in core::iter::once(p.name).chain(aliases_of(p.name)) {
                let name = name.as_bytes();
                let hit = patterns.iter().find(|pat| {
                    if pat.iter().any(|c| GLOB_CHARS.contains(c)) {
                        !hidden && crate::util::glob_match(pat, name, true)
                    } else {
                        pat.eq_ignore_ascii_case(name)
                    }
                });
                if let Some(pat) = hit {
                    let shown = if pat.iter().any(|c| GLOB_CHARS.contains(c)) {
                        name
                    } else {
                        pat
                    };
                    out.push((shown.to_vec(), p.kind.render(&(p.get)(self))));
                }
            }
        }
        out
    }

    /// `CONFIG SET name value [name value ...]`: checks every name first (unknown, immutable,
    /// protected, duplicate), then applies the values in order to a copy, so that either all
    /// change or none does. The error is the full Redis reply text. Protected parameters are
    /// refused as for a remote client (see [`Config::set_many_as`]).
    pub fn set_many(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        self.set_many_as(pairs, false)
    }

    /// [`Config::set_many`] for a client that is local (Unix socket, loopback) or not: a
    /// protected parameter may be set with `enable-protected-configs yes`, or `local` and a
    /// local client.
    pub fn set_many_as(&mut self, pairs: &[(&[u8], &[u8])], local: bool) -> Result<(), String> {
        let protected_ok = match self.enable_protected_configs.as_str() {
            "yes" => true,
            "local" => local,
            _ => false,
        };
        let mut params: Vec<&'static table::Param> = Vec::with_capacity(pairs.len());
        for &(name, _) in pairs {
            let shown = crate::util::sanitize(name, 128);
            let Some(p) = find(name) else {
                return Err(alloc::format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{shown}'"
                ));
            };
            let reason = match p.access {
                table::Access::Immutable => Some("can't set immutable config"),
                table::Access::Protected if !protected_ok => Some("can't set protected config"),
                // An alias is a parameter of its own here, as in Redis: `lua-time-limit` and
                // `busy-reply-threshold` in one CONFIG SET both apply, in order.
                _ if pairs[..params.len()]
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name)) =>
                {
                    Some("duplicate parameter")
                }
                _ => None,
            };
            if let Some(reason) = reason {
                return Err(set_failed(&shown, reason));
            }
            params.push(p);
        }
        let mut next = self.clone();
        for (p, &(name, value)) in params.iter().zip(pairs) {
            let words: Vec<&[u8]> = if p.kind.is_multi() {
                value
                    .split(|&c| c == b' ')
                    .filter(|_| !value.is_empty())
                    .collect()
            } else {
                alloc::vec![value]
            };
            let val = p
                .kind
                .parse(&words)
                .map_err(|r| set_failed(&crate::util::sanitize(name, 128), &r))?;
            (p.put)(&mut next, val);
        }
        *self = next;
        Ok(())
    }
}

/// `ERR CONFIG SET failed (possibly related to argument 'x') - reason`.
fn set_failed(name: &str, reason: &str) -> String {
    alloc::format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(c: &Config, name: &str) -> String {
        let got = c.get_matching(&[name.as_bytes()]);
        assert_eq!(got.len(), 1, "{name}");
        String::from_utf8(got[0].1.clone()).unwrap()
    }

    #[test]
    fn apply_parses_and_validates() {
        let mut c = Config::default();
        c.apply("MAXMEMORY", &["1gb"]).unwrap();
        assert_eq!(c.maxmemory, 1 << 30);
        c.apply("unixsocketperm", &["700"]).unwrap();
        assert_eq!(get(&c, "unixsocketperm"), "700");
        assert_eq!(
            c.apply("foo", &["bar"]).unwrap_err().0,
            "Bad directive or wrong number of arguments"
        );
        assert_eq!(
            c.apply("hz", &["10", "20"]).unwrap_err().0,
            "wrong number of arguments"
        );
        assert_eq!(
            c.apply("hz", &[]).unwrap_err().0,
            "wrong number of arguments"
        );
        assert!(c
            .apply("daemonize", &["yes"])
            .unwrap_err()
            .0
            .contains("does not daemonize"));
        c.apply("daemonize", &["no"]).unwrap();
        assert!(c
            .apply("include", &["x.conf"])
            .unwrap_err()
            .0
            .contains("not supported"));
        c.apply("hz", &["1000"]).unwrap();
        assert_eq!(c.hz, 500);
    }

    #[test]
    fn multi_argument_parameters_take_one_argument_with_spaces() {
        let mut c = Config::default();
        c.apply("client-output-buffer-limit", &["replica 0 0 0"])
            .unwrap();
        assert_eq!(
            get(&c, "client-output-buffer-limit"),
            "normal 0 0 0 slave 0 0 0 pubsub 33554432 8388608 60"
        );
        c.apply("oom-score-adj-values", &["0 100 800"]).unwrap();
        assert_eq!(get(&c, "oom-score-adj-values"), "0 100 800");
        c.apply("replicaof", &["127.0.0.1 6380"]).unwrap();
        assert_eq!(c.replicaof, Some(("127.0.0.1".into(), 6380)));
        c.apply("save", &["900 1 300 10"]).unwrap();
        assert_eq!(get(&c, "save"), "900 1 300 10");
        // A single-valued parameter keeps its argument whole.
        assert_eq!(
            c.apply("hz", &["10 20"]).unwrap_err().0,
            "argument couldn't be parsed into an integer"
        );
    }

    #[test]
    fn rename_command_follows_redis_rules() {
        let mut c = Config::default();
        c.apply_file("rename-command FLUSHDB badger\nrename-command config \"\"\n")
            .unwrap();
        let err = |c: &mut Config, old: &str, new: &str| {
            c.apply("rename-command", &[old, new]).unwrap_err().0
        };
        assert_eq!(
            err(&mut c, "nosuch", "x"),
            "No such command in rename-command"
        );
        assert_eq!(
            err(&mut c, "flushdb", "x"),
            "No such command in rename-command"
        );
        assert_eq!(
            err(&mut c, "get", "set"),
            "Target command name already exists"
        );
        assert_eq!(
            err(&mut c, "get", "badger"),
            "Target command name already exists"
        );
        c.apply("rename-command", &["badger", "mole"]).unwrap();
        c.apply("rename-command", &["get", "flushdb"]).unwrap();
        assert_eq!(
            c.rename_commands,
            [
                ("flushdb".into(), "mole".into()),
                ("config".into(), String::new()),
                ("get".into(), "flushdb".into())
            ]
        );
    }

    #[test]
    fn save_lines_accumulate_then_set_replaces() {
        let mut c = Config::default();
        c.apply("save", &["3600", "1"]).unwrap();
        c.apply("save", &["300", "100"]).unwrap();
        assert_eq!(get(&c, "save"), "3600 1 300 100");
        c.set_many(&[(b"save", b"60 10000")]).unwrap();
        assert_eq!(get(&c, "save"), "60 10000");
        c.apply("save", &[""]).unwrap();
        assert_eq!(get(&c, "save"), "");
        assert_eq!(
            c.apply("save", &["1"]).unwrap_err().0,
            "Invalid save parameters"
        );
    }

    #[test]
    fn apply_file_reports_line_and_text() {
        let mut c = Config::default();
        let text = "port 7000\n# comment\n\n  hz 15  \nfoo bar\n";
        let e = c.apply_file(text).unwrap_err();
        assert_eq!(
            e.0,
            "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, \
             at line 5\n>>> 'foo bar'\nBad directive or wrong number of arguments"
        );
        assert_eq!((c.port, c.hz), (7000, 15));
        let e = Config::default().apply_file("hz \"10\n").unwrap_err();
        assert!(e
            .0
            .ends_with("at line 1\n>>> 'hz \"10'\nUnbalanced quotes in configuration line"));
        let mut c = Config::default();
        c.apply_file("requirepass \"a\\x41b\\\"c d\"\nbind 127.0.0.1 -::1\n")
            .unwrap();
        assert_eq!(c.requirepass.as_deref(), Some(&b"aAb\"c d"[..]));
        assert_eq!(get(&c, "bind"), "127.0.0.1 -::1");
        assert_eq!(
            c.config_file_text.as_deref(),
            Some("requirepass \"a\\x41b\\\"c d\"\nbind 127.0.0.1 -::1\n")
        );
    }

    #[test]
    fn set_many_is_atomic_and_checks_names_first() {
        let mut c = Config::default();
        let e = c
            .set_many(&[(b"hz", b"7"), (b"maxmemory", b"abc")])
            .unwrap_err();
        assert_eq!(e, "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value");
        assert_eq!(c.hz, 10);
        let e = c
            .set_many(&[(b"maxmemory", b"abc"), (b"foo", b"bar")])
            .unwrap_err();
        assert_eq!(
            e,
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        let e = c.set_many(&[(b"hz", b"10"), (b"HZ", b"11")]).unwrap_err();
        assert!(e.contains("'HZ') - duplicate parameter"));
        let e = c.set_many(&[(b"dir", b"/tmp")]).unwrap_err();
        assert!(e.ends_with("- can't set protected config"));
        let e = c.set_many(&[(b"databases", b"1")]).unwrap_err();
        assert!(e.ends_with("'databases') - can't set immutable config"));
        c.set_many(&[(b"requirepass", b"pw"), (b"loglevel", b"WARNING")])
            .unwrap();
        assert_eq!(c.requirepass.as_deref(), Some(&b"pw"[..]));
        assert_eq!(get(&c, "loglevel"), "warning");
        c.set_many(&[(b"requirepass", b"")]).unwrap();
        assert_eq!(c.requirepass, None);
    }

    #[test]
    fn get_matching_names_and_globs() {
        let c = Config::default();
        let got = c.get_matching(&[b"hz", b"port", b"HZ"]);
        let names: Vec<&[u8]> = got.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [&b"port"[..], b"hz"]);
        assert_eq!(c.get_matching(&[b"MaxMemory"])[0].0, b"MaxMemory");
        assert_eq!(c.get_matching(&[b"MAXMEM*"]).len(), 5);
        assert!(c.get_matching(&[b"nosuch"]).is_empty());
        assert_eq!(get(&c, "maxmemory-policy"), "noeviction");
        assert_eq!(get(&c, "daemonize"), "no");
        assert_eq!(get(&c, "proto-max-bulk-len"), "536870912");
    }

    #[test]
    fn aliases_read_and_write_their_parameter() {
        let mut c = Config::default();
        c.set_many(&[(b"hash-max-ziplist-entries", b"7")]).unwrap();
        assert_eq!(c.hash_max_listpack_entries, 7);
        assert_eq!(
            c.get_matching(&[b"hash-max-ziplist-entries"]),
            [(b"hash-max-ziplist-entries".to_vec(), b"7".to_vec())]
        );
        // A glob matches both names, as in Redis 7.0.
        let names: Vec<Vec<u8>> = c
            .get_matching(&[b"hash-max-*"])
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names.len(), 4);
        assert!(names.contains(&b"hash-max-ziplist-value".to_vec()));
        c.set_many(&[(b"list-max-ziplist-size", b"-6")]).unwrap();
        assert_eq!(get(&c, "list-max-listpack-size"), "-6");
        let e = c.set_many(&[(b"list-compress-depth", b"-1")]).unwrap_err();
        assert!(
            e.contains("argument must be between 0 and 2147483647 inclusive"),
            "{e}"
        );
        c.apply_file("zset-max-ziplist-entries 1\n").unwrap();
        assert_eq!(c.zset_max_listpack_entries, 1);
    }

    #[test]
    fn extra_parameters_read_back_and_rewrite() {
        let mut c = Config::default();
        assert_eq!(get(&c, "repl-backlog-size"), "1048576");
        c.set_many(&[(b"repl-backlog-size", b"2mb"), (b"slave-priority", b"7")])
            .unwrap();
        assert_eq!(get(&c, "repl-backlog-size"), "2097152");
        assert_eq!(get(&c, "replica-priority"), "7");
        assert_eq!(
            c.rewrite(""),
            "# Generated by CONFIG REWRITE\nrepl-backlog-size 2mb\nreplica-priority 7\n"
        );
        // Hidden parameters only by name.
        assert!(c
            .get_matching(&[b"*delay*"])
            .iter()
            .all(|(n, _)| n != b"key-load-delay"));
        assert_eq!(get(&c, "key-load-delay"), "0");
        c.apply("key-load-delay", &["-5"]).unwrap();
        assert_eq!(get(&c, "key-load-delay"), "-5");
    }

    #[test]
    fn protected_parameters_follow_enable_protected_configs() {
        let mut c = Config::default();
        assert!(c.set_many_as(&[(b"dbfilename", b"x.rdb")], true).is_err());
        c.apply("enable-protected-configs", &["local"]).unwrap();
        assert!(c.set_many_as(&[(b"dbfilename", b"x.rdb")], false).is_err());
        c.set_many_as(&[(b"dbfilename", b"x.rdb")], true).unwrap();
        c.apply("enable-protected-configs", &["yes"]).unwrap();
        c.set_many(&[(b"dbfilename", b"y.rdb")]).unwrap();
        assert_eq!(c.dbfilename, "y.rdb");
        let e = c
            .set_many(&[(b"enable-protected-configs", b"no")])
            .unwrap_err();
        assert!(e.ends_with("can't set immutable config"), "{e}");
    }
}

//! The parameter table: every configuration parameter Kayvee honours, as data (name, value
//! kind with bounds, who may change it, how to read and store it in [`Config`]). `CONFIG GET`,
//! `CONFIG SET`, the config file and `CONFIG REWRITE` all go through it. Redis 7.0's aliases
//! (the `*-ziplist-*` names of the listpack parameters) are in [`ALIASES`]: they are accepted
//! wherever a name is, and `CONFIG GET` shows them under the name asked for (a glob matches
//! both names, as in Redis); `CONFIG REWRITE` writes the parameter's own name.

use super::syntax::{
    parse_bool, parse_memory, parse_octal, parse_save, render_memory, render_save,
};
use super::Config;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// The syntax and bounds of a parameter's value.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// A strict integer within bounds.
    Int {
        /// Smallest accepted.
        min: i64,
        /// Largest accepted.
        max: i64,
    },
    /// A memory size (`1gb`), within bounds.
    Memory {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// An octal number up to `max` (`unixsocketperm`).
    Octal {
        /// Largest accepted (shown in octal digits in the error).
        max: i64,
    },
    /// One of these words (any case in, lower case out).
    Enum(&'static [&'static str]),
    /// Any bytes.
    Str,
    /// A list of words (`bind`).
    Words,
    /// `seconds changes` pairs (`save`).
    Save,
    /// `daemonize`: only `no`, since Kayvee never forks into the background.
    DaemonizeNo,
    /// `client-output-buffer-limit`: `class hard soft seconds` groups.
    BufferLimits,
    /// `notify-keyspace-events`: class letters, stored as bits (see [`super::keyspace_events`]).
    KeyspaceEvents,
    /// A feature Kayvee lacks (`activedefrag`): only `no`; `yes` is refused with this text.
    OnlyNo(&'static str),
    /// A memory size or a percentage of `maxmemory` (`maxmemory-clients`); a percentage is
    /// stored as its negation.
    MemoryOrPercent,
    /// Other value syntaxes, parsed in [`super::extra`] (percentile lists, flag sets...).
    Special(Special),
    /// `proc-title-template`: text with `{variable}`s (see [`super::proc_title`]).
    ProcTitle,
}

impl Kind {
    /// Whether the parameter takes several arguments (Redis 7.0's MULTI_ARG configs: `bind`,
    /// `save`, `client-output-buffer-limit` and the special lists), which one argument with
    /// spaces may also give.
    pub fn multi_arg(self) -> bool {
        matches!(
            self,
            Kind::Words | Kind::Save | Kind::BufferLimits | Kind::Special(_)
        )
    }
}

/// Who may change a parameter after startup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `CONFIG SET` may change it.
    Mutable,
    /// Only the config file and the command line (Redis: "can't set immutable config").
    Immutable,
    /// Protected as Redis 7.0 protects it by default (`enable-protected-configs no`).
    Protected,
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// Bool parameters.
    Bool(bool),
    /// Integer and octal parameters.
    Int(i64),
    /// Memory parameters.
    Mem(u64),
    /// Strings and enum words.
    Str(Vec<u8>),
    /// `bind`.
    Words(Vec<String>),
    /// `save`.
    Save(Vec<(i64, i64)>),
}

impl Val {
    fn int(self) -> i64 {
        match self {
            Val::Int(v) => v,
            Val::Mem(v) => v as i64,
            _ => unreachable!("parsed by kind"),
        }
    }
    fn mem(self) -> u64 {
        match self {
            Val::Mem(v) => v,
            _ => unreachable!("parsed by kind"),
        }
    }
    fn bool(self) -> bool {
        matches!(self, Val::Bool(true))
    }
    fn string(self) -> String {
        match self {
            Val::Str(b) => String::from_utf8_lossy(&b).into_owned(),
            _ => unreachable!("parsed by kind"),
        }
    }
}

/// One parameter.
pub struct Param {
    /// Lower-case name.
    pub name: &'static str,
    /// Value syntax.
    pub kind: Kind,
    /// Who may change it.
    pub access: Access,
    /// Reads the value from the configuration.
    pub get: fn(&Config) -> Val,
    /// Stores a value parsed for this kind.
    pub put: fn(&mut Config, Val),
}

const INT_MAX: i64 = i32::MAX as i64;
const MB: u64 = 1024 * 1024;

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// Every parameter, in the order `CONFIG GET *` and `CONFIG REWRITE` list them.
pub const PARAMS: &[Param] = &[
    Param {
        name: "port",
        kind: Kind::Int { min: 0, max: 65535 },
        // The shell rebinds its listeners after CONFIG SET (`Outcome::Rebind`).
        access: Access::Mutable,
        get: |c| Val::Int(c.port.into()),
        put: |c, v| c.port = v.int() as u16,
    },
    Param {
        name: "bind",
        kind: Kind::Words,
        access: Access::Mutable,
        get: |c| Val::Words(c.bind.clone()),
        put: |c, v| {
            if let Val::Words(w) = v {
                c.bind = w;
            }
        },
    },
    Param {
        name: "unixsocket",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.unixsocket.as_bytes().into()),
        put: |c, v| c.unixsocket = v.string(),
    },
    Param {
        name: "unixsocketperm",
        kind: Kind::Octal { max: 0o777 },
        access: Access::Immutable,
        get: |c| Val::Int(c.unixsocketperm.into()),
        put: |c, v| c.unixsocketperm = v.int() as u32,
    },
    Param {
        name: "requirepass",
        kind: Kind::Str,
        access: Access::Mutable,
        get: |c| Val::Str(c.requirepass.as_deref().unwrap_or_default().into()),
        put: |c, v| {
            if let Val::Str(b) = v {
                c.requirepass = (!b.is_empty()).then(|| SmallBytes::from_vec(b));
            }
        },
    },
    Param {
        name: "aclfile",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.aclfile.as_bytes().into()),
        put: |c, v| c.aclfile = v.string(),
    },
    Param {
        name: "databases",
        kind: Kind::Int {
            min: 1,
            max: INT_MAX,
        },
        access: Access::Immutable,
        get: |c| Val::Int(c.databases as i64),
        put: |c, v| c.databases = v.int() as usize,
    },
    Param {
        name: "maxclients",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.maxclients as i64),
        put: |c, v| c.maxclients = v.int() as u64,
    },
    Param {
        name: "timeout",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.timeout_s as i64),
        put: |c, v| c.timeout_s = v.int() as u64,
    },
    Param {
        name: "tcp-keepalive",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.tcp_keepalive_s as i64),
        put: |c, v| c.tcp_keepalive_s = v.int() as u64,
    },
    Param {
        name: "loglevel",
        kind: Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        access: Access::Mutable,
        get: |c| Val::Str(c.loglevel.as_bytes().into()),
        put: |c, v| c.loglevel = v.string(),
    },
    Param {
        name: "logfile",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.logfile.as_bytes().into()),
        put: |c, v| c.logfile = v.string(),
    },
    Param {
        name: "notify-keyspace-events",
        kind: Kind::KeyspaceEvents,
        access: Access::Mutable,
        get: |c| Val::Int(c.notify_keyspace_events.into()),
        put: |c, v| c.notify_keyspace_events = v.int() as u32,
    },
    Param {
        name: "hz",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.hz.into()),
        // Redis accepts any non-negative value and clamps it to 1..=500.
        put: |c, v| c.hz = v.int().clamp(1, 500) as u32,
    },
    Param {
        name: "busy-poll-us",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.busy_poll_us.into()),
        put: |c, v| c.busy_poll_us = v.int() as u32,
    },
    Param {
        name: "repl-sync-share",
        kind: Kind::Int { min: 1, max: 100 },
        access: Access::Mutable,
        get: |c| Val::Int(c.repl_sync_share.into()),
        put: |c, v| c.repl_sync_share = v.int() as u32,
    },
    Param {
        name: "tracking-table-max-keys",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.tracking_table_max_keys as i64),
        put: |c, v| c.tracking_table_max_keys = v.int() as u64,
    },
    Param {
        name: "proto-max-bulk-len",
        kind: Kind::Memory {
            min: MB,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.proto_max_bulk_len),
        put: |c, v| c.proto_max_bulk_len = v.mem(),
    },
    Param {
        name: "client-query-buffer-limit",
        kind: Kind::Memory {
            min: MB,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.client_query_buffer_limit),
        put: |c, v| c.client_query_buffer_limit = v.mem(),
    },
    Param {
        name: "maxmemory",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.maxmemory),
        put: |c, v| c.maxmemory = v.mem(),
    },
    Param {
        name: "maxmemory-clients",
        kind: Kind::MemoryOrPercent,
        access: Access::Mutable,
        get: |c| Val::Int(c.maxmemory_clients),
        put: |c, v| c.maxmemory_clients = v.int(),
    },
    Param {
        name: "maxmemory-policy",
        kind: Kind::Enum(POLICIES),
        access: Access::Mutable,
        get: |c| Val::Str(c.maxmemory_policy.as_bytes().into()),
        put: |c, v| c.maxmemory_policy = v.string(),
    },
    Param {
        name: "maxmemory-samples",
        kind: Kind::Int {
            min: 1,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.maxmemory_samples.into()),
        put: |c, v| c.maxmemory_samples = v.int() as u32,
    },
    Param {
        name: "maxmemory-eviction-tenacity",
        kind: Kind::Int { min: 0, max: 100 },
        access: Access::Mutable,
        get: |c| Val::Int(c.maxmemory_eviction_tenacity.into()),
        put: |c, v| c.maxmemory_eviction_tenacity = v.int() as u32,
    },
    Param {
        name: "lfu-log-factor",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.lfu_log_factor.into()),
        put: |c, v| c.lfu_log_factor = v.int() as u32,
    },
    Param {
        name: "lfu-decay-time",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.lfu_decay_time.into()),
        put: |c, v| c.lfu_decay_time = v.int() as u32,
    },
    Param {
        name: "dir",
        kind: Kind::Str,
        access: Access::Protected,
        get: |c| Val::Str(c.dir.as_bytes().into()),
        put: |c, v| c.dir = v.string(),
    },
    Param {
        name: "dbfilename",
        kind: Kind::Str,
        access: Access::Protected,
        get: |c| Val::Str(c.dbfilename.as_bytes().into()),
        put: |c, v| c.dbfilename = v.string(),
    },
    Param {
        name: "client-output-buffer-limit",
        kind: Kind::BufferLimits,
        access: Access::Mutable,
        get: |c| Val::Str(render_buffer_limits(&c.client_output_buffer_limit).into_bytes()),
        put: |c, v| {
            if let Val::Words(w) = v {
                for g in w.chunks(4) {
                    let class = class_index(g[0].as_bytes()).unwrap_or(0);
                    let n = |i: usize| g[i].parse::<u64>().unwrap_or(0);
                    c.client_output_buffer_limit[class] = crate::config::OutputLimit {
                        hard_bytes: n(1),
                        soft_bytes: n(2),
                        soft_s: n(3),
                    };
                }
            }
        },
    },
    Param {
        name: "save",
        kind: Kind::Save,
        access: Access::Mutable,
        get: |c| Val::Save(c.save_points()),
        put: |c, v| {
            if let Val::Save(points) = v {
                c.save = render_save(&points);
            }
        },
    },
    Param {
        name: "rdbcompression",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.rdbcompression),
        put: |c, v| c.rdbcompression = v.bool(),
    },
    Param {
        name: "rdbchecksum",
        kind: Kind::Bool,
        access: Access::Immutable,
        get: |c| Val::Bool(c.rdbchecksum),
        put: |c, v| c.rdbchecksum = v.bool(),
    },
    Param {
        name: "min-replicas-to-write",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.min_replicas_to_write),
        put: |c, v| c.min_replicas_to_write = v.int(),
    },
    Param {
        name: "min-replicas-max-lag",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.min_replicas_max_lag),
        put: |c, v| c.min_replicas_max_lag = v.int(),
    },
    Param {
        name: "stop-writes-on-bgsave-error",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.stop_writes_on_bgsave_error),
        put: |c, v| c.stop_writes_on_bgsave_error = v.bool(),
    },
    Param {
        name: "appendonly",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.appendonly),
        put: |c, v| c.appendonly = v.bool(),
    },
    Param {
        name: "appendfilename",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.appendfilename.as_bytes().into()),
        put: |c, v| c.appendfilename = v.string(),
    },
    Param {
        name: "appenddirname",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.appenddirname.as_bytes().into()),
        put: |c, v| c.appenddirname = v.string(),
    },
    Param {
        name: "appendfsync",
        kind: Kind::Enum(&["everysec", "always", "no"]),
        access: Access::Mutable,
        get: |c| Val::Str(c.appendfsync.as_bytes().into()),
        put: |c, v| c.appendfsync = v.string(),
    },
    Param {
        name: "always-show-logo",
        kind: Kind::Bool,
        access: Access::Immutable,
        get: |c| Val::Bool(c.always_show_logo),
        put: |c, v| c.always_show_logo = v.bool(),
    },
    Param {
        name: "aof-use-rdb-preamble",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.aof_use_rdb_preamble),
        put: |c, v| c.aof_use_rdb_preamble = v.bool(),
    },
    Param {
        name: "aof-load-truncated",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.aof_load_truncated),
        put: |c, v| c.aof_load_truncated = v.bool(),
    },
    Param {
        name: "aof-timestamp-enabled",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.aof_timestamp_enabled),
        put: |c, v| c.aof_timestamp_enabled = v.bool(),
    },
    Param {
        name: "auto-aof-rewrite-percentage",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.auto_aof_rewrite_percentage),
        put: |c, v| c.auto_aof_rewrite_percentage = v.int(),
    },
    Param {
        name: "auto-aof-rewrite-min-size",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.auto_aof_rewrite_min_size),
        put: |c, v| c.auto_aof_rewrite_min_size = v.mem(),
    },
    Param {
        name: "no-appendfsync-on-rewrite",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.no_appendfsync_on_rewrite),
        put: |c, v| c.no_appendfsync_on_rewrite = v.bool(),
    },
    Param {
        name: "protected-mode",
        kind: Kind::Bool,
        access: Access::Mutable,
        get: |c| Val::Bool(c.protected_mode),
        put: |c, v| c.protected_mode = v.bool(),
    },
    Param {
        name: "enable-debug-command",
        kind: Kind::Enum(&["no", "yes", "local"]),
        access: Access::Immutable,
        get: |c| Val::Str(c.enable_debug_command.as_bytes().into()),
        put: |c, v| c.enable_debug_command = v.string(),
    },
    Param {
        name: "pidfile",
        kind: Kind::Str,
        access: Access::Immutable,
        get: |c| Val::Str(c.pidfile.as_bytes().into()),
        put: |c, v| c.pidfile = v.string(),
    },
    Param {
        name: "daemonize",
        kind: Kind::DaemonizeNo,
        access: Access::Immutable,
        get: |_| Val::Bool(false),
        put: |_, _| {},
    },
    Param {
        name: "active-expire-effort",
        kind: Kind::Int { min: 1, max: 10 },
        access: Access::Mutable,
        get: |c| Val::Int(c.active_expire_effort.into()),
        put: |c, v| c.active_expire_effort = v.int() as u32,
    },
    Param {
        name: "slowlog-log-slower-than",
        kind: Kind::Int {
            min: -1,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.slowlog_log_slower_than),
        put: |c, v| c.slowlog_log_slower_than = v.int(),
    },
    Param {
        name: "slowlog-max-len",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.slowlog_max_len as i64),
        put: |c, v| c.slowlog_max_len = v.int() as u64,
    },
    Param {
        name: "stream-node-max-bytes",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.stream_node_max_bytes),
        put: |c, v| c.stream_node_max_bytes = v.mem(),
    },
    Param {
        name: "stream-node-max-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.stream_node_max_entries as i64),
        put: |c, v| c.stream_node_max_entries = v.int() as u64,
    },
    Param {
        name: "zset-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.zset_max_listpack_entries as i64),
        put: |c, v| c.zset_max_listpack_entries = v.int() as u64,
    },
    Param {
        name: "zset-max-listpack-value",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.zset_max_listpack_value),
        put: |c, v| c.zset_max_listpack_value = v.mem(),
    },
    Param {
        name: "hll-sparse-max-bytes",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.hll_sparse_max_bytes),
        put: |c, v| c.hll_sparse_max_bytes = v.mem(),
    },
    Param {
        name: "hash-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.hash_max_listpack_entries as i64),
        put: |c, v| c.hash_max_listpack_entries = v.int() as u64,
    },
    Param {
        name: "hash-max-listpack-value",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        access: Access::Mutable,
        get: |c| Val::Mem(c.hash_max_listpack_value),
        put: |c, v| c.hash_max_listpack_value = v.mem(),
    },
    Param {
        name: "set-max-intset-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.set_max_intset_entries as i64),
        put: |c, v| c.set_max_intset_entries = v.int() as u64,
    },
    // Accepted and shown; lists have no packed form yet (docs/compatibility.md).
    Param {
        name: "list-max-listpack-size",
        kind: Kind::Int {
            min: i32::MIN as i64,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.list_max_listpack_size),
        put: |c, v| c.list_max_listpack_size = v.int(),
    },
    // Accepted and shown; Kayvee's list chunks are not compressed (docs/compatibility.md).
    Param {
        name: "list-compress-depth",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        access: Access::Mutable,
        get: |c| Val::Int(c.list_compress_depth as i64),
        put: |c, v| c.list_compress_depth = v.int() as u64,
    },
];

/// Redis 7.0's aliases: (alias, the parameter's name).
pub const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
];

/// Value syntaxes only these parameters use.
#[derive(Clone, Copy, Debug)]
pub enum Special {
    /// `latency-tracking-info-percentiles`: decimal numbers within 0..=100 (possibly none).
    Percentiles,
    /// `oom-score-adj-values`: three integers within -2000..=2000.
    OomValues,
    /// `shutdown-on-sigint` / `shutdown-on-sigterm`: a set of `default save nosave now force`.
    ShutdownFlags,
}

/// The flags of `shutdown-on-sig*`, in the order they are shown.
const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];

impl Special {
    /// Parses the words of a value into its normalized text (`Val::Str`).
    pub fn parse(self, words: &[&[u8]]) -> Result<Val, String> {
        match self {
            Special::Percentiles => {
                let mut out = Vec::with_capacity(words.len());
                for w in words {
                    let v: f64 = core::str::from_utf8(w)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .filter(|v: &f64| !v.is_nan())
                        .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                    if !(0.0..=100.0).contains(&v) {
                        return Err("latency-tracking-info-percentiles parameters should sit \
                                    between [0.0,100.0]"
                            .into());
                    }
                    out.push(alloc::format!("{v}"));
                }
                Ok(Val::Str(out.join(" ").into_bytes()))
            }
            Special::OomValues => {
                if words.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                let mut out = Vec::with_capacity(3);
                for w in words {
                    let v = crate::util::parse_i64(w)
                        .filter(|v| (-2000..=2000).contains(v))
                        .ok_or(
                            "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
                        )?;
                    out.push(alloc::format!("{v}"));
                }
                Ok(Val::Str(out.join(" ").into_bytes()))
            }
            Special::ShutdownFlags => {
                let mut set = [false; 5];
                for w in words {
                    let i = SHUTDOWN_FLAGS
                        .iter()
                        .position(|f| f.as_bytes().eq_ignore_ascii_case(w))
                        .ok_or_else(|| {
                            alloc::format!(
                                "argument(s) must be one of the following: {}",
                                SHUTDOWN_FLAGS.join(", ")
                            )
                        })?;
                    set[i] = true;
                }
                if set[1] && set[2] {
                    return Err(
                        "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
                    );
                }
                // `default` means no flag: it shows only when nothing else is set.
                let shown: Vec<&str> = (1..5)
                    .filter(|&i| set[i])
                    .map(|i| SHUTDOWN_FLAGS[i])
                    .collect();
                if words.is_empty() {
                    return Err(alloc::format!(
                        "argument(s) must be one of the following: {}",
                        SHUTDOWN_FLAGS.join(", ")
                    ));
                }
                let text = if shown.is_empty() {
                    String::from("default")
                } else {
                    shown.join(" ")
                };
                Ok(Val::Str(text.into_bytes()))
            }
        }
    }
}

/// The most `bind` addresses Redis accepts.
const BIND_MAX: usize = 16;

impl Kind {
    /// Whether the kind takes a list of words rather than exactly one value.
    pub fn is_multi(self) -> bool {
        matches!(
            self,
            Kind::Words | Kind::Save | Kind::BufferLimits | Kind::Special(_)
        )
    }

    /// Parses a value from its words (exactly one for single-valued kinds), giving Redis's
    /// reason text on failure.
    pub fn parse(self, words: &[&[u8]]) -> Result<Val, String> {
        match self {
            Kind::Words => parse_words(words),
            Kind::Save => parse_save(words)
                .map(Val::Save)
                .ok_or_else(|| "Invalid save parameters".into()),
            Kind::BufferLimits => parse_buffer_limits(words),
            Kind::Special(special) => special.parse(words),
            _ => match words {
                [one] => self.parse_one(one),
                _ => Err("wrong number of arguments".into()),
            },
        }
    }

    /// Parses a single-valued kind.
    fn parse_one(self, s: &[u8]) -> Result<Val, String> {
        match self {
            Kind::Bool => parse_bool(s).map(Val::Bool).ok_or_else(yes_or_no),
            Kind::DaemonizeNo => match parse_bool(s) {
                Some(false) => Ok(Val::Bool(false)),
                Some(true) => Err("argument must be 'no': Kayvee does not daemonize itself, \
                     run it under a supervisor (systemd, a container) instead"
                    .into()),
                None => Err(yes_or_no()),
            },
            Kind::Int { min, max } => {
                let v = crate::util::parse_i64(s)
                    .ok_or("argument couldn't be parsed into an integer")?;
                check_bounds(v as i128, min.into(), max.into(), false).map(|_| Val::Int(v))
            }
            Kind::Memory { min, max } => {
                let v = parse_memory(s).ok_or("argument must be a memory value")?;
                check_bounds(v.into(), min.into(), max.into(), false).map(|_| Val::Mem(v))
            }
            Kind::Octal { max } => {
                let v = parse_octal(s).ok_or("argument couldn't be parsed as an octal number")?;
                check_bounds(v.into(), 0, max.into(), true).map(|_| Val::Int(v))
            }
            Kind::Enum(names) => names
                .iter()
                .find(|n| n.as_bytes().eq_ignore_ascii_case(s))
                .map(|n| Val::Str(n.as_bytes().into()))
                .ok_or_else(|| {
                    alloc::format!(
                        "argument(s) must be one of the following: {}",
                        names.join(", ")
                    )
                }),
            Kind::Str => Ok(Val::Str(s.into())),
            Kind::ProcTitle => super::proc_title::validate(s)
                .map(|()| Val::Str(s.into()))
                .map_err(Into::into),
            Kind::KeyspaceEvents => super::keyspace_events::parse_flags(s)
                .map(|f| Val::Int(f.into()))
                .ok_or_else(|| super::keyspace_events::BAD_CLASS.into()),
            Kind::OnlyNo(refusal) => match parse_bool(s) {
                Some(false) => Ok(Val::Bool(false)),
                Some(true) => Err(refusal.into()),
                None => Err(yes_or_no()),
            },
            Kind::MemoryOrPercent => parse_memory_or_percent(s),
            Kind::Words | Kind::Save | Kind::BufferLimits | Kind::Special(_) => {
                unreachable!("multi-valued kinds parse in parse()")
            }
        }
    }

    /// Renders a value as `CONFIG GET` shows it.
    pub fn render(self, v: &Val) -> Vec<u8> {
        match (self, v) {
            (_, Val::Bool(b)) => (if *b { "yes" } else { "no" }).into(),
            (Kind::KeyspaceEvents, Val::Int(f)) => {
                super::keyspace_events::render_flags(*f as u32).into()
            }
            (Kind::Octal { .. }, Val::Int(i)) => alloc::format!("{i:o}").into_bytes(),
            (Kind::MemoryOrPercent, Val::Int(i)) if *i < 0 => {
                alloc::format!("{}%", -*i).into_bytes()
            }
            (_, Val::Int(i)) => alloc::format!("{i}").into_bytes(),
            (_, Val::Mem(m)) => alloc::format!("{m}").into_bytes(),
            (_, Val::Str(s)) => s.clone(),
            (_, Val::Words(w)) => w.join(" ").into_bytes(),
            (_, Val::Save(points)) => render_save(points).into_bytes(),
        }
    }

    /// Renders a value's arguments for a config file line (one entry per line to write).
    pub fn render_file_args(self, v: &Val) -> Vec<String> {
        use super::syntax::repr;
        match (self, v) {
            (_, Val::Mem(m)) => alloc::vec![render_memory(*m)],
            (Kind::Str | Kind::ProcTitle, Val::Str(s)) => alloc::vec![repr(s)],
            (Kind::KeyspaceEvents, v) => alloc::vec![repr(&self.render(v))],
            (_, Val::Save(points)) if points.is_empty() => alloc::vec!["\"\"".into()],
            (_, Val::Save(points)) => points
                .iter()
                .map(|(s, c)| alloc::format!("{s} {c}"))
                .collect(),
            _ => alloc::vec![String::from_utf8_lossy(&self.render(v)).into_owned()],
        }
    }
}

/// The class index of a `client-output-buffer-limit` class name (`replica` = `slave`).
fn class_index(name: &[u8]) -> Option<usize> {
    let name = name.to_ascii_lowercase();
    match name.as_slice() {
        b"normal" => Some(0),
        b"slave" | b"replica" => Some(1),
        b"pubsub" => Some(2),
        _ => None,
    }
}

/// Parses `class hard soft seconds` groups (memory units allowed) into normalized words (class
/// name, then the three numbers in bytes and seconds), with Redis 7.0's error texts.
fn parse_buffer_limits(words: &[&[u8]]) -> Result<Val, String> {
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = Vec::with_capacity(words.len());
    for g in words.chunks(4) {
        let class = class_index(g[0])
            .ok_or("Invalid client class specified in buffer limit configuration.")?;
        let bad = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        let hard = parse_memory(g[1]).ok_or(bad)?;
        let soft = parse_memory(g[2]).ok_or(bad)?;
        let secs = crate::util::parse_i64(g[3])
            .filter(|v| *v >= 0)
            .ok_or(bad)?;
        out.push(String::from(crate::config::OUTPUT_CLASSES[class]));
        out.extend([hard, soft, secs as u64].map(|v| alloc::format!("{v}")));
    }
    Ok(Val::Words(out))
}

/// `normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60`, as CONFIG GET shows.
fn render_buffer_limits(limits: &[crate::config::OutputLimit; 3]) -> String {
    let mut s = String::new();
    for (i, l) in limits.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let class = crate::config::OUTPUT_CLASSES[i];
        s.push_str(&alloc::format!(
            "{class} {} {} {}",
            l.hard_bytes,
            l.soft_bytes,
            l.soft_s
        ));
    }
    s
}

/// A memory size, or `N%` with N at most 100 (stored as `-N`), as `maxmemory-clients` takes.
fn parse_memory_or_percent(s: &[u8]) -> Result<Val, String> {
    if let Some(digits) = s.strip_suffix(b"%") {
        let pct = crate::util::parse_i64(digits)
            .filter(|v| *v >= 0)
            .ok_or("argument must be a memory or percent value")?;
        if pct > 100 {
            return Err("percentage argument must be less or equal to 100".into());
        }
        return Ok(Val::Int(-pct));
    }
    let v = parse_memory(s).ok_or("argument must be a memory or percent value")?;
    check_bounds(v.into(), 0, i64::MAX.into(), false).map(|_| Val::Int(v as i64))
}

/// `argument must be 'yes' or 'no'`.
fn yes_or_no() -> String {
    "argument must be 'yes' or 'no'".into()
}

/// Redis's bounds message (octal bounds are shown in octal digits).
fn check_bounds(v: i128, min: i128, max: i128, octal: bool) -> Result<(), String> {
    if (min..=max).contains(&v) {
        return Ok(());
    }
    Err(if octal {
        alloc::format!("argument must be between {min:o} and {max:o} inclusive")
    } else {
        alloc::format!("argument must be between {min} and {max} inclusive")
    })
}

/// `bind` addresses: at most 16 words.
fn parse_words(words: &[&[u8]]) -> Result<Val, String> {
    if words.len() > BIND_MAX {
        return Err("Too many bind addresses specified.".into());
    }
    let w = words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    Ok(Val::Words(w))
}

//! The rest of Redis 7.0's parameters: the latency monitor's and latency tracking's, the
//! protected-configs switch, and every parameter Kayvee accepts and shows with Redis's type,
//! default and bounds but does not act on yet (replication, cluster, TLS, defragmentation, lazy
//! freeing, process management...; docs/compatibility.md lists them with what is missing).
//! Those keep their value in [`Config::extra`], keyed by name, so a `CONFIG SET` reads back
//! and `CONFIG REWRITE` writes it. [`HIDDEN`] parameters are left out of `CONFIG GET` globs, as
//! Redis leaves out its hidden (testing) parameters.

use super::table::{Access, Kind, Param, Special, Val};
use super::Config;
use alloc::string::String;

/// Parameters asked for by name only: `CONFIG GET` with a glob leaves them out.
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "use-exit-on-panic",
    "rdb-key-save-delay",
    "loading-process-events-interval-bytes",
    "watchdog-period",
    "lua-enable-deprecated-api",
];

/// Whether `name` is hidden from `CONFIG GET` globs.
pub fn is_hidden(name: &str) -> bool {
    HIDDEN.contains(&name)
}

const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;
const LL_MAX: i64 = i64::MAX;

/// The value of an inert parameter: what was set, else the default.
fn stored(c: &Config, name: &'static str, default: Val) -> Val {
    c.extra.get(name).cloned().unwrap_or(default)
}

/// `acllog-max-len`: the ACL log's length limit (stored with the parameters without a field).
pub fn acllog_max_len(c: &Config) -> usize {
    match stored(c, "acllog-max-len", Val::Int(128)) {
        Val::Int(n) => usize::try_from(n).unwrap_or(usize::MAX),
        _ => 128,
    }
}

/// `acl-pubsub-default allchannels`: new and reset users may use every channel.
pub fn acl_pubsub_all(c: &Config) -> bool {
    stored(c, "acl-pubsub-default", s("resetchannels")) == s("allchannels")
}

/// `bind-source-addr`: the local address outgoing links (the link to the primary) bind to
/// before they connect; empty for the kernel's choice.
pub fn bind_source_addr(c: &Config) -> String {
    match stored(c, "bind-source-addr", s("")) {
        Val::Str(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    }
}

/// `sanitize-dump-payload`: when the contents of a payload's compact encodings are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SanitizePayload {
    /// `no` (the default): only the headers Redis checks without deep sanitization.
    No,
    /// `yes`: always, RDB files included.
    Yes,
    /// `clients`: for RESTORE from clients, except users with `skip-sanitize-payload`.
    Clients,
}

/// `sanitize-dump-payload`'s value.
pub fn sanitize_dump_payload(c: &Config) -> SanitizePayload {
    match stored(c, "sanitize-dump-payload", s("no")) {
        v if v == s("yes") => SanitizePayload::Yes,
        v if v == s("clients") => SanitizePayload::Clients,
        _ => SanitizePayload::No,
    }
}

/// An inert parameter: `inert!(name, kind, access, default)`.
macro_rules! inert {
    ($name:literal, $kind:expr, $access:expr, $default:expr) => {
        Param {
            name: $name,
            kind: $kind,
            access: $access,
            get: |c| stored(c, $name, $default),
            put: |c, v| {
                c.extra.insert($name, v);
            },
        }
    };
}

use Access::{Immutable as Imm, Mutable as Mut};

const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}
const fn mem(min: u64) -> Kind {
    Kind::Memory {
        min,
        max: LL_MAX as u64,
    }
}
const BOOL: Kind = Kind::Bool;
const STR: Kind = Kind::Str;
const PORT: Kind = int(0, 65535);
fn yes() -> Val {
    Val::Bool(true)
}
fn no() -> Val {
    Val::Bool(false)
}
fn s(text: &str) -> Val {
    Val::Str(text.as_bytes().into())
}

/// Every parameter of this module, in the order `CONFIG GET *` lists them (after
/// [`super::table::PARAMS`]).
pub const PARAMS: &[Param] = &[
    Param {
        name: "latency-monitor-threshold",
        kind: int(0, LL_MAX),
        access: Mut,
        get: |c| Val::Int(c.latency_monitor_threshold as i64),
        put: |c, v| {
            if let Val::Int(v) = v {
                c.latency_monitor_threshold = v as u64;
            }
        },
    },
    Param {
        name: "latency-tracking",
        kind: BOOL,
        access: Mut,
        get: |c| Val::Bool(c.latency_tracking),
        put: |c, v| c.latency_tracking = matches!(v, Val::Bool(true)),
    },
    Param {
        name: "latency-tracking-info-percentiles",
        kind: Kind::Special(Special::Percentiles),
        access: Mut,
        get: |c| Val::Str(c.latency_tracking_info_percentiles.as_bytes().into()),
        put: |c, v| {
            if let Val::Str(b) = v {
                c.latency_tracking_info_percentiles = String::from_utf8_lossy(&b).into();
            }
        },
    },
    Param {
        name: "enable-protected-configs",
        kind: Kind::Enum(&["no", "yes", "local"]),
        access: Imm,
        get: |c| Val::Str(c.enable_protected_configs.as_bytes().into()),
        put: |c, v| {
            if let Val::Str(b) = v {
                c.enable_protected_configs = String::from_utf8_lossy(&b).into();
            }
        },
    },
    // Accepted, no effect yet (docs/compatibility.md).
    inert!(
        "acl-pubsub-default",
        Kind::Enum(&["allchannels", "resetchannels"]),
        Mut,
        s("resetchannels")
    ),
    inert!("acllog-max-len", int(0, LL_MAX), Mut, Val::Int(128)),
    inert!(
        "activedefrag",
        Kind::OnlyNo(
            "Active defragmentation cannot be enabled: it requires a Redis server compiled \
             with a modified Jemalloc like the one shipped by default with the Redis source \
             distribution"
        ),
        Mut,
        no()
    ),
    inert!("active-defrag-cycle-max", int(1, 99), Mut, Val::Int(25)),
    inert!("active-defrag-cycle-min", int(1, 99), Mut, Val::Int(1)),
    inert!(
        "active-defrag-ignore-bytes",
        mem(1),
        Mut,
        Val::Mem(100 << 20)
    ),
    inert!(
        "active-defrag-max-scan-fields",
        int(1, LL_MAX),
        Mut,
        Val::Int(1000)
    ),
    inert!(
        "active-defrag-threshold-lower",
        int(0, 1000),
        Mut,
        Val::Int(10)
    ),
    inert!(
        "active-defrag-threshold-upper",
        int(0, 1000),
        Mut,
        Val::Int(100)
    ),
    inert!("activerehashing", BOOL, Mut, yes()),
    inert!("aof-disable-auto-gc", BOOL, Mut, no()),
    inert!("aof-rewrite-incremental-fsync", BOOL, Mut, yes()),
    inert!("aof_rewrite_cpulist", STR, Imm, s("")),
    inert!("bgsave_cpulist", STR, Imm, s("")),
    inert!("bio_cpulist", STR, Imm, s("")),
    inert!("server_cpulist", STR, Imm, s("")),
    inert!("bind-source-addr", STR, Mut, s("")),
    inert!("busy-reply-threshold", int(0, LL_MAX), Mut, Val::Int(5000)),
    inert!("cluster-allow-pubsubshard-when-down", BOOL, Mut, yes()),
    inert!("cluster-allow-reads-when-down", BOOL, Mut, no()),
    inert!("cluster-allow-replica-migration", BOOL, Mut, yes()),
    inert!("cluster-announce-bus-port", PORT, Mut, Val::Int(0)),
    inert!("cluster-announce-hostname", STR, Mut, s("")),
    inert!("cluster-announce-ip", STR, Mut, s("")),
    inert!("cluster-announce-port", PORT, Mut, Val::Int(0)),
    inert!("cluster-announce-tls-port", PORT, Mut, Val::Int(0)),
    inert!("cluster-config-file", STR, Imm, s("nodes.conf")),
    inert!(
        "cluster-enabled",
        Kind::OnlyNo("Kayvee has no cluster mode (cluster-enabled must be no)"),
        Imm,
        no()
    ),
    inert!("cluster-link-sendbuf-limit", mem(0), Mut, Val::Mem(0)),
    inert!(
        "cluster-migration-barrier",
        int(0, INT_MAX),
        Mut,
        Val::Int(1)
    ),
    inert!("cluster-node-timeout", int(0, LL_MAX), Mut, Val::Int(15000)),
    inert!("cluster-port", PORT, Imm, Val::Int(0)),
    inert!(
        "cluster-preferred-endpoint-type",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        Mut,
        s("ip")
    ),
    inert!("cluster-replica-no-failover", BOOL, Mut, no()),
    inert!(
        "cluster-replica-validity-factor",
        int(0, INT_MAX),
        Mut,
        Val::Int(10)
    ),
    inert!("cluster-require-full-coverage", BOOL, Mut, yes()),
    inert!("crash-log-enabled", BOOL, Mut, yes()),
    inert!("crash-memcheck-enabled", BOOL, Mut, yes()),
    inert!("disable-thp", BOOL, Imm, yes()),
    inert!("dynamic-hz", BOOL, Mut, yes()),
    inert!(
        "enable-module-command",
        Kind::Enum(&["no", "yes", "local"]),
        Imm,
        s("no")
    ),
    inert!("ignore-warnings", STR, Mut, s("")),
    inert!("io-threads", int(1, 128), Imm, Val::Int(1)),
    inert!("io-threads-do-reads", BOOL, Imm, no()),
    inert!("jemalloc-bg-thread", BOOL, Mut, yes()),
    inert!("lazyfree-lazy-eviction", BOOL, Mut, no()),
    inert!("lazyfree-lazy-expire", BOOL, Mut, no()),
    inert!("lazyfree-lazy-server-del", BOOL, Mut, no()),
    inert!("lazyfree-lazy-user-del", BOOL, Mut, no()),
    inert!("lazyfree-lazy-user-flush", BOOL, Mut, no()),
    // Read when the Lua VM is built: `setfenv`, `getfenv` and `newproxy` for scripts.
    inert!("lua-enable-deprecated-api", BOOL, Imm, no()),
    inert!("masterauth", STR, Mut, s("")),
    inert!("masteruser", STR, Mut, s("")),
    inert!(
        "oom-score-adj",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        Mut,
        s("no")
    ),
    inert!(
        "oom-score-adj-values",
        Kind::Special(Special::OomValues),
        Mut,
        s("0 200 800")
    ),
    // Read by the shell, which sets the process title (Linux: what `ps` shows).
    inert!(
        "proc-title-template",
        Kind::ProcTitle,
        Mut,
        s(super::proc_title::DEFAULT)
    ),
    inert!(
        "propagation-error-behavior",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        Mut,
        s("ignore")
    ),
    inert!("rdb-del-sync-files", BOOL, Mut, no()),
    inert!("rdb-save-incremental-fsync", BOOL, Mut, yes()),
    inert!("repl-backlog-size", mem(1), Mut, Val::Mem(1 << 20)),
    inert!("repl-backlog-ttl", int(0, LL_MAX), Mut, Val::Int(3600)),
    inert!("repl-disable-tcp-nodelay", BOOL, Mut, no()),
    inert!(
        "repl-diskless-load",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        Mut,
        s("disabled")
    ),
    inert!("repl-diskless-sync", BOOL, Mut, yes()),
    inert!(
        "repl-diskless-sync-delay",
        int(0, INT_MAX),
        Mut,
        Val::Int(5)
    ),
    inert!(
        "repl-diskless-sync-max-replicas",
        int(0, INT_MAX),
        Mut,
        Val::Int(0)
    ),
    inert!(
        "repl-ping-replica-period",
        int(1, INT_MAX),
        Mut,
        Val::Int(10)
    ),
    inert!("repl-timeout", int(1, INT_MAX), Mut, Val::Int(60)),
    inert!("replica-announce-ip", STR, Mut, s("")),
    inert!("replica-announce-port", PORT, Mut, Val::Int(0)),
    inert!("replica-announced", BOOL, Mut, yes()),
    inert!("replica-ignore-disk-write-errors", BOOL, Mut, no()),
    inert!("replica-ignore-maxmemory", BOOL, Mut, yes()),
    inert!("replica-lazy-flush", BOOL, Mut, no()),
    inert!("replica-priority", int(0, INT_MAX), Mut, Val::Int(100)),
    inert!("replica-read-only", BOOL, Mut, yes()),
    inert!("replica-serve-stale-data", BOOL, Mut, yes()),
    inert!(
        "sanitize-dump-payload",
        Kind::Enum(&["no", "yes", "clients"]),
        Mut,
        s("no")
    ),
    inert!("set-proc-title", BOOL, Imm, yes()),
    inert!(
        "shutdown-on-sigint",
        Kind::Special(Special::ShutdownFlags),
        Mut,
        s("default")
    ),
    inert!(
        "shutdown-on-sigterm",
        Kind::Special(Special::ShutdownFlags),
        Mut,
        s("default")
    ),
    inert!("shutdown-timeout", int(0, INT_MAX), Mut, Val::Int(10)),
    inert!("socket-mark-id", int(0, u32::MAX as i64), Imm, Val::Int(0)),
    inert!(
        "supervised",
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        Imm,
        s("no")
    ),
    inert!("syslog-enabled", BOOL, Imm, no()),
    inert!(
        "syslog-facility",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"
        ]),
        Imm,
        s("local0")
    ),
    inert!("syslog-ident", STR, Imm, s("redis")),
    inert!("tcp-backlog", int(0, INT_MAX), Imm, Val::Int(511)),
    inert!(
        "tls-auth-clients",
        Kind::Enum(&["no", "yes", "optional"]),
        Mut,
        s("yes")
    ),
    inert!("tls-ca-cert-dir", STR, Mut, s("")),
    inert!("tls-ca-cert-file", STR, Mut, s("")),
    inert!("tls-cert-file", STR, Mut, s("")),
    inert!("tls-ciphers", STR, Mut, s("")),
    inert!("tls-ciphersuites", STR, Mut, s("")),
    inert!("tls-client-cert-file", STR, Mut, s("")),
    inert!("tls-client-key-file", STR, Mut, s("")),
    inert!("tls-client-key-file-pass", STR, Mut, s("")),
    inert!("tls-cluster", BOOL, Mut, no()),
    inert!("tls-dh-params-file", STR, Mut, s("")),
    inert!("tls-key-file", STR, Mut, s("")),
    inert!("tls-key-file-pass", STR, Mut, s("")),
    inert!("tls-port", PORT, Mut, Val::Int(0)),
    inert!("tls-prefer-server-ciphers", BOOL, Mut, no()),
    inert!("tls-protocols", STR, Mut, s("")),
    inert!("tls-replication", BOOL, Mut, no()),
    inert!(
        "tls-session-cache-size",
        int(0, INT_MAX),
        Mut,
        Val::Int(20480)
    ),
    inert!(
        "tls-session-cache-timeout",
        int(0, INT_MAX),
        Mut,
        Val::Int(300)
    ),
    inert!("tls-session-caching", BOOL, Mut, yes()),
    // Hidden (testing) parameters.
    inert!("key-load-delay", int(INT_MIN, INT_MAX), Mut, Val::Int(0)),
    inert!(
        "rdb-key-save-delay",
        int(INT_MIN, INT_MAX),
        Mut,
        Val::Int(0)
    ),
    inert!(
        "loading-process-events-interval-bytes",
        int(1024, INT_MAX),
        Mut,
        Val::Int(2 << 20)
    ),
    inert!("watchdog-period", int(0, INT_MAX), Mut, Val::Int(0)),
    // Redis exits instead of aborting on a panic with it; kayvee-server always exits (status
    // 101, the panic unwinds), never dies of a signal.
    inert!("use-exit-on-panic", BOOL, Imm, no()),
];

/// Redis 7.0's aliases of these parameters: (alias, the parameter's name).
pub const ALIASES: &[(&str, &str)] = &[
    ("lua-time-limit", "busy-reply-threshold"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
];

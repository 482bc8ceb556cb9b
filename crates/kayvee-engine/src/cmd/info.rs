//! INFO: the server's state as `# Section` blocks of `field:value` lines, with Redis 7.0.15's
//! section and field names, order and number formats (checked against the real server), so
//! that tools which parse INFO (exporters, ioredis's ready check, redis-cli) read Kayvee as
//! they read Redis.
//!
//! Values come from the engine (counters, databases, config) and from [`crate::HostInfo`],
//! which the shell fills. Features Kayvee does not have yet (persistence, replication, Lua,
//! modules) report the values an idle Redis with that feature unused reports.

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::Cx;
use alloc::string::String;
use core::fmt::{Display, Write};

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "info",
    arity: -1,
    flags: flags::LOADING | flags::STALE,
    acl: acl::SLOW | acl::DANGEROUS,
    summary: "Get information and statistics about the server",
    group: "server",
    tips: &[
        "nondeterministic_output",
        "request_policy:all_shards",
        "response_policy:special",
    ],
    handler: info,
    ..CommandSpec::DEFAULT
}];

/// The sections in output order, each with whether `INFO` without arguments (`default`)
/// includes it.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// Which sections a request selects, as a bit per entry of [`SECTIONS`].
fn select_sections<'a>(names: impl Iterator<Item = &'a [u8]>) -> u32 {
    let mut mask = 0;
    let mut any = false;
    for name in names {
        any = true;
        let name = name.to_ascii_lowercase();
        for (i, (s, default)) in SECTIONS.iter().enumerate() {
            let hit = match name.as_slice() {
                b"all" | b"everything" => true,
                b"default" => *default,
                n => n == s.as_bytes(),
            };
            if hit {
                mask |= 1 << i;
            }
        }
    }
    if !any {
        return select_sections(core::iter::once(&b"default"[..]));
    }
    mask
}

/// INFO [section ...]: a verbatim `txt` string (a bulk string in RESP2).
fn info(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mask = select_sections(args.iter().skip(1));
    cx.core.save_progress.refresh(cx.now.ms());
    let text = info_text(cx, mask);
    out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The whole INFO text for the sections in `mask`: blocks joined by a blank line.
pub fn info_text(cx: &Cx<'_>, mask: u32) -> String {
    let mut s = String::new();
    for (i, (name, _)) in SECTIONS.iter().enumerate() {
        if mask & (1 << i) == 0 {
            continue;
        }
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        section(cx, name, &mut s);
    }
    s
}

/// Writes one section, header included.
fn section(cx: &Cx<'_>, name: &str, s: &mut String) {
    let mut title = String::from(name);
    title[..1].make_ascii_uppercase();
    if name == "cpu" {
        title = "CPU".into();
    }
    let _ = write!(s, "# {title}\r\n");
    match name {
        "server" => server(cx, s),
        "clients" => clients(cx, s),
        "memory" => memory(cx, s),
        "persistence" => persistence(cx, s),
        "stats" => stats(cx, s),
        "replication" => replication(cx, s),
        "cpu" => cpu(cx, s),
        "commandstats" => commandstats(cx, s),
        "errorstats" => errorstats(cx, s),
        "cluster" => field(s, "cluster_enabled", 0),
        "keyspace" => keyspace(cx, s),
        "latencystats" => latencystats(cx, s),
        _ => {} // modules: nothing to report
    }
}

/// `latency_percentiles_usec_<command>:p50=...` for each command with a latency histogram.
fn latencystats(cx: &Cx<'_>, s: &mut String) {
    let percentiles = &cx.core.config.latency_tracking_info_percentiles;
    for (id, h) in cx.core.latency.histograms.iter() {
        let name = &cx.commands.get(crate::command::CommandId(id)).full_name;
        let text = crate::latency::percentiles_text(h, percentiles);
        let _ = write!(s, "latency_percentiles_usec_{name}:{text}\r\n");
    }
}

/// One `name:value\r\n` line.
fn field(s: &mut String, name: &str, value: impl Display) {
    let _ = write!(s, "{name}:{value}\r\n");
}

/// Several fields that are always zero in Kayvee (features it does not have).
fn zeros(s: &mut String, names: &[&str]) {
    names.iter().for_each(|n| field(s, n, 0));
}

/// A byte count as Redis's `bytesToHuman` shows it: `0B`, `918.88K`, `11.78M`... (bytes past
/// the petabytes stay plain bytes, as in Redis).
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(u32, char)] = &[(1, 'K'), (2, 'M'), (3, 'G'), (4, 'T'), (5, 'P')];
    if n < 1024 {
        return alloc::format!("{n}B");
    }
    for &(power, unit) in UNITS {
        let next = 1u64 << (10 * (power + 1));
        if n < next {
            let v = n as f64 / (1u64 << (10 * power)) as f64;
            return alloc::format!("{v:.2}{unit}");
        }
    }
    alloc::format!("{n}B")
}

/// `a / b` with two decimals, `0.00` when `b` is zero.
pub fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        return "0.00".into();
    }
    alloc::format!("{:.2}", a as f64 / b as f64)
}

/// The Server section.
fn server(cx: &Cx<'_>, s: &mut String) {
    let (core, host) = (&*cx.core, &cx.core.host);
    let uptime_s = cx.now_ms().saturating_sub(core.start_ms) / 1000;
    let port = if host.tcp_port != 0 {
        host.tcp_port
    } else {
        core.config.port
    };
    field(s, "redis_version", super::connection::REDIS_VERSION);
    field(s, "redis_git_sha1", "00000000");
    field(s, "redis_git_dirty", 0);
    field(s, "redis_build_id", 0);
    field(s, "redis_mode", "standalone");
    field(s, "os", &host.os);
    field(s, "arch_bits", host.arch_bits);
    field(s, "monotonic_clock", "POSIX clock_gettime");
    field(s, "multiplexing_api", &host.multiplexing_api);
    field(s, "atomicvar_api", "c11-builtin");
    field(s, "gcc_version", "0.0.0");
    field(s, "process_id", host.process_id);
    field(s, "process_supervised", "no");
    field(s, "run_id", &core.run_id);
    field(s, "tcp_port", port);
    field(s, "server_time_usec", cx.now.unix_us);
    field(s, "uptime_in_seconds", uptime_s);
    field(s, "uptime_in_days", uptime_s / 86400);
    field(s, "hz", core.config.hz);
    field(s, "configured_hz", core.config.hz);
    field(s, "lru_clock", (cx.now_ms() / 1000) & ((1 << 24) - 1));
    field(s, "executable", &host.executable);
    field(
        s,
        "config_file",
        core.config.config_file.as_deref().unwrap_or(""),
    );
    field(s, "io_threads_active", 0);
    // Only while a shutdown waits for replicas, as Redis 7.0.
    if core.shutdown_wait.is_some() {
        let left = super::server::shutdown_remaining_ms(core, cx.now_ms());
        field(s, "shutdown_in_milliseconds", left);
    }
    field(s, "kayvee_version", env!("CARGO_PKG_VERSION"));
    for &(name, value) in &host.counters {
        field(s, name, value);
    }
}

/// The Clients section.
fn clients(cx: &Cx<'_>, s: &mut String) {
    let io = || cx.clients.iter().map(|(_, c)| c.io);
    // Replicas are not counted, as in Redis 7.0 (the link to a primary is).
    let replicas = cx.core.repl.replicas.len();
    field(
        s,
        "connected_clients",
        cx.clients.len().saturating_sub(replicas),
    );
    field(s, "cluster_connections", 0);
    field(s, "maxclients", cx.core.config.maxclients);
    let max_in = io().map(|i| i.qbuf).max().unwrap_or(0);
    let max_out = io().map(|i| i.omem).max().unwrap_or(0);
    field(s, "client_recent_max_input_buffer", max_in);
    field(s, "client_recent_max_output_buffer", max_out);
    let held = cx.core.pause.held();
    let shutdown = super::server::shutdown_blocked(cx.core);
    field(
        s,
        "blocked_clients",
        cx.core.blocking.len() + held + shutdown,
    );
    field(s, "tracking_clients", cx.core.tracking.client_count());
    field(
        s,
        "clients_in_timeout_table",
        cx.core.blocking.with_timeout(),
    );
}

/// The Memory section. Kayvee's allocator is counted by the shell (its memory probe, else
/// `host.used_memory`);
/// the fields Redis splits further (overhead, dataset, allocator internals) are derived
/// from that one count.
fn memory(cx: &Cx<'_>, s: &mut String) {
    let core = &*cx.core;
    let (used, rss) = (
        crate::evict::used_memory(&core.evict, &core.host),
        core.host.used_memory_rss,
    );
    let peak = core.used_memory_peak.max(used);
    let human = |s: &mut String, name: &str, v: u64| {
        field(s, name, v);
        field(s, &alloc::format!("{name}_human"), bytes_to_human(v));
    };
    human(s, "used_memory", used);
    human(s, "used_memory_rss", rss);
    human(s, "used_memory_peak", peak);
    field(s, "used_memory_peak_perc", percent(used, peak));
    zeros(s, &["used_memory_overhead", "used_memory_startup"]);
    field(s, "used_memory_dataset", used);
    field(s, "used_memory_dataset_perc", percent(used, used));
    field(s, "allocator_allocated", used);
    field(s, "allocator_active", used);
    field(s, "allocator_resident", rss);
    human(s, "total_system_memory", core.host.total_system_memory);
    let scripts = ScriptMemory::of(core);
    field(s, "used_memory_lua", scripts.vm);
    field(s, "used_memory_vm_eval", scripts.vm);
    field(s, "used_memory_lua_human", bytes_to_human(scripts.vm));
    field(s, "used_memory_scripts_eval", scripts.bodies);
    field(s, "number_of_cached_scripts", scripts.cached);
    field(s, "number_of_functions", scripts.functions);
    field(s, "number_of_libraries", scripts.libraries);
    field(s, "used_memory_vm_functions", 0);
    human(s, "used_memory_vm_total", scripts.vm);
    field(s, "used_memory_functions", scripts.function_code);
    field(
        s,
        "used_memory_scripts",
        scripts.bodies + scripts.function_code,
    );
    let scripts_total = scripts.bodies + scripts.function_code;
    field(
        s,
        "used_memory_scripts_human",
        bytes_to_human(scripts_total),
    );
    human(s, "maxmemory", core.config.maxmemory);
    field(s, "maxmemory_policy", &core.config.maxmemory_policy);
    // The backlog, which holds the stream syncing replicas wait for too (kept once).
    let backlog = core.repl.backlog.as_ref();
    let repl = ReplMemory {
        // Or further back, while an online replica lags more than the backlog holds.
        buffers: core.repl.shared_buffer_bytes(),
        // Up to its size (what grows past it while replicas sync is theirs), as Redis 7.0.
        backlog: backlog.map_or(0, |b| b.histlen().min(b.size()) as u64),
        not_counted: crate::evict::not_counted(&core.evict, backlog),
    };
    memory_ratios(s, used, rss, &repl);
    clients_memory(cx, s);
}

/// `mem_clients_slaves` and `mem_clients_normal`: the `tot-mem` of the replicas' connections
/// and of the others (as the connection layer last measured them), then the tail of the
/// Memory section.
fn clients_memory(cx: &Cx<'_>, s: &mut String) {
    let (mut replicas, mut normal) = (0u64, 0u64);
    for (h, c) in cx.clients.iter() {
        let mem = c.io.tot_mem as u64;
        if cx.core.repl.is_replica(h) {
            replicas += mem;
        } else {
            normal += mem;
        }
    }
    field(s, "mem_clients_slaves", replicas);
    field(s, "mem_clients_normal", normal);
    zeros(s, &["mem_cluster_links", "mem_aof_buffer"]);
    field(s, "mem_allocator", "kayvee");
    memory_tail(s, cx.core.stats.lazyfreed_objects);
}

/// What INFO memory reports of scripting (zeros without the `scripting` feature). The eval
/// scripts and the functions share one Lua VM, counted as the eval VM's.
#[derive(Default)]
struct ScriptMemory {
    vm: u64,
    bodies: u64,
    cached: u64,
    functions: u64,
    libraries: u64,
    function_code: u64,
}

impl ScriptMemory {
    #[cfg(feature = "scripting")]
    fn of(core: &crate::cx::Core) -> Self {
        let sc = &core.scripts;
        ScriptMemory {
            vm: sc.vm_bytes() as u64,
            bodies: sc.bodies_bytes as u64,
            cached: sc.bodies.len() as u64,
            functions: sc.functions.len() as u64,
            libraries: sc.libraries.len() as u64,
            function_code: sc.libraries.values().map(|l| l.code.len() as u64).sum(),
        }
    }

    #[cfg(not(feature = "scripting"))]
    fn of(_: &crate::cx::Core) -> Self {
        ScriptMemory::default()
    }
}

/// The replication's memory as INFO shows it.
struct ReplMemory {
    /// The shared stream buffer (the backlog, grown while replicas sync).
    buffers: u64,
    /// `mem_replication_backlog`.
    backlog: u64,
    /// `mem_not_counted_for_evict` (see [`crate::evict::not_counted`]).
    not_counted: u64,
}

/// The fragmentation fields of the Memory section and the replication buffers' bytes.
fn memory_ratios(s: &mut String, used: u64, rss: u64, repl: &ReplMemory) {
    let over = rss.saturating_sub(used);
    field(s, "allocator_frag_ratio", ratio(used, used));
    field(s, "allocator_frag_bytes", 0);
    field(s, "allocator_rss_ratio", ratio(rss, used));
    field(s, "allocator_rss_bytes", over);
    field(s, "rss_overhead_ratio", ratio(rss, rss));
    field(s, "rss_overhead_bytes", 0);
    field(s, "mem_fragmentation_ratio", ratio(rss, used));
    field(s, "mem_fragmentation_bytes", over);
    field(s, "mem_not_counted_for_evict", repl.not_counted);
    field(s, "mem_replication_backlog", repl.backlog);
    field(s, "mem_total_replication_buffers", repl.buffers);
}

/// The last fields of the Memory section (nothing is ever pending lazy freeing: see
/// [`crate::stats::Stats::lazyfreed_objects`]).
fn memory_tail(s: &mut String, lazyfreed: u64) {
    zeros(s, &["active_defrag_running", "lazyfree_pending_objects"]);
    field(s, "lazyfreed_objects", lazyfreed);
}

/// `a / b` as a percentage with two decimals (`100.00%`), `0.00%` when `b` is zero.
pub fn percent(a: u64, b: u64) -> String {
    if b == 0 {
        return "0.00%".into();
    }
    alloc::format!("{:.2}%", a as f64 * 100.0 / b as f64)
}

/// The Persistence section: RDB state from [`crate::persist::Persistence`], with the
/// `loading_*` progress fields at its end while the startup load runs, as Redis 7.0 prints them.
fn persistence(cx: &Cx<'_>, s: &mut String) {
    let core = &*cx.core;
    let p = &core.persist;
    field(s, "loading", u8::from(p.loading.is_some()));
    field(s, "async_loading", u8::from(p.async_loading));
    // The running background save's or AOF rewrite's progress (Kayvee forks nothing: see
    // `crate::save_progress` for what the copy-on-write figures mean here).
    let c = core.save_progress.current(cx.now.ms()).unwrap_or_default();
    field(s, "current_cow_peak", c.cow_peak);
    field(s, "current_cow_size", c.cow);
    field(s, "current_cow_size_age", c.cow_age_s);
    field(s, "current_fork_perc", alloc::format!("{:.2}", c.percent()));
    field(s, "current_save_keys_processed", c.keys_processed);
    field(s, "current_save_keys_total", c.keys_total);
    field(s, "rdb_changes_since_last_save", core.stats.dirty);
    // A replica's full sync produces an RDB too (Redis's child writing to the socket).
    let syncing = core
        .repl
        .replicas
        .iter()
        .any(|r| r.state == crate::repl::ReplicaState::Streaming);
    field(
        s,
        "rdb_bgsave_in_progress",
        u8::from(p.bgsave_in_progress() || syncing),
    );
    field(s, "rdb_last_save_time", p.last_save_ms / 1000);
    let status = if p.last_bgsave_failed { "err" } else { "ok" };
    field(s, "rdb_last_bgsave_status", status);
    field(s, "rdb_last_bgsave_time_sec", p.last_bgsave_time_s);
    let current = p
        .bgsave_started_ms
        .map_or(-1, |t| (cx.now.ms().saturating_sub(t) / 1000) as i64);
    field(s, "rdb_current_bgsave_time_sec", current);
    field(s, "rdb_saves", p.saves);
    field(s, "rdb_last_cow_size", core.save_progress.rdb_last_cow_size);
    field(s, "rdb_last_load_keys_expired", p.last_load_keys_expired);
    field(s, "rdb_last_load_keys_loaded", p.last_load_keys_loaded);
    let a = &core.aof.status;
    field(s, "aof_enabled", u8::from(a.on));
    field(
        s,
        "aof_rewrite_in_progress",
        u8::from(a.rewrite_started_ms.is_some()),
    );
    field(s, "aof_rewrite_scheduled", u8::from(a.rewrite_scheduled));
    field(s, "aof_last_rewrite_time_sec", a.last_rewrite_time_s);
    let current = a
        .rewrite_started_ms
        .map_or(-1, |t| (cx.now.ms().saturating_sub(t) / 1000) as i64);
    field(s, "aof_current_rewrite_time_sec", current);
    let ok = |b: bool| if b { "ok" } else { "err" };
    field(s, "aof_last_bgrewrite_status", ok(a.last_bgrewrite_ok));
    field(s, "aof_rewrites", a.rewrites);
    field(
        s,
        "aof_rewrites_consecutive_failures",
        a.consecutive_failures,
    );
    field(s, "aof_last_write_status", ok(a.last_write_ok));
    field(s, "aof_last_cow_size", core.save_progress.aof_last_cow_size);
    zeros(s, &["module_fork_in_progress", "module_fork_last_cow_size"]);
    if a.on {
        field(s, "aof_current_size", a.current_size);
        field(s, "aof_base_size", a.base_size);
        zeros(
            s,
            &[
                "aof_pending_rewrite",
                "aof_buffer_length",
                "aof_pending_bio_fsync",
                "aof_delayed_fsync",
            ],
        );
    }
    if let Some(l) = &p.loading {
        loading_fields(s, l, cx.now.ms());
    }
    // Kayvee's own line: whether this shell can write snapshots at all (the unikernel has no
    // disk yet), so tools need not infer it from failed saves.
    field(
        s,
        "kayvee_persistence",
        if core.host.storage { "on" } else { "off" },
    );
}

/// `loading_start_time` ... `loading_eta_seconds`: the ETA extrapolates the bytes per second
/// so far over the bytes left (1 in the first second), as Redis does.
fn loading_fields(s: &mut String, l: &crate::persist::Loading, now_ms: u64) {
    field(s, "loading_start_time", l.start_ms / 1000);
    field(s, "loading_total_bytes", l.total_bytes);
    field(s, "loading_rdb_used_mem", l.rdb_used_mem);
    field(s, "loading_loaded_bytes", l.loaded_bytes);
    let perc = if l.total_bytes == 0 {
        0.0
    } else {
        l.loaded_bytes as f64 * 100.0 / l.total_bytes as f64
    };
    field(s, "loading_loaded_perc", alloc::format!("{perc:.2}"));
    let elapsed = (now_ms / 1000).saturating_sub(l.start_ms / 1000);
    let left = l.total_bytes.saturating_sub(l.loaded_bytes);
    let eta = if elapsed == 0 {
        1
    } else {
        elapsed * left / (l.loaded_bytes + 1)
    };
    field(s, "loading_eta_seconds", eta);
}

/// The Stats section.
fn stats(cx: &Cx<'_>, s: &mut String) {
    let st = &cx.core.stats;
    let db = |f: fn(&crate::db::DbStats) -> u64| cx.core.dbs.iter().map(|d| f(&d.stats)).sum();
    let expired: u64 = db(|d| d.expired);
    let (hits, misses): (u64, u64) = (db(|d| d.hits), db(|d| d.misses));
    field(
        s,
        "total_connections_received",
        st.total_connections_received,
    );
    field(s, "total_commands_processed", st.total_commands_processed);
    field(s, "instantaneous_ops_per_sec", st.inst_ops.per_sec());
    field(s, "total_net_input_bytes", st.total_net_input_bytes);
    field(s, "total_net_output_bytes", st.total_net_output_bytes);
    zeros(
        s,
        &["total_net_repl_input_bytes", "total_net_repl_output_bytes"],
    );
    let kbps = |m: &crate::stats::InstMetric| alloc::format!("{:.2}", m.per_sec() as f32 / 1024.0);
    field(s, "instantaneous_input_kbps", kbps(&st.inst_input));
    field(s, "instantaneous_output_kbps", kbps(&st.inst_output));
    for name in [
        "instantaneous_input_repl_kbps",
        "instantaneous_output_repl_kbps",
    ] {
        field(s, name, "0.00");
    }
    field(s, "rejected_connections", st.rejected_connections);
    let rs = &cx.core.repl.stats;
    field(s, "sync_full", rs.sync_full);
    field(s, "sync_partial_ok", rs.sync_partial_ok);
    field(s, "sync_partial_err", rs.sync_partial_err);
    field(s, "expired_keys", expired);
    field(s, "expired_stale_perc", "0.00");
    zeros(
        s,
        &[
            "expired_time_cap_reached_count",
            "expire_cycle_cpu_milliseconds",
        ],
    );
    field(s, "evicted_keys", st.evicted_keys);
    field(s, "evicted_clients", st.evicted_clients);
    zeros(
        s,
        &[
            "total_eviction_exceeded_time",
            "current_eviction_exceeded_time",
        ],
    );
    field(s, "keyspace_hits", hits);
    field(s, "keyspace_misses", misses);
    stats_tail(cx, s);
}

/// The Stats section after the keyspace counters.
fn stats_tail(cx: &Cx<'_>, s: &mut String) {
    use crate::pubsub::Kind;
    let ps = &cx.core.pubsub;
    field(s, "pubsub_channels", ps.channel_count(Kind::Channel));
    field(s, "pubsub_patterns", ps.pattern_count());
    field(s, "pubsubshard_channels", ps.channel_count(Kind::Shard));
    // Taking a snapshot is a pointer copy: no fork to time.
    field(s, "latest_fork_usec", 0);
    field(s, "total_forks", cx.core.stats.total_forks);
    field(s, "migrate_cached_sockets", cx.core.migrate.len());
    field(s, "slave_expires_tracked_keys", cx.core.repl.own_ttls.len());
    zeros(
        s,
        &[
            "active_defrag_hits",
            "active_defrag_misses",
            "active_defrag_key_hits",
            "active_defrag_key_misses",
            "total_active_defrag_time",
            "current_active_defrag_time",
        ],
    );
    let tr = &cx.core.tracking;
    field(s, "tracking_total_keys", tr.key_count());
    field(s, "tracking_total_items", tr.item_count());
    field(s, "tracking_total_prefixes", tr.prefix_count());
    field(s, "unexpected_error_replies", 0);
    field(s, "total_error_replies", cx.core.stats.total_error_replies);
    zeros(
        s,
        &[
            "dump_payload_sanitizations",
            "total_reads_processed",
            "total_writes_processed",
            "io_threaded_reads_processed",
            "io_threaded_writes_processed",
        ],
    );
    field(
        s,
        "reply_buffer_shrinks",
        cx.core.stats.reply_buffer_shrinks,
    );
    field(
        s,
        "reply_buffer_expands",
        cx.core.stats.reply_buffer_expands,
    );
}

/// The Replication section, with Redis 7.0.15's fields in its order.
fn replication(cx: &Cx<'_>, s: &mut String) {
    let repl = &cx.core.repl;
    match &repl.primary {
        None => field(s, "role", "master"),
        Some(p) => replica_fields(cx, p, s),
    }
    // Every replica, syncing ones too (checked with redis-server 7.0.15).
    field(s, "connected_slaves", repl.replicas.len());
    let cfg = &cx.core.config;
    let (min, lag) = (
        cfg.int_param("min-replicas-to-write"),
        cfg.int_param("min-replicas-max-lag"),
    );
    if min > 0 && lag > 0 {
        let good = repl.good_replicas(lag as u64, cx.now.ms());
        field(s, "min_slaves_good_slaves", good);
    }
    for (i, r) in repl.replicas.iter().enumerate() {
        let ip = match cx.clients.get(r.handle) {
            Some(c) => crate::repl::replica_ip(&r.announced, &c.conn.transport),
            None => String::new(),
        };
        let lag = cx.now.ms().saturating_sub(r.ack_ms) / 1000;
        let line = alloc::format!(
            "ip={ip},port={},state={},offset={},lag={lag}",
            r.announced.port,
            r.state.name(),
            r.ack_offset
        );
        field(s, &alloc::format!("slave{i}"), line);
    }
    let failover = repl.failover.as_ref().map(|f| f.state);
    field(
        s,
        "master_failover_state",
        crate::repl::FailoverState::name(failover),
    );
    field(s, "master_replid", &repl.replid);
    field(s, "master_replid2", &repl.replid2);
    field(s, "master_repl_offset", repl.offset);
    field(s, "second_repl_offset", repl.second_offset);
    let backlog = repl.backlog.as_ref();
    field(s, "repl_backlog_active", u8::from(backlog.is_some()));
    let size = backlog.map_or(cx.core.config.int_param("repl-backlog-size") as u64, |b| {
        b.size() as u64
    });
    field(s, "repl_backlog_size", size);
    field(
        s,
        "repl_backlog_first_byte_offset",
        backlog.map_or(0, |b| b.first_byte_offset),
    );
    field(
        s,
        "repl_backlog_histlen",
        backlog.map_or(0, |b| b.histlen()),
    );
}

/// A replica's own fields: its primary and the link.
fn replica_fields(cx: &Cx<'_>, p: &crate::repl::Primary, s: &mut String) {
    use crate::repl::LinkState;
    let cfg = &cx.core.config;
    let now_ms = cx.now.ms();
    field(s, "role", "slave");
    field(s, "master_host", &p.host);
    field(s, "master_port", p.port);
    let up = p.state == LinkState::Connected;
    field(s, "master_link_status", if up { "up" } else { "down" });
    let io_ago = if up {
        (now_ms.saturating_sub(p.last_io_ms) / 1000) as i64
    } else {
        -1
    };
    field(s, "master_last_io_seconds_ago", io_ago);
    let syncing = p.state == LinkState::Transfer;
    field(s, "master_sync_in_progress", u8::from(syncing));
    field(
        s,
        "slave_read_repl_offset",
        cx.core.repl.offset + p.read_ahead,
    );
    field(s, "slave_repl_offset", cx.core.repl.offset);
    if syncing {
        let left = (p.transfer_size - p.transfer_read as i64).max(0);
        field(s, "master_sync_total_bytes", p.transfer_size);
        field(s, "master_sync_read_bytes", p.transfer_read);
        field(s, "master_sync_left_bytes", left);
        let perc = if p.transfer_size > 0 {
            p.transfer_read as f64 * 100.0 / p.transfer_size as f64
        } else {
            0.0
        };
        field(s, "master_sync_perc", alloc::format!("{perc:.2}"));
        let ago = now_ms.saturating_sub(p.last_io_ms) / 1000;
        field(s, "master_sync_last_io_seconds_ago", ago);
    }
    if !up {
        let since = match p.down_since_ms {
            0 => -1,
            crate::repl::DOWN_UNNOTED => 0,
            ms => (now_ms.saturating_sub(ms) / 1000) as i64,
        };
        field(s, "master_link_down_since_seconds", since);
    }
    field(s, "slave_priority", cfg.int_param("replica-priority"));
    field(
        s,
        "slave_read_only",
        u8::from(cfg.bool_param("replica-read-only")),
    );
    field(
        s,
        "replica_announced",
        u8::from(cfg.bool_param("replica-announced")),
    );
}

/// The CPU section (seconds with six decimals; one thread, so main thread = process).
fn cpu(cx: &Cx<'_>, s: &mut String) {
    let h = &cx.core.host;
    field(s, "used_cpu_sys", alloc::format!("{:.6}", h.used_cpu_sys));
    field(s, "used_cpu_user", alloc::format!("{:.6}", h.used_cpu_user));
    field(s, "used_cpu_sys_children", "0.000000");
    field(s, "used_cpu_user_children", "0.000000");
    field(
        s,
        "used_cpu_sys_main_thread",
        alloc::format!("{:.6}", h.used_cpu_sys),
    );
    field(
        s,
        "used_cpu_user_main_thread",
        alloc::format!("{:.6}", h.used_cpu_user),
    );
}

/// One `cmdstat_<name>` line per command (or `parent|sub`) that was called, rejected or
/// failed, in command table order.
fn commandstats(cx: &Cx<'_>, s: &mut String) {
    let all = cx.commands.all();
    for (reg, st) in all.iter().zip(&cx.core.stats.commands) {
        if st.calls == 0 && st.rejected_calls == 0 && st.failed_calls == 0 {
            continue;
        }
        let per_call = if st.calls == 0 {
            0.0
        } else {
            st.usec as f64 / st.calls as f64
        };
        let _ = write!(
            s,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},\
             failed_calls={}\r\n",
            reg.full_name, st.calls, st.usec, st.rejected_calls, st.failed_calls
        );
    }
}

/// One `errorstat_<CODE>:count=N` line per error code, in code order.
fn errorstats(cx: &Cx<'_>, s: &mut String) {
    for (code, n) in &cx.core.stats.errors {
        let _ = write!(s, "errorstat_{code}:count={n}\r\n");
    }
}

/// One `dbN:keys=..,expires=..,avg_ttl=0` line per non-empty database.
fn keyspace(cx: &Cx<'_>, s: &mut String) {
    for (i, db) in cx.core.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let (keys, expires) = (db.len(), db.expires_len());
        let _ = write!(s, "db{i}:keys={keys},expires={expires},avg_ttl=0\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::{ArgvBuf, Config, ConnInfo, Engine, Now, Reply, ReplyTree, Transport, Value};
    use kayvee_pds::SmallBytes;

    /// INFO `section` as text, on an engine with one client.
    fn info_of(e: &mut Engine, section: &str) -> String {
        let conn = ConnInfo {
            transport: Transport::Unix { path: "/s".into() },
            fd: 1,
        };
        let h = e.connect(conn, Now::from_ms(5000));
        let argv = ArgvBuf::from_args([&b"INFO"[..], section.as_bytes()]);
        let mut t = ReplyTree::new(e.protocol(h));
        e.execute(h, &argv.argv(), Now::from_ms(5000), &mut t);
        match t.take().as_slice() {
            [Reply::Verbatim(f, text)] if f == "txt" => String::from_utf8(text.clone()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn host_counters_end_the_server_section() {
        let mut e = Engine::new(Config::default(), 7, Now::from_ms(1000));
        assert!(!info_of(&mut e, "server").contains("kayvee_nic_interrupts"));
        e.core.host.counters = alloc::vec![("kayvee_nic_interrupts", 12), ("kayvee_idle_halts", 3)];
        let text = info_of(&mut e, "server");
        assert!(
            text.ends_with("\r\nkayvee_nic_interrupts:12\r\nkayvee_idle_halts:3\r\n"),
            "{text}"
        );
    }

    #[test]
    fn keyspace_lists_non_empty_databases() {
        let mut e = Engine::new(Config::default(), 7, Now::from_ms(1000));
        let v = || Value::Str(SmallBytes::from_slice(b"v"));
        e.core.dbs[0].set(b"a", v(), 1000, false);
        e.core.dbs[0].set(b"b", v(), 1000, false);
        e.core.dbs[0].set_expire(b"b", 90_000);
        e.core.dbs[3].set(b"c", v(), 1000, false);
        assert_eq!(
            info_of(&mut e, "keyspace"),
            "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n"
        );
    }

    #[test]
    fn errorstats_are_sorted_by_code() {
        let mut e = Engine::new(Config::default(), 7, Now::from_ms(1000));
        e.core.stats.count_error("WRONGTYPE Operation");
        e.core.stats.count_error("ERR x");
        e.core.stats.count_error("ERR y");
        assert_eq!(
            info_of(&mut e, "errorstats"),
            "# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n"
        );
    }

    #[test]
    fn host_and_counters_feed_the_fields() {
        let mut e = Engine::new(Config::default(), 7, Now::from_ms(1000));
        e.core.host.used_memory = 940936;
        e.core.host.used_memory_rss = 12349440;
        e.core.host.tcp_port = 7000;
        e.core.host.used_cpu_sys = 0.25;
        e.core.stats.dirty = 12;
        e.core.dbs[1].stats.hits = 3;
        e.core.dbs[2].stats.hits = 4;
        let all = info_of(&mut e, "everything");
        for want in [
            "\r\ntcp_port:7000\r\n",
            "\r\nuptime_in_seconds:4\r\n",
            "\r\nused_memory_human:918.88K\r\nused_memory_rss:12349440\r\n",
            "\r\nmem_fragmentation_ratio:13.12\r\n",
            "\r\nrdb_changes_since_last_save:12\r\n",
            "\r\nkeyspace_hits:7\r\n",
            "\r\nused_cpu_sys:0.250000\r\n",
            "\r\nconnected_clients:1\r\n",
        ] {
            assert!(all.contains(want), "{want:?} missing");
        }
        // The running INFO is counted once it has run, as in Redis.
        assert!(!all.contains("cmdstat_info"));
        let stats = info_of(&mut e, "commandstats");
        assert!(
            stats.contains("\r\ncmdstat_info:calls=1,usec=0,usec_per_call=0.00,rejected_calls=0,")
        );
    }

    #[test]
    fn human_sizes_match_redis() {
        // Pairs observed on redis-server 7.0.15 (maxmemory_human).
        let cases: &[(u64, &str)] = &[
            (0, "0B"),
            (1023, "1023B"),
            (1024, "1.00K"),
            (1535, "1.50K"),
            (940936, "918.88K"),
            (1048575, "1024.00K"),
            (1048576, "1.00M"),
            (5000000, "4.77M"),
            (12349440, "11.78M"),
            (25276510208, "23.54G"),
            (1 << 30, "1.00G"),
            (1 << 40, "1.00T"),
            (1 << 50, "1.00P"),
            (1 << 60, "1152921504606846976B"),
            (i64::MAX as u64, "9223372036854775807B"),
        ];
        for &(n, want) in cases {
            assert_eq!(bytes_to_human(n), want, "{n}");
        }
    }

    #[test]
    fn ratios_and_percentages_have_two_decimals() {
        assert_eq!(ratio(12349440, 940936), "13.12");
        assert_eq!(ratio(5, 0), "0.00");
        assert_eq!(percent(940936, 940936), "100.00%");
        assert_eq!(percent(1, 3), "33.33%");
        assert_eq!(percent(1, 0), "0.00%");
    }

    #[test]
    fn default_all_and_named_sections() {
        let bit = |name: &str| 1u32 << SECTIONS.iter().position(|s| s.0 == name).unwrap();
        let default = select_sections(core::iter::empty());
        assert_eq!(default & bit("commandstats"), 0);
        assert_eq!(default & bit("latencystats"), 0);
        assert_ne!(default & bit("keyspace"), 0);
        let all = select_sections([&b"ALL"[..]].into_iter());
        assert_eq!(all, (1 << SECTIONS.len()) - 1);
        let some = select_sections([&b"cpu"[..], b"Server", b"nosuch"].into_iter());
        assert_eq!(some, bit("cpu") | bit("server"));
        assert_eq!(select_sections([&b"nosuch"[..]].into_iter()), 0);
    }
}

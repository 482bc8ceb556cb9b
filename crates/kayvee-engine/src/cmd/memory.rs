//! MEMORY (USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP), shaped as Redis 7.0.15 answers.
//!
//! Figures come from the process's real allocation count (see [`crate::evict::used_memory`])
//! and, per key, from Kayvee's own layout ([`crate::value::usage`]).

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, KeySpec};
use crate::reply::help_reply;
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::usage::{entry_usage, DEFAULT_SAMPLES, TRIE_SLOT_OVERHEAD};
use crate::value::Entry;
use crate::{Core, Cx};
use core::mem::size_of;
use kayvee_pds::SmallBytes;

/// Below this many used bytes MEMORY DOCTOR declines to judge (as Redis, 5 MB).
const DOCTOR_MIN_BYTES: u64 = 5 << 20;

const STATS_SUB: u32 = 0;
const TIPS_SPECIAL: &[&str] = &[
    "nondeterministic_output",
    "request_policy:all_shards",
    "response_policy:special",
];

/// MEMORY's subcommands.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::help_sub("4.0.0", "server", memory_help),
    CommandSpec {
        name: "purge",
        arity: 2,
        flags: STATS_SUB,
        acl: acl::SLOW,
        summary: "Ask the allocator to release memory",
        since: "4.0.0",
        group: "server",
        complexity: "Depends on how much memory is allocated, could be slow",
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        handler: memory_purge,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "usage",
        arity: -3,
        flags: flags::READONLY,
        first_key: 2,
        last_key: 2,
        key_step: 1,
        acl: acl::READ | acl::SLOW,
        summary: "Estimate the memory usage of a key",
        since: "4.0.0",
        group: "server",
        complexity: "O(N) where N is the number of samples.",
        key_specs: &[KeySpec::range(kf::RO, 2, 0, 1)],
        handler: memory_usage,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "doctor",
        arity: 2,
        flags: STATS_SUB,
        acl: acl::SLOW,
        summary: "Outputs memory problems report",
        since: "4.0.0",
        group: "server",
        tips: TIPS_SPECIAL,
        handler: memory_doctor,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "malloc-stats",
        arity: 2,
        flags: STATS_SUB,
        acl: acl::SLOW,
        summary: "Show allocator internal stats",
        since: "4.0.0",
        group: "server",
        complexity: "Depends on how much memory is allocated, could be slow",
        tips: TIPS_SPECIAL,
        handler: memory_malloc_stats,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "stats",
        arity: 2,
        flags: STATS_SUB,
        acl: acl::SLOW,
        summary: "Show memory usage details",
        since: "4.0.0",
        group: "server",
        tips: TIPS_SPECIAL,
        handler: memory_stats,
        ..CommandSpec::DEFAULT
    },
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "memory",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for memory diagnostics commands",
    since: "4.0.0",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// The lines of MEMORY HELP between its header and HELP, as Redis 7.0.15 sends them.
const HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];

/// MEMORY USAGE key [SAMPLES count]: null for a missing key. As in Redis the key is found
/// without expiring it or recording an access.
fn memory_usage(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if !args.get(i).eq_ignore_ascii_case(b"samples") || i + 1 >= args.len() {
            return Err(Error::Syntax);
        }
        let n = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
        if n < 0 {
            return Err(Error::Syntax);
        }
        samples = n as usize;
        i += 2;
    }
    let key = args.get(2);
    match cx.db().keys.get(key) {
        Some(e) => out.int(entry_usage(key, e, samples) as i64),
        None => out.null(),
    }
    Ok(())
}

/// MEMORY HELP.
fn memory_help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "MEMORY", HELP);
    Ok(())
}

/// MEMORY PURGE: the system allocator has nothing to purge on request.
fn memory_purge(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.ok();
    Ok(())
}

/// MEMORY MALLOC-STATS: what Redis answers when not built with jemalloc.
fn memory_malloc_stats(_cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.verbatim("txt", b"Stats not supported for the current allocator");
    Ok(())
}

/// MEMORY DOCTOR: Redis's verdicts for a small instance, a high RSS, or nothing found.
fn memory_doctor(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let used = crate::evict::used_memory(&cx.core.evict, &cx.core.host);
    let rss = cx.core.host.used_memory_rss;
    let text = if used < DOCTOR_MIN_BYTES {
        alloc::string::String::from("Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n")
    } else if rss as f64 > used as f64 * 1.4 {
        alloc::string::String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"libc\".\n\nI'm here to keep you safe, Sam. I want to help you.\n")
    } else {
        alloc::string::String::from("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n")
    };
    out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The figures of MEMORY STATS.
struct Overhead {
    peak: u64,
    total: u64,
    startup: u64,
    clients: u64,
    /// Per non-empty database: (index, main table bytes, expires table bytes).
    dbs: alloc::vec::Vec<(usize, u64, u64)>,
    keys: u64,
}

/// Collects the MEMORY STATS figures.
fn overhead(core: &Core) -> Overhead {
    let total = crate::evict::used_memory(&core.evict, &core.host);
    let slot = (size_of::<SmallBytes>() + size_of::<Entry>() + TRIE_SLOT_OVERHEAD) as u64;
    let ttl_slot = (size_of::<SmallBytes>() + 8 + TRIE_SLOT_OVERHEAD) as u64;
    let dbs = core
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| (i, d.len() as u64 * slot, d.expires_len() as u64 * ttl_slot))
        .collect();
    Overhead {
        peak: core.used_memory_peak.max(total),
        total,
        startup: core.evict.startup_bytes.min(total),
        clients: 0,
        dbs,
        keys: core.dbs.iter().map(|d| d.len() as u64).sum(),
    }
}

/// A ratio as Redis computes it (in `float`).
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        return 0.0;
    }
    f64::from((a as f64 / b as f64) as f32)
}

/// MEMORY STATS: Redis's fields in its order (a map; ratios as doubles).
fn memory_stats(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut o = overhead(cx.core);
    o.clients = cx.clients.iter().map(|(_, c)| c.io.tot_mem as u64).sum();
    let rss = cx.core.host.used_memory_rss.max(o.total);
    let tables: u64 = o.dbs.iter().map(|d| d.1 + d.2).sum();
    let overhead_total = (o.startup + o.clients + tables).min(o.total);
    let dataset = o.total - overhead_total;
    let net = o.total.saturating_sub(o.startup);
    out.map(27 + o.dbs.len());
    let int = |out: &mut dyn ReplySink, k: &str, v: u64| {
        out.bulk_str(k);
        out.int(v as i64);
    };
    let dbl = |out: &mut dyn ReplySink, k: &str, v: f64| {
        out.bulk_str(k);
        out.double(v);
    };
    int(out, "peak.allocated", o.peak);
    int(out, "total.allocated", o.total);
    int(out, "startup.allocated", o.startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", o.clients);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for &(i, main, expires) in &o.dbs {
        out.bulk_str(&alloc::format!("db.{i}"));
        out.map(3);
        int(out, "overhead.hashtable.main", main);
        int(out, "overhead.hashtable.expires", expires);
        int(out, "overhead.hashtable.slot-to-keys", 0);
    }
    int(out, "overhead.total", overhead_total);
    int(out, "keys.count", o.keys);
    int(
        out,
        "keys.bytes-per-key",
        net.checked_div(o.keys).unwrap_or(0),
    );
    int(out, "dataset.bytes", dataset);
    dbl(out, "dataset.percentage", ratio(dataset * 100, net));
    dbl(out, "peak.percentage", ratio(o.total * 100, o.peak));
    int(out, "allocator.allocated", o.total);
    int(out, "allocator.active", o.total);
    int(out, "allocator.resident", rss);
    dbl(out, "allocator-fragmentation.ratio", 1.0);
    int(out, "allocator-fragmentation.bytes", 0);
    dbl(out, "allocator-rss.ratio", ratio(rss, o.total));
    int(out, "allocator-rss.bytes", rss - o.total);
    dbl(out, "rss-overhead.ratio", 1.0);
    int(out, "rss-overhead.bytes", 0);
    dbl(out, "fragmentation", ratio(rss, o.total));
    int(out, "fragmentation.bytes", rss - o.total);
    Ok(())
}

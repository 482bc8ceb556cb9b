//! The memory limit: `maxmemory` and its eviction policies, approximated by sampling as Redis
//! 7.0 does (Redis's `evict.c`, learnt by experiment). The per-key access data the policies
//! rank by (LRU access time, LFU logarithmic counter with decay) is stamped by the databases
//! ([`crate::touch`]).
//!
//! Eviction works on the databases and a few engine parts it is handed ([`Keyspace`]); the
//! evicted keys reach WATCH, tracking, notifications and the AOF as key events, which the
//! caller drains (`crate::drain::evict`, which also skips eviction while the dataset loads).
//!
//! The engine reads no allocator itself: the shell installs a probe (`fn() -> u64`, the bytes
//! its global allocator holds) with [`crate::Engine::set_memory_probe`]; without one the last
//! figure the shell stored in `HostInfo::used_memory` is used. Reading it is an atomic load, so
//! it is read before every command while a limit is set and again after each eviction.
//!
//! Pool policies (LRU, LFU, TTL) sample `maxmemory-samples` keys per database into a pool of
//! the [`POOL_SIZE`] best candidates kept across calls, then evict the best one still present;
//! random policies take a random key, visiting the databases round-robin.

use crate::config::Config;
use crate::db::{Db, Key};
use crate::host::HostInfo;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Now;
use crate::value::Meta;
use alloc::vec::Vec;

pub use crate::touch::{lfu_decayed, lfu_elapsed, lfu_log_incr, minutes, Touch, LFU_INIT_VAL};

/// Candidates the eviction pool keeps (Redis's `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;
/// The OOM error, exactly as Redis 7.0.15 words it.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Refuse writes once over the limit.
    NoEviction,
    /// Least recently used among all keys.
    AllkeysLru,
    /// Least frequently used among all keys.
    AllkeysLfu,
    /// Any key.
    AllkeysRandom,
    /// Least recently used among keys with a TTL.
    VolatileLru,
    /// Least frequently used among keys with a TTL.
    VolatileLfu,
    /// Any key with a TTL.
    VolatileRandom,
    /// The key with the nearest expiry.
    VolatileTtl,
}

impl Policy {
    /// From the configuration word (validated by the config table; anything else is
    /// `noeviction`).
    pub fn parse(word: &str) -> Policy {
        match word {
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }

    /// Whether keys are ranked by their LFU counter (which then replaces the LRU time).
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// Whether only keys with a TTL may be evicted.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

/// The access rules `config` asks for, for the database that draws from `seed`.
pub fn touch_rules(config: &Config, seed: u64) -> Touch {
    let lfu = Policy::parse(&config.maxmemory_policy).is_lfu();
    Touch::new(lfu, config.lfu_log_factor, config.lfu_decay_time, seed)
}

/// Copies the access rules of the configuration into every database (after CONFIG SET, at
/// start and after loading), and empties the pool, whose scores may belong to another policy.
pub fn sync(evictor: &mut Evictor, dbs: &mut [Db], config: &Config, seed: u64) {
    evictor.pool.clear();
    for (i, db) in dbs.iter_mut().enumerate() {
        db.touch = touch_rules(config, seed.wrapping_add(i as u64));
    }
}

/// One candidate in the pool: higher `score` = better to evict.
#[derive(Clone, Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Key,
}

/// Eviction state kept in `Core`: the pool, the random policies' next database and the
/// memory probe.
#[derive(Default)]
pub struct Evictor {
    /// Ascending by score: the best candidate is last.
    pool: Vec<Candidate>,
    next_db: usize,
    /// Reads the bytes the process holds (installed by the shell).
    pub probe: Option<fn() -> u64>,
    /// What the probe read when it was installed (MEMORY STATS `startup.allocated`).
    pub startup_bytes: u64,
    /// Bytes the probe counts that Redis keeps out of `used_memory`: the Lua VM's heap, which
    /// Redis 7.0 allocates outside its counted allocator (INFO reports it apart, as
    /// `used_memory_vm_eval`, and `maxmemory` ignores it). Set by the glue after each command.
    pub uncounted: u64,
    /// Bytes of the replicas' output buffers (set by the connection layer). With the
    /// backlog's growth past its size, what Redis's `freeMemoryGetNotCountedMemory` leaves
    /// out of the eviction count: a replica that lags must not make the primary evict keys
    /// (or refuse writes) for the stream it still has to send.
    pub replica_output: u64,
}

impl Evictor {
    /// Adds a sampled key, keeping the pool sorted and at most [`POOL_SIZE`] long.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if self.pool.iter().any(|c| c.db == db && &c.key[..] == key) {
            return;
        }
        let full = self.pool.len() >= POOL_SIZE;
        if full && self.pool.first().is_some_and(|c| score <= c.score) {
            return;
        }
        let at = self.pool.partition_point(|c| c.score <= score);
        let key = Key::from_slice(key);
        self.pool.insert(at, Candidate { score, db, key });
        if self.pool.len() > POOL_SIZE {
            self.pool.remove(0);
        }
    }
}

/// What an eviction attempt achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// Under the limit (or no limit).
    Ok,
    /// Still over, but the per-call budget ran out: the command may run; the cron goes on.
    Running,
    /// Over the limit and nothing (more) can be evicted: DENYOOM commands are refused.
    Fail,
}

/// Bytes the process uses now as Redis counts them: the probe's figure, else the shell's last
/// report (`host`), less [`Evictor::uncounted`].
pub fn used_memory(evictor: &Evictor, host: &HostInfo) -> u64 {
    let counted = match evictor.probe {
        Some(probe) => probe(),
        None => host.used_memory,
    };
    counted.saturating_sub(evictor.uncounted)
}

/// Bytes `maxmemory` does not count (INFO `mem_not_counted_for_evict`): the replicas' output
/// buffers and the backlog's blocks past `repl-backlog-size` (its growth while replicas
/// sync, and its last partly filled block), as Redis 7.0 leaves its replication buffers past
/// the backlog's size out.
pub fn not_counted(evictor: &Evictor, backlog: Option<&crate::repl::backlog::Backlog>) -> u64 {
    let grown = backlog.map_or(0, |b| b.allocated().saturating_sub(b.size()) as u64);
    evictor.replica_output + grown
}

/// The engine state an eviction works on, borrowed for one call.
pub struct Keyspace<'a> {
    /// The databases.
    pub dbs: &'a mut [Db],
    /// `maxmemory`, the policy and its settings.
    pub config: &'a Config,
    /// The random source the samples draw from.
    pub rng: &'a mut Rng,
    /// Counts `evicted_keys`.
    pub stats: &'a mut Stats,
    /// The shell's last memory report, read when no probe is installed.
    pub host: &'a HostInfo,
    /// Bytes left out of the count (see [`not_counted`]).
    pub not_counted: u64,
}

/// How many keys one call may evict, from `maxmemory-eviction-tenacity` (Redis's time limit of
/// 50 µs per step up to 10, growing 15 % per step beyond, unlimited at 100, read as one key
/// per microsecond since the engine has no clock).
fn budget(tenacity: u32) -> usize {
    match tenacity {
        100.. => usize::MAX,
        0..=10 => 50 * tenacity.max(1) as usize,
        t => (500.0 * libm_powi(1.15, t - 10)) as usize,
    }
}

/// `base` to an integer power (no_std has no `powi`).
fn libm_powi(base: f64, exp: u32) -> f64 {
    (0..exp).fold(1.0, |acc, _| acc * base)
}

/// Evicts keys by the policy until used memory is under `maxmemory` or the per-call budget
/// is spent, as Redis's `performEvictions` before a command and in its cron. The evicted keys
/// are recorded as key events; the caller drains them.
pub fn perform(ev: &mut Evictor, mut ks: Keyspace<'_>, now: Now) -> Evicted {
    let limit = ks.config.maxmemory;
    if limit == 0 {
        return Evicted::Ok;
    }
    let used = used_memory(ev, ks.host).saturating_sub(ks.not_counted);
    if used <= limit {
        return Evicted::Ok;
    }
    let policy = Policy::parse(&ks.config.maxmemory_policy);
    if policy == Policy::NoEviction {
        return Evicted::Fail;
    }
    let (to_free, mut freed, mut count) = (used - limit, 0u64, 0usize);
    let budget = budget(ks.config.maxmemory_eviction_tenacity);
    while freed < to_free {
        let Some((db, key)) = pick(ev, &mut ks, policy, now) else {
            return Evicted::Fail;
        };
        let before = used_memory(ev, ks.host);
        let Some((entry, _)) = ks.dbs[db].evict(&key, now.ms()) else {
            continue; // it had expired: reclaimed, not evicted
        };
        let estimate = crate::value::usage::entry_usage(&key, &entry, 5) as u64;
        drop(entry);
        freed += before
            .saturating_sub(used_memory(ev, ks.host))
            .max(estimate);
        ks.stats.evicted_keys += 1;
        count += 1;
        if count >= budget && freed < to_free {
            return Evicted::Running;
        }
    }
    Evicted::Ok
}

/// The next key to evict, or `None` when no database holds an evictable key.
fn pick(ev: &mut Evictor, ks: &mut Keyspace<'_>, policy: Policy, now: Now) -> Option<(usize, Key)> {
    if policy.random() {
        return pick_random(ev, ks, policy.volatile());
    }
    loop {
        let total: usize = ks
            .dbs
            .iter()
            .map(|d| {
                if policy.volatile() {
                    d.expires_len()
                } else {
                    d.len()
                }
            })
            .sum();
        if total == 0 {
            return None;
        }
        for db in 0..ks.dbs.len() {
            populate(ev, ks, db, policy, now);
        }
        while let Some(c) = ev.pool.pop() {
            let d = &ks.dbs[c.db];
            let present = if policy.volatile() {
                d.expires.get(&c.key[..]).is_some()
            } else {
                d.keys.get(&c.key[..]).is_some()
            };
            if present {
                return Some((c.db, c.key));
            }
        }
    }
}

/// Random policies: a random key (with a TTL for volatile-random), trying the databases
/// round-robin from the one after the last pick.
fn pick_random(ev: &mut Evictor, ks: &mut Keyspace<'_>, volatile: bool) -> Option<(usize, Key)> {
    let n = ks.dbs.len();
    for _ in 0..n {
        let db = ev.next_db % n;
        ev.next_db = ev.next_db.wrapping_add(1);
        let r = ks.rng.next_u64();
        let d = &ks.dbs[db];
        let key = if volatile {
            d.expires.random(r).map(|(k, _)| k.clone())
        } else {
            d.keys.random(r).map(|(k, _)| k.clone())
        };
        if let Some(k) = key {
            return Some((db, k));
        }
    }
    None
}

/// Samples `maxmemory-samples` keys of database `db` into the pool (Redis's
/// `evictionPoolPopulate`).
fn populate(ev: &mut Evictor, ks: &mut Keyspace<'_>, db: usize, policy: Policy, now: Now) {
    let samples = ks.config.maxmemory_samples.max(1) as usize;
    let d = &ks.dbs[db];
    let size = if policy.volatile() {
        d.expires_len()
    } else {
        d.len()
    };
    if size == 0 {
        return;
    }
    let decay = d.touch.decay_min;
    for _ in 0..samples.min(size) {
        let r = ks.rng.next_u64();
        let d = &ks.dbs[db];
        let (key, at) = if policy.volatile() {
            match d.expires.random(r) {
                Some((k, &at)) => (k, at),
                None => return,
            }
        } else {
            match d.keys.random(r) {
                Some((k, _)) => (k, 0),
                None => return,
            }
        };
        let Some(entry) = d.keys.get(&key[..]) else {
            continue;
        };
        let score = score(policy, &entry.meta(), at, now, decay);
        let key = key.clone();
        ev.offer(score, db, &key);
    }
}

/// How good a candidate is (higher = evict first): idle seconds (LRU), 255 minus the decayed
/// counter (LFU), or the nearness of the expiry (TTL).
fn score(policy: Policy, meta: &Meta, expire_at_ms: u64, now: Now, decay_min: u32) -> u64 {
    match policy {
        Policy::VolatileTtl => u64::MAX - expire_at_ms,
        p if p.is_lfu() => 255 - u64::from(lfu_decayed(meta, minutes(now.ms()), decay_min)),
        _ => meta.idle_s(now.ms()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_candidates_sorted() {
        let mut e = Evictor::default();
        let mut rng = crate::Rng::new(7);
        let mut offered = Vec::new();
        for i in 0..500u64 {
            let score = rng.next_u64() % 1000;
            offered.push(score);
            e.offer(score, 0, alloc::format!("k{i}").as_bytes());
            assert!(e.pool.len() <= POOL_SIZE);
            assert!(e.pool.windows(2).all(|w| w[0].score <= w[1].score));
        }
        offered.sort_unstable();
        let best: Vec<u64> = offered[offered.len() - POOL_SIZE..].to_vec();
        let pool: Vec<u64> = e.pool.iter().map(|c| c.score).collect();
        assert_eq!(pool, best);
        e.offer(9999, 0, b"k1");
        e.offer(9999, 0, b"k1");
        assert_eq!(e.pool.iter().filter(|c| &c.key[..] == b"k1").count(), 1);
    }

    #[test]
    fn budget_follows_tenacity() {
        assert_eq!(budget(10), 500);
        assert_eq!(budget(1), 50);
        assert!(budget(50) > 100_000);
        assert_eq!(budget(100), usize::MAX);
    }

    /// The engine's admission and eviction with a fake allocator figure: the figure never
    /// drops, so each eviction counts its size estimate as freed (the path a snapshot that
    /// still holds the evicted values takes).
    #[test]
    fn admission_follows_the_policy() {
        use crate::cmd::string::get_set::tests::Bench;
        use crate::value::{Entry, Value};
        use crate::Reply;
        use core::sync::atomic::{AtomicU64, Ordering};
        static USED: AtomicU64 = AtomicU64::new(0);
        let oom = || Reply::Error(OOM.into());
        let ok = || Reply::Simple("OK".into());
        let mut b = Bench::new(Config::default());
        b.engine.set_memory_probe(|| USED.load(Ordering::Relaxed));
        assert_eq!(b.run("CONFIG SET maxmemory 100000"), ok());
        for i in 0..100 {
            assert_eq!(b.run(&alloc::format!("SET p{i} v")), ok());
            assert_eq!(b.run(&alloc::format!("SET t{i} v EX 100")), ok());
        }
        USED.store(100_000 + 1000, Ordering::Relaxed);
        // noeviction: DENYOOM commands refused, reads and deletes served.
        assert_eq!(b.run("SET k v"), oom());
        assert_eq!(b.run("GET p1"), Reply::Bulk(b"v".to_vec()));
        assert_eq!(b.run("DEL nokey"), Reply::Int(0));
        // Inside MULTI every queued command is refused and EXEC aborts.
        assert_eq!(b.run("MULTI"), ok());
        assert!(matches!(b.run("GET p1"), Reply::Error(e) if e.starts_with("OOM")));
        assert!(matches!(b.run("EXEC"), Reply::Error(e) if e.starts_with("EXECABORT")));
        // volatile-lru evicts only keys with a TTL, a few per command, until none is left.
        b.run("CONFIG SET maxmemory-policy volatile-lru");
        let mut rounds = 0;
        while b.run("SET k v") == ok() {
            rounds += 1;
            assert!(rounds < 100, "volatile keys never ran out");
        }
        assert!(rounds > 5, "{rounds}");
        assert_eq!(b.engine.core.dbs[0].expires_len(), 0);
        assert_eq!(b.engine.core.dbs[0].len(), 101, "persistent keys all kept");
        let db0 = &b.engine.core.dbs[0];
        assert!((0..100).all(|i| db0.keys.get(alloc::format!("p{i}").as_bytes()).is_some()));
        assert_eq!(b.engine.core.stats.evicted_keys, 100);
        // allkeys-random takes any key, and only as many as the 1000 bytes over the limit
        // need by their size estimates although the figure never drops (a snapshot holding
        // the values): not the whole database.
        b.run("CONFIG SET maxmemory-policy allkeys-random");
        assert_eq!(b.run("SET k2 v"), ok());
        let gone = 102 - b.engine.core.dbs[0].len();
        let per_key =
            crate::value::usage::entry_usage(b"p1", &Entry::new(Value::Str("v".into()), 0), 5);
        assert_eq!(gone, 1000usize.div_ceil(per_key), "{gone} evicted");
        USED.store(0, Ordering::Relaxed);
        let n = b.engine.core.dbs[0].len();
        assert_eq!(b.run("SET k3 v"), ok());
        assert_eq!(b.engine.core.dbs[0].len(), n + 1);
        // volatile-ttl evicts the keys nearest to expiry first.
        b.run("FLUSHALL");
        b.run("CONFIG SET maxmemory-policy volatile-ttl maxmemory-samples 20");
        for i in 0..10 {
            b.run(&alloc::format!("SET t{i} v EX {}", 100 + i * 10));
        }
        USED.store(100_000 + 1, Ordering::Relaxed);
        assert_eq!(b.run("SET k v"), ok());
        USED.store(0, Ordering::Relaxed);
        let db0 = &b.engine.core.dbs[0];
        let left: Vec<bool> = (0..10)
            .map(|i| db0.keys.get(alloc::format!("t{i}").as_bytes()).is_some())
            .collect();
        assert_eq!(left.iter().filter(|k| !**k).count(), 1, "{left:?}");
        assert!(
            left[5..].iter().all(|k| *k),
            "a late key went first: {left:?}"
        );
    }
}

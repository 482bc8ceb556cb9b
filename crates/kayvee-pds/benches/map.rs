//! Criterion benchmarks for `PMap` against `std::collections::HashMap` (same foldhash hasher):
//! bulk insert, get hit, get miss, and snapshot-then-write. Run with `cargo bench -p kayvee-pds`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use kayvee_pds::map::HashBuilder;
use kayvee_pds::{PMap, SmallBytes};
use std::collections::HashMap;

/// Keys in the map: 1,000,000 under `cargo bench`, a few thousand when `cargo test` runs the
/// benchmarks once as a smoke test.
fn n_keys() -> u32 {
    if std::env::args().any(|a| a == "--bench") {
        1_000_000
    } else {
        5_000
    }
}

fn key(i: u32) -> SmallBytes {
    SmallBytes::from_slice(format!("key:{i:08}").as_bytes())
}

type Val = (SmallBytes, u64);

fn val(i: u32) -> Val {
    (SmallBytes::from_slice(b"value"), u64::from(i))
}

fn keys(from: u32, n: u32) -> Vec<SmallBytes> {
    (from..from + n).map(key).collect()
}

fn pmap_of(keys: &[SmallBytes]) -> PMap<SmallBytes, Val> {
    let mut m = PMap::with_seed(1);
    for (i, k) in keys.iter().enumerate() {
        m.insert(k.clone(), val(i as u32));
    }
    m
}

fn std_of(keys: &[SmallBytes]) -> HashMap<SmallBytes, Val, HashBuilder> {
    let mut m = HashMap::with_hasher(HashBuilder::with_seed(1));
    for (i, k) in keys.iter().enumerate() {
        m.insert(k.clone(), val(i as u32));
    }
    m
}

fn insert_1m(c: &mut Criterion) {
    let ks = keys(0, n_keys());
    let mut g = c.benchmark_group("insert_1m");
    g.sample_size(10);
    g.bench_function("pmap", |b| b.iter(|| black_box(pmap_of(&ks)).len()));
    g.bench_function("std", |b| b.iter(|| black_box(std_of(&ks)).len()));
    g.finish();
}

fn lookups(c: &mut Criterion) {
    let ks = keys(0, n_keys());
    let misses = keys(n_keys(), 1000);
    let hits: Vec<SmallBytes> = ks.iter().step_by(997).cloned().collect();
    let (pm, sm) = (pmap_of(&ks), std_of(&ks));
    let mut g = c.benchmark_group("get_1m");
    g.bench_function("hit/pmap", |b| {
        b.iter(|| hits.iter().filter(|k| pm.contains_key(*k)).count())
    });
    g.bench_function("hit/std", |b| {
        b.iter(|| hits.iter().filter(|k| sm.contains_key(*k)).count())
    });
    g.bench_function("miss/pmap", |b| {
        b.iter(|| misses.iter().filter(|k| pm.contains_key(*k)).count())
    });
    g.bench_function("miss/std", |b| {
        b.iter(|| misses.iter().filter(|k| sm.contains_key(*k)).count())
    });
    g.finish();
}

fn writes(c: &mut Criterion) {
    let ks = keys(0, n_keys());
    let some: Vec<SmallBytes> = ks.iter().step_by(997).cloned().collect();
    let mut pm = pmap_of(&ks);
    let mut g = c.benchmark_group("write_1m");
    g.bench_function("overwrite_unshared/pmap", |b| {
        b.iter(|| {
            for k in &some {
                pm.insert(k.clone(), val(0));
            }
        })
    });
    let mut sm = std_of(&ks);
    g.bench_function("overwrite/std", |b| {
        b.iter(|| {
            for k in &some {
                sm.insert(k.clone(), val(0));
            }
        })
    });
    // A snapshot then 1,004 writes (at 1M keys): the first write on each path copies it.
    g.bench_function("snapshot_then_overwrite/pmap", |b| {
        b.iter_batched(
            || pm.clone(),
            |mut w| {
                for k in &some {
                    w.insert(k.clone(), val(1));
                }
                w
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("insert_remove_new/pmap", |b| {
        b.iter(|| {
            for k in some.iter().take(100) {
                let mut k2 = k.to_vec();
                k2.push(b'x');
                let k2 = SmallBytes::from_vec(k2);
                pm.insert(k2.clone(), val(2));
                pm.remove(&k2);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, insert_1m, lookups, writes);
criterion_main!(benches);

//! Criterion benchmark of the RDB writer on the dataset of `DEBUG POPULATE N` (keys `key:I`,
//! values `value:I`), what the background-save and full-sync figures use: the whole file in
//! 64 KiB pieces, checksum and LZF on (the defaults). Run with `cargo bench -p kayvee-rdb`;
//! under `valgrind --tool=callgrind` with `--profile-time 5` it counts instructions per key.

use criterion::BatchSize;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kayvee_engine::save_hook::SaveHook;
use kayvee_engine::value::Entry;
use kayvee_engine::{Db, Snapshot, Value};
use kayvee_pds::SmallBytes;
use kayvee_rdb::{RdbWriter, WriteOptions};
use std::sync::{Arc, Mutex};

#[path = "../tests/common/hook.rs"]
mod hook;
use hook::Hook;

const SEED: u64 = 42;
const NOW_MS: u64 = 1_700_000_000_000;

/// Keys: 200,000 under `cargo bench`, a few thousand when `cargo test` runs the benchmark
/// once as a smoke test.
fn n_keys() -> u32 {
    if std::env::args().any(|a| a == "--bench") {
        200_000
    } else {
        5_000
    }
}

/// Database 0 as `DEBUG POPULATE n` leaves it.
fn populated(n: u32) -> Vec<Db> {
    let mut dbs: Vec<Db> = (0..16).map(|_| Db::new(SEED)).collect();
    for i in 0..n {
        let v = Value::Str(SmallBytes::from_vec(format!("value:{i}").into_bytes()));
        dbs[0].insert_entry(format!("key:{i}").as_bytes(), Entry::new(v, NOW_MS), None);
    }
    dbs
}

/// The whole file, piece by piece into one reused buffer; returns its length.
fn save(dbs: &[Db]) -> usize {
    let snapshot = Snapshot {
        dbs: dbs.iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let mut w = RdbWriter::new(snapshot, WriteOptions::default());
    let (mut piece, mut total) = (Vec::with_capacity(80 * 1024), 0);
    while w.next_chunk(&mut piece) {
        total += piece.len();
        piece.clear();
    }
    total
}

/// The keys `writes` SETs rewrite, spread over the keyspace (a fixed pseudo-random order).
fn rewritten(n: u32, writes: u32) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    (0..writes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("key:{}", x % u64::from(n)).into_bytes()
        })
        .collect()
}

/// `keys` SET, a 2 KiB piece of a save of the live databases (as the image's loop paces
/// it) after every `per_piece` of them while one runs (`save`), and the rest of the save.
fn sets_during(dbs: &mut [Db], keys: &[Vec<u8>], save: bool, per_piece: usize) -> usize {
    let snapshot = Snapshot {
        dbs: dbs.iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let opts = WriteOptions {
        chunk_len: 2048,
        ..WriteOptions::default()
    };
    let hook = Arc::new(Hook(Mutex::new(RdbWriter::live(snapshot, opts))));
    if save {
        for (i, db) in dbs.iter_mut().enumerate() {
            db.set_save_hook(i, Some(hook.clone() as Arc<dyn SaveHook>));
        }
    }
    let (mut piece, mut total, mut more) = (Vec::with_capacity(8 * 1024), 0, save);
    for batch in keys.chunks(per_piece) {
        for k in batch {
            dbs[0].set_str(k, b"rewritten", NOW_MS, false);
        }
        if more {
            more = hook.0.lock().unwrap().next_chunk_of(dbs, &mut piece);
            total += piece.len();
            piece.clear();
        }
    }
    while more && hook.0.lock().unwrap().next_chunk_of(dbs, &mut piece) {
        total += piece.len();
        piece.clear();
    }
    for db in dbs.iter_mut() {
        db.set_save_hook(0, None);
    }
    total
}

fn write(c: &mut Criterion) {
    let n = n_keys();
    let dbs = populated(n);
    let mut g = c.benchmark_group("rdb_write");
    g.throughput(Throughput::Elements(u64::from(n)));
    g.sample_size(20);
    g.bench_function("populate_strings", |b| b.iter(|| save(&dbs)));
    g.finish();
    // A save of the live databases under writes: n/5 SETs, each 2 KiB piece after 16 of
    // them; against the same SETs alone (the save alone is `populate_strings`).
    let keys = rewritten(n, n / 5);
    let mut g = c.benchmark_group("live_save");
    g.throughput(Throughput::Elements(u64::from(n / 5)));
    g.sample_size(10);
    g.bench_function("hook_alone", |b| {
        b.iter_batched(
            || {
                let dbs = populated(n);
                let snapshot = Snapshot {
                    dbs: dbs.iter().map(Db::snapshot).collect(),
                    taken_ms: NOW_MS,
                    functions: Vec::new(),
                };
                (dbs, RdbWriter::live(snapshot, WriteOptions::default()))
            },
            |(dbs, mut w)| {
                for k in &keys {
                    w.before_write(0, k, dbs[0].view());
                }
                (dbs, w) // dropped untimed
            },
            BatchSize::LargeInput,
        )
    });
    for (name, saving) in [("sets_alone", false), ("sets_during_save", true)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || populated(n),
                |mut dbs| {
                    sets_during(&mut dbs, &keys, saving, 16);
                    dbs // dropped untimed
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, write);
criterion_main!(benches);

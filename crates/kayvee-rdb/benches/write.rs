//! Criterion benchmark of the RDB writer on the dataset of `DEBUG POPULATE N` (keys `key:I`,
//! values `value:I`), what the background-save and full-sync figures use: the whole file in
//! 64 KiB pieces, checksum and LZF on (the defaults). Run with `cargo bench -p kayvee-rdb`;
//! under `valgrind --tool=callgrind` with `--profile-time 5` it counts instructions per key.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kayvee_engine::value::Entry;
use kayvee_engine::{Db, Snapshot, Value};
use kayvee_pds::SmallBytes;
use kayvee_rdb::{RdbWriter, WriteOptions};

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

fn write(c: &mut Criterion) {
    let n = n_keys();
    let dbs = populated(n);
    let mut g = c.benchmark_group("rdb_write");
    g.throughput(Throughput::Elements(u64::from(n)));
    g.sample_size(20);
    g.bench_function("populate_strings", |b| b.iter(|| save(&dbs)));
    g.finish();
}

criterion_group!(benches, write);
criterion_main!(benches);

//! Criterion benchmarks for `PList` (push/pop at both ends, index, range) against
//! `std::collections::VecDeque`, and for `POrdSet` (insert, rank, nth, range by rank) against
//! `std::collections::BTreeSet` (which has no rank: its "rank" is a counting walk, shown only
//! for small sets). Run with `cargo bench -p kayvee-pds --bench list_ordset`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use kayvee_pds::{PList, POrdSet, SmallBytes};
use std::collections::{BTreeSet, VecDeque};

/// Elements per structure: 1,000,000 under `cargo bench`, a few thousand as a smoke test.
fn n() -> u32 {
    if std::env::args().any(|a| a == "--bench") {
        1_000_000
    } else {
        5_000
    }
}

fn member(i: u32) -> SmallBytes {
    SmallBytes::from_slice(format!("member:{i:08}").as_bytes())
}

/// A repeatable scrambled sequence of indexes below `n`.
fn probes(n: u32) -> Vec<u32> {
    (0..4096u64)
        .map(|i| ((i * 2_654_435_761) % u64::from(n)) as u32)
        .collect()
}

fn list(c: &mut Criterion) {
    let n = n();
    let items: Vec<SmallBytes> = (0..n).map(member).collect();
    let mut g = c.benchmark_group("list");
    g.bench_function("plist push_back n", |b| {
        b.iter(|| {
            let mut l = PList::new();
            items.iter().for_each(|x| l.push_back(x.clone()));
            l
        })
    });
    g.bench_function("vecdeque push_back n", |b| {
        b.iter(|| {
            let mut l = VecDeque::new();
            items.iter().for_each(|x| l.push_back(x.clone()));
            l
        })
    });
    let full: PList<SmallBytes> = items.iter().cloned().collect();
    let deque: VecDeque<SmallBytes> = items.iter().cloned().collect();
    g.bench_function("plist push_front+pop_back", |b| {
        let mut l = full.clone();
        b.iter(|| {
            l.push_front(items[7].clone());
            l.pop_back()
        })
    });
    g.bench_function("vecdeque push_front+pop_back", |b| {
        let mut l = deque.clone();
        b.iter(|| {
            l.push_front(items[7].clone());
            l.pop_back()
        })
    });
    let idx = probes(n);
    g.bench_function("plist get (4096 random)", |b| {
        b.iter(|| {
            idx.iter()
                .map(|&i| full.get(i as usize).unwrap().len())
                .sum::<usize>()
        })
    });
    g.bench_function("vecdeque get (4096 random)", |b| {
        b.iter(|| idx.iter().map(|&i| deque[i as usize].len()).sum::<usize>())
    });
    g.bench_function("plist set (4096 random, unshared)", |b| {
        let mut l = full.clone();
        l.push_back(items[0].clone()); // unshare the path to the tail
        b.iter(|| {
            idx.iter().for_each(|&i| {
                l.set(i as usize, items[3].clone());
            })
        })
    });
    g.bench_function("plist range 100 from middle", |b| {
        b.iter(|| {
            full.range(n as usize / 2, n as usize / 2 + 100)
                .map(|x| x.len())
                .sum::<usize>()
        })
    });
    g.bench_function("plist snapshot+set", |b| {
        b.iter_batched_ref(
            || full.clone(),
            |l| {
                let snap = l.clone();
                l.set(black_box(12_345 % n as usize), items[1].clone());
                snap
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("plist retain_range middle 100", |b| {
        b.iter_batched_ref(
            || full.clone(),
            |l| l.retain_range(n as usize / 2, n as usize / 2 + 100),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

type Scored = (u64, SmallBytes);

fn ordset(c: &mut Criterion) {
    let n = n();
    let scored: Vec<Scored> = (0..n)
        .map(|i| ((u64::from(i) * 2_654_435_761) % 1_000_003, member(i)))
        .collect();
    let mut g = c.benchmark_group("ordset");
    g.bench_function("pordset insert n random", |b| {
        b.iter(|| {
            let mut s = POrdSet::new();
            scored.iter().for_each(|x| {
                s.insert(x.clone());
            });
            s
        })
    });
    g.bench_function("btreeset insert n random", |b| {
        b.iter(|| {
            let mut s = BTreeSet::new();
            scored.iter().for_each(|x| {
                s.insert(x.clone());
            });
            s
        })
    });
    let set: POrdSet<Scored> = scored.iter().cloned().collect();
    let bset: BTreeSet<Scored> = scored.iter().cloned().collect();
    let idx = probes(n);
    g.bench_function("pordset rank (4096 random)", |b| {
        b.iter(|| {
            idx.iter()
                .map(|&i| set.rank(&scored[i as usize]).unwrap())
                .sum::<usize>()
        })
    });
    g.bench_function("pordset contains (4096 random)", |b| {
        b.iter(|| {
            idx.iter()
                .filter(|&&i| set.contains(&scored[i as usize]))
                .count()
        })
    });
    g.bench_function("btreeset contains (4096 random)", |b| {
        b.iter(|| {
            idx.iter()
                .filter(|&&i| bset.contains(&scored[i as usize]))
                .count()
        })
    });
    g.bench_function("pordset nth (4096 random)", |b| {
        b.iter(|| {
            idx.iter()
                .map(|&i| set.nth(i as usize).unwrap().0)
                .sum::<u64>()
        })
    });
    g.bench_function("pordset range_by_rank 100 from middle", |b| {
        b.iter(|| {
            set.range_by_rank(n as usize / 2, n as usize / 2 + 100)
                .map(|x| x.0)
                .sum::<u64>()
        })
    });
    g.bench_function("pordset remove+insert (unshared)", |b| {
        let mut s = set.clone();
        s.pop_first(); // unshare the path to the head
        let mut k = 0;
        b.iter(|| {
            let x = &scored[idx[k % idx.len()] as usize];
            k += 1;
            s.remove(x);
            s.insert(x.clone())
        })
    });
    g.bench_function("btreeset remove+insert", |b| {
        let mut s = bset.clone();
        let mut k = 0;
        b.iter(|| {
            let x = &scored[idx[k % idx.len()] as usize];
            k += 1;
            s.remove(x);
            s.insert(x.clone())
        })
    });
    g.finish();
}

criterion_group!(benches, list, ordset);
criterion_main!(benches);

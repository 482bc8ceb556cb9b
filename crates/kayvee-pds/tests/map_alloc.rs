//! Allocation accounting for `PMap`, with a counting global allocator (per thread, so parallel
//! tests do not disturb each other): reads and in-place writes allocate nothing, and the trie's
//! structure overhead per entry stays small.

use kayvee_pds::{PMap, SmallBytes};

#[path = "common/alloc.rs"]
mod alloc;
use alloc::counters;

/// A short key like the engine's (inline `SmallBytes`).
fn key(i: u32) -> SmallBytes {
    SmallBytes::from_slice(format!("key:{i:08}").as_bytes())
}

/// A 32-byte value: a short string plus a word of metadata, like the engine's `Entry`.
type Val = (SmallBytes, u64);

fn build(n: u32) -> PMap<SmallBytes, Val> {
    let mut m = PMap::with_seed(0x5eed);
    for i in 0..n {
        m.insert(key(i), (SmallBytes::from_slice(b"value"), u64::from(i)));
    }
    m
}

#[test]
fn reads_and_in_place_writes_allocate_nothing() {
    let mut m = build(20_000);
    let keys: Vec<SmallBytes> = (0..20_000).step_by(7).map(key).collect();
    let before = counters();
    for (i, k) in keys.iter().enumerate() {
        assert!(m.get(k).is_some());
        assert!(m.get(&SmallBytes::from_slice(b"absent")).is_none());
        m.get_mut(k).unwrap().1 = i as u64;
        assert!(m.insert(k.clone(), (SmallBytes::new(), 0)).is_some());
    }
    assert_eq!(
        counters().1,
        before.1,
        "no allocation on get/get_mut/replace"
    );
    assert_eq!(counters().0, before.0);
    let mut cursor = 0;
    let mut seen = 0;
    loop {
        cursor = m.scan(cursor, 100, |_, _| seen += 1);
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen, 20_000);
    assert!(m.random(12345).is_some());
    assert_eq!(counters().1, before.1, "no allocation on scan/random");
}

#[test]
fn new_key_allocates_within_its_node_only() {
    let mut m = build(10_000);
    let before = counters();
    m.insert(key(1_000_000), (SmallBytes::new(), 0));
    let calls = counters().1 - before.1;
    assert!(
        calls <= 3,
        "one node rebuilt (+ at most a new child): {calls} allocations"
    );
}

/// Measures structure bytes per entry beyond `size_of::<(K, V)>()` for `n` keys.
fn overhead_per_entry(n: u32) -> (f64, f64, usize) {
    let before = counters();
    let m = build(n);
    let (bytes, calls) = (counters().0 - before.0, counters().1 - before.1);
    let _ = calls;
    let live = bytes as usize;
    assert_eq!(
        m.heap_size(),
        live,
        "heap_size() must match the allocator's count"
    );
    let kv = std::mem::size_of::<(SmallBytes, Val)>();
    let overhead = (live as f64 - f64::from(n) * kv as f64) / f64::from(n);
    let nodes = m.node_addrs().len();
    (overhead, nodes as f64 / f64::from(n), kv)
}

#[test]
fn structure_overhead_per_entry_is_small() {
    // 1,000,000 keys: the brief's target is < ~20 bytes per entry beyond (K, V).
    for n in [1_000_000u32, 300_000] {
        let (overhead, nodes_per_entry, kv) = overhead_per_entry(n);
        println!(
            "n={n}: (K,V)={kv} B, overhead {overhead:.1} B/entry, {nodes_per_entry:.3} nodes/entry"
        );
        assert!(overhead < 20.0, "n={n}: {overhead:.1} bytes per entry");
    }
}

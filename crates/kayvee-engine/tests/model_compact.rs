//! Model-based property tests of the compact collection representations (`value::Hash` and
//! `value::ZSet`): random inserts, updates and removals against a `BTreeMap` model, converting
//! to the big form at a threshold as the engine does (one way), with snapshots (clones) taken
//! before writes that must still show exactly their own state at the end. Scores include
//! `-0.0`, integers and fractions, so every score width of the flat form is exercised.

use kayvee_engine::value::{cmp_scored, Hash, ZSet};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Entries past which a collection converts (Redis's listpack limit, shrunk to reach it).
const LIMIT: usize = 12;

/// A hash's model.
type HModel = BTreeMap<Vec<u8>, Vec<u8>>;

/// One step on a hash.
#[derive(Clone, Debug)]
enum HOp {
    Set(u8, Vec<u8>),
    Del(u8),
    Snapshot,
}

fn field(f: u8) -> Vec<u8> {
    format!("f{}", f % 24).into_bytes()
}

fn hop() -> impl Strategy<Value = HOp> {
    prop_oneof![
        4 => (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..30)).prop_map(|(f, v)| HOp::Set(f, v)),
        // Values of a few lengths, so neighbours often share one (the flat form's `same` flag).
        4 => (any::<u8>(), 0..3usize, any::<u8>()).prop_map(|(f, l, b)| HOp::Set(f, vec![b; [2, 16, 17][l]])),
        2 => any::<u8>().prop_map(HOp::Del),
        1 => Just(HOp::Snapshot),
    ]
}

/// The hash must equal the model through every read.
fn check_hash(h: &Hash, m: &HModel) {
    h.check_invariants();
    assert_eq!(h.len(), m.len());
    assert_eq!(h.is_empty(), m.is_empty());
    let mut seen: Vec<(Vec<u8>, Vec<u8>)> =
        h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
    seen.sort();
    let want: Vec<_> = m.iter().map(|(f, v)| (f.clone(), v.clone())).collect();
    assert_eq!(seen, want);
    for f in 0..24u8 {
        assert_eq!(
            h.get(&field(f)).map(|v| v.to_vec()),
            m.get(&field(f)).cloned()
        );
    }
}

/// One step on a sorted set.
#[derive(Clone, Debug)]
enum ZOp {
    Add(u8, i16, u8),
    Rem(u8),
    RemRanks(u8, u8),
    Snapshot,
}

fn member(m: u8) -> Vec<u8> {
    format!("m{}", m % 24).into_bytes()
}

/// Scores of every width: small integers, big integers, halves, tenths, thirds, integers past
/// 32 bits, `-0.0`.
fn score(base: i16, kind: u8) -> f64 {
    match kind % 7 {
        0 => f64::from(base),
        1 => f64::from(base) * 100_000.0,
        2 => f64::from(base) + 0.5,
        3 => f64::from(base) / 3.0,
        4 => f64::from(base) / 10.0,
        5 => f64::from(base) * 10_000_000_000.0 + 7.0,
        _ => -0.0,
    }
}

fn zop() -> impl Strategy<Value = ZOp> {
    prop_oneof![
        5 => (any::<u8>(), -300i16..300, any::<u8>()).prop_map(|(m, b, k)| ZOp::Add(m, b, k)),
        2 => any::<u8>().prop_map(ZOp::Rem),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| ZOp::RemRanks(a % 16, b % 16)),
        1 => Just(ZOp::Snapshot),
    ]
}

/// The model's (score, member) order.
fn zorder(m: &BTreeMap<Vec<u8>, f64>) -> Vec<(f64, Vec<u8>)> {
    let mut v: Vec<(f64, Vec<u8>)> = m.iter().map(|(k, s)| (*s, k.clone())).collect();
    v.sort_by(|a, b| cmp_scored((a.0, &a.1), (b.0, &b.1)));
    v
}

/// The sorted set must equal the model through every read (scores bit for bit).
fn check_zset(z: &ZSet, m: &BTreeMap<Vec<u8>, f64>) {
    z.check_invariants();
    let want = zorder(m);
    let got: Vec<(f64, Vec<u8>)> = z.iter().map(|e| (e.0, e.1.to_vec())).collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0.to_bits(), &g.1), (w.0.to_bits(), &w.1));
    }
    let back: Vec<Vec<u8>> = z.iter().rev().map(|e| e.1.to_vec()).collect();
    assert_eq!(
        back,
        want.iter().rev().map(|w| w.1.clone()).collect::<Vec<_>>()
    );
    for (rank, (s, k)) in want.iter().enumerate() {
        assert_eq!(z.rank(k), Some(rank));
        assert_eq!(z.score(k).map(f64::to_bits), Some(s.to_bits()));
        assert_eq!(z.nth(rank).map(|e| e.1.to_vec()), Some(k.clone()));
    }
    let below = want.iter().filter(|w| w.0 < 0.0).count();
    assert_eq!(z.partition_point(|e| e.0 < 0.0), below);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn hash_matches_model_across_conversion_and_snapshots(ops in proptest::collection::vec(hop(), 1..80)) {
        let (mut h, mut model) = (Hash::new(), BTreeMap::new());
        let mut snaps: Vec<(Hash, HModel)> = Vec::new();
        for op in ops {
            match op {
                HOp::Set(f, v) => {
                    if !h.is_big() && model.len() >= LIMIT && !model.contains_key(&field(f)) {
                        h.make_big(42);
                    }
                    let new = h.insert(&field(f), &v);
                    prop_assert_eq!(new, model.insert(field(f), v).is_none());
                }
                HOp::Del(f) => prop_assert_eq!(h.remove(&field(f)), model.remove(&field(f)).is_some()),
                HOp::Snapshot => snaps.push((h.clone(), model.clone())),
            }
            prop_assert!(h.is_big() || model.len() <= LIMIT, "flat past the limit");
            check_hash(&h, &model);
        }
        for (snap, m) in &snaps {
            check_hash(snap, m);
        }
        let was_big = h.is_big();
        h.make_flat();
        check_hash(&h, &model);
        prop_assert!(!h.is_big() || !was_big);
    }

    #[test]
    fn zset_matches_model_across_conversion_and_snapshots(ops in proptest::collection::vec(zop(), 1..80)) {
        let (mut z, mut model) = (ZSet::new_flat(), BTreeMap::new());
        let mut snaps: Vec<(ZSet, BTreeMap<Vec<u8>, f64>)> = Vec::new();
        for op in ops {
            match op {
                ZOp::Add(m, b, k) => {
                    let s = score(b, k);
                    let old = z.insert(&member(m), s);
                    prop_assert_eq!(old.map(f64::to_bits), model.insert(member(m), s).map(f64::to_bits));
                    if !z.is_big() && model.len() > LIMIT {
                        z.make_big(42);
                    }
                }
                ZOp::Rem(m) => {
                    let got = z.remove(&member(m)).map(f64::to_bits);
                    prop_assert_eq!(got, model.remove(&member(m)).map(f64::to_bits));
                }
                ZOp::RemRanks(a, b) => {
                    let (lo, hi) = (a.min(b) as usize, a.max(b) as usize);
                    let gone: Vec<Vec<u8>> = zorder(&model).into_iter().skip(lo).take(hi - lo).map(|w| w.1).collect();
                    prop_assert_eq!(z.remove_rank_range(lo, hi), gone.len());
                    gone.iter().for_each(|k| { model.remove(k); });
                }
                ZOp::Snapshot => snaps.push((z.clone(), model.clone())),
            }
            prop_assert!(z.is_big() || model.len() <= LIMIT, "flat past the limit");
            check_zset(&z, &model);
        }
        for (snap, m) in &snaps {
            check_zset(snap, m);
        }
        z.make_flat();
        check_zset(&z, &model);
    }
}

/// The flat forms are what makes small collections cheap: 10 fields of 7 + 16 bytes take 54
/// bytes of heap when fields and values share prefixes as the memory benchmark's do, 243 when
/// they share nothing (Redis's listpack: ~277 either way); 10 members `member:0..9` with
/// half-integer scores 38 (their shared prefix once; Redis: ~157).
#[test]
fn flat_forms_are_listpack_sized() {
    let mut h = Hash::new();
    let mut z = ZSet::new_flat();
    for j in 0..10 {
        h.insert(
            format!("field:{j}").as_bytes(),
            format!("{:014}:{j}", 12345).as_bytes(),
        );
        z.insert(format!("member:{j}").as_bytes(), f64::from(j) + 0.5);
    }
    assert_eq!(h.heap_size(), 54);
    assert_eq!(z.heap_size(), 38);
    let mut distinct = Hash::new();
    for j in 0..10u8 {
        let (f, v) = ([b'a' + j; 7], [b'a' + j; 16]);
        distinct.insert(&f, &v);
    }
    assert_eq!(distinct.heap_size(), 243);
    let flat = (h.heap_size(), z.heap_size());
    h.make_big(1);
    z.make_big(1);
    assert!(
        h.heap_size() > 2 * flat.0 && z.heap_size() > 4 * flat.1,
        "the big forms cost more"
    );
}

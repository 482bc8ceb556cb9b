//! Model-based property tests for `PMap`: random operation sequences against `std::HashMap`,
//! snapshots taken mid-sequence, forced hash collisions, and scan completeness under concurrent
//! modification.

use kayvee_pds::PMap;
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

/// A key whose hash only sees `k / group`: `group = 1` is an ordinary key, larger groups force
/// full 64-bit hash collisions (and `u16::MAX + 1` makes every key collide).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    k: u16,
    group: u32,
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(u32::from(self.k) / self.group);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u32),
    Remove(u16),
    RemoveRandom(u64),
    GetMut(u16, u32),
    Clear,
    Snapshot,
}

fn op(key_max: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..key_max, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        5 => (0..key_max).prop_map(Op::Remove),
        2 => any::<u64>().prop_map(Op::RemoveRandom),
        2 => (0..key_max, any::<u32>()).prop_map(|(k, v)| Op::GetMut(k, v)),
        1 => Just(Op::Clear),
        1 => Just(Op::Snapshot),
    ]
}

/// The map's contents as a model-comparable `HashMap`.
fn contents(m: &PMap<Key, u32>) -> HashMap<u16, u32> {
    m.iter().map(|(k, v)| (k.k, *v)).collect()
}

/// Runs `ops` on a `PMap` and a `HashMap` model; checks after every op; snapshots must still
/// match their model copy at the end.
fn run_model(ops: &[Op], group: u32, seed: u64) {
    let mut map: PMap<Key, u32> = PMap::with_seed(seed);
    let mut model: HashMap<u16, u32> = HashMap::new();
    let mut snaps = Vec::new();
    let key = |k: u16| Key { k, group };
    for op in ops {
        match *op {
            Op::Insert(k, v) => assert_eq!(map.insert(key(k), v), model.insert(k, v)),
            Op::Remove(k) => {
                let got = map.remove(&key(k)).map(|(k, v)| (k.k, v));
                assert_eq!(got, model.remove(&k).map(|v| (k, v)));
            }
            Op::RemoveRandom(rnd) => {
                let want = map.random(rnd).map(|(k, v)| (k.clone(), *v));
                let got = map.remove_random(rnd);
                assert_eq!(got, want);
                if let Some((k, v)) = got {
                    assert_eq!(model.remove(&k.k), Some(v));
                }
            }
            Op::GetMut(k, v) => {
                let got = map.get_mut(&key(k)).map(|slot| std::mem::replace(slot, v));
                let want = model.get_mut(&k).map(|slot| std::mem::replace(slot, v));
                assert_eq!(got, want);
            }
            Op::Clear => {
                map.clear();
                model.clear();
            }
            Op::Snapshot => snaps.push((map.clone(), model.clone())),
        }
        map.check_invariants();
        assert_eq!(map.len(), model.len());
    }
    assert_eq!(contents(&map), model);
    for (k, v) in &model {
        assert_eq!(map.get(&key(*k)), Some(v));
    }
    for (snap, snap_model) in &snaps {
        snap.check_invariants();
        assert_eq!(
            &contents(snap),
            snap_model,
            "snapshot disturbed by later writes"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn matches_model(ops in prop::collection::vec(op(400), 0..600), seed: u64) {
        run_model(&ops, 1, seed);
    }

    #[test]
    fn matches_model_with_collision_groups(ops in prop::collection::vec(op(200), 0..400),
                                           group in 2u32..12, seed: u64) {
        run_model(&ops, group, seed);
    }

    #[test]
    fn matches_model_with_constant_hash(ops in prop::collection::vec(op(40), 0..200), seed: u64) {
        run_model(&ops, u32::from(u16::MAX) + 1, seed);
    }

    /// Phases of inserts and removes (nodes drained, keeping spare slots or rebuilt, then refilled through
    /// their spare slots), with snapshots taken between phases.
    #[test]
    fn remove_then_insert_phases(phases in prop::collection::vec(
                                     (prop::collection::btree_set(0u16..600, 0..300), any::<bool>()),
                                     1..8),
                                 group in prop_oneof![Just(1u32), 2u32..6],
                                 seed: u64) {
        let mut ops = Vec::new();
        for (keys, insert) in phases {
            ops.extend(keys.into_iter().map(|k| if insert {
                Op::Insert(k, u32::from(k))
            } else {
                Op::Remove(k)
            }));
            ops.push(Op::Snapshot);
        }
        run_model(&ops, group, seed);
    }

    /// Entries present for the whole scan are visited at least once whatever is inserted or
    /// removed between calls; nothing is visited that was never in the map.
    #[test]
    fn scan_is_complete_under_modification(
        stable in prop::collection::btree_set(0u16..1000, 0..200),
        churn in prop::collection::vec((1000u16..1400, any::<bool>()), 0..300),
        counts in prop::collection::vec(1usize..20, 1..50),
        group in prop_oneof![Just(1u32), 2u32..6],
        seed: u64,
    ) {
        let key = |k: u16| Key { k, group };
        let mut map: PMap<Key, u32> = PMap::with_seed(seed);
        for &k in &stable {
            map.insert(key(k), 0);
        }
        let mut seen = BTreeSet::new();
        let mut churn = churn.iter().cycle().take(churn.len() * 4);
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let count = counts[calls % counts.len()];
            let (mut batch, mut last_hash, mut ordered) = (0, 0, true);
            cursor = map.scan(cursor, count, |k, _| {
                let h = map.hash_of(k);
                ordered &= h >= last_hash;
                last_hash = h;
                seen.insert(k.k);
                batch += 1;
            });
            prop_assert!(ordered, "scan out of hash order");
            prop_assert!(batch >= count || cursor == 0, "short batch before the end");
            prop_assert!(cursor == 0 || cursor > last_hash, "cursor must move forward");
            calls += 1;
            if cursor == 0 {
                break;
            }
            for _ in 0..3 {
                if let Some(&(k, ins)) = churn.next() {
                    if ins { map.insert(key(k), 1); } else { map.remove(&key(k)); }
                }
            }
            prop_assert!(calls < 10_000, "scan does not terminate");
        }
        let missed: Vec<_> = stable.iter().filter(|k| !seen.contains(k)).collect();
        prop_assert!(missed.is_empty(), "missed {:?}", missed);
        prop_assert!(seen.iter().all(|k| stable.contains(k) || *k >= 1000));
    }

    /// `random` only returns present entries, and every entry is reachable by some `rnd`.
    #[test]
    fn random_reaches_every_entry(keys in prop::collection::btree_set(0u16..3000, 1..200),
                                  seed: u64) {
        let mut map: PMap<Key, u32> = PMap::with_seed(seed);
        for &k in &keys {
            map.insert(Key { k, group: 1 }, 0);
        }
        let picked: BTreeSet<u16> =
            (0..keys.len() as u64).map(|r| map.random(r).unwrap().0.k).collect();
        prop_assert_eq!(picked, keys);
    }
}

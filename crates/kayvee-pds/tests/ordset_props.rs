//! Model-based property tests for `POrdSet`: random operation sequences (including ascending
//! and descending runs that grow the tree to several levels) against a `BTreeSet` model with
//! ranks computed by counting, invariants checked after every operation, snapshots taken
//! mid-sequence compared with their model copy at the end.

use kayvee_pds::POrdSet;
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Clone, Debug)]
enum Op {
    Insert(u32),
    Remove(u32),
    /// Inserts `start, start + step, ...` (`n` values; descending when `step` < 0).
    Run(u32, i32, usize),
    PopFirst,
    PopLast,
    /// Rank-based ops take a fraction (of u16::MAX) of the length.
    RemoveRange(u16, u16),
    RemoveNth(u16),
    Query(u32),
    Nth(u16),
    Range(u16, u16),
    Snapshot,
}

const KEY_MAX: u32 = 20_000;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..KEY_MAX).prop_map(Op::Insert),
        6 => (0..KEY_MAX).prop_map(Op::Remove),
        2 => (0..KEY_MAX, prop_oneof![Just(1i32), Just(-1), Just(3), -7i32..7], 1usize..2500)
            .prop_map(|(s, st, n)| Op::Run(s, st, n)),
        2 => Just(Op::PopFirst),
        2 => Just(Op::PopLast),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::RemoveRange(a, b)),
        2 => any::<u16>().prop_map(Op::RemoveNth),
        4 => (0..KEY_MAX).prop_map(Op::Query),
        2 => any::<u16>().prop_map(Op::Nth),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Range(a, b)),
        2 => Just(Op::Snapshot),
    ]
}

/// Scales a fraction of `u16::MAX` to a rank in `0..=len` (a little past it sometimes).
fn at(f: u16, len: usize) -> usize {
    (usize::from(f) * (len + 2)) / usize::from(u16::MAX)
}

/// Asserts the set holds exactly the model's elements, both directions.
fn assert_same(set: &POrdSet<u32>, model: &BTreeSet<u32>) {
    assert_eq!(set.len(), model.len());
    assert!(set.iter().eq(model.iter()), "forward iteration");
    assert!(
        set.iter().rev().eq(model.iter().rev()),
        "backward iteration"
    );
    assert_eq!(set.first(), model.first());
    assert_eq!(set.last(), model.last());
}

/// Applies one op to both; checks its result.
fn apply(
    set: &mut POrdSet<u32>,
    model: &mut BTreeSet<u32>,
    op: &Op,
    snaps: &mut Vec<(POrdSet<u32>, BTreeSet<u32>)>,
) {
    let len = model.len();
    match op {
        Op::Insert(v) => assert_eq!(set.insert(*v), model.insert(*v)),
        Op::Remove(v) => assert_eq!(set.remove(v), model.remove(v)),
        Op::Run(s, step, n) => {
            let mut v = i64::from(*s);
            for _ in 0..*n {
                if (0..i64::from(u32::MAX)).contains(&v) {
                    assert_eq!(set.insert(v as u32), model.insert(v as u32));
                }
                v += i64::from(*step);
            }
        }
        Op::PopFirst => assert_eq!(set.pop_first(), model.pop_first()),
        Op::PopLast => assert_eq!(set.pop_last(), model.pop_last()),
        Op::RemoveRange(a, b) => {
            let (s, e) = (at(*a, len), at(*b, len));
            let (ms, me) = (s.min(e).min(len), e.min(len));
            let doomed: Vec<u32> = model
                .iter()
                .skip(ms)
                .take(me.saturating_sub(ms))
                .copied()
                .collect();
            for d in &doomed {
                model.remove(d);
            }
            assert_eq!(set.remove_range_by_rank(s, e), doomed.len());
        }
        Op::RemoveNth(f) => {
            let i = at(*f, len);
            let want = model.iter().nth(i).copied();
            if let Some(w) = want {
                model.remove(&w);
            }
            assert_eq!(set.remove_nth(i), want);
        }
        Op::Query(v) => {
            let less = model.range(..*v).count();
            let has = model.contains(v);
            assert_eq!(set.contains(v), has);
            assert_eq!(set.rank(v), has.then_some(less));
            assert_eq!(set.count_less(v), less);
            assert_eq!(set.count_less_eq(v), less + usize::from(has));
            assert_eq!(set.partition_point(|x| x < v), less);
            assert_eq!(set.partition_point(|x| x <= v), less + usize::from(has));
            assert_eq!(set.get(v), model.get(v));
        }
        Op::Nth(f) => {
            let i = at(*f, len);
            assert_eq!(set.nth(i), model.iter().nth(i));
        }
        Op::Range(a, b) => {
            let (s, e) = (at(*a, len), at(*b, len));
            let want: Vec<u32> = model
                .iter()
                .skip(s)
                .take(e.saturating_sub(s))
                .copied()
                .collect();
            let got: Vec<u32> = set.range_by_rank(s, e).copied().collect();
            assert_eq!(got, want);
            assert!(set.range_by_rank(s, e).rev().eq(want.iter().rev()));
            assert!(set.iter_from(s).eq(model.iter().skip(s)));
        }
        Op::Snapshot => snaps.push((set.clone(), model.clone())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn ordset_matches_btreeset(ops in prop::collection::vec(op(), 1..60)) {
        let mut set = POrdSet::new();
        let mut model = BTreeSet::new();
        let mut snaps = Vec::new();
        for op in &ops {
            apply(&mut set, &mut model, op, &mut snaps);
            set.check_invariants();
            assert_same(&set, &model);
        }
        for (snap, m) in &snaps {
            snap.check_invariants();
            assert_same(snap, m);
        }
    }

    #[test]
    fn from_iter_sorts_and_dedups(v in prop::collection::vec(0u32..3000, 0..5000)) {
        let set: POrdSet<u32> = v.iter().copied().collect();
        set.check_invariants();
        let model: BTreeSet<u32> = v.into_iter().collect();
        assert_same(&set, &model);
    }
}

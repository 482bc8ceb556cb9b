//! Model-based property tests for `PList`: random operation sequences (including bulk pushes
//! that grow the tree to several levels) against a `VecDeque` model, invariants checked after
//! every operation, snapshots taken mid-sequence compared with their model copy at the end.

use kayvee_pds::PList;
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Clone, Debug)]
enum Op {
    PushFront(u32),
    PushBack(u32),
    /// Pushes `n` consecutive values at the front or back.
    PushMany(bool, u32, usize),
    PopFront,
    PopBack,
    /// Pops `n` from the front or back.
    PopMany(bool, usize),
    /// Index ops take a fraction (of u16::MAX) of the length, so they hit every size.
    Set(u16, u32),
    Insert(u16, u32),
    Remove(u16),
    /// Removes `n` elements starting at an index (one by one: middle chunks underflow).
    RemoveRun(u16, usize),
    /// Inserts `n` values at one index (middle chunks split in halves).
    InsertRun(u16, u32, usize),
    Get(u16),
    Range(u16, u16),
    RetainRange(u16, u16),
    RemoveMatching(u32, usize, bool),
    SplitOff(u16),
    Extend(Vec<u32>),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u32>().prop_map(Op::PushFront),
        4 => any::<u32>().prop_map(Op::PushBack),
        2 => (any::<bool>(), any::<u32>(), 1usize..2500).prop_map(|(f, s, n)| Op::PushMany(f, s, n)),
        2 => Just(Op::PopFront),
        2 => Just(Op::PopBack),
        1 => (any::<bool>(), 1usize..1500).prop_map(|(f, n)| Op::PopMany(f, n)),
        3 => (any::<u16>(), any::<u32>()).prop_map(|(i, v)| Op::Set(i, v)),
        4 => (any::<u16>(), any::<u32>()).prop_map(|(i, v)| Op::Insert(i, v)),
        4 => any::<u16>().prop_map(Op::Remove),
        2 => (any::<u16>(), 1usize..400).prop_map(|(i, n)| Op::RemoveRun(i, n)),
        2 => (any::<u16>(), any::<u32>(), 1usize..400).prop_map(|(i, v, n)| Op::InsertRun(i, v, n)),
        2 => any::<u16>().prop_map(Op::Get),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Range(a, b)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::RetainRange(a, b)),
        1 => (0u32..4, 0usize..3000, any::<bool>()).prop_map(|(v, l, b)| Op::RemoveMatching(v, l, b)),
        1 => any::<u16>().prop_map(Op::SplitOff),
        1 => prop::collection::vec(any::<u32>(), 0..200).prop_map(Op::Extend),
        2 => Just(Op::Snapshot),
    ]
}

/// Scales a fraction of `u16::MAX` to an index in `0..=len` (a little past it sometimes).
fn at(f: u16, len: usize) -> usize {
    (usize::from(f) * (len + 2)) / usize::from(u16::MAX)
}

/// Asserts the list holds exactly the model's elements, forwards, backwards and by index.
fn assert_same(list: &PList<u32>, model: &VecDeque<u32>) {
    assert_eq!(list.len(), model.len());
    assert!(list.iter().eq(model.iter()), "forward iteration");
    assert!(
        list.iter().rev().eq(model.iter().rev()),
        "backward iteration"
    );
    assert_eq!(list.front(), model.front());
    assert_eq!(list.back(), model.back());
}

/// Applies one op to both; checks its result.
fn apply(
    list: &mut PList<u32>,
    model: &mut VecDeque<u32>,
    op: &Op,
    snaps: &mut Vec<(PList<u32>, VecDeque<u32>)>,
) {
    let len = model.len();
    match op {
        Op::PushFront(v) => {
            list.push_front(*v);
            model.push_front(*v);
        }
        Op::PushBack(v) => {
            list.push_back(*v);
            model.push_back(*v);
        }
        Op::PushMany(front, s, n) => {
            for v in *s..s.saturating_add(*n as u32) {
                if *front {
                    list.push_front(v);
                    model.push_front(v);
                } else {
                    list.push_back(v);
                    model.push_back(v);
                }
            }
        }
        Op::PopFront => assert_eq!(list.pop_front(), model.pop_front()),
        Op::PopBack => assert_eq!(list.pop_back(), model.pop_back()),
        Op::PopMany(front, n) => {
            for _ in 0..*n {
                if *front {
                    assert_eq!(list.pop_front(), model.pop_front());
                } else {
                    assert_eq!(list.pop_back(), model.pop_back());
                }
            }
        }
        Op::Set(f, v) => {
            let i = at(*f, len);
            let ok = i < len;
            if ok {
                model[i] = *v;
            }
            assert_eq!(list.set(i, *v), ok);
        }
        Op::Insert(f, v) => {
            let i = at(*f, len).min(len);
            list.insert(i, *v);
            model.insert(i, *v);
        }
        Op::Remove(f) => {
            let i = at(*f, len);
            assert_eq!(list.remove(i), model.remove(i));
        }
        Op::RemoveRun(f, n) => {
            let i = at(*f, len);
            for _ in 0..*n {
                assert_eq!(list.remove(i), model.remove(i));
            }
        }
        Op::InsertRun(f, v, n) => {
            let i = at(*f, len).min(len);
            for k in 0..*n as u32 {
                list.insert(i, v.wrapping_add(k));
                model.insert(i, v.wrapping_add(k));
            }
        }
        Op::Get(f) => {
            let i = at(*f, len);
            assert_eq!(list.get(i), model.get(i));
        }
        Op::Range(a, b) => {
            let (s, e) = (at(*a, len), at(*b, len));
            let (ms, me) = (s.min(len), e.min(len));
            let want: Vec<u32> = if ms < me {
                model.range(ms..me).copied().collect()
            } else {
                vec![]
            };
            let got: Vec<u32> = list.range(s, e).copied().collect();
            assert_eq!(got, want);
            let back: Vec<u32> = list.range(s, e).rev().copied().collect();
            assert!(back.iter().eq(want.iter().rev()));
            assert_eq!(list.range(s, e).len(), want.len());
        }
        Op::RetainRange(a, b) => {
            let (s, e) = (at(*a, len), at(*b, len));
            list.retain_range(s, e);
            let (ms, me) = (s.min(e).min(len), e.min(len));
            *model = model.range(ms..me.max(ms)).copied().collect();
        }
        Op::RemoveMatching(v, limit, from_back) => {
            let limit = if *limit == 0 { usize::MAX } else { *limit };
            let got = list.remove_matching(|x| x % 4 == *v, limit, *from_back);
            let mut removed = 0;
            let mut keep: Vec<bool> = vec![true; len];
            let order: Box<dyn Iterator<Item = usize>> = if *from_back {
                Box::new((0..len).rev())
            } else {
                Box::new(0..len)
            };
            for i in order {
                if removed < limit && model[i] % 4 == *v {
                    keep[i] = false;
                    removed += 1;
                }
            }
            *model = model
                .iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(x, _)| *x)
                .collect();
            assert_eq!(got, removed);
        }
        Op::SplitOff(f) => {
            let i = at(*f, len);
            let tail = list.split_off(i);
            let mtail = model.split_off(i.min(len));
            tail.check_invariants();
            assert_same(&tail, &mtail);
        }
        Op::Extend(vs) => {
            list.extend(vs.iter().copied());
            model.extend(vs.iter().copied());
        }
        Op::Snapshot => snaps.push((list.clone(), model.clone())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn list_matches_vecdeque(ops in prop::collection::vec(op(), 1..60)) {
        let mut list = PList::new();
        let mut model = VecDeque::new();
        let mut snaps = Vec::new();
        for op in &ops {
            apply(&mut list, &mut model, op, &mut snaps);
            list.check_invariants();
            assert_same(&list, &model);
        }
        for (snap, m) in &snaps {
            snap.check_invariants();
            assert_same(snap, m);
        }
    }

    #[test]
    fn from_iter_round_trips(v in prop::collection::vec(any::<u32>(), 0..5000)) {
        let list: PList<u32> = v.iter().copied().collect();
        list.check_invariants();
        prop_assert!(list.iter().eq(v.iter()));
        prop_assert_eq!(list, v.iter().copied().collect::<PList<u32>>());
    }
}

/// Draining a large list from alternating ends keeps every invariant and the order.
#[test]
fn drain_both_ends() {
    let mut list: PList<u32> = PList::new();
    let mut model = VecDeque::new();
    for i in 0..20_000 {
        if i % 3 == 0 {
            list.push_front(i);
            model.push_front(i);
        } else {
            list.push_back(i);
            model.push_back(i);
        }
    }
    list.check_invariants();
    let snap = list.clone();
    while !model.is_empty() {
        assert_eq!(list.pop_front(), model.pop_front());
        assert_eq!(list.pop_back(), model.pop_back());
        if model.len() % 997 == 0 {
            list.check_invariants();
        }
    }
    assert!(list.is_empty());
    list.check_invariants();
    assert_eq!(snap.len(), 20_000);
    snap.check_invariants();
}

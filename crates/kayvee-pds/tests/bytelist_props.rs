//! Model-based property tests for `PByteList`: random operation sequences (bulk pushes grow it
//! to several chunks and tree levels; some elements are long enough to need a chunk of their
//! own) against a `VecDeque` model, invariants checked after every operation, snapshots taken
//! mid-sequence compared with their model copy at the end.

use kayvee_pds::PByteList;
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Clone, Debug)]
enum Op {
    Push(bool, u32),
    /// Pushes `n` consecutive values at the front or back.
    PushMany(bool, u32, usize),
    Pop(bool),
    PopMany(bool, usize),
    /// Index ops take a fraction (of u16::MAX) of the length, so they hit every size.
    Set(u16, u32),
    Insert(u16, u32),
    InsertRun(u16, u32, usize),
    Remove(u16),
    RemoveRun(u16, usize),
    Get(u16),
    Range(u16, u16),
    RetainRange(u16, u16),
    RemoveMatching(u32, usize, bool),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), any::<u32>()).prop_map(|(f, v)| Op::Push(f, v)),
        2 => (any::<bool>(), any::<u32>(), 1usize..3000).prop_map(|(f, s, n)| Op::PushMany(f, s, n)),
        3 => any::<bool>().prop_map(Op::Pop),
        1 => (any::<bool>(), 1usize..1500).prop_map(|(f, n)| Op::PopMany(f, n)),
        3 => (any::<u16>(), any::<u32>()).prop_map(|(i, v)| Op::Set(i, v)),
        4 => (any::<u16>(), any::<u32>()).prop_map(|(i, v)| Op::Insert(i, v)),
        2 => (any::<u16>(), any::<u32>(), 1usize..400).prop_map(|(i, v, n)| Op::InsertRun(i, v, n)),
        4 => any::<u16>().prop_map(Op::Remove),
        2 => (any::<u16>(), 1usize..400).prop_map(|(i, n)| Op::RemoveRun(i, n)),
        2 => any::<u16>().prop_map(Op::Get),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Range(a, b)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::RetainRange(a, b)),
        1 => (0u32..4, 0usize..3000, any::<bool>()).prop_map(|(v, l, b)| Op::RemoveMatching(v, l, b)),
        2 => Just(Op::Snapshot),
    ]
}

/// The element for `v`: its digits, empty for multiples of 11, 300 bytes for multiples of 97
/// (a chunk of its own), 120 bytes for multiples of 3 (so lists reach several tree levels).
fn el(v: u32) -> Vec<u8> {
    match v {
        v if v % 97 == 0 => vec![(v % 251) as u8; 300],
        v if v % 11 == 0 => Vec::new(),
        v if v % 3 == 0 => vec![(v % 7) as u8; 120],
        v => v.to_string().into_bytes(),
    }
}

/// Scales a fraction of `u16::MAX` to an index in `0..=len` (a little past it sometimes).
fn at(f: u16, len: usize) -> usize {
    (usize::from(f) * (len + 2)) / usize::from(u16::MAX)
}

type Model = VecDeque<Vec<u8>>;

/// Asserts the list holds exactly the model's elements, forwards and backwards.
fn assert_same(list: &PByteList, model: &Model) {
    assert_eq!(list.len(), model.len());
    assert!(list.iter().eq(model.iter().map(|v| &v[..])), "forwards");
    assert!(
        list.iter().rev().eq(model.iter().rev().map(|v| &v[..])),
        "backwards"
    );
    assert_eq!(list.front(), model.front().map(|v| &v[..]));
    assert_eq!(list.back(), model.back().map(|v| &v[..]));
}

fn push(list: &mut PByteList, model: &mut Model, front: bool, v: u32) {
    if front {
        list.push_front(&el(v));
        model.push_front(el(v));
    } else {
        list.push_back(&el(v));
        model.push_back(el(v));
    }
}

fn pop(list: &mut PByteList, model: &mut Model, front: bool) {
    let (got, want) = if front {
        (list.pop_front(), model.pop_front())
    } else {
        (list.pop_back(), model.pop_back())
    };
    assert_eq!(got.as_deref(), want.as_deref());
}

/// Applies one op to both; checks its result.
fn apply(list: &mut PByteList, model: &mut Model, op: &Op, snaps: &mut Vec<(PByteList, Model)>) {
    let len = model.len();
    match *op {
        Op::Push(f, v) => push(list, model, f, v),
        Op::PushMany(f, s, n) => {
            (s..s.saturating_add(n as u32)).for_each(|v| push(list, model, f, v))
        }
        Op::Pop(f) => pop(list, model, f),
        Op::PopMany(f, n) => (0..n).for_each(|_| pop(list, model, f)),
        Op::Set(f, v) => {
            let i = at(f, len);
            if i < len {
                model[i] = el(v);
            }
            assert_eq!(list.set(i, &el(v)), i < len);
        }
        Op::Insert(f, v) => {
            let i = at(f, len).min(len);
            list.insert(i, &el(v));
            model.insert(i, el(v));
        }
        Op::InsertRun(f, v, n) => {
            let i = at(f, len).min(len);
            for k in 0..n as u32 {
                list.insert(i, &el(v.wrapping_add(k)));
                model.insert(i, el(v.wrapping_add(k)));
            }
        }
        Op::Remove(f) => {
            let i = at(f, len);
            assert_eq!(list.remove(i).as_deref(), model.remove(i).as_deref());
        }
        Op::RemoveRun(f, n) => {
            let i = at(f, len);
            for _ in 0..n {
                assert_eq!(list.remove(i).as_deref(), model.remove(i).as_deref());
            }
        }
        Op::Get(f) => {
            let i = at(f, len);
            assert_eq!(list.get(i), model.get(i).map(|v| &v[..]));
        }
        Op::Range(a, b) => {
            let (s, e) = (at(a, len), at(b, len));
            let (ms, me) = (s.min(len), e.min(len));
            let want: Vec<&[u8]> = if ms < me {
                model.range(ms..me).map(|v| &v[..]).collect()
            } else {
                vec![]
            };
            let got: Vec<&[u8]> = list.range(s, e).collect();
            assert_eq!(got, want);
            assert!(list.range(s, e).rev().eq(want.iter().rev().copied()));
            assert_eq!(list.range(s, e).len(), want.len());
        }
        Op::RetainRange(a, b) => {
            let (s, e) = (at(a, len), at(b, len));
            list.retain_range(s, e);
            let (ms, me) = (s.min(e).min(len), e.min(len));
            *model = model.range(ms..me.max(ms)).cloned().collect();
        }
        Op::RemoveMatching(v, limit, from_back) => {
            let limit = if limit == 0 { usize::MAX } else { limit };
            let hit = |x: &[u8]| x.len() % 4 == v as usize;
            let got = list.remove_matching(hit, limit, from_back);
            let mut keep = vec![true; len];
            let order: Box<dyn Iterator<Item = usize>> = if from_back {
                Box::new((0..len).rev())
            } else {
                Box::new(0..len)
            };
            let mut removed = 0;
            for i in order {
                if removed < limit && hit(&model[i]) {
                    keep[i] = false;
                    removed += 1;
                }
            }
            let kept = model.iter().zip(&keep).filter(|(_, k)| **k);
            *model = kept.map(|(x, _)| x.clone()).collect();
            assert_eq!(got, removed);
        }
        Op::Snapshot => snaps.push((list.clone(), model.clone())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matches_a_deque(ops in prop::collection::vec(op(), 1..60)) {
        let (mut list, mut model) = (PByteList::new(), Model::new());
        let mut snaps = Vec::new();
        for op in &ops {
            apply(&mut list, &mut model, op, &mut snaps);
            list.check_invariants();
        }
        assert_same(&list, &model);
        for (snap, m) in &snaps {
            snap.check_invariants();
            assert_same(snap, m);
        }
    }
}

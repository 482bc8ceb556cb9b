//! Model-based property tests of the compact set and list forms (`value::Set`: intset, packed,
//! map; `value::List`: packed, tree): random command sequences run on a value that starts
//! compact and converts by itself, on one forced into the persistent form from the start, and
//! on a `BTreeSet` / `VecDeque` model. Every reply must be the same in all three (sets in
//! sorted order, except the intset's own order, which must be ascending), with snapshots
//! (clones) taken before writes that must still show exactly their own state at the end.
//! Limits are shrunk (an intset of 6, lists of 5 elements) so conversions happen.

use kayvee_engine::value::{List, Set};
use proptest::prelude::*;
use std::collections::{BTreeSet, VecDeque};

/// `set-max-intset-entries` for the test.
const INTSET_MAX: u64 = 6;

/// A member: small and large integers, spellings that are not canonical integers, short and
/// long (past the packed limit) strings.
fn member(k: u8) -> Vec<u8> {
    match k % 8 {
        0..=2 => format!("{}", i64::from(k % 24) - 8).into_bytes(),
        3 => format!("{}", i64::from(k) * 1_000_003).into_bytes(),
        4 => format!("-{}", i64::from(k) << 40).into_bytes(),
        5 => format!("0{}", k % 3).into_bytes(),
        6 => format!("m{}", k % 16).into_bytes(),
        _ => vec![b'L'; 60 + usize::from(k % 10)],
    }
}

/// One step on a set.
#[derive(Clone, Debug)]
enum SOp {
    Add(u8),
    /// Only integers (keeps an intset growing to its limit).
    AddInt(u8),
    Rem(u8),
    Has(u8),
    Random(u64),
    Snapshot,
}

fn sop() -> impl Strategy<Value = SOp> {
    prop_oneof![
        3 => any::<u8>().prop_map(SOp::Add),
        4 => any::<u8>().prop_map(SOp::AddInt),
        3 => any::<u8>().prop_map(SOp::Rem),
        2 => any::<u8>().prop_map(SOp::Has),
        1 => any::<u64>().prop_map(SOp::Random),
        1 => Just(SOp::Snapshot),
    ]
}

/// Whether `m` is a canonical integer (Redis's `string2ll`).
fn is_int(m: &[u8]) -> bool {
    kayvee_engine::util::parse_i64(m).is_some()
}

/// The set's members in its own order; an intset's must be ascending numerically.
fn members(s: &Set) -> Vec<Vec<u8>> {
    let all: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
    if s.is_intset() {
        let nums: Vec<i64> = all
            .iter()
            .map(|m| kayvee_engine::util::parse_i64(m).unwrap())
            .collect();
        assert!(nums.windows(2).all(|w| w[0] < w[1]), "intset order");
    }
    all
}

/// The set must equal the model through every read.
fn check_set(s: &Set, m: &BTreeSet<Vec<u8>>) {
    s.check_invariants();
    assert_eq!(s.len(), m.len());
    assert_eq!(s.is_empty(), m.is_empty());
    let mut got = members(s);
    got.sort();
    assert_eq!(got, m.iter().cloned().collect::<Vec<_>>());
    for k in 0..=255u8 {
        assert_eq!(s.contains(&member(k)), m.contains(&member(k)));
    }
}

/// One step on a list.
#[derive(Clone, Debug)]
enum LOp {
    Push(bool, u8),
    Pop(bool),
    Set(u8, u8),
    Insert(u8, u8),
    RemoveMatching(u8, u8, bool),
    Retain(u8, u8),
    Get(u8),
    Range(u8, u8),
    Snapshot,
}

fn lop() -> impl Strategy<Value = LOp> {
    prop_oneof![
        6 => (any::<bool>(), any::<u8>()).prop_map(|(f, k)| LOp::Push(f, k)),
        2 => any::<bool>().prop_map(LOp::Pop),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(i, k)| LOp::Set(i, k)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(i, k)| LOp::Insert(i, k)),
        1 => (any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(k, n, b)| LOp::RemoveMatching(k, n % 4, b)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| LOp::Retain(a, b)),
        2 => any::<u8>().prop_map(LOp::Get),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| LOp::Range(a, b)),
        1 => Just(LOp::Snapshot),
    ]
}

/// A list element: short strings of a few values (so LREM finds repeats), some long.
fn element(k: u8) -> Vec<u8> {
    match k % 6 {
        5 => vec![b'e'; 20 + usize::from(k % 30)],
        _ => format!("e{}", k % 5).into_bytes(),
    }
}

/// The list must equal the model through every read, both ways.
fn check_list(l: &List, m: &VecDeque<Vec<u8>>) {
    l.check_invariants();
    assert_eq!(l.len(), m.len());
    let fwd: Vec<Vec<u8>> = l.iter().map(<[u8]>::to_vec).collect();
    assert_eq!(fwd, m.iter().cloned().collect::<Vec<_>>());
    let back: Vec<Vec<u8>> = l.iter().rev().map(<[u8]>::to_vec).collect();
    assert_eq!(back, m.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(l.iter().len(), m.len());
}

/// One list step on `l`, returning its reply as text.
fn list_step(l: &mut List, op: &LOp, fill: i64) -> String {
    let len = l.len();
    match *op {
        LOp::Push(front, k) if front => {
            l.push_front(&element(k), fill);
            String::new()
        }
        LOp::Push(_, k) => {
            l.push_back(&element(k), fill);
            String::new()
        }
        LOp::Pop(front) => {
            let v = if front { l.pop_front() } else { l.pop_back() };
            format!("{:?}", v.map(|v| v.to_vec()))
        }
        LOp::Set(i, k) if len > 0 => {
            l.set(usize::from(i) % len, &element(k), fill);
            String::new()
        }
        LOp::Insert(i, k) => {
            l.insert(usize::from(i) % (len + 1), &element(k), fill);
            String::new()
        }
        LOp::RemoveMatching(k, n, back) => {
            let e = element(k);
            let limit = if n == 0 { usize::MAX } else { usize::from(n) };
            format!("{}", l.remove_matching(|v| v == e.as_slice(), limit, back))
        }
        LOp::Retain(a, b) => {
            l.retain_range(usize::from(a.min(b)) % 40, usize::from(a.max(b)) % 40);
            String::new()
        }
        LOp::Get(i) => format!("{:?}", l.get(usize::from(i) % 40).map(<[u8]>::to_vec)),
        LOp::Range(a, b) => {
            let (s, e) = (usize::from(a % 40), usize::from(b % 40));
            let r: Vec<Vec<u8>> = l.range(s, e).map(<[u8]>::to_vec).collect();
            format!("{r:?}")
        }
        _ => String::new(),
    }
}

/// The same step on the model.
fn model_step(m: &mut VecDeque<Vec<u8>>, op: &LOp) -> String {
    let len = m.len();
    match *op {
        LOp::Push(front, k) if front => {
            m.push_front(element(k));
            String::new()
        }
        LOp::Push(_, k) => {
            m.push_back(element(k));
            String::new()
        }
        LOp::Pop(front) => {
            let v = if front { m.pop_front() } else { m.pop_back() };
            format!("{v:?}")
        }
        LOp::Set(i, k) if len > 0 => {
            m[usize::from(i) % len] = element(k);
            String::new()
        }
        LOp::Insert(i, k) => {
            m.insert(usize::from(i) % (len + 1), element(k));
            String::new()
        }
        LOp::RemoveMatching(k, n, back) => {
            let e = element(k);
            let limit = if n == 0 { usize::MAX } else { usize::from(n) };
            let mut hits: Vec<usize> = (0..len).filter(|&i| m[i] == e).collect();
            if back {
                hits.reverse();
            }
            hits.truncate(limit);
            hits.sort_unstable();
            for &i in hits.iter().rev() {
                m.remove(i);
            }
            format!("{}", hits.len())
        }
        LOp::Retain(a, b) => {
            let (s, e) = (usize::from(a.min(b)) % 40, usize::from(a.max(b)) % 40);
            let kept: VecDeque<Vec<u8>> = m
                .iter()
                .skip(s)
                .take(e.saturating_sub(s))
                .cloned()
                .collect();
            *m = kept;
            String::new()
        }
        LOp::Get(i) => format!("{:?}", m.get(usize::from(i) % 40)),
        LOp::Range(a, b) => {
            let (s, e) = (usize::from(a % 40), usize::from(b % 40));
            let r: Vec<Vec<u8>> = m
                .iter()
                .skip(s)
                .take(e.saturating_sub(s))
                .cloned()
                .collect();
            format!("{r:?}")
        }
        _ => String::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn compact_set_answers_as_the_map_form(ops in proptest::collection::vec(sop(), 1..120)) {
        let (mut compact, mut map, mut model) = (Set::new(), Set::with_seed(7), BTreeSet::new());
        // Whether Redis would still hold the set as an intset (conversions are one way).
        let mut intset = true;
        let mut snaps: Vec<(Set, BTreeSet<Vec<u8>>)> = Vec::new();
        for op in ops {
            match op {
                SOp::Add(k) | SOp::AddInt(k) => {
                    let m = match op { SOp::AddInt(_) => format!("{}", i64::from(k) - 100).into_bytes(), _ => member(k) };
                    let new = model.insert(m.clone());
                    intset &= is_int(&m) && model.len() as u64 <= INTSET_MAX;
                    prop_assert_eq!(compact.insert(&m, INTSET_MAX, 7), new);
                    prop_assert_eq!(map.insert(&m, INTSET_MAX, 7), new);
                }
                SOp::Rem(k) => {
                    let gone = model.remove(&member(k));
                    prop_assert_eq!(compact.remove(&member(k)), gone);
                    prop_assert_eq!(map.remove(&member(k)), gone);
                }
                SOp::Has(k) => {
                    prop_assert_eq!(compact.contains(&member(k)), model.contains(&member(k)));
                    prop_assert_eq!(map.contains(&member(k)), model.contains(&member(k)));
                }
                SOp::Random(r) => {
                    let got = compact.random(r).map(|m| m.to_vec());
                    prop_assert_eq!(got.is_some(), !model.is_empty());
                    prop_assert!(got.is_none_or(|g| model.contains(&g)));
                }
                SOp::Snapshot => snaps.push((compact.clone(), model.clone())),
            }
            prop_assert_eq!(compact.is_intset(), intset, "intset exactly when Redis's is");
            prop_assert!(map.is_map());
            check_set(&compact, &model);
            check_set(&map, &model);
            prop_assert!(compact == map);
            let (next, all) = compact.scan(0, 10);
            if !compact.is_map() {
                prop_assert_eq!((next, all.len()), (0, model.len()));
            }
        }
        for (snap, m) in &snaps {
            check_set(snap, m);
        }
        let mut loaded = map.clone();
        loaded.normalize(!intset, 7);
        prop_assert_eq!(loaded.is_intset(), intset);
        check_set(&loaded, &model);
    }

    #[test]
    fn packed_list_answers_as_the_tree_form(
        ops in proptest::collection::vec(lop(), 1..120),
        fill in prop_oneof![Just(5i64), Just(-1), Just(-2)],
    ) {
        let (mut packed, mut tree, mut model) = (List::new(), List::new(), VecDeque::new());
        tree.make_tree();
        let mut snaps: Vec<(List, VecDeque<Vec<u8>>)> = Vec::new();
        for op in ops {
            if let LOp::Snapshot = op {
                snaps.push((packed.clone(), model.clone()));
                continue;
            }
            let want = model_step(&mut model, &op);
            prop_assert_eq!(list_step(&mut packed, &op, fill), want.clone());
            prop_assert_eq!(list_step(&mut tree, &op, fill), want);
            prop_assert!(!tree.is_packed(), "a tree stays a tree");
            if fill == 5 {
                prop_assert!(!packed.is_packed() || model.len() <= 5, "packed past the fill");
            }
            check_list(&packed, &model);
            check_list(&tree, &model);
            prop_assert!(packed == tree);
        }
        for (snap, m) in &snaps {
            check_list(snap, m);
        }
        let mut loaded = tree.clone();
        loaded.normalize(fill);
        check_list(&loaded, &model);
    }
}

/// The compact forms are what makes small sets and lists cheap: 10 small integers take no
/// heap at all (inline in the value; Redis's intset: 28), 10 members of 8 bytes 107 (91 and
/// the buffer's count and length), 10 list elements of 9 bytes 102 (Redis's listpack: 117).
#[test]
fn compact_forms_are_redis_sized() {
    let (mut ints, mut strs, mut list) = (Set::new(), Set::new(), List::new());
    for j in 0..10 {
        ints.insert(format!("{}", j * 97).as_bytes(), 512, 1);
        strs.insert(format!("member:{j}").as_bytes(), 512, 1);
        list.push_back(format!("element:{j}").as_bytes(), -2);
    }
    assert!(ints.is_intset() && list.is_packed());
    assert_eq!(ints.heap_size(), 0);
    assert_eq!(strs.heap_size(), 107);
    assert_eq!(list.heap_size(), 102);
}

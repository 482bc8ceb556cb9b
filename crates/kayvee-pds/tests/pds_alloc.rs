//! Allocation accounting for `PList` and `POrdSet`, with a counting global allocator (per
//! thread): bytes per element (elements live inline in chunks, so the structure adds little
//! beyond `size_of::<T>()`), `heap_size()` agreeing with the allocator, and in-place writes
//! allocating nothing.
use kayvee_pds::{PList, POrdSet, SmallBytes};

#[path = "common/alloc.rs"]
mod alloc;
use alloc::counters;

/// A sorted-set element like the engine's `ScoreMember` (score bits, member).
type Scored = (u64, SmallBytes);

/// Element `i`'s bytes: a short member like "member:000123".
fn member(i: u32) -> SmallBytes {
    SmallBytes::from_slice(format!("member:{i:06}").as_bytes())
}

/// A scrambled but repeatable permutation of `0..n` (`n` not a multiple of 7919).
fn scrambled(n: u32) -> impl Iterator<Item = u32> {
    (0..n).map(move |i| ((u64::from(i) * 7919) % u64::from(n)) as u32)
}

/// (live bytes, allocation calls) that `f` leaves behind, and its result.
fn measure<R>(f: impl FnOnce() -> R) -> (R, isize, usize) {
    let before = counters();
    let r = f();
    let after = counters();
    (r, after.0 - before.0, after.1 - before.1)
}

/// A list of `m`'s elements built by `how`.
fn build_list(how: &str, m: &[SmallBytes]) -> PList<SmallBytes> {
    let mut l = PList::new();
    for (k, i) in scrambled(m.len() as u32).enumerate() {
        match how {
            "push_back" => l.push_back(m[k].clone()),
            "push_front" => l.push_front(m[k].clone()),
            _ => l.insert(i as usize % (k + 1), m[i as usize].clone()),
        }
    }
    l
}

#[test]
fn list_bytes_per_element() {
    let n = 200_000u32;
    let elem = std::mem::size_of::<SmallBytes>();
    let m: Vec<SmallBytes> = (0..n).map(member).collect();
    for name in ["push_back", "push_front", "random insert"] {
        let (l, bytes, calls) = measure(|| build_list(name, &m));
        assert_eq!(
            l.heap_size() as isize,
            bytes,
            "{name}: heap_size() vs allocator"
        );
        l.check_invariants();
        let per = bytes as f64 / f64::from(n);
        println!("PList<SmallBytes> {name}: {per:.2} B/element (element {elem} B), {calls} allocation calls for {n}");
        // Full chunks add < 1 byte per element; half-full ones (random inserts) double it.
        let bound = if name == "random insert" { 2.2 } else { 1.05 };
        assert!(per < elem as f64 * bound, "{name}: {per:.2} B/element");
    }
}

#[test]
fn small_lists_stay_small() {
    let (l, bytes, _) = measure(|| {
        let mut l = PList::new();
        for i in 0..3 {
            l.push_back(member(i));
        }
        l
    });
    println!("PList of 3: {bytes} B");
    assert!(bytes <= 200, "{bytes} bytes for 3 elements");
    assert_eq!(l.len(), 3);
}

#[test]
fn ordset_bytes_per_element() {
    let n = 200_000u32;
    let elem = std::mem::size_of::<Scored>();
    for (name, ascending) in [("ascending", true), ("random", false)] {
        let order: Vec<Scored> = if ascending {
            (0..n).map(|i| (u64::from(i) * 3, member(i))).collect()
        } else {
            scrambled(n)
                .map(|i| (u64::from(i) * 3, member(i)))
                .collect()
        };
        let (s, bytes, calls) = measure(|| {
            let mut s = POrdSet::new();
            for x in &order {
                assert!(s.insert(x.clone()));
            }
            s
        });
        assert_eq!(s.len(), n as usize);
        // Heap-allocated separators would show here; these members are inline.
        assert_eq!(
            s.heap_size() as isize,
            bytes,
            "{name}: heap_size() vs allocator"
        );
        s.check_invariants();
        let per = bytes as f64 / f64::from(n);
        println!("POrdSet<(u64, SmallBytes)> {name}: {per:.2} B/element (element {elem} B), {calls} allocation calls for {n}");
        let bound = if ascending { 1.1 } else { 1.7 };
        assert!(per < elem as f64 * bound, "{name}: {per:.2} B/element");
    }
}

#[test]
fn in_place_writes_allocate_nothing() {
    let m: Vec<SmallBytes> = (0..50_000).map(member).collect();
    let mut l: PList<SmallBytes> = m.iter().cloned().collect();
    let s: POrdSet<Scored> = (0..50_000).map(|i| (i as u64 * 2, m[i].clone())).collect();
    let (_, bytes, calls) = measure(|| {
        for i in (0..50_000).step_by(97) {
            assert!(l.set(i, m[7].clone()));
            assert!(l.get(i).is_some());
            assert!(s.rank(&(i as u64 * 2, m[i].clone())).is_some());
            assert!(s.nth(i).is_some());
            assert_eq!(s.range_by_rank(i, i + 10).count(), 10);
            assert_eq!(l.range(i, i + 10).rev().count(), 10);
        }
        // Pops then pushes at the ends: the end chunks have room again.
        for _ in 0..10 {
            l.pop_back();
            l.pop_front();
        }
        for x in &m[..10] {
            l.push_back(x.clone());
            l.push_front(x.clone());
        }
    });
    assert_eq!(
        (bytes, calls),
        (0, 0),
        "reads, set and end pushes into room allocate nothing"
    );
}

//! `PMap`: a persistent hash map, a CHAMP trie (compressed hash-array mapped prefix tree) whose
//! nodes live behind `triomphe::Arc` and are shared between snapshots.
//!
//! API contract (kept by every implementation):
//! - `clone()` is O(1) and is a snapshot.
//! - A write mutates the nodes no snapshot shares in place and copies only the shared nodes on
//!   the path from the root to the entry.
//! - Iteration and `scan` visit entries in ascending order of their 64-bit hash, so a `scan`
//!   cursor (the next hash to visit) never misses an entry present for the whole scan, whatever
//!   is inserted or removed between calls.
//!
//! The node layout and canonical form are described in [`node`].

mod iter;
mod node;

use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};

pub use iter::Iter;
use node::Node;

/// The hasher: foldhash, seeded by the caller (the engine's seed comes from the shell).
pub type HashBuilder = foldhash::fast::FixedState;

/// A persistent hash map.
pub struct PMap<K, V> {
    root: Node<K, V>,
    hasher: HashBuilder,
}

impl<K, V> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap {
            root: self.root.clone(),
            hasher: self.hasher.clone(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> PMap<K, V> {
    /// An empty map hashing with `seed`.
    pub fn with_seed(seed: u64) -> Self {
        PMap {
            root: node::empty(),
            hasher: HashBuilder::with_seed(seed),
        }
    }

    /// The 64-bit hash of a key, as used for ordering and cursors.
    #[inline]
    pub fn hash_of<Q: Hash + ?Sized>(&self, k: &Q) -> u64 {
        self.hasher.hash_one(k)
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.root.header.size
    }

    /// Whether the map is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Looks a key up.
    #[inline]
    pub fn get<Q>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_key_value(k).map(|(_, v)| v)
    }

    /// Looks a key up, returning the stored key too.
    #[inline]
    pub fn get_key_value<Q>(&self, k: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        node::get(&self.root, self.hash_of(k), k).map(|(k, v)| (k, v))
    }

    /// Whether the key is present.
    #[inline]
    pub fn contains_key<Q>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(k).is_some()
    }

    /// Mutable access; copies the shared nodes on the path (only those, and only when the key
    /// is present). One pass down the trie when no snapshot shares the path.
    #[inline]
    pub fn get_mut<Q>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        node::get_mut(&mut self.root, h, k)
    }

    /// Looks a key up and, when `needs(value)`, applies `touch` to the value first (a read that
    /// records something, such as an access time). Unshared nodes are written in place; a path a
    /// snapshot shares is copied only when the touch is needed. One pass down the trie except in
    /// that copying case.
    #[inline]
    pub fn get_touch<Q>(
        &mut self,
        k: &Q,
        needs: impl Fn(&V) -> bool,
        touch: impl FnOnce(&mut V),
    ) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        node::get_touch(&mut self.root, h, k, needs, touch)
    }

    /// Inserts, returning the previous value. Replacing the value of a present key in an
    /// unshared map allocates nothing.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        let h = self.hash_of(&k);
        node::insert(&mut self.root, 0, h, k, v, &self.hasher)
    }

    /// Removes, returning the stored key and value. An absent key copies nothing.
    pub fn remove<Q>(&mut self, k: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        node::remove(&mut self.root, 0, h, k, false)
    }

    /// Removes everything (O(1): drops this version's root).
    pub fn clear(&mut self) {
        self.root = node::empty();
    }

    /// All entries, in hash order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter::new(&self.root)
    }

    /// Visits entries with hash >= `cursor` in hash order until at least `count` entries were
    /// visited (all entries sharing one hash are visited together). Returns the cursor to continue
    /// from (the hash of the next entry), or 0 when the walk is complete. O(depth + visited).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&K, &V)) -> u64 {
        let mut it = Iter::seek(&self.root, cursor, |k| self.hash_of(k));
        let mut last = None;
        for seen in 1..=count.max(1) {
            let (k, v) = match it.next() {
                Some(kv) => kv,
                None => return 0,
            };
            f(k, v);
            if seen == count.max(1) {
                last = Some(self.hash_of(k));
            }
        }
        let last = last.expect("loop ran to count");
        // Finish the entries sharing the last hash, then report the next hash.
        loop {
            let mut ahead = it.clone();
            let Some((k, v)) = ahead.next() else {
                return 0;
            };
            let h = self.hash_of(k);
            if h != last {
                return h;
            }
            f(k, v);
            it = ahead;
        }
    }

    /// Lets go of every entry whose hash is below `cursor` (a [`scan`](Self::scan) cursor),
    /// except a few stored on the cursor's path; returns how many went. For a reader that owns a
    /// snapshot and has visited those entries: dropping them lets the live version, which may
    /// share the nodes, write them in place again instead of copying them, and frees the old
    /// values it replaced. Lookups and scans at or after `cursor` are unaffected; `len` counts
    /// what is left.
    pub fn release_below(&mut self, cursor: u64) -> usize {
        node::release_below(&mut self.root, 0, cursor)
    }

    /// A pseudo-random entry chosen with `rnd` (uniform over entries when `rnd` is). O(depth).
    pub fn random(&self, rnd: u64) -> Option<(&K, &V)> {
        if self.is_empty() {
            return None;
        }
        let r = (rnd % self.len() as u64) as usize;
        node::nth(&self.root, r).map(|(k, v)| (k, v))
    }

    /// Removes and returns the entry [`random`](Self::random) picks with `rnd`, in one walk down
    /// the trie (no hashing, no key comparisons).
    pub fn remove_random(&mut self, rnd: u64) -> Option<(K, V)> {
        if self.is_empty() {
            return None;
        }
        let r = (rnd % self.len() as u64) as usize;
        node::remove_nth(&mut self.root, 0, r)
    }

    /// Whether two maps are the same version (pointer equality of roots).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        triomphe::Arc::ptr_eq(&self.root, &other.root)
    }

    /// Bytes of trie structure (node allocations: headers, entry slots, child pointers), not
    /// counting heap memory owned by keys and values. O(nodes): for memory reports, not hot paths.
    pub fn heap_size(&self) -> usize {
        node::heap_size(&self.root)
    }

    /// Keeps only the entries for which `keep` returns true; returns how many were removed.
    /// O(n + removed * depth); copies shared nodes only on the paths of removed entries.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let doomed: Vec<K> = self
            .iter()
            .filter(|(k, v)| !keep(k, v))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &doomed {
            self.remove(k);
        }
        doomed.len()
    }

    /// Addresses of every node (tests use it to observe copying and sharing).
    #[doc(hidden)]
    pub fn node_addrs(&self) -> Vec<usize> {
        let mut out = Vec::new();
        node::for_each_node(&self.root, &mut |n| {
            out.push(&**n as *const node::Inner<K, V> as *const u8 as usize)
        });
        out
    }

    /// Panics when an internal invariant is broken.
    pub fn check_invariants(&self) {
        let n = node::check(&self.root, 0, 0, &|k: &K| self.hash_of(k));
        assert_eq!(n, self.len(), "len out of sync");
        let mut prev = 0;
        for (k, _) in self.iter() {
            let h = self.hash_of(k);
            assert!(prev <= h, "iteration out of hash order");
            prev = h;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;
    use core::hash::Hasher;

    /// A key whose hash is `self.0 / group`: forces full 64-bit collisions.
    #[derive(Clone, PartialEq, Eq, Debug, Ord, PartialOrd)]
    struct Colliding(u32, u32);

    impl Hash for Colliding {
        fn hash<H: Hasher>(&self, state: &mut H) {
            state.write_u32(self.0 / self.1);
        }
    }

    fn filled(n: u32) -> PMap<u32, u32> {
        let mut m = PMap::with_seed(7);
        for i in 0..n {
            assert_eq!(m.insert(i, i * 2), None);
        }
        m.check_invariants();
        m
    }

    #[test]
    fn insert_get_remove() {
        let mut m = filled(5000);
        assert_eq!(m.len(), 5000);
        assert_eq!(m.get(&77), Some(&154));
        assert_eq!(m.get(&5000), None);
        assert_eq!(m.insert(77, 1), Some(154));
        assert_eq!(m.remove(&77), Some((77, 1)));
        assert_eq!(m.remove(&77), None);
        for i in 0..5000 {
            m.remove(&i);
            if i % 500 == 0 {
                m.check_invariants();
            }
        }
        assert!(m.is_empty());
        m.check_invariants();
        assert_eq!(
            m.root.header.datamap() | m.root.header.nodemap,
            0,
            "root emptied"
        );
    }

    /// Each node's entry count and slot count.
    fn layout<K, V>(m: &PMap<K, V>) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        node::for_each_node(&m.root, &mut |n| {
            out.push((n.header.entries(), n.slice.len()))
        });
        out
    }

    #[test]
    fn inserts_alone_size_nodes_exactly() {
        let m = filled(20_000);
        assert!(layout(&m)
            .iter()
            .all(|&(entries, slots)| slots == node::capacity(entries)));
    }

    #[test]
    fn removes_keep_slots_in_place_and_inserts_refill_them() {
        let mut m = filled(6000);
        let mut removed = Vec::new();
        // Removes spread over the trie, in an order unrelated to the layout.
        for i in (0..6000u32).filter(|i| i.wrapping_mul(2_654_435_761) % 5 < 3) {
            assert_eq!(m.remove(&i), Some((i, i * 2)));
            removed.push(i);
            if i % 97 == 0 {
                m.check_invariants();
            }
        }
        m.check_invariants();
        let spare = layout(&m)
            .iter()
            .filter(|&&(entries, slots)| slots > node::capacity(entries))
            .count();
        assert!(spare > 0, "some node kept spare slots");
        // Most unshared removes now reallocate no node (one left under about three quarters
        // full, or one a child is pulled up into without enough spare slots, still is).
        let more: Vec<u32> = (0..6000)
            .filter(|i| !removed.contains(i))
            .take(400)
            .collect();
        let mut reallocs = 0;
        for &i in &more {
            let before: BTreeSet<usize> = m.node_addrs().into_iter().collect();
            assert_eq!(m.remove(&i), Some((i, i * 2)));
            if m.node_addrs().iter().any(|a| !before.contains(a)) {
                reallocs += 1;
            }
        }
        m.check_invariants();
        assert!(
            reallocs * 5 < more.len(),
            "{reallocs} of {} removes reallocated",
            more.len()
        );
        removed.extend(more);
        // Inserting everything back gives the same contents, invariants hold throughout.
        for (n, &i) in removed.iter().enumerate() {
            assert_eq!(m.insert(i, i * 2), None);
            if n % 101 == 0 {
                m.check_invariants();
            }
        }
        m.check_invariants();
        assert_eq!(m.len(), 6000);
        assert!((0..6000).all(|i| m.get(&i) == Some(&(i * 2))));
        // Removing everything empties the root.
        for i in 0..6000 {
            assert_eq!(m.remove(&i), Some((i, i * 2)));
        }
        m.check_invariants();
        assert!(m.is_empty());
    }

    #[test]
    fn removes_do_not_disturb_a_snapshot() {
        let mut m = filled(4000);
        for i in (0..4000).step_by(3) {
            m.remove(&i);
        }
        // A snapshot of a map whose nodes have spare slots.
        let snap = m.clone();
        let snap_layout = layout(&snap);
        let snap_addrs = snap.node_addrs();
        let want: Vec<(u32, u32)> = snap.iter().map(|(k, v)| (*k, *v)).collect();
        for i in 0..4000 {
            m.remove(&i);
            if i % 50 == 0 {
                m.check_invariants();
                snap.check_invariants();
            }
            if i % 2 == 0 {
                m.insert(i + 100_000, 0);
            }
        }
        m.check_invariants();
        assert_eq!(m.len(), 2000);
        snap.check_invariants();
        assert_eq!(snap.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(), want);
        assert_eq!(layout(&snap), snap_layout);
        assert_eq!(snap.node_addrs(), snap_addrs);
        // Copies of shared nodes are made without the spare slots.
        let mut copy = snap.clone();
        copy.remove(&1);
        copy.check_invariants();
    }

    #[test]
    fn snapshot_is_isolated() {
        let mut m = filled(2000);
        let snap = m.clone();
        assert!(m.ptr_eq(&snap));
        for i in 0..1000 {
            m.remove(&i);
            m.insert(i + 10_000, 0);
        }
        *m.get_mut(&1500).unwrap() = 9;
        assert!(!m.ptr_eq(&snap));
        assert_eq!(snap.len(), 2000);
        assert_eq!(snap.get(&1500), Some(&3000));
        assert!((0..2000).all(|i| snap.get(&i) == Some(&(i * 2))));
        snap.check_invariants();
        m.check_invariants();
    }

    #[test]
    fn unshared_write_mutates_in_place() {
        let mut m = filled(3000);
        let before = m.node_addrs();
        assert_eq!(m.insert(5, 0), Some(10));
        *m.get_mut(&6).unwrap() = 1;
        assert!(m.get_mut(&99_999).is_none());
        assert!(m.remove(&99_999).is_none());
        assert_eq!(m.node_addrs(), before, "no node may be copied");
    }

    #[test]
    fn shared_write_copies_only_the_path() {
        let mut m = filled(3000);
        let snap = m.clone();
        let before: BTreeSet<usize> = m.node_addrs().into_iter().collect();
        m.insert(5, 0);
        let after: BTreeSet<usize> = m.node_addrs().into_iter().collect();
        let copied = after.difference(&before).count();
        let depth = {
            let h = m.hash_of(&5u32);
            let mut node = &m.root;
            let mut d = 1;
            while node.header.nodemap & (1 << node::frag(h, d - 1)) != 0 {
                let bit = 1 << node::frag(h, d - 1);
                node = &node.header.children[node::index(node.header.nodemap, bit)];
                d += 1;
            }
            d
        };
        assert_eq!(copied, depth, "exactly the path is copied");
        // A second write along the same path copies nothing more.
        m.insert(5, 1);
        let again: BTreeSet<usize> = m.node_addrs().into_iter().collect();
        assert_eq!(again, after);
        assert_eq!(snap.get(&5), Some(&10));
    }

    #[test]
    fn absent_key_on_shared_map_copies_nothing() {
        let mut m = filled(100);
        let snap = m.clone();
        assert!(m.get_mut(&1000).is_none());
        assert!(m.remove(&1000).is_none());
        assert!(m.ptr_eq(&snap));
    }

    #[test]
    fn partly_shared_path_copies_only_for_present_keys() {
        let mut m = filled(3000);
        let snap = m.clone();
        // Unshares the root (and one path) only: the other subtrees stay shared with `snap`.
        m.insert(0, 1);
        let before = m.node_addrs();
        for absent in 5000..5200 {
            assert!(m.get_mut(&absent).is_none());
            assert!(m.remove(&absent).is_none());
        }
        assert_eq!(m.node_addrs(), before, "absent keys copy nothing");
        for k in (1..3000).step_by(7) {
            *m.get_mut(&k).unwrap() += 1;
        }
        for k in (2..3000).step_by(11) {
            assert_eq!(m.remove(&k).map(|(k, _)| k), Some(k));
        }
        for k in 0..3000 {
            assert_eq!(snap.get(&k), Some(&(k * 2)), "snapshot unchanged");
            let want = match k {
                0 => Some(1),
                k if k % 11 == 2 => None,
                k if k % 7 == 1 => Some(k * 2 + 1),
                k => Some(k * 2),
            };
            assert_eq!(m.get(&k).copied(), want, "{k}");
        }
        m.check_invariants();
        snap.check_invariants();
    }

    #[test]
    fn get_touch_copies_only_when_touching_a_shared_path() {
        let mut m = filled(3000);
        assert_eq!(m.get_touch(&10, |_| true, |v| *v += 1), Some(&21));
        assert_eq!(m.get_touch(&10, |_| false, |v| *v += 1), Some(&21));
        assert_eq!(m.get_touch(&9999, |_| true, |v| *v += 1), None);
        let snap = m.clone();
        let before = m.node_addrs();
        assert_eq!(m.get_touch(&11, |&v| v != 22, |v| *v = 0), Some(&22));
        assert_eq!(m.get_touch(&9999, |_| true, |v| *v = 0), None);
        assert!(m.ptr_eq(&snap), "no touch needed: nothing copied");
        assert_eq!(m.node_addrs(), before);
        assert_eq!(m.get_touch(&12, |_| true, |v| *v = 5), Some(&5));
        assert!(!m.ptr_eq(&snap));
        assert_eq!(snap.get(&12), Some(&24));
        assert_eq!(m.get(&12), Some(&5));
        // Full collisions reach the collision level.
        let mut c: PMap<Colliding, u32> = PMap::with_seed(1);
        for i in 0..8 {
            c.insert(Colliding(i, 8), i);
        }
        let csnap = c.clone();
        assert_eq!(
            c.get_touch(&Colliding(3, 8), |_| true, |v| *v = 30),
            Some(&30)
        );
        assert_eq!(
            c.get_touch(&Colliding(3, 8), |_| true, |v| *v += 1),
            Some(&31)
        );
        assert_eq!(c.get_touch(&Colliding(9, 8), |_| true, |v| *v += 1), None);
        assert_eq!(csnap.get(&Colliding(3, 8)), Some(&3));
        c.check_invariants();
        m.check_invariants();
    }

    #[test]
    fn full_hash_collisions() {
        let mut m: PMap<Colliding, u32> = PMap::with_seed(1);
        for i in 0..64 {
            assert_eq!(m.insert(Colliding(i, 8), i), None);
            m.check_invariants();
        }
        assert_eq!(m.len(), 64);
        assert_eq!(m.insert(Colliding(3, 8), 9), Some(3));
        for i in (0..64).step_by(3) {
            assert_eq!(
                m.remove(&Colliding(i, 8)),
                Some((Colliding(i, 8), i + 6 * (i == 3) as u32))
            );
            m.check_invariants();
        }
        let got: BTreeSet<u32> = m.iter().map(|(k, _)| k.0).collect();
        let want: BTreeSet<u32> = (0..64).filter(|i| i % 3 != 0).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn constant_hash_collapses_to_root() {
        let mut m: PMap<Colliding, ()> = PMap::with_seed(1);
        m.insert(Colliding(1, u32::MAX), ());
        m.insert(Colliding(2, u32::MAX), ());
        m.check_invariants();
        m.remove(&Colliding(1, u32::MAX));
        m.check_invariants();
        assert_eq!(m.root.header.nodemap, 0, "lone entry pulled up to the root");
        assert_eq!(m.root.header.entries(), 1);
        assert_eq!(m.root.slice.len(), 1, "a node left half full is rebuilt");
    }

    #[test]
    fn iter_and_scan_follow_hash_order() {
        let m = filled(1000);
        let hashes: Vec<u64> = m.iter().map(|(k, _)| m.hash_of(k)).collect();
        assert_eq!(hashes.len(), 1000);
        assert!(hashes.windows(2).all(|w| w[0] < w[1]));
        let (mut cursor, mut seen) = (0, Vec::new());
        loop {
            let mut batch = 0;
            cursor = m.scan(cursor, 7, |k, _| {
                seen.push(m.hash_of(k));
                batch += 1;
            });
            assert!(batch == 7 || cursor == 0);
            if cursor == 0 {
                break;
            }
            assert_eq!(Some(&cursor), hashes.get(seen.len()), "cursor = next hash");
        }
        assert_eq!(seen, hashes);
        // Seeking to any hash starts at the first entry with a hash >= it.
        for &h in hashes.iter().step_by(37) {
            let mut first = None;
            m.scan(h, 1, |k, _| first = first.or(Some(m.hash_of(k))));
            assert_eq!(first, Some(h));
            let mut next = None;
            m.scan(h + 1, 1, |k, _| next = next.or(Some(m.hash_of(k))));
            assert_eq!(next, hashes.iter().copied().find(|&x| x > h));
        }
    }

    #[test]
    fn scan_finishes_a_collision_group() {
        let mut m: PMap<Colliding, ()> = PMap::with_seed(3);
        for i in 0..40 {
            m.insert(Colliding(i, 10), ());
        }
        let mut cursor = 0;
        let mut calls = 0;
        let mut seen = Vec::new();
        loop {
            cursor = m.scan(cursor, 1, |k, _| seen.push(k.0));
            calls += 1;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(calls, 4, "one call per group of 10 equal hashes");
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn random_is_close_to_uniform() {
        let m = filled(64);
        let mut counts = [0u32; 64];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..64 * 200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            counts[*m.random(x).unwrap().0 as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (100..=300).contains(&c)),
            "{counts:?}"
        );
        assert!(PMap::<u32, u32>::with_seed(0).random(5).is_none());
    }

    #[test]
    fn retain_and_heap_size() {
        let mut m = filled(1000);
        let size = m.heap_size();
        assert!(size >= 1000 * core::mem::size_of::<(u32, u32)>());
        assert_eq!(m.retain(|k, _| k % 2 == 0), 500);
        m.check_invariants();
        assert!(m.iter().all(|(k, _)| k % 2 == 0));
        assert!(m.heap_size() < size);
        m.clear();
        assert!(m.is_empty());
        m.check_invariants();
    }

    #[test]
    fn release_below_lets_go_of_the_visited_part_only() {
        let live = filled(20_000);
        let mut snap = live.clone();
        let (mut cursor, mut seen) = (0, Vec::new());
        loop {
            let next = snap.scan(cursor, 500, |k, v| seen.push((*k, *v)));
            if next == 0 {
                break;
            }
            let before = snap.len();
            let released = snap.release_below(next);
            assert_eq!(snap.len(), before - released);
            // What is left is exactly the original's entries at or after the cursor, plus a
            // few inline ones on the path below it.
            let mut left: Vec<_> = snap.iter().map(|(k, v)| (*k, *v)).collect();
            left.sort_unstable();
            assert!(live
                .iter()
                .filter(|(k, _)| live.hash_of(*k) >= next)
                .all(|(k, v)| left.binary_search(&(*k, *v)).is_ok()));
            assert!(left.len() < live.len());
            cursor = next;
        }
        seen.sort_unstable();
        let mut all: Vec<_> = live.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable();
        assert_eq!(
            seen, all,
            "the scan interleaved with releases still saw everything once"
        );
        live.check_invariants();
        assert_eq!(live.len(), 20_000);
    }

    #[test]
    fn release_below_unshares_the_live_version() {
        let mut live = filled(5_000);
        let mut snap = live.clone();
        let shared = |a: &PMap<u32, u32>, b: &PMap<u32, u32>| {
            let b = b.node_addrs();
            a.node_addrs().iter().filter(|x| b.contains(x)).count()
        };
        let before = shared(&live, &snap);
        snap.release_below(u64::MAX / 2);
        assert!(shared(&live, &snap) < before / 2 + 8);
        // Writes to the released half no longer copy: the live nodes there are unshared.
        let addrs = live.node_addrs();
        for k in 0..5_000u32 {
            if live.hash_of(&k) < u64::MAX / 4 {
                live.insert(k, k + 1);
            }
        }
        let kept = live
            .node_addrs()
            .iter()
            .filter(|a| addrs.contains(a))
            .count();
        assert!(
            kept * 10 > addrs.len() * 9,
            "{kept} of {} nodes kept",
            addrs.len()
        );
        live.check_invariants();
    }
}

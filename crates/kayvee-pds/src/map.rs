//! `PMap`: a persistent hash map (placeholder implementation; the CHAMP trie replaces it).
//!
//! API contract (kept by every implementation):
//! - `clone()` is O(1) and is a snapshot.
//! - Iteration and `scan` visit entries in ascending order of their 64-bit hash, so a `scan`
//!   cursor (the next hash to visit) never misses an entry present for the whole scan, whatever
//!   is inserted or removed between calls.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use triomphe::Arc;

/// The hasher: foldhash, seeded by the caller (the engine's seed comes from the shell).
pub type HashBuilder = foldhash::fast::FixedState;

/// A persistent hash map.
pub struct PMap<K, V> {
    root: Arc<BTreeMap<u64, Vec<(K, V)>>>,
    len: usize,
    hasher: HashBuilder,
}

impl<K, V> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap {
            root: self.root.clone(),
            len: self.len,
            hasher: self.hasher.clone(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> PMap<K, V> {
    /// An empty map hashing with `seed`.
    pub fn with_seed(seed: u64) -> Self {
        PMap {
            root: Arc::new(BTreeMap::new()),
            len: 0,
            hasher: HashBuilder::with_seed(seed),
        }
    }

    /// The 64-bit hash of a key, as used for ordering and cursors.
    pub fn hash_of<Q: Hash + ?Sized>(&self, k: &Q) -> u64 {
        self.hasher.hash_one(k)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Looks a key up.
    pub fn get<Q>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_key_value(k).map(|(_, v)| v)
    }

    /// Looks a key up, returning the stored key too.
    pub fn get_key_value<Q>(&self, k: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        let bucket = self.root.get(&h)?;
        bucket
            .iter()
            .find(|(key, _)| key.borrow() == k)
            .map(|(k, v)| (k, v))
    }

    /// Whether the key is present.
    pub fn contains_key<Q>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(k).is_some()
    }

    /// Mutable access; copies the shared nodes on the path (only those).
    pub fn get_mut<Q>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        if !self.root.contains_key(&h) {
            return None;
        }
        let bucket = Arc::make_mut(&mut self.root).get_mut(&h)?;
        bucket
            .iter_mut()
            .find(|(key, _)| key.borrow() == k)
            .map(|(_, v)| v)
    }

    /// Inserts, returning the previous value.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        let h = self.hash_of(&k);
        let bucket = Arc::make_mut(&mut self.root).entry(h).or_default();
        if let Some(slot) = bucket.iter_mut().find(|(key, _)| *key == k) {
            return Some(core::mem::replace(&mut slot.1, v));
        }
        bucket.push((k, v));
        self.len += 1;
        None
    }

    /// Removes, returning the stored key and value.
    pub fn remove<Q>(&mut self, k: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = self.hash_of(k);
        self.root
            .get(&h)?
            .iter()
            .position(|(key, _)| key.borrow() == k)?;
        let root = Arc::make_mut(&mut self.root);
        let bucket = root.get_mut(&h)?;
        let i = bucket.iter().position(|(key, _)| key.borrow() == k)?;
        let kv = bucket.swap_remove(i);
        if bucket.is_empty() {
            root.remove(&h);
        }
        self.len -= 1;
        Some(kv)
    }

    /// Removes everything (O(1): drops this version's root).
    pub fn clear(&mut self) {
        self.root = Arc::new(BTreeMap::new());
        self.len = 0;
    }

    /// All entries, in hash order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.root
            .values()
            .flat_map(|b| b.iter().map(|(k, v)| (k, v)))
    }

    /// Visits entries with hash >= `cursor` in hash order until at least `count` entries were
    /// visited (all entries sharing one hash are visited together). Returns the cursor to continue
    /// from, or 0 when the walk is complete.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&K, &V)) -> u64 {
        let mut seen = 0usize;
        for (h, bucket) in self.root.range(cursor..) {
            if seen >= count.max(1) {
                return *h;
            }
            for (k, v) in bucket {
                f(k, v);
                seen += 1;
            }
            if *h == u64::MAX {
                return 0;
            }
        }
        0
    }

    /// A pseudo-random entry chosen with `rnd` (close to uniform).
    pub fn random(&self, rnd: u64) -> Option<(&K, &V)> {
        if self.len == 0 {
            return None;
        }
        self.iter().nth((rnd % self.len as u64) as usize)
    }

    /// Whether two maps are the same version (pointer equality of roots).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.root, &other.root)
    }

    /// Panics when an internal invariant is broken.
    pub fn check_invariants(&self) {
        let n: usize = self.root.values().map(|b| b.len()).sum();
        assert_eq!(n, self.len, "len out of sync");
        for (h, b) in self.root.iter() {
            assert!(!b.is_empty(), "empty bucket");
            for (k, _) in b {
                assert_eq!(self.hash_of(k), *h, "entry in wrong bucket");
            }
        }
    }
}

//! CHAMP trie nodes for `PMap`: one allocation per node holding a small header (the inline
//! entry counts, the child bitmap, the subtree size, the children) followed by the node's entries
//! inline.
//!
//! Layout (after Steindorfer & Vinju, "Optimizing Hash-Array Mapped Tries", OOPSLA 2015):
//! - Level `l` (0..=12) branches on 5 bits of the 64-bit hash, most significant first (level 12
//!   uses the last 4 bits, shifted left), so in-order traversal follows numeric hash order.
//! - A position holds either up to [`MAX_INLINE`] entries inline or one child. The inline count
//!   of each position is `lo + 2 * hi` (one bit of each of the bitmaps `lo` and `hi`); its
//!   entries sit in `slice`, in position order and, within a position, in hash order. `nodemap`
//!   marks positions holding a child (in `children`, in position order). Several entries per
//!   position keep most small groups out of child nodes of their own: a node costs its header,
//!   its allocation's count and chunk header, and a 16-byte pointer in its parent.
//! - Level 13 ([`COLLISION_LEVEL`]) holds *collision nodes*: all bitmaps zero, every entry shares
//!   one full 64-bit hash.
//! - Canonical form: every node below the root holds more than [`MAX_INLINE`] entries in its
//!   subtree; a remove that leaves a child with at most that many entries and no children pulls
//!   them up into its position.
//!
//! - A node's slots are its entries, packed at the front, then `None`s: a size class (a value of
//!   [`capacity`]) from [`capacity`] of the entry count up to [`max_capacity`] of it. Most
//!   inserts and removes shift entries within the node instead of reallocating it (each
//!   reallocation copies the node and frees a chunk that, split by the values' allocations,
//!   fragments the heap). An insert fills a spare slot in place and, when there is none,
//!   reallocates to [`capacity`] of the new count; a remove leaves a spare slot unless fewer
//!   than about three quarters of the slots would stay filled, when it reallocates to
//!   [`capacity`] of the new count. So a map built by inserts alone has every node at exactly
//!   [`capacity`] of its entries.
//!
//! Writes go through [`make_unique`]: a node no snapshot shares is mutated in place; a shared node
//! is copied first (path copying). Entries are `Option`s so that an owned entry can be moved out
//! of a node being rebuilt without `unsafe` and so that a node can have spare slots.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use core::mem;
use core::ops::Range;
use triomphe::{Arc, HeaderSlice};

/// Bits of hash consumed per level.
pub(super) const BITS: usize = 5;
/// The level of collision nodes: every hash bit has been consumed above it.
pub(super) const COLLISION_LEVEL: usize = 13;
/// Frames an iterator needs: branching levels plus the collision level.
pub(super) const DEPTH_MAX: usize = COLLISION_LEVEL + 1;
/// Entries one position holds inline before they move down into a child.
pub(super) const MAX_INLINE: usize = 3;

/// One entry slot; `None` past the node's entries (and transiently while a node is rebuilt).
pub(super) type Slot<K, V> = Option<(K, V)>;

/// The fixed part of a node.
pub(super) struct NodeHeader<K, V> {
    /// Low bit of each position's inline entry count.
    pub lo: u32,
    /// High bit of each position's inline entry count.
    pub hi: u32,
    /// Positions holding a child node.
    pub nodemap: u32,
    /// Entries in this subtree (for O(depth) `random`).
    pub size: usize,
    /// Child nodes, in position order.
    pub children: Box<[Node<K, V>]>,
}

impl<K, V> NodeHeader<K, V> {
    /// Positions holding inline entries.
    #[inline]
    pub fn datamap(&self) -> u32 {
        self.lo | self.hi
    }

    /// The slots of the entries stored at position `bit`.
    #[inline]
    pub fn slots(&self, bit: u32) -> Range<usize> {
        let below = bit - 1;
        let first = (self.lo & below).count_ones() + 2 * (self.hi & below).count_ones();
        let count = u32::from(self.lo & bit != 0) + 2 * u32::from(self.hi & bit != 0);
        first as usize..(first + count) as usize
    }

    /// Entries stored in the node itself (a collision node, all of whose bitmaps are zero,
    /// stores its whole subtree).
    #[inline]
    pub fn entries(&self) -> usize {
        if self.datamap() | self.nodemap == 0 {
            self.size
        } else {
            (self.lo.count_ones() + 2 * self.hi.count_ones()) as usize
        }
    }

    /// Sets the inline entry count of position `bit` (0..=[`MAX_INLINE`]).
    #[inline]
    fn set_count(&mut self, bit: u32, count: usize) {
        self.lo = (self.lo & !bit) | if count & 1 != 0 { bit } else { 0 };
        self.hi = (self.hi & !bit) | if count & 2 != 0 { bit } else { 0 };
    }
}

impl<K: Clone, V: Clone> Clone for NodeHeader<K, V> {
    fn clone(&self) -> Self {
        NodeHeader {
            lo: self.lo,
            hi: self.hi,
            nodemap: self.nodemap,
            size: self.size,
            children: self.children.clone(),
        }
    }
}

/// A node's contents: header then entries, in one allocation.
pub(super) type Inner<K, V> = HeaderSlice<NodeHeader<K, V>, [Slot<K, V>]>;
/// A shared pointer to a node.
pub(super) type Node<K, V> = Arc<Inner<K, V>>;

/// The 5-bit position of `hash` at `level` (most significant bits first).
#[inline]
pub(super) fn frag(hash: u64, level: usize) -> u32 {
    let chunk = if level < COLLISION_LEVEL - 1 {
        hash >> (64 - BITS * (level + 1))
    } else {
        hash << 1
    };
    (chunk & 31) as u32
}

/// Index in a dense array of the position `bit` given the bitmap `map`.
#[inline]
pub(super) fn index(map: u32, bit: u32) -> usize {
    (map & (bit - 1)).count_ones() as usize
}

/// Slots a node of `n` entries has: `n` up to 4 (most nodes below the root's children are
/// small and stay exact), then rounded up to an even number, past 16 to a multiple of 4.
#[inline]
pub(super) fn capacity(n: usize) -> usize {
    if n <= 4 {
        n
    } else if n <= 16 {
        (n + 1) & !1
    } else {
        (n + 3) & !3
    }
}

/// Most slots a node of `n` entries keeps: a remove reallocates a node only when fewer than
/// about three quarters of its slots would stay filled. Every [`capacity`] is at most this.
/// Spare slots are memory a delete does not give back, in the keyspace too: a looser bound
/// (half full) made removes cheaper still but left a keyspace with half its keys deleted at
/// random about 40% bigger than with exact nodes; this one about 8%.
#[inline]
pub(super) fn max_capacity(n: usize) -> usize {
    n + n / 3
}

/// A header with no entries and no children.
fn header_of_size<K, V>(size: usize) -> NodeHeader<K, V> {
    NodeHeader {
        lo: 0,
        hi: 0,
        nodemap: 0,
        size,
        children: Box::default(),
    }
}

/// Allocates a node from its header and its entries.
fn build<K, V>(
    header: NodeHeader<K, V>,
    slots: impl ExactSizeIterator<Item = Slot<K, V>>,
) -> Node<K, V> {
    Arc::from_header_and_iter(header, slots)
}

/// An empty node (the root of an empty map).
pub(super) fn empty<K, V>() -> Node<K, V> {
    build(header_of_size(0), core::iter::empty())
}

/// Mutable access to a node, copying it first when a snapshot shares it (the copy has
/// [`capacity`] of its entries: spare slots left by removes are not copied).
pub(super) fn make_unique<K: Clone, V: Clone>(node: &mut Node<K, V>) -> &mut Inner<K, V> {
    if !node.is_unique() {
        let entries = node.header.entries();
        let slots = &node.slice[..entries];
        *node = build(
            node.header.clone(),
            (0..capacity(entries)).map(|i| slots.get(i).cloned().flatten()),
        );
    }
    Arc::get_mut(node).expect("node was just made unique")
}

/// Moves the header out of a node about to be rebuilt (its children are left empty).
fn take_header<K, V>(n: &mut Inner<K, V>) -> NodeHeader<K, V> {
    NodeHeader {
        lo: n.header.lo,
        hi: n.header.hi,
        nodemap: n.header.nodemap,
        size: n.header.size,
        children: mem::take(&mut n.header.children),
    }
}

/// The slots of a node rebuilt from `old` (holding `count` entries): the `removed` entries from
/// `at` replaced by the entries of `new`, then spare slots up to the new count's [`capacity`].
/// Moves the entries out of `old` and `new`.
fn rebuilt<'a, K, V>(
    old: &'a mut [Slot<K, V>],
    count: usize,
    at: usize,
    removed: usize,
    new: &'a mut [Slot<K, V>],
) -> impl ExactSizeIterator<Item = Slot<K, V>> + 'a {
    let added = new.len();
    let len = count - removed + added;
    (0..capacity(len)).map(move |i| {
        if i < at {
            old[i].take()
        } else if i < at + added {
            new[i - at].take()
        } else if i < len {
            old[i - added + removed].take()
        } else {
            None
        }
    })
}

/// Puts `kv` at slot `at` of `n` (holding `count` entries) and applies `change` to its header:
/// in place, shifting the entries after `at`, when the node has a spare slot; otherwise returns
/// the node to build in its place (with [`capacity`] of the new count).
fn insert_slot<K, V>(
    n: &mut Inner<K, V>,
    count: usize,
    at: usize,
    kv: (K, V),
    change: impl FnOnce(&mut NodeHeader<K, V>),
) -> Option<Node<K, V>> {
    if count < n.slice.len() {
        n.slice[count] = Some(kv);
        n.slice[at..=count].rotate_right(1);
        change(&mut n.header);
        return None;
    }
    let mut header = take_header(n);
    change(&mut header);
    Some(build(
        header,
        rebuilt(&mut n.slice, count, at, 0, &mut [Some(kv)]),
    ))
}

/// `old` children with `new` inserted at `at` (exact-size allocation).
fn children_inserted<T>(old: Box<[T]>, at: usize, new: T) -> Box<[T]> {
    let mut v = Vec::with_capacity(old.len() + 1);
    let mut it = old.into_vec().into_iter();
    v.extend(it.by_ref().take(at));
    v.push(new);
    v.extend(it);
    v.into_boxed_slice()
}

/// `old` children without the one at `at` (exact-size allocation), and that one.
fn children_removed<T>(old: Box<[T]>, at: usize) -> (Box<[T]>, T) {
    let mut v = Vec::with_capacity(old.len() - 1);
    let mut removed = None;
    for (i, c) in old.into_vec().into_iter().enumerate() {
        if i == at {
            removed = Some(c);
        } else {
            v.push(c);
        }
    }
    (v.into_boxed_slice(), removed.expect("child index in range"))
}

/// Finds the entry for `k` (hash `hash`) below `node`. A loop, allocation-free.
#[inline]
pub(super) fn get<'a, K, V, Q>(node: &'a Node<K, V>, hash: u64, k: &Q) -> Option<&'a (K, V)>
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    get_from(node, 0, hash, k)
}

/// [`get`] starting below `node` at `level` (`node` is on the path of `hash` at that level).
#[inline]
fn get_from<'a, K, V, Q>(
    mut node: &'a Node<K, V>,
    start: usize,
    hash: u64,
    k: &Q,
) -> Option<&'a (K, V)>
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    for level in start..COLLISION_LEVEL {
        let h = &node.header;
        let bit = 1u32 << frag(hash, level);
        if h.datamap() & bit != 0 {
            return node.slice[h.slots(bit)]
                .iter()
                .flatten()
                .find(|e| e.0.borrow() == k);
        }
        if h.nodemap & bit == 0 {
            return None;
        }
        node = &h.children[index(h.nodemap, bit)];
    }
    node.slice.iter().flatten().find(|e| e.0.borrow() == k)
}

/// Mutable access to the value of `k`, in one pass while the nodes are unshared (mutating
/// nothing, so an absent key costs nothing either). At the first node a snapshot shares, the
/// key's presence is checked read-only from there, and only then is the rest of the path copied.
pub(super) fn get_mut<'a, K, V, Q>(
    mut node: &'a mut Node<K, V>,
    hash: u64,
    k: &Q,
) -> Option<&'a mut V>
where
    K: Borrow<Q> + Clone,
    V: Clone,
    Q: Eq + ?Sized,
{
    for level in 0..COLLISION_LEVEL {
        if !node.is_unique() {
            get_from(node, level, hash, k)?;
            return get_mut_copying(node, level, hash, k);
        }
        let n = Arc::get_mut(node).expect("checked unique");
        let bit = 1u32 << frag(hash, level);
        if n.header.datamap() & bit != 0 {
            let e = n.slice[n.header.slots(bit)]
                .iter_mut()
                .flatten()
                .find(|e| e.0.borrow() == k)?;
            return Some(&mut e.1);
        }
        if n.header.nodemap & bit == 0 {
            return None;
        }
        node = &mut n.header.children[index(n.header.nodemap, bit)];
    }
    if !node.is_unique() {
        get_from(node, COLLISION_LEVEL, hash, k)?;
    }
    let n = make_unique(node);
    let e = n.slice.iter_mut().flatten().find(|e| e.0.borrow() == k)?;
    Some(&mut e.1)
}

/// Finds the entry of `k` and applies `touch` to its value when `needs(value)`: in place while
/// the path is unshared; from the first shared node on, read-only, the path being copied only
/// when `needs` asks for the touch. One pass unless a copy is needed.
pub(super) fn get_touch<'a, K, V, Q>(
    mut node: &'a mut Node<K, V>,
    hash: u64,
    k: &Q,
    needs: impl Fn(&V) -> bool,
    touch: impl FnOnce(&mut V),
) -> Option<&'a V>
where
    K: Borrow<Q> + Clone,
    V: Clone,
    Q: Eq + ?Sized,
{
    for level in 0..=COLLISION_LEVEL {
        if !node.is_unique() {
            if !needs(&get_from(node, level, hash, k)?.1) {
                return get_from(node, level, hash, k).map(|e| &e.1);
            }
            let v = get_mut_copying(node, level, hash, k)?;
            touch(v);
            return Some(v);
        }
        let n = Arc::get_mut(node).expect("checked unique");
        let slots = if level == COLLISION_LEVEL {
            &mut n.slice[..]
        } else {
            let bit = 1u32 << frag(hash, level);
            if n.header.datamap() & bit != 0 {
                &mut n.slice[n.header.slots(bit)]
            } else if n.header.nodemap & bit == 0 {
                return None;
            } else {
                node = &mut n.header.children[index(n.header.nodemap, bit)];
                continue;
            }
        };
        let e = slots.iter_mut().flatten().find(|e| e.0.borrow() == k)?;
        if needs(&e.1) {
            touch(&mut e.1);
        }
        return Some(&e.1);
    }
    unreachable!("the collision level ends the walk")
}

/// Mutable access to the value of `k` below `node` at `start`, copying every shared node on the
/// path. The caller checked that the key is present.
#[cold]
fn get_mut_copying<'a, K, V, Q>(
    mut node: &'a mut Node<K, V>,
    start: usize,
    hash: u64,
    k: &Q,
) -> Option<&'a mut V>
where
    K: Borrow<Q> + Clone,
    V: Clone,
    Q: Eq + ?Sized,
{
    for level in start..COLLISION_LEVEL {
        let n = make_unique(node);
        let bit = 1u32 << frag(hash, level);
        if n.header.datamap() & bit != 0 {
            let e = n.slice[n.header.slots(bit)]
                .iter_mut()
                .flatten()
                .find(|e| e.0.borrow() == k)?;
            return Some(&mut e.1);
        }
        if n.header.nodemap & bit == 0 {
            return None;
        }
        node = &mut n.header.children[index(n.header.nodemap, bit)];
    }
    let n = make_unique(node);
    let e = n.slice.iter_mut().flatten().find(|e| e.0.borrow() == k)?;
    Some(&mut e.1)
}

/// A subtree at `level` holding `entries` (more than [`MAX_INLINE`], in hash order, distinct
/// keys, all on one path down to `level`).
fn subtree<K, V>(level: usize, entries: Vec<(u64, (K, V))>) -> Node<K, V> {
    let mut header = header_of_size(entries.len());
    if level == COLLISION_LEVEL {
        let mut slots: Vec<Slot<K, V>> = entries.into_iter().map(|(_, e)| Some(e)).collect();
        slots.resize_with(capacity(slots.len()), || None);
        return build(header, slots.into_iter());
    }
    let mut slots = Vec::with_capacity(capacity(entries.len()));
    let mut children = Vec::new();
    let mut rest = entries.into_iter().peekable();
    while let Some(first) = rest.next() {
        let pos = frag(first.0, level);
        let mut group = Vec::with_capacity(MAX_INLINE + 1);
        group.push(first);
        while let Some(next) = rest.next_if(|e| frag(e.0, level) == pos) {
            group.push(next);
        }
        let bit = 1u32 << pos;
        if group.len() <= MAX_INLINE {
            header.set_count(bit, group.len());
            slots.extend(group.into_iter().map(|(_, e)| Some(e)));
        } else {
            header.nodemap |= bit;
            children.push(subtree(level + 1, group));
        }
    }
    header.children = children.into_boxed_slice();
    slots.resize_with(capacity(slots.len()), || None);
    build(header, slots.into_iter())
}

/// Inserts into a collision node; returns the previous value.
fn insert_collision<K: Eq + Clone, V: Clone>(node: &mut Node<K, V>, k: K, v: V) -> Option<V> {
    let n = make_unique(node);
    if let Some(e) = n.slice.iter_mut().flatten().find(|e| e.0 == k) {
        return Some(mem::replace(&mut e.1, v));
    }
    let count = n.header.size;
    if let Some(rebuilt) = insert_slot(n, count, count, (k, v), |h| h.size += 1) {
        *node = rebuilt;
    }
    None
}

/// Inserts `k -> v` (hash `hash`) below `node` at `level`; returns the previous value.
pub(super) fn insert<K, V, S>(
    node: &mut Node<K, V>,
    level: usize,
    hash: u64,
    k: K,
    v: V,
    hasher: &S,
) -> Option<V>
where
    K: Hash + Eq + Clone,
    V: Clone,
    S: BuildHasher,
{
    if level == COLLISION_LEVEL {
        return insert_collision(node, k, v);
    }
    let n = make_unique(node);
    let bit = 1u32 << frag(hash, level);
    if n.header.nodemap & bit != 0 {
        let child = &mut n.header.children[index(n.header.nodemap, bit)];
        let old = insert(child, level + 1, hash, k, v, hasher);
        if old.is_none() {
            n.header.size += 1;
        }
        return old;
    }
    let slots = n.header.slots(bit);
    if let Some(e) = n.slice[slots.clone()]
        .iter_mut()
        .flatten()
        .find(|e| e.0 == k)
    {
        return Some(mem::replace(&mut e.1, v));
    }
    let count = n.header.entries();
    if slots.len() < MAX_INLINE {
        // Another entry at this position, in hash order among the ones there.
        let before = n.slice[slots.clone()]
            .iter()
            .flatten()
            .take_while(|e| hasher.hash_one(&e.0) < hash)
            .count();
        let change = |h: &mut NodeHeader<K, V>| {
            h.set_count(bit, slots.len() + 1);
            h.size += 1;
        };
        if let Some(rebuilt) = insert_slot(n, count, slots.start + before, (k, v), change) {
            *node = rebuilt;
        }
        return None;
    }
    // A full position: its entries and the new one move down into a new child.
    let mut moved: Vec<(u64, (K, V))> = n.slice[slots.clone()]
        .iter_mut()
        .map(|s| {
            let e = s.take().expect("slot holds an entry");
            (hasher.hash_one(&e.0), e)
        })
        .collect();
    let at = moved.partition_point(|e| e.0 < hash);
    moved.insert(at, (hash, (k, v)));
    let mut header = take_header(n);
    header.size += 1;
    header.set_count(bit, 0);
    header.nodemap |= bit;
    let child = subtree(level + 1, moved);
    header.children = children_inserted(header.children, index(header.nodemap, bit), child);
    *node = build(
        header,
        rebuilt(&mut n.slice, count, slots.start, slots.len(), &mut []),
    );
    None
}

/// Removes the entry at slot `at` of `node` (holding `count` entries), one of the position
/// `bit`'s (0 in a collision node): in place, leaving a spare slot, unless that leaves more
/// slots than [`max_capacity`] of the new count (then it is rebuilt with [`capacity`] of it).
fn remove_slot<K: Clone, V: Clone>(
    node: &mut Node<K, V>,
    at: usize,
    bit: u32,
    count: usize,
) -> Slot<K, V> {
    let n = make_unique(node);
    let change = |h: &mut NodeHeader<K, V>| {
        if bit != 0 {
            let left = h.slots(bit).len() - 1;
            h.set_count(bit, left);
        }
        h.size -= 1;
    };
    let kv = n.slice[at].take();
    if n.slice.len() <= max_capacity(count - 1) {
        n.slice[at..count].rotate_left(1);
        change(&mut n.header);
        return kv;
    }
    let mut header = take_header(n);
    change(&mut header);
    *node = build(header, rebuilt(&mut n.slice, count, at, 1, &mut []));
    kv
}

/// Removes `k` (hash `hash`) below `node` at `level`, keeping the trie canonical. One pass
/// while the nodes are unshared; at the first shared node the key's presence is checked
/// read-only (`present` records that it was), so an absent key copies nothing.
pub(super) fn remove<K, V, Q>(
    node: &mut Node<K, V>,
    level: usize,
    hash: u64,
    k: &Q,
    mut present: bool,
) -> Slot<K, V>
where
    K: Borrow<Q> + Clone,
    V: Clone,
    Q: Eq + ?Sized,
{
    if !present && !node.is_unique() {
        get_from(node, level, hash, k)?;
        present = true;
    }
    let matches = |s: &Slot<K, V>| s.as_ref().is_some_and(|e| e.0.borrow() == k);
    if level == COLLISION_LEVEL {
        let at = node.slice.iter().position(matches)?;
        let count = node.header.size;
        return remove_slot(node, at, 0, count);
    }
    let bit = 1u32 << frag(hash, level);
    if node.header.datamap() & bit != 0 {
        let slots = node.header.slots(bit);
        let at = slots.start + node.slice[slots].iter().position(matches)?;
        let count = node.header.entries();
        return remove_slot(node, at, bit, count);
    }
    if node.header.nodemap & bit == 0 {
        return None;
    }
    let n = make_unique(node);
    let ci = index(n.header.nodemap, bit);
    let kv = remove(&mut n.header.children[ci], level + 1, hash, k, present)?;
    child_lost_one(node, ci, bit);
    Some(kv)
}

/// Accounts for an entry removed below the child `ci` (at position `bit`) of the unshared
/// `node`, keeping the trie canonical.
fn child_lost_one<K: Clone, V: Clone>(node: &mut Node<K, V>, ci: usize, bit: u32) {
    let n = Arc::get_mut(node).expect("the path was made unique");
    n.header.size -= 1;
    let child = &n.header.children[ci];
    // A child without children holds its whole subtree itself (a collision node too).
    let left = child.header.size;
    if child.header.nodemap == 0 && left <= MAX_INLINE {
        // Canonical form: the few entries left below us move up into this position, into spare
        // slots when the node has enough, else into a rebuilt node.
        let count = n.header.entries();
        let (children, mut child) = children_removed(mem::take(&mut n.header.children), ci);
        n.header.children = children;
        n.header.nodemap ^= bit;
        n.header.set_count(bit, left);
        let at = n.header.slots(bit).start;
        let mut moved: [Slot<K, V>; MAX_INLINE] = Default::default();
        match Arc::get_mut(&mut child) {
            Some(c) => moved
                .iter_mut()
                .zip(&mut c.slice[..left])
                .for_each(|(m, s)| *m = s.take()),
            None => moved
                .iter_mut()
                .zip(&child.slice[..left])
                .for_each(|(m, s)| *m = s.clone()),
        }
        let moved = &mut moved[..left];
        if count + left <= n.slice.len() {
            n.slice[at..count + left].rotate_right(left);
            n.slice[at..at + left].swap_with_slice(moved);
        } else {
            let header = take_header(n);
            *node = build(header, rebuilt(&mut n.slice, count, at, 0, moved));
        }
    }
}

/// Removes the `r`-th entry of the subtree (`r < size`, in [`nth`]'s order), keeping the trie
/// canonical; copies the shared nodes on its path. One walk, no hashing or key comparisons.
pub(super) fn remove_nth<K: Clone, V: Clone>(
    node: &mut Node<K, V>,
    level: usize,
    r: usize,
) -> Slot<K, V> {
    let entries = node.header.entries();
    if r < entries {
        let bit = if level == COLLISION_LEVEL {
            0
        } else {
            bit_of_slot(&node.header, r)
        };
        return remove_slot(node, r, bit, entries);
    }
    let (ci, bit, r) = child_at(&node.header, r - entries)?;
    let n = make_unique(node);
    let kv = remove_nth(&mut n.header.children[ci], level + 1, r)?;
    child_lost_one(node, ci, bit);
    Some(kv)
}

/// The position whose inline entries include slot `at` (`at` below the node's entries).
fn bit_of_slot<K, V>(h: &NodeHeader<K, V>, at: usize) -> u32 {
    /// The number of set bits of each byte, in that byte.
    fn byte_counts(x: u32) -> u32 {
        let x = x - ((x >> 1) & 0x5555_5555);
        let x = (x & 0x3333_3333) + ((x >> 2) & 0x3333_3333);
        (x + (x >> 4)) & 0x0f0f_0f0f
    }
    // Entries per group of 8 positions (at most 24), then running totals (at most 96): byte
    // `i` of `upto` counts the entries of positions below `8 * (i + 1)`. Cheaper than
    // `count_ones` per probe on targets without a popcount instruction.
    let upto = (byte_counts(h.lo) + 2 * byte_counts(h.hi)).wrapping_mul(0x0101_0101);
    let mut first = 0;
    let mut group = 0;
    while group < 3 {
        let end = ((upto >> (8 * group)) & 0xff) as usize;
        if at < end {
            break;
        }
        first = end;
        group += 1;
    }
    // Then position by position within the group.
    let mut map = (h.lo | h.hi) & (0xff << (8 * group));
    loop {
        let bit = map & map.wrapping_neg();
        first += usize::from(h.lo & bit != 0) + 2 * usize::from(h.hi & bit != 0);
        if at < first || map == bit {
            return bit;
        }
        map ^= bit;
    }
}

/// Drops from this version every child subtree whose hashes all lie below `cursor` (the
/// children left of the cursor's path), copying shared nodes on that path first; returns how
/// many entries went. Entries stored inline on the path stay. The result is a valid trie for
/// lookups and scans at or after `cursor`, though not canonical: meant for a reader that has
/// already visited everything below `cursor` (a background save) and wants to let go of it.
pub(super) fn release_below<K: Clone, V: Clone>(
    node: &mut Node<K, V>,
    level: usize,
    cursor: u64,
) -> usize {
    if level >= COLLISION_LEVEL {
        return 0;
    }
    let pos = frag(cursor, level);
    let below = (1u32 << pos) - 1;
    let dropped = (node.header.nodemap & below).count_ones() as usize;
    let on_path = node.header.nodemap & (1 << pos) != 0;
    if dropped == 0 && !on_path {
        return 0;
    }
    let n = make_unique(node);
    let mut children = mem::take(&mut n.header.children).into_vec();
    let mut removed: usize = children.drain(..dropped).map(|c| c.header.size).sum();
    if on_path {
        removed += release_below(&mut children[0], level + 1, cursor);
    }
    n.header.children = children.into_boxed_slice();
    n.header.nodemap &= !below;
    n.header.size -= removed;
    removed
}

/// Picks the `r`-th entry of the subtree (`r < size`) in O(depth * 32): a node's own entries
/// come first, then its children's subtrees in order. The children are walked from whichever
/// end is nearer `r`.
pub(super) fn nth<K, V>(mut node: &Node<K, V>, mut r: usize) -> Option<&(K, V)> {
    loop {
        let entries = node.header.entries();
        if r < entries {
            return node.slice[r].as_ref();
        }
        let (ci, _, rest) = child_at(&node.header, r - entries)?;
        node = &node.header.children[ci];
        r = rest;
    }
}

/// The child holding entry `r` of the children's subtrees taken in order: its index, its
/// position's bit, and the entry's index in its subtree. Walks from whichever end is nearer.
#[inline]
fn child_at<K, V>(h: &NodeHeader<K, V>, mut r: usize) -> Option<(usize, u32, usize)> {
    let below = h.size - h.entries();
    let mut map = h.nodemap;
    if r < below / 2 {
        for (i, child) in h.children.iter().enumerate() {
            let bit = map & map.wrapping_neg();
            if r < child.header.size {
                return Some((i, bit, r));
            }
            map ^= bit;
            r -= child.header.size;
        }
        None
    } else {
        // Counted from the last entry backwards.
        let mut back = below.checked_sub(r + 1)?;
        for (i, child) in h.children.iter().enumerate().rev() {
            let bit = 1u32 << (31 - map.leading_zeros());
            if back < child.header.size {
                return Some((i, bit, child.header.size - 1 - back));
            }
            map ^= bit;
            back -= child.header.size;
        }
        None
    }
}

/// Structure bytes of the subtree (node allocations, excluding what keys/values own).
pub(super) fn heap_size<K, V>(node: &Node<K, V>) -> usize {
    let own = mem::size_of::<usize>()
        + mem::size_of::<NodeHeader<K, V>>()
        + mem::size_of_val(&node.slice)
        + mem::size_of_val(&*node.header.children);
    own + node.header.children.iter().map(heap_size).sum::<usize>()
}

/// Calls `f` with the address of every node of the subtree.
pub(super) fn for_each_node<K, V>(node: &Node<K, V>, f: &mut impl FnMut(&Node<K, V>)) {
    f(node);
    for child in node.header.children.iter() {
        for_each_node(child, f);
    }
}

/// Checks one subtree's invariants; `path` holds the hash bits chosen above `level`.
/// Returns the subtree's entry count.
pub(super) fn check<K, V>(
    node: &Node<K, V>,
    level: usize,
    path: u64,
    hash: &impl Fn(&K) -> u64,
) -> usize {
    let h = &node.header;
    let entries = h.entries();
    let slots = node.slice.len();
    assert_eq!(slots, capacity(slots), "slot count not a size class");
    assert!(
        capacity(entries) <= slots && slots <= max_capacity(entries),
        "slots vs entries"
    );
    assert!(
        node.slice[..entries].iter().all(Option::is_some),
        "vacant slot"
    );
    assert!(
        node.slice[entries..].iter().all(Option::is_none),
        "entry past the count"
    );
    if level == COLLISION_LEVEL {
        assert_eq!(h.datamap() | h.nodemap, 0, "collision node with bitmaps");
        assert!(h.children.is_empty(), "collision node with children");
        assert!(entries > MAX_INLINE, "collision node that fits inline");
        for (k, _) in node.slice.iter().flatten() {
            assert_eq!(hash(k), path, "collision entry with another hash");
        }
        return h.size;
    }
    assert_eq!(h.datamap() & h.nodemap, 0, "position both entry and child");
    assert_eq!(
        h.nodemap.count_ones() as usize,
        h.children.len(),
        "nodemap vs children"
    );
    let prefix_mask = prefix_mask(level);
    for pos in 0..32 {
        let bit = 1u32 << pos;
        let mut prev = None;
        for (k, _) in node.slice[h.slots(bit)].iter().flatten() {
            let kh = hash(k);
            assert_eq!(kh & prefix_mask, path, "entry off its path");
            assert_eq!(frag(kh, level), pos, "entry at wrong position");
            assert!(prev <= Some(kh), "entries of a position out of hash order");
            prev = Some(kh);
        }
    }
    let mut size = entries;
    for (i, child) in h.children.iter().enumerate() {
        let pos = nth_bit(h.nodemap, i);
        let child_path = path | with_frag(pos, level);
        let n = check(child, level + 1, child_path, hash);
        assert!(
            n > MAX_INLINE,
            "non-canonical: subtree below root that fits inline"
        );
        size += n;
    }
    assert_eq!(h.size, size, "subtree size out of sync");
    size
}

/// The hash bits fixed by the path to a node at `level`.
fn prefix_mask(level: usize) -> u64 {
    if level == 0 {
        0
    } else if level >= COLLISION_LEVEL {
        u64::MAX
    } else {
        !(u64::MAX >> (BITS * level))
    }
}

/// The hash bits meaning "position `pos` at `level`".
fn with_frag(pos: u32, level: usize) -> u64 {
    if level < COLLISION_LEVEL - 1 {
        u64::from(pos) << (64 - BITS * (level + 1))
    } else {
        u64::from(pos) >> 1
    }
}

/// Position of the `i`-th set bit of `map`.
fn nth_bit(mut map: u32, i: usize) -> u32 {
    for _ in 0..i {
        map &= map - 1;
    }
    map.trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frag_follows_numeric_order() {
        // Concatenating the fragments of all levels must rebuild the hash, MSB first.
        for &h in &[
            0u64,
            1,
            u64::MAX,
            0x8000_0000_0000_0000,
            0x0123_4567_89ab_cdef,
        ] {
            let mut rebuilt: u64 = 0;
            for level in 0..COLLISION_LEVEL {
                rebuilt |= with_frag(frag(h, level), level);
            }
            assert_eq!(rebuilt, h);
            assert_eq!(
                frag(h, COLLISION_LEVEL - 1) & 1,
                0,
                "last level uses 4 bits"
            );
        }
        assert!(frag(0x8000_0000_0000_0000, 0) > frag(0x7fff_ffff_ffff_ffff, 0));
    }

    #[test]
    fn prefix_mask_covers_consumed_bits() {
        assert_eq!(prefix_mask(0), 0);
        assert_eq!(prefix_mask(1), 0xf800_0000_0000_0000);
        assert_eq!(prefix_mask(12), !0xf);
        assert_eq!(prefix_mask(COLLISION_LEVEL), u64::MAX);
    }

    /// `nth` as a walk from the first child only: the order `nth` keeps.
    fn nth_forward<K, V>(mut node: &Node<K, V>, mut r: usize) -> Option<&(K, V)> {
        loop {
            let entries = node.header.entries();
            if r < entries {
                return node.slice[r].as_ref();
            }
            r -= entries;
            let mut next = None;
            for child in node.header.children.iter() {
                if r < child.header.size {
                    next = Some(child);
                    break;
                }
                r -= child.header.size;
            }
            node = next?;
        }
    }

    #[test]
    fn nth_walks_from_either_end_to_the_same_entry() {
        let mut root = empty::<u64, ()>();
        let hasher = foldhash::fast::FixedState::with_seed(3);
        for i in 0..3000u64 {
            insert(&mut root, 0, hasher.hash_one(i), i, (), &hasher);
        }
        for i in (0..3000u64).step_by(7) {
            remove(&mut root, 0, hasher.hash_one(i), &i, false);
        }
        let size = root.header.size;
        for r in 0..size {
            let got = nth(&root, r).map(|e| e.0);
            assert_eq!(got, nth_forward(&root, r).map(|e| e.0), "entry {r}");
            assert!(got.is_some());
        }
        assert!(nth(&root, size).is_none());
    }

    #[test]
    fn remove_nth_removes_the_entry_nth_picks() {
        let mut root = empty::<u64, ()>();
        let hasher = foldhash::fast::FixedState::with_seed(5);
        let hash = |k: &u64| hasher.hash_one(k);
        for i in 0..2000u64 {
            insert(&mut root, 0, hash(&i), i, (), &hasher);
        }
        let snap = root.clone();
        let mut r = 12345usize;
        while root.header.size > 0 {
            r = r.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1) >> 7;
            let at = r % root.header.size;
            let want = nth(&root, at).map(|e| e.0);
            assert_eq!(remove_nth(&mut root, 0, at).map(|e| e.0), want);
            if root.header.size.is_multiple_of(37) {
                check(&root, 0, 0, &hash);
            }
        }
        check(&root, 0, 0, &hash);
        assert_eq!(
            check(&snap, 0, 0, &hash),
            2000,
            "the snapshot kept its entries"
        );
    }

    #[test]
    fn bit_of_slot_finds_each_slots_position() {
        let mut layouts: Vec<Vec<(u32, usize)>> = alloc::vec![
            alloc::vec![(0, 2), (3, 1), (4, 3), (17, 2), (31, 3)],
            alloc::vec![(31, 1)],
            alloc::vec![(0, 1)],
            (0..32).map(|p| (p, 3)).collect(),
            (0..32).map(|p| (p, 1 + p as usize % 3)).collect(),
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..500 {
            let mut l = Vec::new();
            for p in 0..32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(3) {
                    l.push((p, 1 + (x >> 8) as usize % 3));
                }
            }
            layouts.push(l);
        }
        for l in layouts {
            let mut h = header_of_size::<(), ()>(0);
            for &(pos, count) in &l {
                h.set_count(1 << pos, count);
            }
            for pos in 0..32 {
                for at in h.slots(1 << pos) {
                    assert_eq!(bit_of_slot(&h, at), 1 << pos, "{l:?} slot {at}");
                }
            }
        }
    }

    #[test]
    fn index_and_nth_bit_agree() {
        let map = 0b1011_0010u32;
        for i in 0..4 {
            let pos = nth_bit(map, i);
            assert_eq!(index(map, 1 << pos), i);
        }
    }
}

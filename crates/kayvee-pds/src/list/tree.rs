//! The counted persistent B+tree shared by `PList` (addressed by position) and `POrdSet`
//! (addressed by key): elements live inline in leaf chunks, each branch keeps its children's
//! subtree sizes (order statistics), so indexing and rank are O(log n).
//!
//! Shape (all leaves at the same depth):
//! - A leaf holds at most [`LEAF_MAX`] elements, a branch at most [`BRANCH_MAX`] children.
//! - A node that is neither the root nor on the left or right *spine* (the path of first / last
//!   children from the root) is at least half full. Spine nodes only need one item: pushing past
//!   a full end node starts a new end node instead of splitting in halves, so sequential pushes
//!   (RPUSH, LPUSH, ZADD with growing scores) leave full chunks behind them, and trimming an end
//!   (LTRIM, ZREMRANGEBYRANK) cuts along one path without rebalancing.
//! - A root branch has at least two children (a one-child root is collapsed).
//! - A child's summary `S` caches what a keyed search needs (nothing for lists, the subtree's
//!   largest element for ordered sets).
//!
//! Writes locate their target first (read-only, giving a [`Path`]), then walk the path with
//! `Arc::make_mut`: a node no snapshot shares is mutated in place, a shared node is copied, so a
//! write after a snapshot copies only the root-to-leaf path (plus a neighbour when rebalancing).

use alloc::vec::Vec;
use core::slice;
use triomphe::Arc;

/// Most elements in a leaf chunk.
pub(crate) const LEAF_MAX: usize = 64;
/// Fewest elements in a leaf off the spine.
pub(crate) const LEAF_MIN: usize = LEAF_MAX / 2;
/// Most children of a branch.
pub(crate) const BRANCH_MAX: usize = 32;
/// Fewest children of a branch off the spine.
pub(crate) const BRANCH_MIN: usize = BRANCH_MAX / 2;
/// Deepest tree supported: non-spine nodes are half full, so 16 levels hold far more elements
/// than memory can.
pub(crate) const DEPTH_MAX: usize = 16;

/// What a parent caches about each child beyond its size.
pub(crate) trait Summary<T>: Clone + Sized {
    /// The summary of a non-empty `node`.
    fn of(node: &Node<T, Self>) -> Self;
    /// Brings `self` up to date after `node` (non-empty) changed.
    fn refresh(&mut self, node: &Node<T, Self>);
    /// Panics when `self` is not the summary of `node`.
    fn check(&self, node: &Node<T, Self>);
}

/// Lists cache nothing.
impl<T> Summary<T> for () {
    fn of(_: &Node<T, ()>) {}
    fn refresh(&mut self, _: &Node<T, ()>) {}
    fn check(&self, _: &Node<T, ()>) {}
}

/// A tree node: a chunk of elements or a list of children.
pub(crate) enum Node<T, S> {
    /// Elements, in order.
    Leaf(Vec<T>),
    /// Children, in order.
    Branch(Vec<Child<T, S>>),
}

/// A branch's reference to one child.
pub(crate) struct Child<T, S> {
    /// Elements in the child's subtree.
    pub len: usize,
    /// The child's cached summary.
    pub sum: S,
    /// The child.
    pub node: Arc<Node<T, S>>,
}

impl<T, S: Summary<T>> Child<T, S> {
    /// Brings the cached summary up to date after the child changed.
    fn refresh(&mut self) {
        self.sum.refresh(&self.node);
    }
}

impl<T, S: Clone> Clone for Child<T, S> {
    fn clone(&self) -> Self {
        Child {
            len: self.len,
            sum: self.sum.clone(),
            node: self.node.clone(),
        }
    }
}

impl<T: Clone, S: Clone> Clone for Node<T, S> {
    fn clone(&self) -> Self {
        match self {
            Node::Leaf(v) => Node::Leaf(v.clone()),
            Node::Branch(k) => Node::Branch(k.clone()),
        }
    }
}

impl<T, S> Node<T, S> {
    /// Items held directly: elements of a leaf, children of a branch.
    pub fn items(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Branch(k) => k.len(),
        }
    }

    /// Elements in the subtree.
    pub fn total(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Branch(k) => k.iter().map(|c| c.len).sum(),
        }
    }

    /// (fewest items off the spine, most items) for this kind of node.
    fn bounds(&self) -> (usize, usize) {
        match self {
            Node::Leaf(_) => (LEAF_MIN, LEAF_MAX),
            Node::Branch(_) => (BRANCH_MIN, BRANCH_MAX),
        }
    }
}

/// Whether a node lies on the left and/or right spine.
#[derive(Clone, Copy)]
struct Edges {
    left: bool,
    right: bool,
}

impl Edges {
    /// The root is on both spines.
    const ROOT: Edges = Edges {
        left: true,
        right: true,
    };

    /// The edges of child `i` of `n` children of a node with edges `self`.
    fn child(self, i: usize, n: usize) -> Edges {
        Edges {
            left: self.left && i == 0,
            right: self.right && i + 1 == n,
        }
    }

    /// Whether on either spine.
    fn any(self) -> bool {
        self.left || self.right
    }
}

/// Where a located element is (or would be inserted): child indexes from the root down, the
/// position in the leaf, and the element's rank in the whole tree.
#[derive(Clone, Copy)]
pub(crate) struct Path {
    idx: [u8; DEPTH_MAX],
    depth: usize,
    /// Position within the leaf.
    pos: usize,
    /// Elements before the position in the whole tree.
    pub rank: usize,
    /// Whether an element sits at the position (keyed search hit, or index in range).
    pub found: bool,
}

impl Path {
    /// An empty path (at the root).
    fn new() -> Path {
        Path {
            idx: [0; DEPTH_MAX],
            depth: 0,
            pos: 0,
            rank: 0,
            found: false,
        }
    }

    /// Records a step into child `i`, after `skipped` elements.
    fn step(&mut self, i: usize, skipped: usize) {
        assert!(self.depth < DEPTH_MAX, "tree deeper than DEPTH_MAX");
        self.idx[self.depth] = i as u8;
        self.depth += 1;
        self.rank += skipped;
    }
}

/// A node split off by an insert, to be placed next to the node that split.
struct Split<T, S> {
    node: Arc<Node<T, S>>,
    /// Whether it goes before (a push at the left spine) rather than after.
    before: bool,
}

/// The tree: a root node and the element count.
pub(crate) struct Tree<T, S> {
    pub root: Arc<Node<T, S>>,
    pub len: usize,
}

impl<T, S> Clone for Tree<T, S> {
    fn clone(&self) -> Self {
        Tree {
            root: self.root.clone(),
            len: self.len,
        }
    }
}

/// Equal elements in the same order (the summaries follow from them); O(1) when both share
/// their root (one is an unchanged snapshot of the other). The wrappers derive theirs from it.
impl<T: PartialEq, S> PartialEq for Tree<T, S> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && (Arc::ptr_eq(&self.root, &other.root) || self.iter().eq(other.iter()))
    }
}

impl<T: Eq, S> Eq for Tree<T, S> {}

/// Reserves room for `extra` more items in a node's vector without ever exceeding `max`
/// capacity (doubling while small, so short lists stay small).
fn grow_for<X>(v: &mut Vec<X>, extra: usize, max: usize) {
    let need = v.len() + extra;
    if need > v.capacity() {
        let target = (v.len() * 2).max(4).min(max).max(need);
        v.reserve_exact(target - v.len());
    }
}

/// Inserts `x` at `at` in a node's items; when the node is full, splits it and returns the new
/// sibling's items and whether it goes before. Past a full spine end the sibling starts with
/// just `x`; elsewhere the node splits in halves.
fn vec_insert<X>(
    items: &mut Vec<X>,
    at: usize,
    x: X,
    max: usize,
    e: Edges,
) -> Option<(Vec<X>, bool)> {
    if items.len() < max {
        grow_for(items, 1, max);
        items.insert(at, x);
        return None;
    }
    let mut fresh = Vec::with_capacity(max);
    if (e.right && at == items.len()) || (e.left && at == 0) {
        fresh.push(x);
        return Some((fresh, at == 0));
    }
    let mid = max / 2;
    fresh.extend(items.drain(mid..));
    if at <= mid {
        items.insert(at, x);
    } else {
        fresh.insert(at - mid, x);
    }
    Some((fresh, false))
}

/// Moves items between two neighbours' vectors so the left holds half (rounded down).
fn balance_vecs<X>(l: &mut Vec<X>, r: &mut Vec<X>, max: usize) {
    let target = (l.len() + r.len()) / 2;
    if l.len() > target {
        grow_for(r, l.len() - target, max);
        r.splice(0..0, l.drain(target..));
    } else {
        let need = target - l.len();
        grow_for(l, need, max);
        l.extend(r.drain(..need));
    }
}

impl<T, S> Tree<T, S> {
    /// Every element, in order.
    pub fn iter(&self) -> Iter<'_, T, S> {
        self.range(0, self.len)
    }

    /// Elements with indexes in `start..end`, both first clamped to the tree, in order.
    pub fn range_clamped(&self, start: usize, end: usize) -> Iter<'_, T, S> {
        let end = end.min(self.len);
        self.range(start.min(end), end)
    }

    /// Elements with indexes in `start..end` (callers clamp), in order.
    pub fn range(&self, start: usize, end: usize) -> Iter<'_, T, S> {
        debug_assert!(start <= end && end <= self.len);
        let mut it = Iter {
            front: Cursor::empty(),
            back: Cursor::empty(),
            remaining: end - start,
        };
        if start < end {
            it.front.seek_front(&self.root, start);
            it.back.seek_back(&self.root, end - 1);
        }
        it
    }
}

impl<T: Clone, S: Summary<T>> Tree<T, S> {
    /// An empty tree.
    pub fn new() -> Self {
        Tree {
            root: Arc::new(Node::Leaf(Vec::new())),
            len: 0,
        }
    }

    /// Builds a tree from elements in order: full chunks, full branches (only the right spine
    /// may be short).
    pub fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut level: Vec<Child<T, S>> = Vec::new();
        let mut cur: Vec<T> = Vec::new();
        for x in iter {
            if cur.len() == LEAF_MAX {
                level.push(child_of(Node::Leaf(core::mem::take(&mut cur))));
            }
            if cur.is_empty() {
                cur.reserve_exact(if level.is_empty() { 4 } else { LEAF_MAX });
            }
            grow_for(&mut cur, 1, LEAF_MAX);
            cur.push(x);
        }
        if level.is_empty() {
            let len = cur.len();
            return Tree {
                root: Arc::new(Node::Leaf(cur)),
                len,
            };
        }
        if !cur.is_empty() {
            cur.shrink_to_fit();
            level.push(child_of(Node::Leaf(cur)));
        }
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len().div_ceil(BRANCH_MAX));
            let mut it = level.into_iter().peekable();
            while it.peek().is_some() {
                let kids: Vec<_> = it.by_ref().take(BRANCH_MAX).collect();
                up.push(child_of(Node::Branch(kids)));
            }
            level = up;
        }
        let top = level.pop().expect("non-empty level");
        Tree {
            root: top.node,
            len: top.len,
        }
    }

    /// Locates index `i`: for a read or remove (`found` when `i < len`), or for an insert
    /// before `i` (`insert`: an index on a child boundary goes to the end of the earlier child).
    pub fn locate_index(&self, i: usize, insert: bool) -> Path {
        let mut path = Path::new();
        let mut rem = i.min(self.len);
        let mut node_len = self.len;
        let mut node = &*self.root;
        loop {
            match node {
                Node::Leaf(v) => {
                    path.pos = rem;
                    path.rank += rem;
                    path.found = rem < v.len();
                    return path;
                }
                Node::Branch(kids) => {
                    let (c, skipped) = pick_child(kids, rem, node_len, insert);
                    path.step(c, skipped);
                    rem -= skipped;
                    node_len = kids[c].len;
                    node = &kids[c].node;
                }
            }
        }
    }

    /// Locates by search: `branch` picks a child (given the children), `leaf` searches a chunk
    /// (`Ok` = found at, `Err` = would insert at).
    pub fn locate_by(
        &self,
        mut branch: impl FnMut(&[Child<T, S>]) -> usize,
        leaf: impl FnOnce(&[T]) -> Result<usize, usize>,
    ) -> Path {
        let mut path = Path::new();
        let mut node = &*self.root;
        loop {
            match node {
                Node::Leaf(v) => {
                    let (pos, found) = match leaf(v) {
                        Ok(p) => (p, true),
                        Err(p) => (p, false),
                    };
                    path.pos = pos;
                    path.rank += pos;
                    path.found = found;
                    return path;
                }
                Node::Branch(kids) => {
                    let c = branch(kids);
                    path.step(c, kids[..c].iter().map(|k| k.len).sum());
                    node = &kids[c].node;
                }
            }
        }
    }

    /// The element a found path points at.
    pub fn at(&self, path: &Path) -> &T {
        let mut node = &*self.root;
        for &c in &path.idx[..path.depth] {
            match node {
                Node::Branch(kids) => node = &kids[c as usize].node,
                Node::Leaf(_) => unreachable!("path deeper than tree"),
            }
        }
        match node {
            Node::Leaf(v) => &v[path.pos],
            Node::Branch(_) => unreachable!("path shallower than tree"),
        }
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (mut rem, mut node_len, mut node) = (i, self.len, &*self.root);
        loop {
            match node {
                Node::Leaf(v) => return v.get(rem),
                Node::Branch(kids) => {
                    let (c, skipped) = pick_child(kids, rem, node_len, false);
                    rem -= skipped;
                    node_len = kids[c].len;
                    node = &kids[c].node;
                }
            }
        }
    }

    /// Element `i`, mutably (copies the shared part of its path).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let path = self.locate_index(i, false);
        let mut node = &mut self.root;
        for &c in &path.idx[..path.depth] {
            match Arc::make_mut(node) {
                Node::Branch(kids) => node = &mut kids[c as usize].node,
                Node::Leaf(_) => unreachable!("path deeper than tree"),
            }
        }
        match Arc::make_mut(node) {
            Node::Leaf(v) => Some(&mut v[path.pos]),
            Node::Branch(_) => unreachable!("path shallower than tree"),
        }
    }

    /// Calls `f` on the element a found path points at, mutably (copying the shared part of its
    /// path first), then `adjust` on each cached summary along the path, bottom up, with what
    /// `f` returned (a summary that follows from the element, such as a count, moves by it).
    pub fn modify_at<R>(
        &mut self,
        path: &Path,
        f: impl FnOnce(&mut T) -> R,
        adjust: impl Fn(&mut S, &R),
    ) -> R {
        modify_rec(&mut self.root, path, 0, f, &adjust)
    }

    /// The first or last element (the tree must not be empty): one walk down the spine.
    pub fn end(&self, front: bool) -> &T {
        let mut node = &*self.root;
        loop {
            match node {
                Node::Branch(kids) => node = &kids[if front { 0 } else { kids.len() - 1 }].node,
                Node::Leaf(v) => return if front { &v[0] } else { &v[v.len() - 1] },
            }
        }
    }

    /// [`Tree::modify_at`] for the first or last element (the tree must not be empty), in one
    /// walk down the spine.
    pub fn modify_end<R>(
        &mut self,
        front: bool,
        f: impl FnOnce(&mut T) -> R,
        adjust: impl Fn(&mut S, &R),
    ) -> R {
        modify_end_rec(&mut self.root, front, f, &adjust)
    }

    /// Inserts `x` at the position `path` names.
    pub fn insert_at(&mut self, path: &Path, x: T) {
        if let Some(split) = insert_rec(&mut self.root, path, 0, Edges::ROOT, x) {
            let new_len = split.node.total();
            let old = Arc::clone(&self.root);
            let old = Child {
                len: self.len + 1 - new_len,
                sum: S::of(&old),
                node: old,
            };
            let new = child_of_arc(split.node, new_len);
            let mut kids = Vec::with_capacity(4);
            if split.before {
                kids.extend([new, old]);
            } else {
                kids.extend([old, new]);
            }
            self.root = Arc::new(Node::Branch(kids));
        }
        self.len += 1;
    }

    /// Removes and returns the element a found path points at.
    pub fn remove_at(&mut self, path: &Path) -> T {
        let x = remove_rec(&mut self.root, path, 0, Edges::ROOT);
        self.len -= 1;
        self.collapse_root();
        x
    }

    /// Keeps the first `n` elements (O(log n) plus freeing what is cut).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        if n == 0 {
            *self = Tree::new();
            return;
        }
        truncate_rec(&mut self.root, n);
        self.len = n;
        self.collapse_root();
    }

    /// Drops the first `n` elements (O(log n) plus freeing what is cut).
    pub fn drop_front(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if n >= self.len {
            *self = Tree::new();
            return;
        }
        drop_front_rec(&mut self.root, n);
        self.len -= n;
        self.collapse_root();
    }

    /// Replaces a root branch with a single child by that child (repeatedly), and an empty root
    /// branch by an empty leaf.
    fn collapse_root(&mut self) {
        loop {
            let next = match &*self.root {
                Node::Branch(k) if k.len() == 1 => k[0].node.clone(),
                Node::Branch(k) if k.is_empty() => Arc::new(Node::Leaf(Vec::new())),
                _ => return,
            };
            self.root = next;
        }
    }

    /// Bytes the tree's nodes occupy on the heap (node allocations and chunk capacity; not what
    /// elements own themselves; shared nodes counted as if owned).
    pub fn heap_size(&self) -> usize {
        fn walk<T, S>(n: &Node<T, S>) -> usize {
            let own = core::mem::size_of::<usize>() + core::mem::size_of::<Node<T, S>>();
            own + match n {
                Node::Leaf(v) => v.capacity() * core::mem::size_of::<T>(),
                Node::Branch(k) => {
                    k.capacity() * core::mem::size_of::<Child<T, S>>()
                        + k.iter().map(|c| walk(&c.node)).sum::<usize>()
                }
            }
        }
        walk(&self.root)
    }

    /// Panics when a structural invariant is broken: sizes, summaries, fill, equal depth.
    pub fn check(&self) {
        if let Node::Branch(k) = &*self.root {
            assert!(k.len() >= 2, "root branch with {} children", k.len());
        }
        let (total, depth) = check_rec(&self.root, Edges::ROOT, true);
        assert_eq!(total, self.len, "cached length");
        assert!(depth <= DEPTH_MAX, "depth {depth}");
    }
}

#[cfg(test)]
impl<T, S> Tree<T, S> {
    /// Addresses of every node, root first (tests check what a write copied).
    pub fn node_addrs(&self) -> alloc::collections::BTreeSet<usize> {
        fn walk<T, S>(n: &Node<T, S>, out: &mut alloc::collections::BTreeSet<usize>) {
            out.insert(n as *const Node<T, S> as usize);
            if let Node::Branch(k) = n {
                k.iter().for_each(|c| walk(&c.node, out));
            }
        }
        let mut out = alloc::collections::BTreeSet::new();
        walk(&self.root, &mut out);
        out
    }

    /// Every leaf's element count, in order.
    pub fn leaf_lens(&self) -> alloc::vec::Vec<usize> {
        fn walk<T, S>(n: &Node<T, S>, out: &mut alloc::vec::Vec<usize>) {
            match n {
                Node::Leaf(v) => out.push(v.len()),
                Node::Branch(k) => k.iter().for_each(|c| walk(&c.node, out)),
            }
        }
        let mut out = alloc::vec::Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Levels of nodes (1 for a lone leaf).
    pub fn height(&self) -> usize {
        let mut node = &*self.root;
        let mut h = 1;
        while let Node::Branch(k) = node {
            node = &k[0].node;
            h += 1;
        }
        h
    }
}

/// The child of a branch holding `node_len` elements that index `rem` falls in, and the
/// elements before it. Scans from whichever end is nearer, so work at the ends (pushes, pops)
/// is O(1) per level. For an insert, an index on a boundary goes to the earlier child's end.
fn pick_child<T, S>(
    kids: &[Child<T, S>],
    rem: usize,
    node_len: usize,
    insert: bool,
) -> (usize, usize) {
    let inside = |c: &Child<T, S>, r: usize| r < c.len || (insert && r == c.len);
    if rem <= node_len / 2 {
        let (mut c, mut skipped) = (0, 0);
        while c + 1 < kids.len() && !inside(&kids[c], rem - skipped) {
            skipped += kids[c].len;
            c += 1;
        }
        (c, skipped)
    } else {
        // Walk back from the end: `after` elements lie beyond child `c`.
        let (mut c, mut after) = (kids.len() - 1, 0);
        loop {
            let start = node_len - after - kids[c].len;
            let before_it = rem < start || (insert && rem == start);
            if c == 0 || !before_it {
                return (c, start);
            }
            after += kids[c].len;
            c -= 1;
        }
    }
}

/// Lists (no summaries to refresh) push at an end in one walk down the spine.
impl<T: Clone> Tree<T, ()> {
    /// Pushes `x` at the front or back when the end chunk has room: one descent along the spine
    /// (copying only what a snapshot shares), no path to record and no summaries to refresh.
    /// Gives `x` back when the end chunk is full (the caller takes the general insert, which
    /// starts a new chunk).
    pub fn push_end(&mut self, x: T, front: bool) -> Result<(), T> {
        let end = |n: usize| if front { 0 } else { n - 1 };
        let mut node = &*self.root;
        while let Node::Branch(kids) = node {
            node = &kids[end(kids.len())].node;
        }
        if node.items() >= LEAF_MAX {
            return Err(x);
        }
        let mut node = &mut self.root;
        loop {
            match Arc::make_mut(node) {
                Node::Branch(kids) => {
                    let i = end(kids.len());
                    kids[i].len += 1;
                    node = &mut kids[i].node;
                }
                Node::Leaf(v) => {
                    grow_for(v, 1, LEAF_MAX);
                    if front {
                        v.insert(0, x);
                    } else {
                        v.push(x);
                    }
                    break;
                }
            }
        }
        self.len += 1;
        Ok(())
    }
}

/// A child entry for `node` (non-empty).
fn child_of<T, S: Summary<T>>(node: Node<T, S>) -> Child<T, S> {
    let len = node.total();
    child_of_arc(Arc::new(node), len)
}

/// A child entry for a shared `node` of `len` elements.
fn child_of_arc<T, S: Summary<T>>(node: Arc<Node<T, S>>, len: usize) -> Child<T, S> {
    Child {
        len,
        sum: S::of(&node),
        node,
    }
}

/// Applies `f` at the element `path` names below `node` (at depth `level`), then `adjust` to
/// each child summary on the way back up.
fn modify_rec<T: Clone, S: Clone, R>(
    node: &mut Arc<Node<T, S>>,
    path: &Path,
    level: usize,
    f: impl FnOnce(&mut T) -> R,
    adjust: &impl Fn(&mut S, &R),
) -> R {
    match Arc::make_mut(node) {
        Node::Leaf(v) => f(&mut v[path.pos]),
        Node::Branch(kids) => {
            let i = path.idx[level] as usize;
            let r = modify_rec(&mut kids[i].node, path, level + 1, f, adjust);
            adjust(&mut kids[i].sum, &r);
            r
        }
    }
}

/// Applies `f` at the first or last element below `node`, then `adjust` to each child summary
/// on the way back up.
fn modify_end_rec<T: Clone, S: Clone, R>(
    node: &mut Arc<Node<T, S>>,
    front: bool,
    f: impl FnOnce(&mut T) -> R,
    adjust: &impl Fn(&mut S, &R),
) -> R {
    match Arc::make_mut(node) {
        Node::Leaf(v) => {
            let i = if front { 0 } else { v.len() - 1 };
            f(&mut v[i])
        }
        Node::Branch(kids) => {
            let i = if front { 0 } else { kids.len() - 1 };
            let r = modify_end_rec(&mut kids[i].node, front, f, adjust);
            adjust(&mut kids[i].sum, &r);
            r
        }
    }
}

/// Inserts along `path` below `node` (at depth `level`); returns a split-off sibling.
fn insert_rec<T: Clone, S: Summary<T>>(
    node: &mut Arc<Node<T, S>>,
    path: &Path,
    level: usize,
    e: Edges,
    x: T,
) -> Option<Split<T, S>> {
    match Arc::make_mut(node) {
        Node::Leaf(v) => vec_insert(v, path.pos, x, LEAF_MAX, e).map(|(items, before)| Split {
            node: Arc::new(Node::Leaf(items)),
            before,
        }),
        Node::Branch(kids) => {
            let i = path.idx[level] as usize;
            let ce = e.child(i, kids.len());
            let split = insert_rec(&mut kids[i].node, path, level + 1, ce, x);
            kids[i].len += 1;
            let Some(split) = split else {
                kids[i].refresh();
                return None;
            };
            let new_len = split.node.total();
            kids[i].len -= new_len;
            kids[i].refresh();
            let at = if split.before { i } else { i + 1 };
            let new = child_of_arc(split.node, new_len);
            vec_insert(kids, at, new, BRANCH_MAX, e).map(|(items, before)| Split {
                node: Arc::new(Node::Branch(items)),
                before,
            })
        }
    }
}

/// Removes along `path` below `node`, rebalancing underfull children on the way up.
fn remove_rec<T: Clone, S: Summary<T>>(
    node: &mut Arc<Node<T, S>>,
    path: &Path,
    level: usize,
    e: Edges,
) -> T {
    match Arc::make_mut(node) {
        Node::Leaf(v) => v.remove(path.pos),
        Node::Branch(kids) => {
            let i = path.idx[level] as usize;
            let ce = e.child(i, kids.len());
            let x = remove_rec(&mut kids[i].node, path, level + 1, ce);
            kids[i].len -= 1;
            fix_child(kids, i, ce);
            x
        }
    }
}

/// After child `i` (with edges `ce`) shrank: drops it when empty; when it is under half full,
/// merges it with a neighbour if both fit in one node, else (off the spine) evens the two out.
fn fix_child<T: Clone, S: Summary<T>>(kids: &mut Vec<Child<T, S>>, i: usize, ce: Edges) {
    let count = kids[i].node.items();
    if count == 0 {
        kids.remove(i);
        return;
    }
    let (min, max) = kids[i].node.bounds();
    if count >= min || kids.len() < 2 {
        kids[i].refresh();
        return;
    }
    let j = if i + 1 < kids.len() { i + 1 } else { i - 1 };
    let a = i.min(j);
    if count + kids[j].node.items() <= max {
        merge(kids, a);
    } else if !ce.any() {
        balance(kids, a, max);
    } else {
        kids[i].refresh();
    }
}

/// Merges child `a + 1` into child `a`.
fn merge<T: Clone, S: Summary<T>>(kids: &mut Vec<Child<T, S>>, a: usize) {
    let right = kids.remove(a + 1);
    let moved = right.len;
    let right = Arc::unwrap_or_clone(right.node);
    let left = &mut kids[a];
    match (Arc::make_mut(&mut left.node), right) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            grow_for(l, r.len(), LEAF_MAX);
            l.extend(r);
        }
        (Node::Branch(l), Node::Branch(r)) => {
            grow_for(l, r.len(), BRANCH_MAX);
            l.extend(r);
        }
        _ => unreachable!("siblings at different depths"),
    }
    left.len += moved;
    left.sum.refresh(&left.node);
}

/// Evens out children `a` and `a + 1` (one of them is under half full, together they overflow
/// one node).
fn balance<T: Clone, S: Summary<T>>(kids: &mut [Child<T, S>], a: usize, max: usize) {
    let total = kids[a].len + kids[a + 1].len;
    let (l, r) = kids[a..].split_at_mut(1);
    let (l, r) = (&mut l[0], &mut r[0]);
    match (Arc::make_mut(&mut l.node), Arc::make_mut(&mut r.node)) {
        (Node::Leaf(lv), Node::Leaf(rv)) => balance_vecs(lv, rv, max),
        (Node::Branch(lv), Node::Branch(rv)) => balance_vecs(lv, rv, max),
        _ => unreachable!("siblings at different depths"),
    }
    l.len = l.node.total();
    r.len = total - l.len;
    l.sum.refresh(&l.node);
    r.sum.refresh(&r.node);
}

/// Keeps the first `n` (1..total) elements below `node`.
fn truncate_rec<T: Clone, S: Summary<T>>(node: &mut Arc<Node<T, S>>, n: usize) {
    match Arc::make_mut(node) {
        Node::Leaf(v) => v.truncate(n),
        Node::Branch(kids) => {
            let (mut i, mut rem) = (0, n);
            while rem > kids[i].len {
                rem -= kids[i].len;
                i += 1;
            }
            kids.truncate(i + 1);
            if rem < kids[i].len {
                truncate_rec(&mut kids[i].node, rem);
                kids[i].len = rem;
                kids[i].refresh();
            }
        }
    }
}

/// Drops the first `n` (1..total) elements below `node`.
fn drop_front_rec<T: Clone, S: Summary<T>>(node: &mut Arc<Node<T, S>>, n: usize) {
    match Arc::make_mut(node) {
        Node::Leaf(v) => {
            v.drain(..n);
        }
        Node::Branch(kids) => {
            let (mut i, mut rem) = (0, n);
            while rem >= kids[i].len {
                rem -= kids[i].len;
                i += 1;
            }
            kids.drain(..i);
            if rem > 0 {
                drop_front_rec(&mut kids[0].node, rem);
                kids[0].len -= rem;
                kids[0].refresh();
            }
        }
    }
}

/// Checks the subtree at `node`; returns (elements, height).
fn check_rec<T, S: Summary<T>>(node: &Node<T, S>, e: Edges, root: bool) -> (usize, usize) {
    let (min, max) = node.bounds();
    let count = node.items();
    assert!(count <= max, "node with {count} items > {max}");
    if !root {
        let least = if e.any() { 1 } else { min };
        assert!(count >= least, "node with {count} items < {least}");
    }
    match node {
        Node::Leaf(v) => {
            let zst = core::mem::size_of::<T>() == 0;
            assert!(
                zst || v.capacity() <= LEAF_MAX,
                "leaf capacity {}",
                v.capacity()
            );
            (v.len(), 0)
        }
        Node::Branch(kids) => {
            let mut total = 0;
            let mut height = None;
            for (i, c) in kids.iter().enumerate() {
                let (t, h) = check_rec(&c.node, e.child(i, kids.len()), false);
                assert_eq!(t, c.len, "cached child size");
                c.sum.check(&c.node);
                assert!(*height.get_or_insert(h) == h, "leaves at different depths");
                total += t;
            }
            (total, height.unwrap_or(0) + 1)
        }
    }
}

/// One end of an iteration: the unvisited siblings at each level above, and the current chunk.
struct Cursor<'a, T, S> {
    stack: [slice::Iter<'a, Child<T, S>>; DEPTH_MAX],
    depth: usize,
    leaf: slice::Iter<'a, T>,
}

impl<'a, T, S> Cursor<'a, T, S> {
    /// A cursor with nothing to visit.
    fn empty() -> Self {
        Cursor {
            stack: core::array::from_fn(|_| [].iter()),
            depth: 0,
            leaf: [].iter(),
        }
    }

    /// Positions at element `i`, to walk forwards.
    fn seek_front(&mut self, root: &'a Node<T, S>, mut i: usize) {
        let mut node = root;
        loop {
            match node {
                Node::Leaf(v) => {
                    self.leaf = v[i..].iter();
                    return;
                }
                Node::Branch(kids) => {
                    let mut c = 0;
                    while i >= kids[c].len {
                        i -= kids[c].len;
                        c += 1;
                    }
                    self.push(kids[c + 1..].iter());
                    node = &kids[c].node;
                }
            }
        }
    }

    /// Positions at element `i`, to walk backwards.
    fn seek_back(&mut self, root: &'a Node<T, S>, mut i: usize) {
        let mut node = root;
        loop {
            match node {
                Node::Leaf(v) => {
                    self.leaf = v[..=i].iter();
                    return;
                }
                Node::Branch(kids) => {
                    let mut c = 0;
                    while i >= kids[c].len {
                        i -= kids[c].len;
                        c += 1;
                    }
                    self.push(kids[..c].iter());
                    node = &kids[c].node;
                }
            }
        }
    }

    /// Pushes a level's unvisited siblings.
    fn push(&mut self, it: slice::Iter<'a, Child<T, S>>) {
        self.stack[self.depth] = it;
        self.depth += 1;
    }

    /// Moves to the next chunk (forwards or backwards); false at the end.
    fn advance(&mut self, forwards: bool) -> bool {
        while self.depth > 0 {
            let top = &mut self.stack[self.depth - 1];
            let next = if forwards {
                top.next()
            } else {
                top.next_back()
            };
            let Some(child) = next else {
                self.depth -= 1;
                continue;
            };
            let mut node = &*child.node;
            loop {
                match node {
                    Node::Leaf(v) => {
                        self.leaf = v.iter();
                        return true;
                    }
                    Node::Branch(kids) => {
                        let (first, rest) = if forwards {
                            kids.split_first()
                        } else {
                            kids.split_last()
                        }
                        .expect("non-empty branch");
                        self.push(rest.iter());
                        node = &first.node;
                    }
                }
            }
        }
        false
    }
}

/// A double-ended iterator over a range of elements.
pub struct Iter<'a, T, S> {
    front: Cursor<'a, T, S>,
    back: Cursor<'a, T, S>,
    remaining: usize,
}

impl<'a, T, S> Iterator for Iter<'a, T, S> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(x) = self.front.leaf.next() {
                self.remaining -= 1;
                return Some(x);
            }
            if !self.front.advance(true) {
                return None;
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T, S> DoubleEndedIterator for Iter<'_, T, S> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(x) = self.back.leaf.next_back() {
                self.remaining -= 1;
                return Some(x);
            }
            if !self.back.advance(false) {
                return None;
            }
        }
    }
}

impl<T, S> ExactSizeIterator for Iter<'_, T, S> {}

impl<T, S> core::iter::FusedIterator for Iter<'_, T, S> {}

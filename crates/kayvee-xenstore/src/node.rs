//! The persistent trie node: value, permissions and sorted children, shared between versions
//! of the store by `Arc` (path copying on update, OXenstored paper Section 4.2).

use alloc::sync::Arc;
use alloc::vec::Vec;

use kayvee_pds::PMap;

use crate::perms::Perms;

/// Seed of the child maps' hash. Fixed: iteration order never leaks (listings are sorted) and
/// a domain can only crowd its own directories, whose size the node quota bounds.
const CHILD_SEED: u64 = 0x6b61_7976_6565_7873;

/// A node's children: nothing for a leaf (most nodes; no allocation), one child held inline
/// (most inner nodes of a Xenstore tree: `/local`, each domain's chain of directories; copying
/// such a node on the update path allocates no map node and finding its child hashes nothing),
/// a few (up to [`FEW_MAX`]) in one shared list, found by comparing names (the root, a
/// domain's handful of directories: no hashing, one allocation to copy), else a persistent
/// hash map, so that copying a node on the update path costs O(log n) whatever its fan-out
/// (a wide directory such as /local/domain used to cost a copy of its whole child list per
/// write).
#[derive(Clone, Debug, Default)]
pub struct Children(Kids);

/// Most children kept in a list; one more makes a map.
pub const FEW_MAX: usize = 8;

/// The shapes of [`Children`]; a list holds 2..=[`FEW_MAX`] children, a map two or more.
#[derive(Clone, Debug, Default)]
enum Kids {
    #[default]
    None,
    One(Arc<str>, Arc<Node>),
    Few(Arc<Vec<(Arc<str>, Arc<Node>)>>),
    Many(ChildMap),
}

/// The entry called `name` in a short list.
fn find<'a>(few: &'a [(Arc<str>, Arc<Node>)], name: &str) -> Option<&'a (Arc<str>, Arc<Node>)> {
    few.iter().find(|(k, _)| **k == *name)
}

impl Children {
    /// The child called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Node>> {
        match &self.0 {
            Kids::None => None,
            Kids::One(k, v) => (**k == *name).then_some(v),
            Kids::Few(few) => find(few, name).map(|(_, v)| v),
            Kids::Many(m) => m.get(name),
        }
    }

    /// The child called `name`, to change in place (a map's nodes that another version
    /// shares are copied first).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Arc<Node>> {
        match &mut self.0 {
            Kids::None => None,
            Kids::One(k, v) => (**k == *name).then_some(v),
            Kids::Few(few) => {
                // Looked up before the list is copied (if shared): a miss copies nothing.
                let i = few.iter().position(|(k, _)| **k == *name)?;
                Some(&mut Arc::make_mut(few)[i].1)
            }
            Kids::Many(m) => m.get_mut(name),
        }
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        match &self.0 {
            Kids::None => 0,
            Kids::One(..) => 1,
            Kids::Few(few) => few.len(),
            Kids::Many(m) => m.len(),
        }
    }

    /// No children.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Kids::None)
    }

    /// Insert or replace a child; returns true when the name is new.
    pub fn insert(&mut self, name: &str, node: Arc<Node>) -> bool {
        match &mut self.0 {
            Kids::None => {
                self.0 = Kids::One(Arc::from(name), node);
                true
            }
            Kids::One(k, v) if **k == *name => {
                *v = node;
                false
            }
            Kids::One(k, v) => {
                let few = alloc::vec![(k.clone(), v.clone()), (Arc::from(name), node)];
                self.0 = Kids::Few(Arc::new(few));
                true
            }
            Kids::Few(few) => {
                if let Some(i) = few.iter().position(|(k, _)| **k == *name) {
                    Arc::make_mut(few)[i].1 = node;
                    return false;
                }
                if few.len() < FEW_MAX {
                    Arc::make_mut(few).push((Arc::from(name), node));
                    return true;
                }
                let mut map = PMap::with_seed(CHILD_SEED);
                for (k, v) in few.iter() {
                    map.insert(k.clone(), v.clone());
                }
                map.insert(Arc::from(name), node);
                self.0 = Kids::Many(map);
                true
            }
            Kids::Many(map) => match map.get_mut(name) {
                Some(slot) => {
                    *slot = node;
                    false
                }
                None => {
                    map.insert(Arc::from(name), node);
                    true
                }
            },
        }
    }

    /// Remove a child, returning it; a map left with one child gives way to the inline form.
    pub fn remove(&mut self, name: &str) -> Option<Arc<Node>> {
        match &mut self.0 {
            Kids::None => None,
            Kids::One(k, _) if **k == *name => match core::mem::take(&mut self.0) {
                Kids::One(_, v) => Some(v),
                _ => unreachable!("matched One above"),
            },
            Kids::One(..) => None,
            Kids::Few(few) => {
                let i = few.iter().position(|(k, _)| **k == *name)?;
                let (_, node) = Arc::make_mut(few).swap_remove(i);
                if few.len() == 1 {
                    let (k, v) = few[0].clone();
                    self.0 = Kids::One(k, v);
                }
                Some(node)
            }
            Kids::Many(map) => {
                let (_, node) = map.remove(name)?;
                if map.len() == 1 {
                    let (k, v) = map.iter().next().expect("one child left");
                    self.0 = Kids::One(k.clone(), v.clone());
                }
                Some(node)
            }
        }
    }

    /// The children in hash order (cheap; for walks whose order does not matter).
    pub fn iter(&self) -> ChildIter<'_> {
        match &self.0 {
            Kids::None => ChildIter::One(None),
            Kids::One(k, v) => ChildIter::One(Some((k, v))),
            Kids::Few(few) => ChildIter::Few(few.iter()),
            Kids::Many(m) => ChildIter::Many(m.iter()),
        }
    }

    /// The children sorted by name (listings: oxenstored lists them sorted).
    pub fn sorted(&self) -> Vec<(&Arc<str>, &Arc<Node>)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Panic unless the shape is canonical (a map has two children or more) and sound.
    fn check_invariants(&self) {
        match &self.0 {
            Kids::Few(few) => {
                assert!((2..=FEW_MAX).contains(&few.len()), "list of {}", few.len());
                for (i, (k, _)) in few.iter().enumerate() {
                    assert!(find(&few[..i], k).is_none(), "{k} twice");
                }
            }
            Kids::Many(m) => {
                assert!(m.len() >= 2, "child map of {} kept", m.len());
                m.check_invariants();
            }
            _ => {}
        }
    }
}

/// The map of a node with children.
type ChildMap = PMap<Arc<str>, Arc<Node>>;

/// [`Children`] in hash order, without allocating.
// A short-lived iterator on the stack: the map iterator's size is no cost worth a box.
#[allow(clippy::large_enum_variant)]
pub enum ChildIter<'a> {
    /// No child left to give, or the one inline child.
    One(Option<(&'a Arc<str>, &'a Arc<Node>)>),
    /// A short list's children.
    Few(core::slice::Iter<'a, (Arc<str>, Arc<Node>)>),
    /// A map's children.
    Many(kayvee_pds::map::Iter<'a, Arc<str>, Arc<Node>>),
}

impl<'a> Iterator for ChildIter<'a> {
    type Item = (&'a Arc<str>, &'a Arc<Node>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ChildIter::One(one) => one.take(),
            ChildIter::Few(it) => it.next().map(|(k, v)| (k, v)),
            ChildIter::Many(it) => it.next(),
        }
    }
}

impl<'a> IntoIterator for &'a Children {
    type Item = (&'a Arc<str>, &'a Arc<Node>);
    type IntoIter = ChildIter<'a>;

    /// The children in hash order, as [`Children::iter`].
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// One node of the trie. Updating a node copies it and the path to the root; every other
/// node is shared, so `Arc::ptr_eq` on a subtree says "unchanged since that version".
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's value (may contain NULs).
    pub value: Arc<[u8]>,
    /// Its permissions.
    pub perms: Arc<Perms>,
    /// Its children by name (a persistent map: cloning a node is O(1)).
    pub children: Children,
    /// Stamp of the last change to this node's own content (value, perms or child names);
    /// a descendant's change does not touch it. Per-node conflict checks and the DIRECTORY_PART
    /// generation count read it.
    pub gen: u64,
}

impl Node {
    /// A node with a value and permissions, no children.
    pub fn leaf(value: &[u8], perms: Arc<Perms>, gen: u64) -> Self {
        Node {
            value: Arc::from(value),
            perms,
            children: Children::default(),
            gen,
        }
    }

    /// The child called `name`.
    pub fn child(&self, name: &str) -> Option<&Arc<Node>> {
        self.children.get(name)
    }

    /// Insert or replace a child; returns true when the name is new.
    pub fn set_child(&mut self, name: &str, node: Arc<Node>) -> bool {
        self.children.insert(name, node)
    }

    /// Remove a child, returning it.
    pub fn remove_child(&mut self, name: &str) -> Option<Arc<Node>> {
        self.children.remove(name)
    }

    /// Visit this node and all its descendants.
    pub fn walk(&self, f: &mut impl FnMut(&Node)) {
        f(self);
        for (_, c) in &self.children {
            c.walk(f);
        }
    }

    /// Number of nodes in this subtree.
    pub fn count(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |_| n += 1);
        n
    }

    /// Panic unless the child maps are sound with valid names, recursively.
    pub fn check_invariants(&self) {
        self.children.check_invariants();
        for (name, c) in &self.children {
            assert!(!name.is_empty() && !name.contains('/'), "bad child name");
            c.check_invariants();
        }
    }
}

/// The node at `comps` below `root`.
pub fn lookup<'a>(root: &'a Arc<Node>, comps: &[&str]) -> Option<&'a Arc<Node>> {
    let mut node = root;
    for c in comps {
        node = node.child(c)?;
    }
    Some(node)
}

/// Make the subtree at `comps` below `*root` be `sub` (`None` removes it). Every node on the
/// path must exist except the last; nodes whose child list changes get stamp `gen`.
///
/// A node on the path that another version shares is copied first (path copying); one that
/// only this version holds (reference count 1) is changed in place: no snapshot can see it,
/// so every other version is untouched and pointer equality still means "unchanged". A
/// version changed twice before anyone takes a snapshot of it copies its path once.
pub fn replace_at(root: &mut Arc<Node>, comps: &[&str], sub: Option<Arc<Node>>, gen: u64) {
    replace_in(root, comps.iter().copied().peekable(), sub, gen)
}

/// [`replace_at`] for an absolute path, walked without collecting its components (a
/// commit and a WRITE of an existing node go through here: no vector per call).
pub fn replace_path(root: &mut Arc<Node>, path: &str, sub: Option<Arc<Node>>, gen: u64) {
    replace_in(root, crate::path::segments(path).peekable(), sub, gen)
}

/// [`replace_at`] below `root` for the components left in `comps` (a slice's or a path's).
fn replace_in<'p, I: Iterator<Item = &'p str>>(
    root: &mut Arc<Node>,
    mut comps: core::iter::Peekable<I>,
    sub: Option<Arc<Node>>,
    gen: u64,
) {
    let Some(mut name) = comps.next() else {
        *root = sub.expect("the root cannot be removed");
        return;
    };
    let mut node = Arc::make_mut(root);
    while comps.peek().is_some() {
        let child = node
            .children
            .get_mut(name)
            .expect("replace_at: missing intermediate node");
        node = Arc::make_mut(child);
        name = comps.next().expect("peeked");
    }
    let changed = match sub {
        Some(c) => node.set_child(name, c),
        None => node.remove_child(name).is_some(),
    };
    if changed {
        node.gen = gen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perms() -> Arc<Perms> {
        Arc::new(Perms::owned_by(0))
    }

    #[test]
    fn path_copying_shares_siblings() {
        let mut root = Arc::new(Node::leaf(b"", perms(), 0));
        replace_at(
            &mut root,
            &["a"],
            Some(Arc::new(Node::leaf(b"1", perms(), 1))),
            1,
        );
        replace_at(
            &mut root,
            &["b"],
            Some(Arc::new(Node::leaf(b"2", perms(), 2))),
            2,
        );
        let before = root.clone();
        replace_at(
            &mut root,
            &["b"],
            Some(Arc::new(Node::leaf(b"3", perms(), 3))),
            3,
        );
        assert!(Arc::ptr_eq(
            lookup(&root, &["a"]).unwrap(),
            lookup(&before, &["a"]).unwrap()
        ));
        assert!(!Arc::ptr_eq(&root, &before));
        assert_eq!(&*lookup(&root, &["b"]).unwrap().value, b"3");
        assert_eq!(&*lookup(&before, &["b"]).unwrap().value, b"2");
        // Replacing an existing child keeps the parent's own stamp; adding one changes it.
        assert_eq!(root.gen, 2);
        replace_at(&mut root, &["b"], None, 4);
        assert_eq!(root.gen, 4);
        assert!(lookup(&root, &["b"]).is_none());
        // A version no one else holds is changed in place; the one `before` holds is not.
        let at = Arc::as_ptr(&root);
        replace_at(
            &mut root,
            &["a"],
            Some(Arc::new(Node::leaf(b"4", perms(), 5))),
            5,
        );
        assert_eq!(Arc::as_ptr(&root), at);
        assert_eq!(&*lookup(&before, &["a"]).unwrap().value, b"1");
        assert_eq!(&*lookup(&before, &["b"]).unwrap().value, b"2");
        root.check_invariants();
        assert_eq!(root.count(), 2);
    }

    #[test]
    fn children_go_from_one_to_a_list_to_a_map_and_back() {
        let mut n = Node::leaf(b"", perms(), 0);
        let names: Vec<alloc::string::String> =
            (0..3 * FEW_MAX).map(|i| alloc::format!("c{i}")).collect();
        let mut snapshots = Vec::new();
        for (i, name) in names.iter().enumerate() {
            assert!(n.set_child(name, Arc::new(Node::leaf(b"x", perms(), 1))));
            assert_eq!(n.children.len(), i + 1);
            n.check_invariants();
            snapshots.push(n.clone());
        }
        for (i, name) in names.iter().enumerate() {
            assert!(!n.set_child(name, Arc::new(Node::leaf(b"y", perms(), 2))));
            assert_eq!(&*n.child(name).unwrap().value, b"y");
            // Every snapshot kept its own values.
            assert_eq!(&*snapshots[i].child(name).unwrap().value, b"x");
        }
        for (i, name) in names.iter().enumerate().rev() {
            assert!(n.remove_child(name).is_some());
            assert!(n.child(name).is_none());
            assert_eq!(n.children.len(), i);
            n.check_invariants();
            assert_eq!(snapshots[i].children.len(), i + 1);
        }
        assert!(n.children.is_empty());
        for s in &snapshots {
            s.check_invariants();
        }
    }

    #[test]
    fn children_list_sorted_share_on_clone_and_free_when_empty() {
        let mut n = Node::leaf(b"", perms(), 0);
        for name in ["b", "c10", "a", "c2"] {
            assert!(n.set_child(name, Arc::new(Node::leaf(name.as_bytes(), perms(), 1))));
        }
        assert!(
            !n.set_child("a", Arc::new(Node::leaf(b"A", perms(), 2))),
            "replaced"
        );
        let names: Vec<&str> = n.children.sorted().iter().map(|(k, _)| &***k).collect();
        assert_eq!(names, ["a", "b", "c10", "c2"]);
        assert_eq!((&n.children).into_iter().count(), 4);
        // A clone shares every child; changing one side leaves the other alone.
        let before = n.clone();
        n.set_child("b", Arc::new(Node::leaf(b"B", perms(), 3)));
        assert!(Arc::ptr_eq(
            before.child("a").unwrap(),
            n.child("a").unwrap()
        ));
        assert_eq!(&*before.child("b").unwrap().value, b"b");
        assert_eq!(&*n.child("b").unwrap().value, b"B");
        for name in ["a", "b", "c10", "c2"] {
            assert!(n.remove_child(name).is_some());
        }
        assert!(n.remove_child("a").is_none());
        assert!(n.children.is_empty(), "map freed");
        n.check_invariants();
        before.check_invariants();
    }
}

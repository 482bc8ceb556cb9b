//! The persistent trie node: value, permissions and sorted children, shared between versions
//! of the store by `Arc` (path copying on update, OXenstored paper Section 4.2).

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::perms::Perms;

/// One node of the trie. Updating a node copies it and the path to the root; every other
/// node is shared, so `Arc::ptr_eq` on a subtree says "unchanged since that version".
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's value (may contain NULs).
    pub value: Arc<[u8]>,
    /// Its permissions.
    pub perms: Arc<Perms>,
    /// Children sorted by name (oxenstored lists them sorted).
    pub children: Vec<(Arc<str>, Arc<Node>)>,
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
            children: Vec::new(),
            gen,
        }
    }

    /// Position of `name` among the children (Ok) or where it would go (Err).
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.children.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// The child called `name`.
    pub fn child(&self, name: &str) -> Option<&Arc<Node>> {
        self.position(name).ok().map(|i| &self.children[i].1)
    }

    /// Insert or replace a child; returns true when the name is new.
    pub fn set_child(&mut self, name: &str, node: Arc<Node>) -> bool {
        match self.position(name) {
            Ok(i) => {
                self.children[i].1 = node;
                false
            }
            Err(i) => {
                self.children.insert(i, (Arc::from(name), node));
                true
            }
        }
    }

    /// Remove a child, returning it.
    pub fn remove_child(&mut self, name: &str) -> Option<Arc<Node>> {
        self.position(name).ok().map(|i| self.children.remove(i).1)
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

    /// Panic unless children are strictly sorted with valid names, recursively.
    pub fn check_invariants(&self) {
        for w in self.children.windows(2) {
            assert!(w[0].0 < w[1].0, "children not strictly sorted");
        }
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

/// A new root where the subtree at `comps` is `sub` (`None` removes it). Every node on the
/// path must exist except the last; nodes whose child list changes get stamp `gen`.
pub fn replace_at(root: &Arc<Node>, comps: &[&str], sub: Option<Arc<Node>>, gen: u64) -> Arc<Node> {
    let Some((first, rest)) = comps.split_first() else {
        return sub.expect("the root cannot be removed");
    };
    let mut node = Node::clone(root);
    let new_child = match rest.is_empty() {
        true => sub,
        false => {
            let child = root
                .child(first)
                .expect("replace_at: missing intermediate node");
            Some(replace_at(child, rest, sub, gen))
        }
    };
    match new_child {
        Some(c) => {
            if node.set_child(first, c) {
                node.gen = gen;
            }
        }
        None => {
            if node.remove_child(first).is_some() {
                node.gen = gen;
            }
        }
    }
    Arc::new(node)
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
        root = replace_at(
            &root,
            &["a"],
            Some(Arc::new(Node::leaf(b"1", perms(), 1))),
            1,
        );
        root = replace_at(
            &root,
            &["b"],
            Some(Arc::new(Node::leaf(b"2", perms(), 2))),
            2,
        );
        let before = root.clone();
        root = replace_at(
            &root,
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
        root = replace_at(&root, &["b"], None, 4);
        assert_eq!(root.gen, 4);
        assert!(lookup(&root, &["b"]).is_none());
        root.check_invariants();
        assert_eq!(root.count(), 2);
    }
}

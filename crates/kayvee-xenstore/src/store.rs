//! One version of the Xenstore database (a trie root plus per-owner node counts) and the
//! node operations on it: read, write, mkdir, rm, set_perms with permission and quota checks.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use kayvee_pds::PMap;

use crate::error::XsError;
use crate::node::{replace_at, replace_path, Node};
use crate::path::{components, parent};
use crate::perms::{Access, Perms};

/// Who performs an operation: a domain, whether it is privileged (dom0), and the domain it
/// may act for (SET_TARGET).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Actor {
    /// The domain of the connection.
    pub domid: u32,
    /// Privileged (dom0): no permission checks, no quotas.
    pub privileged: bool,
    /// The domain this one is a device model for, if any.
    pub target: Option<u32>,
}

impl Actor {
    /// The privileged dom0 (every Unix-socket client).
    pub const DOM0: Actor = Actor {
        domid: 0,
        privileged: true,
        target: None,
    };

    /// The access this actor has to a node with `perms`.
    pub fn access(&self, perms: &Perms) -> Access {
        match self.privileged {
            true => Access::Both,
            false => perms.access_for(self.domid, self.target),
        }
    }
}

/// Per-domain limits (cxenstored `quota` defaults); applied to unprivileged domains only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Nodes owned per domain.
    pub nodes: u32,
    /// Watches per domain.
    pub watches: u32,
    /// Open transactions per domain.
    pub transactions: u32,
    /// Outstanding requests per domain: replies not yet delivered. At the limit the daemon
    /// stops reading the domain's requests (no error), as cxenstored 4.17.
    pub outstanding: u32,
    /// Distinct nodes a transaction may touch; the request crossing it gets ENOSPC and the
    /// transaction's commit ENOMEM (cxenstored 4.17). 0 = unlimited.
    pub transaction_nodes: u32,
    /// Accounted bytes per domain (cxenstored's hard `memory` quota): at or over it the daemon
    /// stops reading the domain's requests (no error). 0 = unlimited.
    pub memory: u32,
    /// Soft memory quota (`quota-soft`): crossing it is only reported. 0 = never reported.
    pub memory_soft: u32,
    /// Largest node value, bytes.
    pub node_size: u32,
    /// Longest path as sent, bytes.
    pub path_max: u32,
    /// Permission entries per node.
    pub permissions: u32,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            nodes: 1000,
            watches: 128,
            transactions: 10,
            outstanding: 20,
            transaction_nodes: 1024,
            memory: 2621440,
            memory_soft: 2097152,
            node_size: 2048,
            path_max: 2048,
            permissions: 5,
        }
    }
}

/// What a successful modification did, for watch events and transaction bookkeeping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The node the request named (the event path).
    pub path: String,
    /// A recursive removal (watches below `path` fire too).
    pub recursive: bool,
    /// The node's permissions, to filter events by read access.
    pub perms: Arc<Perms>,
    /// Length of the top of the changed region, a prefix of `path` ([`Change::top`]).
    pub top_len: usize,
}

impl Change {
    /// The top of the changed region: the node itself, or the parent of the highest node
    /// created or removed (its child list changed); always `path` or an ancestor of it, so
    /// kept as a length. Feeds the transaction's write prefix.
    pub fn top(&self) -> &str {
        &self.path[..self.top_len]
    }
}

/// One version of the database.
#[derive(Clone, Debug)]
pub struct Store {
    /// The trie.
    pub root: Arc<Node>,
    /// Nodes owned per domain (quota accounting). Persistent, as the two maps below: a
    /// snapshot (a transaction's start and private stores) shares them instead of copying one
    /// entry per domain.
    pub owners: PMap<u32, u32>,
    /// Bytes charged per domain ([`Store::memory_of`]'s formula), kept in step with every
    /// change so flow control before each guest request costs no walk.
    pub memory: PMap<u32, u64>,
    /// In a transaction's private store, the domains whose counts changed since it was
    /// taken (what a commit carries over to the current store); None in the daemon's store.
    pub touched: Option<Vec<u32>>,
}

/// Hash seed of the per-domain count maps.
const COUNT_SEED: u64 = 0x0078_6f77_6e65_7273;

/// Bytes cxenstored 4.17 charges for `n` at a path `path_len` bytes long: 24, plus 8 per
/// permission entry, the path, the value and the child list (each name and its NUL).
fn node_bytes(n: &Node, path_len: usize) -> u64 {
    let kids: usize = n.children.iter().map(|(k, _)| k.len() + 1).sum();
    (24 + 8 * n.perms.entries().len() + path_len + n.value.len() + kids) as u64
}

/// Call `f(owner, bytes)` for every node of the subtree at `n` (its path `path_len` long).
fn subtree_bytes(n: &Node, path_len: usize, f: &mut impl FnMut(u32, u64)) {
    f(n.perms.owner(), node_bytes(n, path_len));
    for (name, c) in &n.children {
        // "/" + name at the root, else path + "/" + name.
        let len = if path_len == 1 {
            1 + name.len()
        } else {
            path_len + 1 + name.len()
        };
        subtree_bytes(c, len, f);
    }
}

impl Store {
    /// An empty store: a root node owned by dom0 with perms `n0`.
    pub fn new() -> Self {
        let root = Node::leaf(b"", Arc::new(Perms::owned_by(0)), 0);
        let bytes = node_bytes(&root, 1);
        let mut owners = PMap::with_seed(COUNT_SEED);
        owners.insert(0, 1);
        let mut memory = PMap::with_seed(COUNT_SEED);
        memory.insert(0, bytes);
        Store {
            root: Arc::new(root),
            owners,
            memory,
            touched: None,
        }
    }

    /// This store as a transaction's private copy: from now on it lists the domains whose
    /// counts change.
    pub fn track_changes(&mut self) {
        self.touched = Some(Vec::new());
    }

    /// Note that `domid`'s counts changed (in a tracked store).
    fn touch(&mut self, domid: u32) {
        if let Some(t) = &mut self.touched {
            if !t.contains(&domid) {
                t.push(domid);
            }
        }
    }

    /// Nodes owned by `domid`.
    pub fn nodes_of(&self, domid: u32) -> u32 {
        self.owners.get(&domid).copied().unwrap_or(0)
    }

    /// Count `plus` more and `minus` fewer nodes for `domid`.
    fn own(&mut self, domid: u32, plus: u32, minus: u32) {
        let old = self.nodes_of(domid);
        let n = (old + plus).saturating_sub(minus);
        // An unchanged count is not rewritten: an insert copies the map's path when shared.
        if n != old {
            self.owners.insert(domid, n);
            self.touch(domid);
        }
    }

    /// The node at an absolute path.
    pub fn get(&self, path: &str) -> Option<&Arc<Node>> {
        // Component by component, without collecting them (commits look paths up often).
        let mut node = &self.root;
        for c in crate::path::segments(path) {
            node = node.child(c)?;
        }
        Some(node)
    }

    /// The node at `path` if `actor` may read it: ENOENT when missing, EACCES when denied.
    pub fn read(&self, actor: &Actor, path: &str) -> Result<&Arc<Node>, XsError> {
        let node = self.get(path).ok_or(XsError::Enoent)?;
        match actor.access(&node.perms).can_read() {
            true => Ok(node),
            false => Err(XsError::Eacces),
        }
    }

    /// WRITE: set the value, creating the node and missing ancestors (empty values,
    /// inherited permissions).
    pub fn write(
        &mut self,
        actor: &Actor,
        quota: &Quota,
        path: &str,
        value: &[u8],
        gen: u64,
    ) -> Result<Change, XsError> {
        match self.write_existing(actor, quota, path, value, gen)? {
            Some(perms) => Ok(self.change(path, false, perms, path)),
            None => self.create(actor, quota, &components(path), value, gen),
        }
    }

    /// [`Store::write`] of a node that exists: its permissions (for the caller's [`Change`]),
    /// or None, having done nothing, when the node is missing.
    pub fn write_existing(
        &mut self,
        actor: &Actor,
        quota: &Quota,
        path: &str,
        value: &[u8],
        gen: u64,
    ) -> Result<Option<Arc<Perms>>, XsError> {
        if !actor.privileged && value.len() > quota.node_size as usize {
            return Err(XsError::Enospc);
        }
        let Some(node) = self.get(path) else {
            return Ok(None);
        };
        self.check_write(actor, node)?;
        let mut new = Node::clone(node);
        let (owner, old_len) = (new.perms.owner(), new.value.len() as u64);
        new.value = Arc::from(value);
        new.gen = gen;
        let perms = new.perms.clone();
        self.charge(owner, value.len() as u64, old_len);
        replace_path(&mut self.root, path, Some(Arc::new(new)), gen);
        Ok(Some(perms))
    }

    /// Create the missing tail of `comps`, the last node holding `value`.
    fn create(
        &mut self,
        actor: &Actor,
        quota: &Quota,
        comps: &[&str],
        value: &[u8],
        gen: u64,
    ) -> Result<Change, XsError> {
        let (depth, base) = self.deepest(comps);
        self.check_write(actor, base)?;
        let new_count = (comps.len() - depth) as u32;
        let perms = match actor.privileged {
            true => base.perms.clone(),
            false => Arc::new(base.perms.with_owner(actor.domid)),
        };
        let owner = perms.owner();
        self.check_nodes_quota(actor, quota, new_count)?;
        let mut chain = Node::leaf(value, perms.clone(), gen);
        for name in comps[depth + 1..].iter().rev() {
            let mut up = Node::leaf(b"", perms.clone(), gen);
            up.set_child(name, Arc::new(chain));
            chain = up;
        }
        let base_owner = base.perms.owner();
        replace_at(&mut self.root, &comps[..=depth], Some(Arc::new(chain)), gen);
        self.own(owner, new_count, 0);
        self.charge(base_owner, comps[depth].len() as u64 + 1, 0);
        let mut path_len = join(&comps[..depth]).len();
        for (i, name) in comps.iter().enumerate().skip(depth) {
            path_len = if path_len == 1 { 1 } else { path_len + 1 } + name.len();
            let (val, kids) = match comps.get(i + 1) {
                Some(next) => (0, next.len() + 1),
                None => (value.len(), 0),
            };
            let bytes = 24 + 8 * perms.entries().len() + path_len + val + kids;
            self.charge(owner, bytes as u64, 0);
        }
        let top = join(&comps[..depth]);
        Ok(self.change(&join(comps), false, perms, &top))
    }

    /// The depth of the deepest existing node on `comps` and that node.
    fn deepest(&self, comps: &[&str]) -> (usize, &Arc<Node>) {
        let mut node = &self.root;
        for (i, c) in comps.iter().enumerate() {
            match node.child(c) {
                Some(n) => node = n,
                None => return (i, node),
            }
        }
        (comps.len(), node)
    }

    /// MKDIR: create the node with an empty value; an existing node is left alone (`None`).
    pub fn mkdir(
        &mut self,
        actor: &Actor,
        quota: &Quota,
        path: &str,
        gen: u64,
    ) -> Result<Option<Change>, XsError> {
        match self.get(path) {
            Some(node) => self.check_write(actor, node).map(|_| None),
            None => self
                .create(actor, quota, &components(path), b"", gen)
                .map(Some),
        }
    }

    /// RM: remove the node and its subtree. A missing node is OK (`None`) when its parent
    /// exists, ENOENT otherwise; the root cannot be removed (EINVAL, as cxenstored).
    pub fn rm(&mut self, actor: &Actor, path: &str, gen: u64) -> Result<Option<Change>, XsError> {
        if path == "/" {
            return Err(XsError::Einval);
        }
        let Some(node) = self.get(path).cloned() else {
            return match self.get(parent(path)) {
                Some(_) => Ok(None),
                None => Err(XsError::Enoent),
            };
        };
        self.check_write(actor, &node)?;
        let mut gone = Vec::new();
        node.walk(&mut |n| gone.push(n.perms.owner()));
        for d in gone {
            self.own(d, 0, 1);
        }
        let mut freed = Vec::new();
        subtree_bytes(&node, path.len(), &mut |d, b| freed.push((d, b)));
        for (d, b) in freed {
            self.charge(d, 0, b);
        }
        let name_len = path.len() - path.rfind('/').unwrap_or(0);
        if let Some(p) = self.get(parent(path)) {
            self.charge(p.perms.owner(), 0, name_len as u64);
        }
        replace_path(&mut self.root, path, None, gen);
        Ok(Some(self.change(
            path,
            true,
            node.perms.clone(),
            parent(path),
        )))
    }

    /// SET_PERMS: only the owner (or dom0) may change permissions; only dom0 the owner.
    pub fn set_perms(
        &mut self,
        actor: &Actor,
        quota: &Quota,
        path: &str,
        perms: Perms,
        gen: u64,
    ) -> Result<Change, XsError> {
        let node = self.get(path).ok_or(XsError::Enoent)?;
        if !actor.privileged {
            let owner = node.perms.owner();
            if owner != actor.domid && Some(owner) != actor.target {
                return Err(XsError::Eacces);
            }
            if perms.owner() != owner {
                return Err(XsError::Eperm);
            }
            if perms.entries().len() > quota.permissions as usize {
                return Err(XsError::Enospc);
            }
        }
        let (old_owner, new_owner) = (node.perms.owner(), perms.owner());
        let old_bytes = node_bytes(node, path.len());
        let mut new = Node::clone(node);
        new.perms = Arc::new(perms);
        new.gen = gen;
        let new_bytes = node_bytes(&new, path.len());
        self.charge(old_owner, 0, old_bytes);
        self.charge(new_owner, new_bytes, 0);
        let change = self.change(path, false, new.perms.clone(), path);
        replace_path(&mut self.root, path, Some(Arc::new(new)), gen);
        if old_owner != new_owner {
            self.own(old_owner, 0, 1);
            self.own(new_owner, 1, 0);
        }
        Ok(change)
    }

    /// EACCES unless `actor` may write `node`.
    fn check_write(&self, actor: &Actor, node: &Node) -> Result<(), XsError> {
        match actor.access(&node.perms).can_write() {
            true => Ok(()),
            false => Err(XsError::Eacces),
        }
    }

    /// ENOSPC when an unprivileged actor would own more than its node quota.
    fn check_nodes_quota(&self, actor: &Actor, quota: &Quota, extra: u32) -> Result<(), XsError> {
        let owned = self.nodes_of(actor.domid);
        match !actor.privileged && owned + extra > quota.nodes {
            true => Err(XsError::Enospc),
            false => Ok(()),
        }
    }

    /// Bytes of store memory charged to `domid`, by cxenstored 4.17's formula (measured with
    /// `xenstore-control quota 0`): per owned node 24, plus 8 per permission entry, path length,
    /// value length and the child list (each name and its NUL). Kept per domain as nodes
    /// change (`check_invariants` compares it with a walk of the trie), because flow control
    /// asks before every request of an unprivileged domain.
    pub fn memory_of(&self, domid: u32) -> u64 {
        self.memory.get(&domid).copied().unwrap_or(0)
    }

    /// Charge `plus` bytes to `domid` and release `minus`.
    fn charge(&mut self, domid: u32, plus: u64, minus: u64) {
        let old = self.memory_of(domid);
        let m = (old + plus).saturating_sub(minus);
        if m != old {
            self.memory.insert(domid, m);
            self.touch(domid);
        }
    }

    /// Build a [`Change`] record.
    fn change(&self, path: &str, recursive: bool, perms: Arc<Perms>, top: &str) -> Change {
        debug_assert!(path.starts_with(top), "{top} is not a prefix of {path}");
        Change {
            path: String::from(path),
            recursive,
            perms,
            top_len: top.len(),
        }
    }

    /// Panic unless the trie is well formed and the owner counts match it.
    pub fn check_invariants(&self) {
        self.root.check_invariants();
        let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
        self.root
            .walk(&mut |n| *counts.entry(n.perms.owner()).or_default() += 1);
        let nonzero: BTreeMap<u32, u32> = self
            .owners
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        assert_eq!(counts, nonzero, "owner counts out of step with the trie");
        let mut bytes: BTreeMap<u32, u64> = BTreeMap::new();
        subtree_bytes(&self.root, 1, &mut |d, b| *bytes.entry(d).or_default() += b);
        let nonzero: BTreeMap<u32, u64> = self
            .memory
            .iter()
            .filter(|(_, b)| **b > 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        assert_eq!(bytes, nonzero, "memory charges out of step with the trie");
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

/// `"/a/b"` from `["a", "b"]`; `"/"` from nothing.
pub fn join(comps: &[&str]) -> String {
    if comps.is_empty() {
        return String::from("/");
    }
    let mut s = String::new();
    for c in comps {
        s.push('/');
        s.push_str(c);
    }
    s
}

/// The names of a node's children.
pub fn child_names(node: &Node) -> Vec<Vec<u8>> {
    node.children
        .sorted()
        .into_iter()
        .map(|(n, _)| n.as_bytes().to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_creates_parents_and_inherits() {
        let mut s = Store::new();
        let q = Quota::default();
        let c = s.write(&Actor::DOM0, &q, "/a/b/c", b"v", 1).unwrap();
        assert_eq!(c.top(), "/");
        assert_eq!(&*s.get("/a/b/c").unwrap().value, b"v");
        assert_eq!(&*s.get("/a").unwrap().value, b"");
        s.set_perms(
            &Actor::DOM0,
            &q,
            "/a",
            Perms::parse(&[b"n0", b"r0"]).unwrap(),
            2,
        )
        .unwrap();
        s.write(&Actor::DOM0, &q, "/a/x", b"", 3).unwrap();
        assert_eq!(s.get("/a/x").unwrap().perms.to_strings(), ["n0", "r0"]);
        s.check_invariants();
        assert_eq!(s.rm(&Actor::DOM0, "/a/b", 4).unwrap().unwrap().top(), "/a");
        assert_eq!(s.rm(&Actor::DOM0, "/a/b", 5), Ok(None));
        assert_eq!(s.rm(&Actor::DOM0, "/q/b", 5), Err(XsError::Enoent));
        assert_eq!(s.rm(&Actor::DOM0, "/", 5), Err(XsError::Einval));
        s.check_invariants();
    }

    #[test]
    fn memory_charges_follow_every_change() {
        let mut s = Store::new();
        let q = Quota::default();
        let guest = Actor {
            domid: 5,
            privileged: false,
            target: None,
        };
        let perms = |o: &[u8]| Perms::parse(&[o]).unwrap();
        s.write(&Actor::DOM0, &q, "/local/domain/5", b"", 1)
            .unwrap();
        s.set_perms(&Actor::DOM0, &q, "/local/domain/5", perms(b"n5"), 2)
            .unwrap();
        s.check_invariants();
        s.write(&guest, &q, "/local/domain/5/a/b/c", b"value", 3)
            .unwrap();
        s.write(&guest, &q, "/local/domain/5/a/b/c", b"v", 4)
            .unwrap();
        s.write(&guest, &q, "/local/domain/5/a/d", b"xyz", 5)
            .unwrap();
        s.check_invariants();
        // The guest's node in a dom0 directory charges dom0 for the name in its child list.
        s.write(&Actor::DOM0, &q, "/tool", b"", 6).unwrap();
        s.set_perms(&Actor::DOM0, &q, "/tool", perms(b"b0"), 7)
            .unwrap();
        s.write(&guest, &q, "/tool/g", b"1", 8).unwrap();
        s.check_invariants();
        let full = Perms::parse(&[b"n5", b"r0", b"w3"]).unwrap();
        s.set_perms(&guest, &q, "/local/domain/5/a", full, 9)
            .unwrap();
        s.set_perms(&Actor::DOM0, &q, "/local/domain/5/a/d", perms(b"n7"), 10)
            .unwrap();
        s.check_invariants();
        s.rm(&guest, "/local/domain/5/a/b", 11).unwrap();
        s.rm(&Actor::DOM0, "/tool", 12).unwrap();
        s.check_invariants();
        s.rm(&Actor::DOM0, "/local/domain/5", 13).unwrap();
        s.check_invariants();
        assert_eq!(s.memory_of(5), 0);
        assert_eq!(s.memory_of(7), 0);
    }

    #[test]
    fn guests_need_permission_and_quota() {
        let mut s = Store::new();
        let q = Quota {
            nodes: 2,
            ..Quota::default()
        };
        let guest = Actor {
            domid: 5,
            privileged: false,
            target: None,
        };
        s.write(&Actor::DOM0, &q, "/home", b"", 1).unwrap();
        assert_eq!(s.write(&guest, &q, "/home/x", b"", 2), Err(XsError::Eacces));
        s.set_perms(
            &Actor::DOM0,
            &q,
            "/home",
            Perms::parse(&[b"n5"]).unwrap(),
            3,
        )
        .unwrap();
        s.write(&guest, &q, "/home/x", b"", 4).unwrap();
        assert_eq!(
            s.write(&guest, &q, "/home/y/z", b"", 5),
            Err(XsError::Enospc)
        );
        let big = [0u8; 2049];
        assert_eq!(
            s.write(&guest, &q, "/home/x", &big, 6),
            Err(XsError::Enospc)
        );
        let p = Perms::parse(&[b"n0"]).unwrap();
        assert_eq!(
            s.set_perms(&guest, &q, "/home/x", p, 7),
            Err(XsError::Eperm)
        );
        assert_eq!(s.read(&guest, "/").err(), Some(XsError::Eacces));
        s.check_invariants();
    }

    #[test]
    fn memory_matches_cxenstored_accounting() {
        // Figures read from cxenstored 4.17 (`xenstore-control quota 0`) after the same steps.
        let mut s = Store::new();
        let q = Quota::default();
        let mut gen = 0;
        let d0 = Actor::DOM0;
        for (step, expect) in [
            ("/tool/xenstored", 132u64),
            ("/a", 168),
            ("/bb", 206),
            ("/a/c", 244),
        ] {
            gen += 1;
            s.write(&d0, &q, step, b"", gen).unwrap();
            assert_eq!(s.memory_of(0), expect, "after {step}");
        }
        gen += 1;
        s.write(&d0, &q, "/a", b"xyz", gen).unwrap();
        assert_eq!(s.memory_of(0), 247);
        assert_eq!(s.memory_of(5), 0);
    }
}

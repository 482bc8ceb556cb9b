//! Transactions and their commit (OXenstored paper, Algorithm 2 with the read/write prefix
//! extension, plus oxenstored's replay since Xen 4.7), under three conflict policies.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::sync::Arc;

use smallvec::SmallVec;

use crate::error::XsError;
use crate::exec::{apply, Ctx, Effects};
use crate::node::{replace_path, Node};
use crate::op::{Op, Reply};
use crate::path::{canonicalize, common_prefix_len, is_prefix, parent, segments};
use crate::store::{Change, Store};

/// How commits decide conflicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConflictPolicy {
    /// Swap roots when nothing changed; else graft when the read and write subtrees are the
    /// same pointers; else replay and compare replies (oxenstored).
    #[default]
    Coalesce,
    /// EAGAIN iff a node read or written was modified since the start (cxenstored >= 4.9).
    PerNode,
    /// EAGAIN iff anything was committed since the start (cxenstored <= 4.8, the 2009 baseline).
    AbortOnAnyCommit,
}

impl ConflictPolicy {
    /// Every policy, for benchmarks and tests.
    pub const ALL: [ConflictPolicy; 3] = [
        ConflictPolicy::Coalesce,
        ConflictPolicy::PerNode,
        ConflictPolicy::AbortOnAnyCommit,
    ];

    /// The option value naming this policy.
    pub fn name(self) -> &'static str {
        match self {
            ConflictPolicy::Coalesce => "coalesce",
            ConflictPolicy::PerNode => "per-node",
            ConflictPolicy::AbortOnAnyCommit => "abort-on-any-commit",
        }
    }

    /// Parse an option value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// How a commit went through (counted in the daemon's statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitPath {
    /// Nothing committed since the start: the private root became the root.
    Swap,
    /// The touched subtrees were unchanged: the written subtree was grafted in.
    Graft,
    /// Replayed against the current store with the same replies.
    Replay,
}

/// An open transaction: (start root, private root, read and write prefixes, recorded requests).
#[derive(Clone, Debug)]
pub struct Txn {
    /// The store when the transaction started.
    pub start: Store,
    /// The private store the transaction's requests run against.
    pub store: Store,
    /// The daemon's commit counter at the start (abort-on-any-commit).
    pub start_commits: u64,
    /// Longest common prefix of the paths read.
    pub read_prefix: Option<String>,
    /// Longest common prefix of the regions written.
    pub write_prefix: Option<String>,
    /// Every path read or written (per-node policy).
    pub accessed: Accessed,
    /// Requests and their replies, in order, for replay.
    pub log: SmallVec<[(Op, Reply); 2]>,
    /// Changes made, for watch events on commit.
    pub changes: Changes,
    /// Start time, unix ms.
    pub started_ms: u64,
    /// A request went over the transaction-nodes quota: the commit answers ENOMEM.
    pub failed: bool,
    /// The private copy of one subtree that WRITEs of existing nodes below it went to, not
    /// yet put back into `store` (see [`Detached`]).
    detached: Option<Detached>,
}

/// A transaction's private version of the subtree at `at`, kept apart from its private
/// store: a WRITE of an existing node copies only the path from `at` down, not the path from
/// the root (which the commit's graft copies again in the current store, the private one
/// going to waste). Any other request first puts it back into the private store
/// ([`Txn::attach`]); a graft takes its written subtree straight from it.
#[derive(Clone, Debug)]
struct Detached {
    /// Absolute path of the subtree's root: the parent of the first node written.
    at: String,
    /// The transaction's version of that subtree.
    node: Arc<Node>,
}

impl Detached {
    /// The node at absolute path `path` (at or below `at`) in this subtree.
    fn get(&self, path: &str) -> Option<&Arc<Node>> {
        let mut node = &self.node;
        for c in segments(self.rel(path)) {
            node = node.child(c)?;
        }
        Some(node)
    }

    /// `path` (at or below `at`) relative to `at`, as an absolute path of the subtree.
    fn rel<'a>(&self, path: &'a str) -> &'a str {
        match self.at.as_str() {
            "/" => path,
            at => &path[at.len()..],
        }
    }
}

/// A transaction's changes (one, as a rule, held inline).
pub type Changes = SmallVec<[Change; 1]>;

/// The distinct paths a transaction touched, sorted (a few, as a rule, held inline: no
/// allocation for the set itself).
#[derive(Clone, Debug, Default)]
pub struct Accessed(SmallVec<[String; 4]>);

impl Accessed {
    /// Number of paths.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No path yet.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where `p` is, or would go.
    fn find(&self, p: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|s| s.as_str().cmp(p))
    }

    /// Whether `p` is in the set.
    pub fn contains(&self, p: &str) -> bool {
        self.find(p).is_ok()
    }

    /// Add `p` (taken only when new); true when it was new.
    pub fn insert(&mut self, p: String) -> bool {
        match self.find(&p) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, p);
                true
            }
        }
    }

    /// The paths in order.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }
}

/// Paths one request can add to a transaction's accessed set: one read, or one change's top
/// and path.
const PATHS_PER_REQUEST: usize = 2;

/// Widen an optional prefix with one more path (in place: the prefixes are canonical).
fn widen(prefix: &mut Option<String>, path: &str) {
    match prefix {
        None => *prefix = Some(String::from(path)),
        Some(p) => {
            let n = common_prefix_len(p, path);
            p.truncate(n);
        }
    }
}

impl Txn {
    /// A transaction starting from `store`.
    pub fn new(store: &Store, commits: u64, now_ms: u64) -> Self {
        let mut private = store.clone();
        private.track_changes();
        Txn {
            start: store.clone(),
            store: private,
            start_commits: commits,
            read_prefix: None,
            write_prefix: None,
            accessed: Accessed::default(),
            log: SmallVec::new(),
            changes: Changes::new(),
            started_ms: now_ms,
            failed: false,
            detached: None,
        }
    }

    /// Put the detached subtree back into the private store (one path copy from the root).
    fn attach(&mut self) {
        if let Some(d) = self.detached.take() {
            // The node at `d.at` exists in the private store (nothing else ran since it was
            // detached), so no child list changes and the stamp is not used.
            replace_path(&mut self.store.root, &d.at, Some(d.node), 0);
        }
    }

    /// The private version of the node at `path`: from the detached subtree when it holds
    /// `path`, else from the private store (attach first when `path` is above the subtree).
    fn private_get(&self, path: &str) -> Option<&Arc<Node>> {
        match &self.detached {
            Some(d) if is_prefix(&d.at, path) => d.get(path),
            _ => self.store.get(path),
        }
    }

    /// WRITE of an existing node in the detached subtree (detaching its parent's subtree
    /// first when none is): the reply, or None when the request is anything else (the
    /// caller then attaches and runs it on the private store). Same checks, accounting and
    /// effects as [`apply`] on the private store.
    fn write_detached(&mut self, cx: &mut Ctx<'_>, op: &Op, fx: &mut Effects) -> Option<Reply> {
        let Op::Write(p, v) = op else { return None };
        let path = canonicalize(p, cx.actor.domid, cx.quota.path_max as usize).ok()?;
        let fits = |d: &Detached| is_prefix(&d.at, &path) && d.at != path;
        match &self.detached {
            Some(d) if fits(d) => {}
            Some(_) => return None,
            None if path == "/" => return None,
            None => {
                let at = String::from(parent(&path));
                let node = self.store.get(&at)?.clone();
                self.detached = Some(Detached { at, node });
            }
        }
        let d = self.detached.as_mut().expect("detached above");
        d.get(&path)?;
        *cx.gen += 1;
        let gen = *cx.gen;
        // The private store's maps with the subtree as its root, for the length of the write.
        core::mem::swap(&mut self.store.root, &mut d.node);
        let r = self
            .store
            .write_existing(&cx.actor, cx.quota, d.rel(&path), v, gen);
        core::mem::swap(&mut self.store.root, &mut d.node);
        Some(match r {
            Ok(perms) => {
                // A WRITE of an existing node (found above): the node itself is the top.
                let perms = perms.expect("the node exists in the detached subtree");
                fx.changes.push(Change {
                    top_len: path.len(),
                    path,
                    recursive: false,
                    perms,
                });
                Reply::Ok
            }
            Err(e) => {
                fx.reads.push(String::from(parent(&path)));
                Reply::Error(e)
            }
        })
    }

    /// Run a store operation inside the transaction and record it (Algorithm 1).
    /// For an unprivileged actor, a request that would make the transaction touch more than
    /// `transaction-nodes` distinct nodes is undone, answers ENOSPC and marks the transaction
    /// failed (cxenstored 4.17: its commit then answers ENOMEM).
    ///
    /// `fx` is the caller's scratch list of effects, empty on entry and on return (kept by
    /// the daemon so that its vectors keep their room from one request to the next).
    pub fn run(&mut self, cx: &mut Ctx<'_>, op: Op, fx: &mut Effects) -> Reply {
        debug_assert!(fx.reads.is_empty() && fx.changes.is_empty());
        // Only a request that could cross the quota needs a copy to undo: one adds at most
        // PATHS_PER_REQUEST paths (a copy would also make the first change to the private
        // count maps copy their nodes).
        let limit = cx.quota.transaction_nodes as usize;
        let near =
            !cx.actor.privileged && limit != 0 && self.accessed.len() + PATHS_PER_REQUEST > limit;
        let detached = match near {
            true => None,
            false => self.write_detached(cx, &op, fx),
        };
        let reply = match detached {
            Some(reply) => reply,
            None => {
                self.attach();
                let before = near.then(|| self.store.clone());
                let reply = apply(&mut self.store, cx, &op, fx);
                if let Some(before) = before {
                    if self.touched_after(fx) > limit {
                        self.store = before;
                        self.failed = true;
                        fx.reads.clear();
                        fx.changes.clear();
                        return Reply::Error(XsError::Enospc);
                    }
                }
                reply
            }
        };
        debug_assert!(fx.reads.len() + 2 * fx.changes.len() <= PATHS_PER_REQUEST);
        for r in fx.reads.drain(..) {
            widen(&mut self.read_prefix, &r);
            self.accessed.insert(r);
        }
        for c in fx.changes.drain(..) {
            widen(&mut self.write_prefix, c.top());
            // Copied only when new (a WRITE of an existing node has its path as its top).
            for p in [c.top(), c.path.as_str()] {
                if !self.accessed.contains(p) {
                    self.accessed.insert(String::from(p));
                }
            }
            self.changes.push(c);
        }
        self.log.push((op, reply.clone()));
        reply
    }

    /// How many distinct nodes the transaction has touched once `fx` is added.
    fn touched_after(&self, fx: &Effects) -> usize {
        let mut fresh: BTreeSet<&str> = BTreeSet::new();
        let paths = fx.reads.iter().map(String::as_str);
        let changed = fx.changes.iter().flat_map(|c| [c.top(), c.path.as_str()]);
        for p in paths.chain(changed) {
            if !self.accessed.contains(p) {
                fresh.insert(p);
            }
        }
        self.accessed.len() + fresh.len()
    }

    /// Commit into `current` under `policy`: the changes to announce, how it went, and the
    /// store `current` replaced when it was replaced whole (a root swap or a replay; a graft
    /// changes `current` in place). `None` means EAGAIN, `current` untouched.
    pub fn commit(
        mut self,
        current: &mut Store,
        commits: u64,
        policy: ConflictPolicy,
        cx: &mut Ctx<'_>,
    ) -> Option<Committed> {
        match policy {
            ConflictPolicy::AbortOnAnyCommit => {
                if commits != self.start_commits {
                    return None;
                }
                Some(self.swap(current))
            }
            ConflictPolicy::PerNode => {
                let clean = self
                    .accessed
                    .iter()
                    .all(|p| stamp(&self.start, p) == stamp(current, p));
                clean.then(|| self.replay(current, cx)).flatten()
            }
            ConflictPolicy::Coalesce => {
                if Arc::ptr_eq(&current.root, &self.start.root) {
                    return Some(self.swap(current));
                }
                if self.graft(current, cx) {
                    return Some(Committed {
                        changes: self.changes,
                        how: CommitPath::Graft,
                        replaced: None,
                    });
                }
                self.replay(current, cx)
            }
        }
    }

    /// The private store becomes the current one.
    fn swap(mut self, current: &mut Store) -> Committed {
        self.attach();
        let old = core::mem::replace(current, untracked(self.store));
        Committed {
            changes: self.changes,
            how: CommitPath::Swap,
            replaced: Some(old),
        }
    }

    /// The coalescing test of Algorithm 2 with separate read and write prefixes: when the
    /// subtrees at both are the same pointers in the start and current roots, graft the
    /// private subtree at the write prefix into the current root (in place: see
    /// [`replace_path`]). False, with `current` untouched, when the test fails.
    fn graft(&mut self, current: &mut Store, cx: &mut Ctx<'_>) -> bool {
        // Writes below the detached subtree cannot widen the write prefix above it; attach
        // anyway if it ever did, so the private store answers for the prefix.
        if let (Some(d), Some(w)) = (&self.detached, &self.write_prefix) {
            if !is_prefix(&d.at, w) {
                self.attach();
            }
        }
        if let Some(r) = &self.read_prefix {
            if !compare_at(&self.start, current, r).0 {
                return false;
            }
        }
        let Some(w) = &self.write_prefix else {
            return true;
        };
        if compare_at(&self.start, current, w) != (true, true) {
            return false;
        }
        let Some(mine) = self.private_get(w).cloned() else {
            return false;
        };
        *cx.gen += 1;
        replace_path(&mut current.root, w, Some(mine), *cx.gen);
        // Counts: current + private - start, for the domains the transaction changed.
        for &d in self.store.touched.as_deref().unwrap_or(&[]) {
            // Unchanged counts are not rewritten (an insert copies the shared map's path).
            let (now, mine, then) = (
                current.nodes_of(d),
                self.store.nodes_of(d),
                self.start.nodes_of(d),
            );
            if mine != then {
                current.owners.insert(d, (now + mine).saturating_sub(then));
            }
            let (now, mine, then) = (
                current.memory_of(d),
                self.store.memory_of(d),
                self.start.memory_of(d),
            );
            if mine != then {
                current.memory.insert(d, (now + mine).saturating_sub(then));
            }
        }
        true
    }

    /// Run the recorded requests again against `current`; commit iff every reply is the same.
    fn replay(self, current: &mut Store, cx: &mut Ctx<'_>) -> Option<Committed> {
        let mut store = current.clone();
        let mut fx = Effects::default();
        for (op, reply) in &self.log {
            if apply(&mut store, cx, op, &mut fx) != *reply {
                return None;
            }
        }
        Some(Committed {
            changes: Changes::from_vec(fx.changes),
            how: CommitPath::Replay,
            replaced: Some(core::mem::replace(current, store)),
        })
    }
}

/// What a commit did: the changes to announce, how it went, and the store it replaced whole
/// (for the daemon to free later), if any.
#[derive(Debug)]
pub struct Committed {
    /// The changes, for watch events.
    pub changes: Changes,
    /// Swap, graft or replay.
    pub how: CommitPath,
    /// The store `current` was before a swap or a replay; None after a graft, which changed
    /// it in place.
    pub replaced: Option<Store>,
}

/// A transaction's private store as the daemon's: no longer tracking changed domains.
fn untracked(mut store: Store) -> Store {
    store.touched = None;
    store
}

/// Whether the node at `path` is the same in two versions (the same pointer, or absent from
/// both), and whether it exists. Walks both versions at once only until they share a subtree
/// (mostly well above `path`: then the same node below is certain, and one walk of the
/// rest, through nodes of one child as a rule, says whether it exists).
fn compare_at(a: &Store, b: &Store, path: &str) -> (bool, bool) {
    let (mut x, mut y) = (&a.root, &b.root);
    let mut comps = segments(path);
    while !Arc::ptr_eq(x, y) {
        let Some(c) = comps.next() else {
            return (false, true);
        };
        match (x.child(c), y.child(c)) {
            (Some(p), Some(q)) => (x, y) = (p, q),
            (None, None) => return (true, false),
            _ => return (false, false),
        }
    }
    let exists = comps.try_fold(x, |n, c| n.child(c)).is_some();
    (true, exists)
}

/// The own-content stamp of the node at `path`, if it exists.
fn stamp(store: &Store, path: &str) -> Option<u64> {
    store.get(path).map(|n| n.gen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names() {
        for p in ConflictPolicy::ALL {
            assert_eq!(ConflictPolicy::parse(p.name()), Some(p));
        }
        assert_eq!(ConflictPolicy::parse("nope"), None);
        let mut a = None;
        widen(&mut a, "/a/b/c");
        widen(&mut a, "/a/b/d");
        assert_eq!(a.as_deref(), Some("/a/b"));
    }
}

//! The circle check's graph: a crate's module tree (from its file names), the resolution of
//! the paths each file names to the module that defines them, the import edges between
//! siblings at every level of the tree, and their strongly connected components (Tarjan).

use super::refs::{PathRef, Scan};
use std::collections::{BTreeMap, BTreeSet};

/// A module path from the crate root (`[]` is the root, `["cmd", "string"]`).
pub type ModPath = Vec<String>;

/// One source file: its module and what it names.
pub struct File {
    /// Shown in reports (`src/db.rs`).
    pub name: String,
    pub module: ModPath,
    pub scan: Scan,
}

/// Where an edge was first seen: file and line.
pub type Site = (String, usize);

/// Graph edges `from -> to` between node names, with their first site.
pub type Edges = BTreeMap<(String, String), Site>;

/// The module path of a file below `src/` (`["db.rs"]`, `["cmd", "mod.rs"]`); `None` for the
/// other crate roots under `src/bin/`.
pub fn module_of(parts: &[&str]) -> Option<ModPath> {
    let (file, dirs) = parts.split_last()?;
    if dirs.first() == Some(&"bin") {
        return None;
    }
    let stem = file.strip_suffix(".rs")?;
    let mut m: ModPath = dirs.iter().map(|d| d.to_string()).collect();
    let is_root = dirs.is_empty() && matches!(stem, "lib" | "main");
    if stem != "mod" && !is_root {
        m.push(stem.to_string());
    }
    Some(m)
}

/// A crate's modules and re-exports, for resolving paths.
pub struct Tree<'a> {
    modules: BTreeSet<ModPath>,
    /// Per module: the names its `pub use` gives, and the path (as written, with its file's
    /// module) each stands for.
    reexports: BTreeMap<ModPath, BTreeMap<String, (&'a ModPath, &'a PathRef)>>,
}

impl<'a> Tree<'a> {
    pub fn new(files: &'a [File]) -> Self {
        let mut modules = BTreeSet::new();
        let mut reexports: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
        for f in files {
            (0..=f.module.len()).for_each(|n| {
                modules.insert(f.module[..n].to_vec());
            });
            for (name, r) in &f.scan.reexports {
                let entry = reexports.entry(f.module.clone()).or_default();
                entry.insert(name.clone(), (&f.module, r));
            }
        }
        Tree { modules, reexports }
    }

    fn has(&self, m: &[String]) -> bool {
        self.modules.contains(m)
    }

    /// The module that defines what `r` (written in module `from`) names, or `None` when it
    /// is outside the crate (`alloc::vec`, `kayvee_pds::PMap`) or inside the same file
    /// (`super::` out of an inline `mod tests`).
    pub fn resolve(&self, from: &[String], r: &PathRef) -> Option<ModPath> {
        self.resolve_depth(from, r, 0)
    }

    fn resolve_depth(&self, from: &[String], r: &PathRef, depth: usize) -> Option<ModPath> {
        let (base, rest) = self.anchor(from, r)?;
        let mut m = base;
        for seg in rest {
            let mut next = m.clone();
            next.push(seg.clone());
            if self.has(&next) {
                m = next;
                continue;
            }
            let target = self.reexports.get(&m).and_then(|names| names.get(seg));
            return match target {
                Some((home, r)) if depth < 8 => self.resolve_depth(home, r, depth + 1),
                _ => Some(m),
            };
        }
        Some(m)
    }

    /// Where a path starts (`crate`, `super`, `self`, or a child of the current module) and
    /// the segments after that.
    fn anchor<'r>(&self, from: &[String], r: &'r PathRef) -> Option<(ModPath, &'r [String])> {
        let segs = &r.segs[..];
        let first = segs.first()?.as_str();
        if first == "crate" {
            return Some((Vec::new(), &segs[1..]));
        }
        if first == "self" {
            return (r.inline_depth == 0).then(|| (from.to_vec(), &segs[1..]));
        }
        if first == "super" {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            let out = ups.checked_sub(r.inline_depth).filter(|&n| n > 0)?;
            let base = from[..from.len().checked_sub(out)?].to_vec();
            return Some((base, &segs[ups..]));
        }
        let mut child = from.to_vec();
        child.push(first.to_string());
        (r.inline_depth == 0 && self.has(&child)).then(|| (from.to_vec(), segs))
    }
}

/// The import edges of a crate at every level: top-level module to top-level module, and
/// inside each directory module, at any depth, child to sibling child (`cmd::string ->
/// cmd::list`, `cmd::zset::pop -> cmd::zset::range`). The crate root is no node (a path
/// through its re-exports counts as naming the module that defines the name), and a module's
/// use of its ancestors or of its own descendants is no edge.
pub fn edges(files: &[File]) -> Edges {
    let tree = Tree::new(files);
    let mut out = Edges::new();
    for f in files.iter().filter(|f| !f.module.is_empty()) {
        for r in &f.scan.paths {
            let Some(to) = tree.resolve(&f.module, r) else {
                continue;
            };
            if let Some(e) = edge(&f.module, &to) {
                out.entry(e).or_insert_with(|| (f.name.clone(), r.line));
            }
        }
    }
    out
}

/// The edge (if any) that a use of module `to` from module `from` makes: between the two
/// children of their deepest common ancestor that hold them (siblings), none when one module
/// holds the other (a child uses its parent, a parent declares and joins its children).
fn edge(from: &[String], to: &[String]) -> Option<(String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    let node = |m: &[String]| m[..=common].join("::");
    Some((node(from), node(to)))
}

/// The strongly connected components with more than one node, each sorted, in order.
pub fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    let mut t = Tarjan {
        adj: &adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in adj.keys() {
        if !t.index.contains_key(n) {
            t.visit(n);
        }
    }
    let mut out: Vec<Vec<String>> = t.out.into_iter().filter(|c| c.len() > 1).collect();
    out.iter_mut().for_each(|c| c.sort());
    out.sort();
    out
}

/// Tarjan's algorithm's state (module graphs are small: recursion is fine).
struct Tarjan<'g> {
    adj: &'g BTreeMap<&'g str, Vec<&'g str>>,
    index: BTreeMap<&'g str, usize>,
    low: BTreeMap<&'g str, usize>,
    stack: Vec<&'g str>,
    on_stack: BTreeSet<&'g str>,
    out: Vec<Vec<String>>,
}

impl<'g> Tarjan<'g> {
    fn visit(&mut self, v: &'g str) {
        let i = self.index.len();
        self.index.insert(v, i);
        self.low.insert(v, i);
        self.stack.push(v);
        self.on_stack.insert(v);
        for &w in &self.adj[v] {
            if !self.index.contains_key(w) {
                self.visit(w);
                let low = self.low[v].min(self.low[w]);
                self.low.insert(v, low);
            } else if self.on_stack.contains(w) {
                let low = self.low[v].min(self.index[w]);
                self.low.insert(v, low);
            }
        }
        if self.low[v] == self.index[v] {
            self.pop_component(v);
        }
    }

    fn pop_component(&mut self, root: &str) {
        let mut comp = Vec::new();
        while let Some(w) = self.stack.pop() {
            self.on_stack.remove(w);
            comp.push(w.to_string());
            if w == root {
                break;
            }
        }
        self.out.push(comp);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{lex::tokens, refs::scan};
    use super::*;

    fn file(path: &str, src: &str) -> File {
        let parts: Vec<&str> = path.split('/').collect();
        File {
            name: path.to_string(),
            module: module_of(&parts).unwrap(),
            scan: scan(&tokens(src)),
        }
    }

    fn edge_list(files: &[File]) -> Vec<String> {
        edges(files)
            .keys()
            .map(|(a, b)| format!("{a}->{b}"))
            .collect()
    }

    #[test]
    fn file_names_give_module_paths() {
        assert_eq!(module_of(&["lib.rs"]), Some(vec![]));
        assert_eq!(module_of(&["cmd", "mod.rs"]), Some(vec!["cmd".to_string()]));
        assert_eq!(module_of(&["cmd", "string.rs"]).unwrap(), ["cmd", "string"]);
        assert_eq!(module_of(&["bin", "x.rs"]), None);
    }

    #[test]
    fn reexports_resolve_to_their_defining_module() {
        let files = [
            file(
                "lib.rs",
                "pub mod a; pub mod b; pub use a::Now; pub struct Root;",
            ),
            file("a.rs", "use crate::Root; fn f() { crate::b::x(); }"),
            file("b.rs", "use crate::Now; fn f() { crate::a::x(); }"),
        ];
        assert_eq!(edge_list(&files), ["a->b", "b->a"]);
        assert_eq!(cycles(&edges(&files)), [["a", "b"]]);
    }

    #[test]
    fn siblings_edges_and_parent_uses_are_told_apart() {
        let files = [
            file("lib.rs", "mod cmd; mod db;"),
            file(
                "cmd/mod.rs",
                "pub const G: &[u8] = string::S; fn f() { crate::db::g(); }",
            ),
            file(
                "cmd/string.rs",
                "use super::list::helper; use super::parse;",
            ),
            file("cmd/list.rs", "fn f() { super::string::g(); }"),
            file("db.rs", "mod tests { use super::*; }"),
        ];
        let e = edge_list(&files);
        assert_eq!(
            e,
            [
                "cmd->db",
                "cmd::list->cmd::string",
                "cmd::string->cmd::list"
            ]
        );
        assert_eq!(cycles(&edges(&files)), [["cmd::list", "cmd::string"]]);
    }

    #[test]
    fn siblings_are_checked_at_every_depth() {
        let files = [
            file("lib.rs", "mod cmd; mod db;"),
            file(
                "cmd/mod.rs",
                "mod zset; mod coll; pub const G: u8 = zset::T;",
            ),
            file("cmd/coll.rs", "use crate::db::Db;"),
            file(
                "cmd/zset/mod.rs",
                "mod pop; mod range; pub const T: u8 = pop::A; pub fn shared() {}",
            ),
            file(
                "cmd/zset/pop.rs",
                "use super::shared; use super::super::coll::x; use super::range::R;",
            ),
            file(
                "cmd/zset/range.rs",
                "use crate::cmd::zset::pop::A; use crate::cmd::G;",
            ),
            file("db.rs", "pub struct Db;"),
        ];
        assert_eq!(
            edge_list(&files),
            [
                "cmd->db",
                "cmd::zset->cmd::coll",
                "cmd::zset::pop->cmd::zset::range",
                "cmd::zset::range->cmd::zset::pop",
            ]
        );
        assert_eq!(
            cycles(&edges(&files)),
            [["cmd::zset::pop", "cmd::zset::range"]]
        );
    }

    #[test]
    fn cycles_are_the_components_with_two_nodes_or_more() {
        let mut e = Edges::new();
        for (a, b) in [
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("d", "d"),
            ("e", "f"),
        ] {
            e.insert((a.into(), b.into()), ("x.rs".into(), 1));
        }
        assert_eq!(cycles(&e), [["a", "b", "c"]]);
    }
}

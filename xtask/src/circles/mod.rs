//! `cargo xtask circles`: fails when modules of a crate import each other in a circle.
//!
//! The rule, for every crate in the repository (the workspace's and the unikernel's):
//! - **Nodes** are top-level modules (`src/db.rs`, or `src/cmd/` as a whole), and, inside
//!   every directory module at any depth, its children (`cmd::string`, `cmd::list`; inside
//!   `src/cmd/zset/`, `cmd::zset::pop`, `cmd::zset::range`).
//! - **Edges** are the paths a file names, in `use` declarations and in code: `crate::a::b`,
//!   `super::b`, `self::b`, and, in a module's own file, `child::x`. A path counts as naming
//!   the module that *defines* its target: a re-export (`pub use`) is followed to its source,
//!   so `crate::Now` depends on the module that defines `Now`, not on the crate root.
//! - The crate root (`lib.rs`/`main.rs`) is no node: it declares the modules and is the
//!   entry point (a library's re-exports, a binary's `main`), so it depends on everything.
//!   That is sound only while a library root holds nothing but `mod` lines and re-exports
//!   (the engine's does); macro paths (`crate::log!`) are skipped, `#[macro_export]` puts
//!   every macro at the root.
//! - Top level: a file in module `a` naming module `b` is `a -> b`. Inside a directory `d`, at
//!   any depth: `d::x -> d::y` for siblings (a use from anywhere inside `d::x` of anything
//!   inside `d::y`); a child may use its parent (`d/mod.rs`) and every ancestor, and a parent
//!   its descendants, freely (it declares and joins them), but siblings must not import each
//!   other in a circle. A use in `d::x::p` of top-level `e` is `d -> e`.
//! - Ignored: comments (doc links are prose), strings, and items under `#[cfg(test)]` (a test
//!   may drive the whole crate; it is a user of the module, not a dependency). `src/bin/`
//!   files are other crate roots and are skipped.
//!
//! A cycle is a strongly connected component of two nodes or more; the check lists each with
//! every edge inside it and where that edge was first seen.
//!
//! Known cycles, the debt this check was introduced with, are listed in [`KNOWN_FILE`] (one
//! line per cycle: `crate: module, module, ...`). A cycle passes when its modules are all in one
//! known cycle of its crate, so a known cycle may shrink or go but never grow, and any new
//! cycle fails. A known cycle that shrank or went is reported, so the list gets pruned: it may
//! only shrink.

mod graph;
mod lex;
mod refs;

use graph::{Edges, File};
use std::path::{Path, PathBuf};

/// Edges known to close a circle and scheduled to go, skipped by the check: (crate, from, to,
/// why). Keep it short; every line is a debt.
const ALLOWED: &[(&str, &str, &str, &str)] = &[];

/// The list of known cycles, relative to the repository root.
pub const KNOWN_FILE: &str = "xtask/circles-known.txt";

/// Runs the check on every crate under `root`; errs listing the cycles not known.
pub fn check(root: &Path) -> Result<(), String> {
    let known = read_known(&root.join(KNOWN_FILE))?;
    let mut failed = Vec::new();
    let mut seen: Vec<&(String, Vec<String>)> = Vec::new();
    for (name, src) in crates(root)? {
        let files = read_crate(&src)?;
        let mut edges = graph::edges(&files);
        let allowed = drop_allowed(&name, &mut edges);
        let cycles = graph::cycles(&edges);
        println!(
            "circles: {name}: {} edges, {}",
            edges.len(),
            summary(&cycles)
        );
        for (from, to, why) in allowed {
            println!("  allowed {from} -> {to}: {why}");
        }
        for c in &cycles {
            print!("{}", describe(c, &edges));
            match known_cover(&known, &name, c) {
                Some(k) => {
                    if k.1.len() > c.len() {
                        println!("  (a known cycle shrank: update {KNOWN_FILE})");
                    }
                    seen.push(k);
                }
                None => {
                    println!("  NEW: not in {KNOWN_FILE}");
                    failed.push(name.clone());
                }
            }
        }
    }
    for k in &known {
        if !seen.iter().any(|s| std::ptr::eq(*s, k)) {
            println!(
                "circles: the known cycle {}: {} is gone: remove it from {KNOWN_FILE}",
                k.0,
                k.1.join(", ")
            );
        }
    }
    failed.dedup();
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("new module cycles in {}", failed.join(", "))),
    }
}

/// The known cycles: (crate, sorted modules), from `crate: a, b, c` lines (`#` comments).
fn read_known(path: &Path) -> Result<Vec<(String, Vec<String>)>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Ok(parse_known(&text))
}

/// Parses the known-cycles list (see [`read_known`]).
fn parse_known(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((krate, mods)) = line.split_once(':') else {
            continue;
        };
        let mut mods: Vec<String> = mods.split(',').map(|m| m.trim().to_string()).collect();
        mods.retain(|m| !m.is_empty());
        mods.sort();
        out.push((krate.trim().to_string(), mods));
    }
    out
}

/// The known cycle of crate `name` that holds every module of `cycle`, if any.
fn known_cover<'a>(
    known: &'a [(String, Vec<String>)],
    name: &str,
    cycle: &[String],
) -> Option<&'a (String, Vec<String>)> {
    known
        .iter()
        .find(|(k, mods)| k == name && cycle.iter().all(|m| mods.contains(m)))
}

fn summary(cycles: &[Vec<String>]) -> String {
    match cycles.len() {
        0 => "no cycles".to_string(),
        n => format!("{n} cycle(s)"),
    }
}

/// A cycle's members and the edges among them, one per line with its first site.
fn describe(cycle: &[String], edges: &Edges) -> String {
    let mut s = format!("  cycle: {}\n", cycle.join(", "));
    for ((a, b), (file, line)) in edges {
        if cycle.contains(a) && cycle.contains(b) {
            s += &format!("    {a} -> {b}  ({file}:{line})\n");
        }
    }
    s
}

/// Removes the allowed edges of crate `name`; returns those it removed.
fn drop_allowed(name: &str, edges: &mut Edges) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut out = Vec::new();
    for &(krate, from, to, why) in ALLOWED {
        let key = (from.to_string(), to.to_string());
        if krate == name && edges.remove(&key).is_some() {
            out.push((from, to, why));
        }
    }
    out
}

/// Every package with a `src/` directory at most two levels below `root`: (name, src dir).
fn crates(root: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut dirs = vec![root.to_path_buf()];
    for d in subdirs(root)? {
        dirs.extend(subdirs(&d)?);
        dirs.push(d);
    }
    let mut out = Vec::new();
    for d in dirs {
        let (manifest, src) = (d.join("Cargo.toml"), d.join("src"));
        if !src.is_dir() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if let Some(name) = package_name(&text) {
            out.push((name, src));
        }
    }
    out.sort();
    Ok(out)
}

/// Directories below `d`, without `target` and hidden ones.
fn subdirs(d: &Path) -> Result<Vec<PathBuf>, String> {
    let read = std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
    let mut out = Vec::new();
    for entry in read.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() && !name.starts_with('.') && name != "target" {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// The `name = "..."` of a manifest's `[package]` section.
fn package_name(manifest: &str) -> Option<String> {
    let package = manifest.split("[package]").nth(1)?;
    let section = package.split("\n[").next()?;
    let line = section
        .lines()
        .find(|l| l.trim_start().starts_with("name"))?;
    Some(line.split('"').nth(1)?.to_string())
}

/// Reads and scans every `.rs` file under `src`, without the test-only module files.
fn read_crate(src: &Path) -> Result<Vec<File>, String> {
    let mut paths = Vec::new();
    rs_files(src, &mut paths)?;
    let mut files = Vec::new();
    for p in paths {
        let rel = p.strip_prefix(src).expect("below src");
        let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
        let Some(module) = graph::module_of(&parts) else {
            continue;
        };
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let scan = refs::scan(&lex::tokens(&text));
        let name = format!("src/{}", parts.join("/"));
        files.push(File { name, module, scan });
    }
    let test_only = test_modules(&files);
    files.retain(|f| !test_only.iter().any(|t| f.module.starts_with(t)));
    Ok(files)
}

/// Modules declared `#[cfg(test)] mod x;`.
fn test_modules(files: &[File]) -> Vec<graph::ModPath> {
    let mut out = Vec::new();
    for f in files {
        for m in &f.scan.test_mods {
            let mut p = f.module.clone();
            p.push(m.clone());
            out.push(p);
        }
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let read = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in read.flatten() {
        let p = entry.path();
        if p.is_dir() {
            rs_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_come_from_the_package_section() {
        let m = "[package]\nname = \"kayvee-engine\"\n[dependencies]\nname = \"x\"\n";
        assert_eq!(package_name(m).as_deref(), Some("kayvee-engine"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
    }

    #[test]
    fn known_cycles_may_shrink_but_not_grow() {
        let known = super::parse_known("# debt\nkayvee-engine: db, cx, txn\nother: a, b # why\n");
        let c = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(super::known_cover(&known, "kayvee-engine", &c(&["cx", "db"])).is_some());
        assert!(super::known_cover(&known, "kayvee-engine", &c(&["cx", "db", "txn"])).is_some());
        assert!(super::known_cover(&known, "kayvee-engine", &c(&["cx", "db", "acl"])).is_none());
        assert!(super::known_cover(&known, "other", &c(&["cx", "db"])).is_none());
        assert_eq!(known[1], ("other".to_string(), c(&["a", "b"])));
    }
}

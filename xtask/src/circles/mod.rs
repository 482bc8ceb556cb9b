//! `cargo xtask circles`: fails when modules of a crate import each other in a circle.
//!
//! The rule, for every crate in the repository (the workspace's and the unikernel's):
//! - **Nodes** are top-level modules (`src/db.rs`, or `src/cmd/` as a whole), and one level
//!   inside a directory module its children (`cmd::string`, `cmd::list`).
//! - **Edges** are the paths a file names, in `use` declarations and in code: `crate::a::b`,
//!   `super::b`, `self::b`, and, in a module's own file, `child::x`. A path counts as naming
//!   the module that *defines* its target: a re-export (`pub use`) is followed to its source,
//!   so `crate::Now` depends on the module that defines `Now`, not on the crate root.
//! - The crate root (`lib.rs`/`main.rs`) is no node: it declares the modules and is the
//!   entry point (a library's re-exports, a binary's `main`), so it depends on everything.
//!   That is sound only while a library root holds nothing but `mod` lines and re-exports
//!   (the engine's does); macro paths (`crate::log!`) are skipped, `#[macro_export]` puts
//!   every macro at the root.
//! - Top level: a file in module `a` naming module `b` is `a -> b`. Inside a directory `d`:
//!   `d::x -> d::y` for siblings; a child may use its parent (`d/mod.rs`) and the parent its
//!   children freely (it declares and joins them), but siblings must not import each other
//!   in a circle.
//! - Ignored: comments (doc links are prose), strings, and items under `#[cfg(test)]` (a test
//!   may drive the whole crate; it is a user of the module, not a dependency). `src/bin/`
//!   files are other crate roots and are skipped.
//!
//! A cycle is a strongly connected component of two nodes or more; the check lists each with
//! every edge inside it and where that edge was first seen.

mod graph;
mod lex;
mod refs;

use graph::{Edges, File};
use std::path::{Path, PathBuf};

/// Edges known to close a circle and scheduled to go, skipped by the check: (crate, from, to,
/// why). Keep it short; every line is a debt.
const ALLOWED: &[(&str, &str, &str, &str)] = &[];

/// Runs the check on every crate under `root`; errs listing the cycles.
pub fn check(root: &Path) -> Result<(), String> {
    let mut failed = Vec::new();
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
        }
        if !cycles.is_empty() {
            failed.push(name);
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("module cycles in {}", failed.join(", "))),
    }
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
}

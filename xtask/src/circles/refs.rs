//! The circle check's path finder: from one file's tokens, every module path it names (`use`
//! trees expanded, and `a::b` paths in code), the names it re-exports (`pub use`), and the
//! child modules it declares test-only (`#[cfg(test)] mod tests;`).
//!
//! Items under `#[cfg(test)]` are skipped: a test may drive the whole crate to exercise one
//! module, and that makes it a user of the crate, not a dependency of the module.

use super::lex::{Tok, Token};

/// A path the file names, as written (`["crate", "db", "Key"]`, `["super", "flat"]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRef {
    pub segs: Vec<String>,
    pub line: usize,
    /// How many inline `mod x { }` blocks enclose it (`super::` leaves those first).
    pub inline_depth: usize,
    /// Part of a `pub use` (a re-export).
    pub reexport: bool,
}

/// What one file names.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub paths: Vec<PathRef>,
    /// `pub use` re-exports: the name they give (alias or last segment) and the path.
    pub reexports: Vec<(String, PathRef)>,
    /// Child modules declared under `#[cfg(test)]` (`mod tests;`): their files are skipped.
    pub test_mods: Vec<String>,
}

/// One `use` leaf: its full path, the name it binds (`None` for a glob).
struct UseLeaf {
    segs: Vec<String>,
    name: Option<String>,
}

/// Scans a file's tokens.
pub fn scan(t: &[Token]) -> Scan {
    let mut s = Scan::default();
    let (mut i, mut depth, mut inline) = (0, 0usize, Vec::new());
    while i < t.len() {
        i = match &t[i].tok {
            Tok::Punct('#') if is_cfg_test(t, i) => skip_item(t, i + 7, &mut s.test_mods),
            Tok::Ident(w) if w == "use" => use_decl(t, i, inline.len(), &mut s),
            Tok::Ident(w) if w == "mod" && is(t, i + 2, &Tok::Punct('{')) => {
                inline.push(depth + 1);
                i + 2
            }
            Tok::Ident(_) if is(t, i + 1, &Tok::PathSep) && !is_path_continuation(t, i) => {
                code_path(t, i, inline.len(), &mut s.paths)
            }
            Tok::Punct('{') => {
                depth += 1;
                i + 1
            }
            Tok::Punct('}') => {
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i + 1
            }
            _ => i + 1,
        };
    }
    s
}

fn is(t: &[Token], i: usize, want: &Tok) -> bool {
    t.get(i).is_some_and(|x| &x.tok == want)
}

fn ident(t: &[Token], i: usize) -> Option<&str> {
    match t.get(i).map(|x| &x.tok) {
        Some(Tok::Ident(w)) => Some(w),
        _ => None,
    }
}

/// `#[cfg(test)]` starts at `i` (7 tokens).
fn is_cfg_test(t: &[Token], i: usize) -> bool {
    let want = ["#", "[", "cfg", "(", "test", ")", "]"];
    want.iter()
        .enumerate()
        .all(|(k, w)| match t.get(i + k).map(|x| &x.tok) {
            Some(Tok::Ident(x)) => x == w,
            Some(Tok::Punct(c)) => w.len() == 1 && w.starts_with(*c),
            _ => false,
        })
}

/// Past the item that starts at `i` (further attributes included): through its first `;` or
/// its first `{ }` block. Notes `mod name;` as a test-only child module.
fn skip_item(t: &[Token], mut i: usize, test_mods: &mut Vec<String>) -> usize {
    let start = i;
    let mut nest = 0usize;
    while i < t.len() {
        match t[i].tok {
            Tok::Punct('(' | '[') => nest += 1,
            Tok::Punct(')' | ']') => nest = nest.saturating_sub(1),
            Tok::Punct(';') if nest == 0 => {
                note_test_mod(&t[start..=i], test_mods);
                return i + 1;
            }
            Tok::Punct('{') if nest == 0 => return skip_block(t, i),
            _ => {}
        }
        i += 1;
    }
    i
}

/// `... mod name ;` at the end of an item's tokens.
fn note_test_mod(item: &[Token], test_mods: &mut Vec<String>) {
    let n = item.len();
    if n >= 3 && ident(item, n - 3) == Some("mod") {
        if let Some(name) = ident(item, n - 2) {
            test_mods.push(name.to_string());
        }
    }
}

/// Past the `{ }` block whose `{` is at `i`.
fn skip_block(t: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match t[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the identifier at `i` continues a path (`a::b`: `b`) rather than starting one.
fn is_path_continuation(t: &[Token], i: usize) -> bool {
    i > 0 && is(t, i - 1, &Tok::PathSep)
}

/// A path in code at `i`: `a::b::c` (stops before `::<` or `::{`). Returns the next index.
fn code_path(t: &[Token], mut i: usize, inline_depth: usize, out: &mut Vec<PathRef>) -> usize {
    let line = t[i].line;
    let mut segs = Vec::new();
    while let Some(w) = ident(t, i) {
        segs.push(w.to_string());
        if !(is(t, i + 1, &Tok::PathSep) && ident(t, i + 2).is_some()) {
            i += 1;
            break;
        }
        i += 2;
    }
    // A macro (`crate::log!`) is placed at the crate root by `#[macro_export]` wherever it
    // is defined, so its path says nothing about modules.
    if !is(t, i, &Tok::Punct('!')) {
        out.push(PathRef {
            segs,
            line,
            inline_depth,
            reexport: false,
        });
    }
    i
}

/// A `use` declaration at `i` (`pub use` makes it a re-export). Returns the index past it.
fn use_decl(t: &[Token], i: usize, inline_depth: usize, s: &mut Scan) -> usize {
    let reexport = is_pub(t, i);
    let (line, mut j, mut leaves) = (t[i].line, i + 1, Vec::new());
    use_tree(t, &mut j, Vec::new(), &mut leaves);
    for leaf in leaves {
        let r = PathRef {
            segs: leaf.segs,
            line,
            inline_depth,
            reexport,
        };
        if let (true, Some(name)) = (reexport, leaf.name) {
            s.reexports.push((name, r.clone()));
        }
        s.paths.push(r);
    }
    j.max(i + 1)
}

/// `pub use`, `pub(crate) use`, `pub(super) use`.
fn is_pub(t: &[Token], i: usize) -> bool {
    if i >= 1 && ident(t, i - 1) == Some("pub") {
        return true;
    }
    i >= 4 && is(t, i - 1, &Tok::Punct(')')) && ident(t, i - 4) == Some("pub")
}

/// Expands one use tree at `*i` under `prefix` into `out`.
fn use_tree(t: &[Token], i: &mut usize, mut path: Vec<String>, out: &mut Vec<UseLeaf>) {
    while *i < t.len() {
        match &t[*i].tok {
            Tok::PathSep => *i += 1,
            Tok::Punct('{') => {
                *i += 1;
                use_group(t, i, &path, out);
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push(UseLeaf {
                    segs: path,
                    name: None,
                });
                return;
            }
            Tok::Ident(w) => {
                path.push(w.clone());
                *i += 1;
                if !is(t, *i, &Tok::PathSep) {
                    out.push(use_leaf(t, i, path));
                    return;
                }
            }
            _ => return,
        }
    }
}

/// The trees of a `{ a, b::c }` group, up to and past its `}`.
fn use_group(t: &[Token], i: &mut usize, path: &[String], out: &mut Vec<UseLeaf>) {
    while *i < t.len() {
        match t[*i].tok {
            Tok::Punct('}') => {
                *i += 1;
                return;
            }
            Tok::Punct(',') => *i += 1,
            _ => {
                let before = *i;
                use_tree(t, i, path.to_vec(), out);
                if *i == before {
                    *i += 1;
                }
            }
        }
    }
}

/// The end of a use path: `self` names its parent, `as x` renames.
fn use_leaf(t: &[Token], i: &mut usize, mut segs: Vec<String>) -> UseLeaf {
    if segs.last().is_some_and(|s| s == "self") {
        segs.pop();
    }
    let mut name = segs.last().cloned();
    if ident(t, *i) == Some("as") {
        name = ident(t, *i + 1).map(str::to_string);
        *i += 2;
    }
    UseLeaf { segs, name }
}

#[cfg(test)]
mod tests {
    use super::super::lex::tokens;
    use super::*;

    fn paths(src: &str) -> Vec<String> {
        scan(&tokens(src))
            .paths
            .iter()
            .map(|p| p.segs.join("::"))
            .collect()
    }

    #[test]
    fn use_trees_expand() {
        let got = paths("use crate::{a, b::{C, d::E as F}, g::self, h::*};");
        assert_eq!(
            got,
            [
                "crate::a",
                "crate::b::C",
                "crate::b::d::E",
                "crate::g",
                "crate::h"
            ]
        );
    }

    #[test]
    fn code_paths_are_found_whole() {
        let src = "fn f() { crate::x::y(1); Vec::<u8>::new(); super::z::W { }; crate::m!(); }";
        assert_eq!(paths(src), ["crate::x::y", "Vec", "super::z::W"]);
    }

    #[test]
    fn pub_use_is_a_reexport_with_its_name() {
        let s = scan(&tokens(
            "pub use a::{B, C as D}; pub(crate) use e::F; use g::H;",
        ));
        let names: Vec<_> = s.reexports.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["B", "D", "F"]);
        assert!(!s.paths[3].reexport);
    }

    #[test]
    fn cfg_test_items_are_skipped_and_test_mods_noted() {
        let src = "#[cfg(test)]\nmod tests { use crate::a; }\n#[cfg(test)]\nmod proptests;\n\
                   #[cfg(test)]\n#[allow(x)]\nfn g() { crate::b::c(); }\nuse crate::d;";
        let s = scan(&tokens(src));
        assert_eq!(s.test_mods, ["proptests"]);
        assert_eq!(s.paths.len(), 1);
        assert_eq!(
            (s.paths[0].segs.join("::"), s.paths[0].line),
            ("crate::d".into(), 8)
        );
    }

    #[test]
    fn inline_modules_are_counted_for_super() {
        let s = scan(&tokens("mod m { use super::a; } use super::b;"));
        let depths: Vec<_> = s.paths.iter().map(|p| p.inline_depth).collect();
        assert_eq!(depths, [1, 0]);
    }
}

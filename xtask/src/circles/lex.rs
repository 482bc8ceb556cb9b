//! The circle check's lexer: Rust source to the few tokens path finding needs (identifiers,
//! `::` and punctuation, each with its line), with comments, strings and char literals gone.
//!
//! Not a Rust lexer: numbers and operators become `Punct`, which is all the path scan needs.
//! Comments go first because doc links (`[`crate::db`]`) are prose, not dependencies.

/// One token of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (`crate`, `use`, `foo`).
    Ident(String),
    /// `::`
    PathSep,
    /// Any other single character that is not white space (`{`, `}`, `;`, `#`, `*`...).
    Punct(char),
}

/// A token and the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// Tokenizes `src`.
pub fn tokens(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let start_line = line;
        let next = scan_one(&chars, i, &mut line, &mut out, start_line);
        i = next;
    }
    out
}

/// Consumes what starts at `i`, pushing at most one token; returns the next index.
fn scan_one(c: &[char], i: usize, line: &mut usize, out: &mut Vec<Token>, at: usize) -> usize {
    let ch = c[i];
    let peek = |k: usize| c.get(i + k).copied();
    let end = match ch {
        '\n' => {
            *line += 1;
            i + 1
        }
        _ if ch.is_whitespace() => i + 1,
        '/' if peek(1) == Some('/') => skip_while(c, i, |x| x != '\n'),
        '/' if peek(1) == Some('*') => skip_block_comment(c, i, line),
        '"' => skip_string(c, i + 1, line),
        'r' | 'b' if raw_string_start(c, i).is_some() => {
            let (open, hashes) = raw_string_start(c, i).unwrap();
            skip_raw_string(c, open, hashes, line)
        }
        'b' if peek(1) == Some('"') => skip_string(c, i + 2, line),
        'b' if peek(1) == Some('\'') => skip_char_or_lifetime(c, i + 1),
        '\'' => skip_char_or_lifetime(c, i),
        ':' if peek(1) == Some(':') => {
            out.push(Token {
                tok: Tok::PathSep,
                line: at,
            });
            i + 2
        }
        _ if ch == '_' || ch.is_alphabetic() => {
            let end = skip_while(c, i, |x| x == '_' || x.is_alphanumeric());
            let word = c[i..end].iter().collect();
            out.push(Token {
                tok: Tok::Ident(word),
                line: at,
            });
            end
        }
        _ if ch.is_ascii_digit() => skip_while(c, i, |x| x == '_' || x.is_alphanumeric()),
        _ => {
            out.push(Token {
                tok: Tok::Punct(ch),
                line: at,
            });
            i + 1
        }
    };
    end.max(i + 1)
}

/// The first index at or after `i` where `keep` fails.
fn skip_while(c: &[char], mut i: usize, keep: impl Fn(char) -> bool) -> usize {
    while i < c.len() && keep(c[i]) {
        i += 1;
    }
    i
}

/// Past a `/* */` comment starting at `i` (they nest in Rust).
fn skip_block_comment(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        match (c[i], c.get(i + 1).copied()) {
            ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
            ('*', Some('/')) => {
                (depth, i) = (depth - 1, i + 2);
                if depth == 0 {
                    return i;
                }
            }
            ('\n', _) => (*line, i) = (*line + 1, i + 1),
            _ => i += 1,
        }
    }
    i
}

/// Past a string whose contents start at `i` (escapes honoured).
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            '\n' => (*line, i) = (*line + 1, i + 1),
            _ => i += 1,
        }
    }
    i
}

/// For `r"`, `r#"`, `br##"`...: the index of the opening quote and the number of `#`.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i + usize::from(c[i] == 'b');
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = skip_while(c, j, |x| x == '#') - j;
    (c.get(j + hashes) == Some(&'"')).then_some((j + hashes, hashes))
}

/// Past a raw string whose opening quote is at `open`.
fn skip_raw_string(c: &[char], open: usize, hashes: usize, line: &mut usize) -> usize {
    let mut i = open + 1;
    while i < c.len() {
        if c[i] == '\n' {
            *line += 1;
        }
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// At a `'`: past a char literal (`'x'`, `'\n'`, `'\''`), or just past the quote of a
/// lifetime or label (`'a`), whose name is then an ordinary identifier.
fn skip_char_or_lifetime(c: &[char], i: usize) -> usize {
    match c.get(i + 1) {
        Some('\\') => skip_while(c, i + 2, |x| x != '\'') + 1,
        Some(_) if c.get(i + 2) == Some(&'\'') => i + 3,
        _ => i + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<String> {
        tokens(src)
            .into_iter()
            .map(|t| match t.tok {
                Tok::Ident(w) => w,
                Tok::PathSep => "::".into(),
                Tok::Punct(c) => c.into(),
            })
            .collect()
    }

    #[test]
    fn comments_strings_and_chars_vanish() {
        let src = "use crate::a; // crate::b\n/* crate::c /* nested */ */ let s = \"crate::d\";\n\
                   let r = r#\"crate::e\"#; let ch = '\\''; let q = b'x'; fn f<'a>() {}";
        let w = words(src).join(" ");
        assert!(w.starts_with("use crate :: a ;"));
        for gone in ["b", "c", "d", "e", "x"] {
            assert!(!w.split(' ').any(|t| t == gone), "{gone} in {w}");
        }
        assert!(w.ends_with("fn f < a > ( ) { }"), "{w}");
    }

    #[test]
    fn lines_are_counted_through_comments_and_strings() {
        let t = tokens("/* a\n b */ \"x\ny\"\nfoo");
        assert_eq!(
            t,
            vec![Token {
                tok: Tok::Ident("foo".into()),
                line: 4
            }]
        );
    }
}

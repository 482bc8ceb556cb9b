//! Reply parser for clients and tests: every RESP2 and RESP3 type (Redis protocol
//! specification, "RESP protocol description") into an owned [`Reply`], incrementally
//! (`Ok(None)` until the whole reply has arrived). Attributes (`|`) are parsed and dropped;
//! streamed strings and aggregates (`$?`, `*?`) are not supported. Iterative, so deep nesting
//! cannot overflow the stack, and it never panics on any input.

use alloc::string::String;
use alloc::vec::Vec;
use kayvee_engine::Reply;

/// A malformed reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError;

/// Elements reserved up front for an announced aggregate (the rest grows as they arrive).
const AGGREGATE_PREALLOC_MAX: usize = 64;

/// The kinds of aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Array,
    Map,
    Set,
    Push,
    /// Parsed and dropped: the reply that follows it is the real one.
    Attribute,
}

/// One parsed element: a complete reply or the header of an aggregate.
enum Item {
    Value(Reply),
    Open(Kind, usize),
}

/// An aggregate being filled.
struct Open {
    kind: Kind,
    remaining: usize,
    items: Vec<Reply>,
}

/// Parses one RESP2/RESP3 reply at the start of `buf`: `Ok(None)` when incomplete, else the
/// reply and the number of bytes it used.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ParseError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut pos = 0;
    loop {
        let Some((item, next)) = parse_item(buf, pos)? else {
            return Ok(None);
        };
        pos = next;
        let mut done = match item {
            Item::Value(r) => Some(r),
            Item::Open(kind, 0) => close(kind, Vec::new()),
            Item::Open(kind, remaining) => {
                let items = Vec::with_capacity(remaining.min(AGGREGATE_PREALLOC_MAX));
                stack.push(Open {
                    kind,
                    remaining,
                    items,
                });
                None
            }
        };
        // Hand the finished value to its parent, closing every aggregate it completes.
        while let Some(r) = done.take() {
            let Some(top) = stack.last_mut() else {
                return Ok(Some((r, pos)));
            };
            top.items.push(r);
            top.remaining -= 1;
            if top.remaining == 0 {
                let open = stack.pop().ok_or(ParseError)?;
                done = close(open.kind, open.items);
            }
        }
    }
}

/// Builds the reply of a complete aggregate (`None` for an attribute, which is dropped).
fn close(kind: Kind, items: Vec<Reply>) -> Option<Reply> {
    Some(match kind {
        Kind::Array => Reply::Array(items),
        Kind::Set => Reply::Set(items),
        Kind::Push => Reply::Push(items),
        Kind::Map => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Reply::Map(pairs)
        }
        Kind::Attribute => return None,
    })
}

/// Parses the element at `pos`: its type byte and line, plus the payload of blob types.
fn parse_item(buf: &[u8], pos: usize) -> Result<Option<(Item, usize)>, ParseError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(cr) = line_end(buf, pos + 1)? else {
        return Ok(None);
    };
    let line = &buf[pos + 1..cr];
    let next = cr + 2;
    let value = |r: Reply| Ok(Some((Item::Value(r), next)));
    match kind {
        b'+' => value(Reply::Simple(text(line))),
        b'-' => value(Reply::Error(text(line))),
        b':' => value(Reply::Int(parse_int(line)?)),
        b'_' if line.is_empty() => value(Reply::Null),
        b',' => value(Reply::Double(parse_double(line)?)),
        b'#' => match line {
            b"t" => value(Reply::Boolean(true)),
            b"f" => value(Reply::Boolean(false)),
            _ => Err(ParseError),
        },
        b'(' => value(Reply::BigNumber(big_number(line)?)),
        b'$' if line == b"-1" => value(Reply::Null),
        b'*' if line == b"-1" => value(Reply::NullArray),
        b'$' | b'!' | b'=' => blob(buf, kind, parse_len(line)?, next),
        b'*' => aggregate(Kind::Array, parse_len(line)?, next),
        b'~' => aggregate(Kind::Set, parse_len(line)?, next),
        b'>' => aggregate(Kind::Push, parse_len(line)?, next),
        b'%' => aggregate(Kind::Map, pairs(line)?, next),
        b'|' => aggregate(Kind::Attribute, pairs(line)?, next),
        _ => Err(ParseError),
    }
}

/// An aggregate header of `n` elements.
fn aggregate(kind: Kind, n: usize, next: usize) -> Result<Option<(Item, usize)>, ParseError> {
    Ok(Some((Item::Open(kind, n), next)))
}

/// The element count of a map or attribute of `line` pairs.
fn pairs(line: &[u8]) -> Result<usize, ParseError> {
    parse_len(line)?.checked_mul(2).ok_or(ParseError)
}

/// A blob (`$` bulk, `!` blob error, `=` verbatim) of `len` bytes at `start`.
fn blob(
    buf: &[u8],
    kind: u8,
    len: usize,
    start: usize,
) -> Result<Option<(Item, usize)>, ParseError> {
    let end = start.checked_add(len).ok_or(ParseError)?;
    if buf.len() < end.saturating_add(2) {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(ParseError);
    }
    let payload = &buf[start..end];
    let reply = match kind {
        b'$' => Reply::Bulk(payload.into()),
        b'!' => Reply::Error(text(payload)),
        _ => verbatim(payload)?,
    };
    Ok(Some((Item::Value(reply), end + 2)))
}

/// A verbatim string's payload: a 3-byte ASCII format, `:`, then the text.
fn verbatim(payload: &[u8]) -> Result<Reply, ParseError> {
    match payload {
        [a, b, c, b':', text @ ..] if [a, b, c].iter().all(|x| x.is_ascii()) => {
            Ok(Reply::Verbatim(text_ascii(&[*a, *b, *c]), text.into()))
        }
        _ => Err(ParseError),
    }
}

/// The index of the `\r` ending the line that starts at `from` (`None` until it and its `\n`
/// have arrived; a `\r` followed by anything else is malformed).
fn line_end(buf: &[u8], from: usize) -> Result<Option<usize>, ParseError> {
    let Some(i) = buf.get(from..).and_then(|rest| memchr::memchr(b'\r', rest)) else {
        return Ok(None);
    };
    match buf.get(from + i + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(from + i)),
        Some(_) => Err(ParseError),
    }
}

/// Text of a simple string or error (invalid UTF-8 replaced, as clients show it).
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Text already known to be ASCII.
fn text_ascii(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(c)).collect()
}

/// A signed integer line.
fn parse_int(line: &[u8]) -> Result<i64, ParseError> {
    core::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ParseError)
}

/// A length or count line (non-negative).
fn parse_len(line: &[u8]) -> Result<usize, ParseError> {
    let n = parse_int(line)?;
    usize::try_from(n).map_err(|_| ParseError)
}

/// A RESP3 double: decimal or exponent notation, `inf`, `-inf`, `nan`.
fn parse_double(line: &[u8]) -> Result<f64, ParseError> {
    core::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ParseError)
}

/// A RESP3 big number: an optional `-` and at least one digit.
fn big_number(line: &[u8]) -> Result<String, ParseError> {
    let digits = line.strip_prefix(b"-").unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ParseError);
    }
    Ok(text_ascii(line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Parses a complete reply and checks it used every byte.
    fn full(b: &[u8]) -> Reply {
        let (r, n) = parse_reply(b).unwrap().unwrap();
        assert_eq!(n, b.len(), "consumed of {:?}", b);
        r
    }

    #[test]
    fn resp2_types() {
        assert_eq!(full(b"+OK\r\n"), Reply::Simple("OK".into()));
        assert_eq!(full(b"-ERR x y\r\n"), Reply::Error("ERR x y".into()));
        assert_eq!(full(b":-12\r\n"), Reply::Int(-12));
        assert_eq!(full(b"$3\r\na\rb\r\n"), Reply::Bulk(b"a\rb".to_vec()));
        assert_eq!(full(b"$0\r\n\r\n"), Reply::Bulk(vec![]));
        assert_eq!(full(b"$-1\r\n"), Reply::Null);
        assert_eq!(full(b"*-1\r\n"), Reply::NullArray);
        assert_eq!(full(b"*0\r\n"), Reply::Array(vec![]));
        assert_eq!(
            full(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n"),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Array(vec![Reply::Bulk(b"x".to_vec())])
            ])
        );
    }

    #[test]
    fn resp3_types() {
        assert_eq!(full(b"_\r\n"), Reply::Null);
        assert_eq!(full(b",1.5\r\n"), Reply::Double(1.5));
        assert_eq!(full(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
        assert_eq!(full(b",1e+20\r\n"), Reply::Double(1e20));
        assert_eq!(full(b"#t\r\n"), Reply::Boolean(true));
        assert_eq!(full(b"#f\r\n"), Reply::Boolean(false));
        assert_eq!(full(b"(-123\r\n"), Reply::BigNumber("-123".into()));
        assert_eq!(full(b"!5\r\nERR x\r\n"), Reply::Error("ERR x".into()));
        assert_eq!(
            full(b"=8\r\ntxt:a\r\nb\r\n"),
            Reply::Verbatim("txt".into(), b"a\r\nb".to_vec())
        );
        assert_eq!(
            full(b"%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n"),
            Reply::Map(vec![(
                Reply::Simple("k".into()),
                Reply::Set(vec![Reply::Int(1), Reply::Int(2)])
            )])
        );
        assert_eq!(
            full(b">2\r\n$7\r\nmessage\r\n_\r\n"),
            Reply::Push(vec![Reply::Bulk(b"message".to_vec()), Reply::Null])
        );
        assert_eq!(full(b"%0\r\n"), Reply::Map(vec![]));
    }

    #[test]
    fn nan_doubles_round_trip_through_the_encoder() {
        for text in [&b",nan\r\n"[..], b",-nan\r\n"] {
            let Reply::Double(d) = full(text) else {
                panic!("not a double");
            };
            assert!(d.is_nan());
            crate::fuzzing::parse_reply(text).expect("parses");
        }
    }

    #[test]
    fn attributes_are_skipped() {
        assert_eq!(full(b"|1\r\n+ttl\r\n:3\r\n:42\r\n"), Reply::Int(42));
        assert_eq!(
            full(b"*2\r\n|0\r\n:1\r\n|1\r\n+a\r\n+b\r\n:2\r\n"),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2)])
        );
    }

    #[test]
    fn incomplete_until_the_last_byte() {
        let b: &[u8] = b"*3\r\n$3\r\nfoo\r\n%1\r\n:1\r\n,2.5\r\n=7\r\ntxt:abc\r\n";
        for n in 0..b.len() {
            assert_eq!(parse_reply(&b[..n]), Ok(None), "prefix {n}");
        }
        assert!(parse_reply(b).unwrap().is_some());
    }

    #[test]
    fn pipelined_replies_parse_one_at_a_time() {
        let b: &[u8] = b"+OK\r\n:5\r\n";
        let (r, n) = parse_reply(b).unwrap().unwrap();
        assert_eq!((r, n), (Reply::Simple("OK".into()), 5));
        assert_eq!(parse_reply(&b[n..]).unwrap().unwrap().0, Reply::Int(5));
    }

    #[test]
    fn malformed_replies() {
        for b in [
            &b"?\r\n"[..],
            b"+a\rb\r\n",
            b":x\r\n",
            b"$-2\r\n",
            b"$2\r\nabcd\r\n",
            b"*-2\r\n",
            b"#x\r\n",
            b",abc\r\n",
            b"(12a\r\n",
            b"(\r\n",
            b"=3\r\ntxt\r\n",
            b"_x\r\n",
            b"%-1\r\n",
            b"$?\r\n",
        ] {
            assert_eq!(parse_reply(b), Err(ParseError), "{:?}", b);
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut b = Vec::new();
        for _ in 0..200_000 {
            b.extend_from_slice(b"*1\r\n");
        }
        assert_eq!(parse_reply(&b), Ok(None));
        b.extend_from_slice(b":1\r\n");
        let (mut r, _) = parse_reply(&b).unwrap().unwrap();
        let mut depth = 0;
        while let Reply::Array(mut v) = r {
            r = v.pop().unwrap();
            depth += 1;
        }
        assert_eq!((depth, r), (200_000, Reply::Int(1)));
    }
}

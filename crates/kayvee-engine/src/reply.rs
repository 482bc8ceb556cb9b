//! The reply layer: commands describe replies as values; the connection's codec encodes them
//! for the protocol version the client negotiated (RESP2 or RESP3).
//!
//! Commands call a [`ReplySink`] (as Redis's `addReply*` functions): `null()` becomes `$-1` in
//! RESP2 and `_` in RESP3, `map(n)` becomes `*2n` or `%n`, and so on. The codec that implements
//! the sink writes straight into the connection's output buffer, so the hot path allocates
//! nothing. [`Reply`] is the same vocabulary as an owned tree, built by [`ReplyTree`], for tests
//! and for anything that must hold a reply before sending it.

use alloc::string::String;
use alloc::vec::Vec;

/// The protocol version of one connection, switched by `HELLO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2 (the default).
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

impl Protocol {
    /// The number `HELLO` and `CLIENT LIST` use.
    pub fn number(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// Where a command writes its reply. Aggregates (`array`, `map`, `set`, `push`, `attribute`)
/// announce their element count first, then the elements follow as further calls (a map of `n`
/// has `2n` calls: key, value, key, value...).
pub trait ReplySink {
    /// The protocol this sink encodes for.
    fn protocol(&self) -> Protocol;
    /// Whether this sink writes to a client's connection (not to a script or a discarded
    /// reply): only such a reply is bounded by the client's output limits.
    fn is_connection(&self) -> bool {
        false
    }
    /// Switches the protocol for the rest of this reply and the next ones (`HELLO`).
    fn set_protocol(&mut self, p: Protocol);
    /// A status reply, e.g. `OK` (`+OK`).
    fn simple(&mut self, s: &str);
    /// An error reply: the full text with its code, e.g. `ERR syntax error`.
    fn error(&mut self, s: &str);
    /// An error reply whose text quotes client bytes verbatim (may not be UTF-8).
    fn error_bytes(&mut self, b: &[u8]) {
        self.error(&String::from_utf8_lossy(b));
    }
    /// An integer.
    fn int(&mut self, v: i64);
    /// A bulk (binary) string.
    fn bulk(&mut self, b: &[u8]);
    /// A bulk string given as two parts, `head` then `tail` (a flat hash's field or value, a
    /// flat sorted set's member: the shared prefix and its own suffix). A sink that writes bytes writes both without
    /// joining them; this default joins them when both are non-empty.
    fn bulk_parts(&mut self, head: &[u8], tail: &[u8]) {
        if head.is_empty() {
            self.bulk(tail);
        } else {
            self.bulk(&[head, tail].concat());
        }
    }
    /// The null reply for a missing string (`$-1` / `_`).
    fn null(&mut self);
    /// The null reply for a missing aggregate (`*-1` / `_`).
    fn null_array(&mut self);
    /// An array of `len` elements.
    fn array(&mut self, len: usize);
    /// A map of `len` key/value pairs (a flat array of `2*len` in RESP2).
    fn map(&mut self, len: usize);
    /// A set of `len` elements (an array in RESP2).
    fn set(&mut self, len: usize);
    /// An out-of-band push of `len` elements (an array in RESP2).
    fn push(&mut self, len: usize);
    /// A double (a bulk string in RESP2, formatted as Redis does).
    fn double(&mut self, v: f64);
    /// A boolean (`:1`/`:0` in RESP2).
    fn boolean(&mut self, v: bool);
    /// A verbatim string with a 3-letter format such as `txt` (a bulk string in RESP2).
    fn verbatim(&mut self, format: &str, text: &[u8]);
    /// A big number given as its decimal digits (a bulk string in RESP2).
    fn big_number(&mut self, digits: &str);
    /// An attribute of `len` key/value pairs, which annotates the reply that follows it
    /// (RESP3 only: a command calls it only when [`ReplySink::protocol`] is RESP3). Owned
    /// trees drop it, as clients that do not ask for attributes do.
    fn attribute(&mut self, len: usize);

    /// Convenience: `+OK`.
    fn ok(&mut self) {
        self.simple("OK");
    }
    /// Convenience: `+PONG` (a sink may write it as one constant, as Redis's `shared.pong`).
    fn pong(&mut self) {
        self.simple("PONG");
    }
    /// Convenience: a bulk string from text.
    fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }
    /// A double given with the text Redis prints for it (`addReplyHumanLongDouble`): the text
    /// as a bulk string in RESP2, a double in RESP3. A sink that writes bytes prints the text
    /// in RESP3 too; this default (the tree of replies) keeps the value.
    fn human_double(&mut self, v: f64, text: &str) {
        if self.protocol() == Protocol::Resp3 {
            self.double(v);
        } else {
            self.bulk(text.as_bytes());
        }
    }
}

/// An owned reply, for tests and for replies that are held before sending.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+text`
    Simple(String),
    /// `-text`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` bulk
    Bulk(Vec<u8>),
    /// missing string
    Null,
    /// missing aggregate
    NullArray,
    /// `*n`
    Array(Vec<Reply>),
    /// `%n` (pairs)
    Map(Vec<(Reply, Reply)>),
    /// `~n`
    Set(Vec<Reply>),
    /// `>n`
    Push(Vec<Reply>),
    /// `,d`
    Double(f64),
    /// `#t`/`#f`
    Boolean(bool),
    /// `=n fmt:text`
    Verbatim(String, Vec<u8>),
    /// `(digits`
    BigNumber(String),
}

impl Reply {
    /// Replays this reply into a sink.
    pub fn write_to(&self, out: &mut dyn ReplySink) {
        match self {
            Reply::Simple(s) => out.simple(s),
            Reply::Error(s) => out.error(s),
            Reply::Int(v) => out.int(*v),
            Reply::Bulk(b) => out.bulk(b),
            Reply::Null => out.null(),
            Reply::NullArray => out.null_array(),
            Reply::Array(items) => {
                out.array(items.len());
                items.iter().for_each(|r| r.write_to(out));
            }
            Reply::Map(pairs) => {
                out.map(pairs.len());
                for (k, v) in pairs {
                    k.write_to(out);
                    v.write_to(out);
                }
            }
            Reply::Set(items) => {
                out.set(items.len());
                items.iter().for_each(|r| r.write_to(out));
            }
            Reply::Push(items) => {
                out.push(items.len());
                items.iter().for_each(|r| r.write_to(out));
            }
            Reply::Double(d) => out.double(*d),
            Reply::Boolean(b) => out.boolean(*b),
            Reply::Verbatim(f, t) => out.verbatim(f, t),
            Reply::BigNumber(d) => out.big_number(d),
        }
    }
}

/// Aggregate being filled: its kind and how many elements it still waits for.
#[derive(Debug)]
struct Open {
    kind: u8,
    remaining: usize,
    items: Vec<Reply>,
}

/// A sink that builds owned [`Reply`] trees (one per top-level reply).
#[derive(Debug, Default)]
pub struct ReplyTree {
    protocol: Protocol,
    stack: Vec<Open>,
    /// Completed top-level replies, in order.
    pub replies: Vec<Reply>,
}

impl ReplyTree {
    /// A builder for the given protocol.
    pub fn new(protocol: Protocol) -> Self {
        ReplyTree {
            protocol,
            ..Default::default()
        }
    }

    /// Takes the completed replies.
    pub fn take(&mut self) -> Vec<Reply> {
        core::mem::take(&mut self.replies)
    }

    fn finish(&mut self, mut r: Reply) {
        loop {
            let Some(top) = self.stack.last_mut() else {
                self.replies.push(r);
                return;
            };
            top.items.push(r);
            top.remaining -= 1;
            if top.remaining > 0 {
                return;
            }
            let open = self.stack.pop().expect("non-empty");
            match Self::close(open) {
                Some(closed) => r = closed,
                // A complete attribute: dropped, its reply follows on its own.
                None => return,
            }
        }
    }

    /// The reply of a complete aggregate; `None` for an attribute, which is dropped.
    fn close(open: Open) -> Option<Reply> {
        Some(match open.kind {
            b'%' => {
                let mut it = open.items.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Reply::Map(pairs)
            }
            b'~' => Reply::Set(open.items),
            b'>' => Reply::Push(open.items),
            b'|' => return None,
            _ => Reply::Array(open.items),
        })
    }

    fn open(&mut self, kind: u8, len: usize) {
        if len == 0 {
            let empty = Self::close(Open {
                kind,
                remaining: 0,
                items: Vec::new(),
            });
            if let Some(r) = empty {
                self.finish(r);
            }
        } else {
            self.stack.push(Open {
                kind,
                remaining: len,
                items: Vec::with_capacity(len.min(1024)),
            });
        }
    }
}

impl ReplySink for ReplyTree {
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.protocol = p;
    }
    fn simple(&mut self, s: &str) {
        self.finish(Reply::Simple(s.into()))
    }
    fn error(&mut self, s: &str) {
        self.finish(Reply::Error(s.into()))
    }
    fn int(&mut self, v: i64) {
        self.finish(Reply::Int(v))
    }
    fn bulk(&mut self, b: &[u8]) {
        self.finish(Reply::Bulk(b.into()))
    }
    fn null(&mut self) {
        self.finish(Reply::Null)
    }
    fn null_array(&mut self) {
        self.finish(Reply::NullArray)
    }
    fn array(&mut self, len: usize) {
        self.open(b'*', len)
    }
    fn map(&mut self, len: usize) {
        self.open(b'%', len * 2)
    }
    fn set(&mut self, len: usize) {
        self.open(b'~', len)
    }
    fn push(&mut self, len: usize) {
        self.open(b'>', len)
    }
    fn double(&mut self, v: f64) {
        self.finish(Reply::Double(v))
    }
    fn boolean(&mut self, v: bool) {
        self.finish(Reply::Boolean(v))
    }
    fn verbatim(&mut self, format: &str, text: &[u8]) {
        self.finish(Reply::Verbatim(format.into(), text.into()))
    }
    fn big_number(&mut self, digits: &str) {
        self.finish(Reply::BigNumber(digits.into()))
    }
    fn attribute(&mut self, len: usize) {
        self.open(b'|', len * 2)
    }
}

/// A sink that drops everything (`CLIENT REPLY OFF`/`SKIP`).
#[derive(Debug)]
pub struct Discard(pub Protocol);

impl ReplySink for Discard {
    fn protocol(&self) -> Protocol {
        self.0
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.0 = p;
    }
    fn simple(&mut self, _: &str) {}
    fn error(&mut self, _: &str) {}
    fn int(&mut self, _: i64) {}
    fn bulk(&mut self, _: &[u8]) {}
    fn bulk_parts(&mut self, _: &[u8], _: &[u8]) {}
    fn null(&mut self) {}
    fn null_array(&mut self) {}
    fn array(&mut self, _: usize) {}
    fn map(&mut self, _: usize) {}
    fn set(&mut self, _: usize) {}
    fn push(&mut self, _: usize) {}
    fn double(&mut self, _: f64) {}
    fn boolean(&mut self, _: bool) {}
    fn verbatim(&mut self, _: &str, _: &[u8]) {}
    fn big_number(&mut self, _: &str) {}
    fn attribute(&mut self, _: usize) {}
}

/// A HELP reply as Redis words it: a header line, the given lines, then HELP's own entry.
pub fn help_reply(out: &mut dyn ReplySink, command: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&alloc::format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_builds_nested_aggregates() {
        let mut t = ReplyTree::new(Protocol::Resp3);
        t.array(2);
        t.int(1);
        t.map(1);
        t.bulk(b"k");
        t.array(0);
        t.ok();
        let got = t.take();
        assert_eq!(
            got,
            alloc::vec![
                Reply::Array(alloc::vec![
                    Reply::Int(1),
                    Reply::Map(alloc::vec![(
                        Reply::Bulk(b"k".to_vec()),
                        Reply::Array(alloc::vec![])
                    )])
                ]),
                Reply::Simple("OK".into())
            ]
        );
    }
}

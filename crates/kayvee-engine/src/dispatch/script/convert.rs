//! Replies to Lua values and back, as Redis 7.0 converts them (its `redisProtocolToLuaType`
//! and `luaReplyToRedisReply`), and a failed script's error text.
//!
//! A command's reply, in the protocol the script chose: integer → number, bulk → string,
//! null → `false` (RESP2) or `nil` (RESP3), status → `{ok=}`, error → `{err=}`, array →
//! table; RESP3 adds map → `{map={k=v}}`, set → `{set={k=true}}`, double → `{double=n}`,
//! boolean, big number → `{big_number=}`, verbatim → `{verbatim_string={format=,string=}}`.
//! A script's value: string → bulk, number → integer (truncated), boolean → `1`/null (RESP2)
//! or a boolean (after `redis.setresp(3)`), a table with `err`/`ok`/`double`/`big_number`/
//! `map`/`set`/`verbatim_string` as those, any other table → array up to its first nil,
//! anything else → null.

use crate::cmd::double::format_g17;
use crate::error::Error;
use crate::reply::{Reply, ReplySink};
use crate::stats::Stats;
use alloc::vec::Vec;
use kayvee_lua::{Lua, Type};

/// How deep converted values may nest (Lua's C stack is the limit otherwise).
const DEPTH_MAX: usize = 200;

/// A Lua number as an integer reply, as Redis's `(long long)` cast gives it on x86-64: cut
/// towards zero, and the "integer indefinite" `i64::MIN` for NaN and whatever is out of range
/// (Rust's `as` would saturate at `i64::MAX`).
fn c_long_long(n: f64) -> i64 {
    // 2^63: the first double above every i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// A number as `redis.call` passes it: the integer when whole, else `%.17g`.
pub fn number_text(n: f64) -> Vec<u8> {
    if n == libm::trunc(n) && n.abs() < 9.0e15 {
        alloc::format!("{}", n as i64).into_bytes()
    } else {
        let mut out = Vec::new();
        format_g17(n, &mut out);
        out
    }
}

/// Newlines become spaces (an error or status line must be one line).
pub fn one_line(mut text: Vec<u8>) -> Vec<u8> {
    for b in &mut text {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    text
}

/// The field Redis 7.0 sets (to `true`) in the error table of a command a script ran: the
/// error was counted (INFO errorstats, `total_error_replies`) when the command failed or was
/// refused, so the script's reply of that table does not count it again.
const COUNTED: &[u8] = b"ignore_error_stats_update";

/// Pushes `{err = text}`.
pub fn push_error_table(lua: &mut Lua, text: &[u8]) {
    lua.new_table(0, 1);
    lua.push_bytes(text);
    lua.raw_set_field(-2, b"err");
}

/// Pushes `{err = text, ignore_error_stats_update = true}`: the error of a command the script
/// ran, already counted (see [`COUNTED`]).
pub fn push_command_error(lua: &mut Lua, text: &[u8]) {
    push_error_table(lua, text);
    lua.push_bool(true);
    lua.raw_set_field(-2, COUNTED);
}

/// Whether the table at `idx` carries [`COUNTED`] (any value but `nil` and `false`).
fn counted(lua: &mut Lua, idx: i32) -> bool {
    lua.raw_get_field(idx, COUNTED);
    let set = lua.to_bool(-1);
    lua.pop(1);
    set
}

/// What the error replies in a script's value add to the script command's `failed_calls`, as
/// Redis 7.0 counts them: one for each error a command of the script returned (counted in the
/// error statistics already), and one if the value held other errors (counted as written).
#[derive(Default)]
struct Failures {
    counted: u64,
    fresh: bool,
}

/// Pushes a one-field table `{name = <the value on top>}`, popping the value.
fn wrap_field(lua: &mut Lua, name: &[u8]) {
    lua.new_table(0, 1);
    lua.insert(-2);
    lua.raw_set_field(-2, name);
}

/// Pushes the Lua form of a command's reply.
pub fn push_reply(lua: &mut Lua, reply: &Reply, resp3: bool) {
    lua.check_stack(8);
    match reply {
        Reply::Simple(s) => {
            lua.push_bytes(s.as_bytes());
            wrap_field(lua, b"ok");
        }
        Reply::Error(s) => push_command_error(lua, s.as_bytes()),
        Reply::Int(i) => lua.push_number(*i as f64),
        Reply::Bulk(b) => lua.push_bytes(b),
        Reply::Null | Reply::NullArray if resp3 => lua.push_nil(),
        Reply::Null | Reply::NullArray => lua.push_bool(false),
        Reply::Array(items) | Reply::Push(items) => push_array(lua, items, resp3),
        Reply::Set(items) if resp3 => {
            lua.new_table(0, items.len() as i32);
            for item in items {
                push_reply(lua, item, resp3);
                lua.push_bool(true);
                lua.raw_set(-3);
            }
            wrap_field(lua, b"set");
        }
        Reply::Set(items) => push_array(lua, items, resp3),
        Reply::Map(pairs) if resp3 => {
            lua.new_table(0, pairs.len() as i32);
            for (k, v) in pairs {
                push_reply(lua, k, resp3);
                push_reply(lua, v, resp3);
                lua.raw_set(-3);
            }
            wrap_field(lua, b"map");
        }
        Reply::Map(pairs) => {
            lua.new_table(pairs.len() as i32 * 2, 0);
            for (i, (k, v)) in pairs.iter().enumerate() {
                push_reply(lua, k, resp3);
                lua.raw_seti(-2, i as i32 * 2 + 1);
                push_reply(lua, v, resp3);
                lua.raw_seti(-2, i as i32 * 2 + 2);
            }
        }
        Reply::Double(d) if resp3 => {
            lua.push_number(*d);
            wrap_field(lua, b"double");
        }
        Reply::Double(d) => {
            let mut text = Vec::new();
            format_g17(*d, &mut text);
            lua.push_bytes(&text);
        }
        Reply::Boolean(b) if resp3 => lua.push_bool(*b),
        Reply::Boolean(b) => lua.push_number(f64::from(u8::from(*b))),
        Reply::BigNumber(d) if resp3 => {
            lua.push_bytes(d.as_bytes());
            wrap_field(lua, b"big_number");
        }
        Reply::BigNumber(d) => lua.push_bytes(d.as_bytes()),
        Reply::Verbatim(format, text) if resp3 => {
            lua.new_table(0, 2);
            lua.push_bytes(format.as_bytes());
            lua.raw_set_field(-2, b"format");
            lua.push_bytes(text);
            lua.raw_set_field(-2, b"string");
            wrap_field(lua, b"verbatim_string");
        }
        Reply::Verbatim(_, text) => lua.push_bytes(text),
    }
}

fn push_array(lua: &mut Lua, items: &[Reply], resp3: bool) {
    lua.new_table(items.len() as i32, 0);
    for (i, item) in items.iter().enumerate() {
        push_reply(lua, item, resp3);
        lua.raw_seti(-2, i as i32 + 1);
    }
}

/// Writes the script's value at `idx` as the client's reply, counting its error replies in
/// `stats` (but those of the script's commands, counted when they failed); returns what they
/// add to the script command's `failed_calls` (see [`Failures`]).
pub fn write_value(
    lua: &mut Lua,
    idx: i32,
    out: &mut dyn ReplySink,
    resp3: bool,
    stats: &mut Stats,
) -> u64 {
    let idx = lua.absolute(idx);
    let mut w = Writer {
        out,
        resp3,
        stats,
        failures: Failures::default(),
    };
    w.write_at(lua, idx, 0);
    w.failures.counted + u64::from(w.failures.fresh)
}

/// The value of string field `name` of the table at `idx`, if it is a string.
fn string_field(lua: &mut Lua, idx: i32, name: &[u8]) -> Option<Vec<u8>> {
    lua.raw_get_field(idx, name);
    let v = (lua.type_of(-1) == Type::String).then(|| lua.to_vec(-1).unwrap_or_default());
    lua.pop(1);
    v
}

/// A script's value being written as a reply.
struct Writer<'a> {
    out: &'a mut dyn ReplySink,
    resp3: bool,
    stats: &'a mut Stats,
    failures: Failures,
}

impl Writer<'_> {
    fn write_at(&mut self, lua: &mut Lua, idx: i32, depth: usize) {
        if depth > DEPTH_MAX || !lua.check_stack(8) {
            return self.error(b"ERR reached lua stack limit".to_vec(), false);
        }
        let out = &mut *self.out;
        match lua.type_of(idx) {
            Type::String => out.bulk(lua.to_bytes(idx).unwrap_or_default()),
            Type::Boolean if self.resp3 => out.boolean(lua.to_bool(idx)),
            Type::Boolean if lua.to_bool(idx) => out.int(1),
            Type::Number => out.int(c_long_long(lua.to_number(idx).unwrap_or(0.0))),
            Type::Table => self.write_table(lua, idx, depth),
            _ => out.null(),
        }
    }

    /// Writes error `text` (made one line), counting it unless `counted` already.
    fn error(&mut self, text: Vec<u8>, counted: bool) {
        let text = one_line(text);
        if counted {
            self.failures.counted += 1;
        } else {
            self.stats
                .count_error(&alloc::string::String::from_utf8_lossy(&text));
            self.failures.fresh = true;
        }
        self.out.error_bytes(&text);
    }

    fn write_table(&mut self, lua: &mut Lua, idx: i32, depth: usize) {
        if let Some(err) = string_field(lua, idx, b"err") {
            let counted = counted(lua, idx);
            return self.error(err, counted);
        }
        let out = &mut *self.out;
        if let Some(ok) = string_field(lua, idx, b"ok") {
            return out.simple(&alloc::string::String::from_utf8_lossy(&one_line(ok)));
        }
        lua.raw_get_field(idx, b"double");
        if lua.type_of(-1) == Type::Number {
            out.double(lua.to_number(-1).unwrap_or(0.0));
            return lua.pop(1);
        }
        lua.pop(1);
        if let Some(digits) = string_field(lua, idx, b"big_number") {
            return out.big_number(&alloc::string::String::from_utf8_lossy(&one_line(digits)));
        }
        for kind in [&b"map"[..], b"set"] {
            lua.raw_get_field(idx, kind);
            if lua.type_of(-1) == Type::Table {
                self.write_pairs(lua, depth, kind == b"map");
                return lua.pop(1);
            }
            lua.pop(1);
        }
        lua.raw_get_field(idx, b"verbatim_string");
        if lua.type_of(-1) == Type::Table {
            let t = lua.top();
            let format = string_field(lua, t, b"format");
            let text = string_field(lua, t, b"string");
            if let (Some(f), Some(s)) = (format, text) {
                out.verbatim(&alloc::string::String::from_utf8_lossy(&f), &s);
                return lua.pop(1);
            }
        }
        lua.pop(1);
        self.write_array(lua, idx, depth);
    }

    /// The table on top as a map (its pairs) or a set (its keys).
    fn write_pairs(&mut self, lua: &mut Lua, depth: usize, map: bool) {
        let t = lua.top();
        let mut n = 0;
        lua.push_nil();
        while lua.next(t) {
            n += 1;
            lua.pop(1);
        }
        if map {
            self.out.map(n);
        } else {
            self.out.set(n);
        }
        lua.push_nil();
        while lua.next(t) {
            let k = lua.top() - 1;
            self.write_at(lua, k, depth + 1);
            if map {
                self.write_at(lua, k + 1, depth + 1);
            }
            lua.pop(1);
        }
    }

    /// The table at `idx` as an array: its elements from 1 up to the first nil.
    fn write_array(&mut self, lua: &mut Lua, idx: i32, depth: usize) {
        let mut n = 0;
        loop {
            lua.raw_geti(idx, n as i32 + 1);
            let nil = lua.type_of(-1) == Type::Nil;
            lua.pop(1);
            if nil {
                break;
            }
            n += 1;
        }
        self.out.array(n);
        for i in 0..n {
            lua.raw_geti(idx, i as i32 + 1);
            let top = lua.top();
            self.write_at(lua, top, depth + 1);
            lua.pop(1);
        }
    }
}

/// The error reply of a script that raised an error (the handler's table on top): Redis's
/// `<message> script: <sha>, on <source>:<line>.`, the message being the raised table's `err`
/// or `ERR ` and the raised value; true when that is the error of a command the script ran,
/// counted in the error statistics already (see [`COUNTED`]).
pub fn failure(lua: &mut Lua, name: &[u8]) -> (Error, bool) {
    let t = lua.top();
    if lua.type_of(t) != Type::Table {
        let msg = lua.to_vec(t).unwrap_or_default();
        return (Error::Bytes(one_line([&b"ERR "[..], &msg].concat())), false);
    }
    lua.raw_get_field(t, b"message");
    let mut was_counted = false;
    let msg = match lua.type_of(-1) {
        Type::Table => {
            let m = lua.top();
            was_counted = counted(lua, m);
            string_field(lua, m, b"err").unwrap_or_else(|| b"ERR unknown error".to_vec())
        }
        Type::String | Type::Number => {
            [&b"ERR "[..], lua.to_bytes(-1).unwrap_or_default()].concat()
        }
        Type::Nil => b"ERR nil".to_vec(),
        _ => b"ERR unknown error".to_vec(),
    };
    lua.pop(1);
    let source = string_field(lua, t, b"source");
    lua.raw_get_field(t, b"line");
    let line = lua.to_number(-1);
    lua.pop(1);
    let mut text = msg;
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(b" script: ");
        text.extend_from_slice(name);
        text.extend_from_slice(b", on ");
        text.extend_from_slice(&source);
        text.extend_from_slice(alloc::format!(":{}.", line as i64).as_bytes());
    }
    (Error::Bytes(one_line(text)), was_counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_replies_cut_numbers_as_x86_64_casts_them() {
        assert_eq!(c_long_long(3.99), 3);
        assert_eq!(c_long_long(-7.9), -7);
        assert_eq!(c_long_long(-9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(c_long_long(9_223_372_036_854_775_807.0), i64::MIN);
        assert_eq!(c_long_long(1e300), i64::MIN);
        assert_eq!(c_long_long(f64::NAN), i64::MIN);
    }
}

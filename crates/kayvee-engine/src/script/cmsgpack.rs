//! The `cmsgpack` library scripts get (lua-cmsgpack 0.4.0's API, behaviour and error texts,
//! as Redis 7.0 loads it), written here as host functions: `pack`, `unpack`, `unpack_one`,
//! `unpack_limit` and the library's `_NAME`, `_VERSION`, `_COPYRIGHT`, `_DESCRIPTION`.
//!
//! Packing: a number that is a whole value in the 64-bit range becomes the smallest MessagePack
//! integer, any other a float 32 when exact, else a float 64; strings are `str` (fixstr, str 8,
//! 16, 32); a table whose keys are exactly 1..n is an array, any other table a map (in the
//! order `next` gives); tables nested 16 deep, functions and other values are nil. Unpacking
//! reads the `str` forms as strings, and fails on `bin` and extension types (as 0.4.0 does).

use alloc::format;
use alloc::vec::Vec;
use kayvee_lua::{Lua, Raise, Type};

/// The first host function number of the library.
pub const FIRST: i32 = 300;

/// The library's functions, in host-number order.
pub const NAMES: &[&str] = &["pack", "unpack", "unpack_one", "unpack_limit"];

/// The library's string fields.
pub const FIELDS: &[(&str, &str)] = &[
    ("_NAME", "cmsgpack"),
    ("_VERSION", "lua-cmsgpack 0.4.0"),
    ("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo"),
    ("_DESCRIPTION", "MessagePack C implementation for Lua"),
];

/// Tables nested this deep are packed as nil (circular references end there).
const MAX_NESTING: u32 = 16;

/// Runs `cmsgpack.<NAMES[id - FIRST]>`.
pub fn call(lua: &mut Lua, id: i32) -> Result<i32, Raise> {
    match id - FIRST {
        0 => pack(lua),
        1 => unpack(lua, 0, 0),
        2 => {
            let offset = lua.opt_integer(2, 0)? as i32;
            keep_first(lua);
            unpack(lua, 1, offset)
        }
        _ => {
            let limit = lua.check_integer(2)? as i32;
            let offset = lua.opt_integer(3, 0)? as i32;
            keep_first(lua);
            unpack(lua, limit, offset)
        }
    }
}

/// Drops every argument but the first.
fn keep_first(lua: &mut Lua) {
    if lua.top() > 1 {
        lua.set_top(1);
    }
}

fn pack(lua: &mut Lua) -> Result<i32, Raise> {
    let n = lua.top();
    if n == 0 {
        return Err(lua.arg_error(0, b"MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for i in 1..=n {
        if !lua.check_stack(4) {
            return Err(lua.error_here(b"stack overflow (in function mp_check)"));
        }
        lua.push_value(i);
        encode(lua, &mut out, 0);
    }
    lua.push_bytes(&out);
    Ok(1)
}

/// Appends the value on top and pops it.
fn encode(lua: &mut Lua, out: &mut Vec<u8>, level: u32) {
    let mut t = lua.type_of(-1);
    if t == Type::Table && level == MAX_NESTING {
        t = Type::Nil;
    }
    match t {
        Type::String => encode_str(out, lua.to_bytes(-1).unwrap_or_default()),
        Type::Boolean => out.push(if lua.to_bool(-1) { 0xc3 } else { 0xc2 }),
        Type::Number => encode_number(out, lua.to_number(-1).unwrap_or(0.0)),
        Type::Table => encode_table(lua, out, level),
        _ => out.push(0xc0),
    }
    lua.pop(1);
}

fn encode_str(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// Whether `n` is a whole number an `int64_t` holds exactly.
fn is_int64(n: f64) -> bool {
    (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) && libm::trunc(n) == n
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    if is_int64(n) {
        encode_int(out, n as i64);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_bits().to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_bits().to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Whether the table on top has exactly the keys 1..n (an empty table is an array).
fn is_array(lua: &mut Lua) -> bool {
    let top = lua.top();
    let (mut count, mut max) = (0i64, 0i64);
    lua.push_nil();
    while lua.next(top) {
        lua.pop(1);
        let key = match lua.type_of(-1) {
            Type::Number => lua.to_number(-1).unwrap_or(0.0),
            _ => 0.0,
        };
        // The key must be a positive whole number a C `int` holds.
        if key <= 0.0 || key >= 2_147_483_648.0 || libm::trunc(key) != key {
            lua.set_top(top);
            return false;
        }
        max = max.max(key as i64);
        count += 1;
    }
    max == count
}

fn encode_table(lua: &mut Lua, out: &mut Vec<u8>, level: u32) {
    // A key, its value and a copy of the key (16 levels at most: the room is always there).
    lua.check_stack(4);
    let table = lua.top();
    if is_array(lua) {
        let n = lua.raw_len(table);
        header(out, n, 0x90, 0xdc);
        for i in 1..=n {
            lua.raw_geti(table, i as i32);
            encode(lua, out, level + 1);
        }
    } else {
        let mut n = 0;
        lua.push_nil();
        while lua.next(table) {
            lua.pop(1);
            n += 1;
        }
        header(out, n, 0x80, 0xde);
        lua.push_nil();
        while lua.next(table) {
            lua.push_value(-2);
            encode(lua, out, level + 1);
            encode(lua, out, level + 1);
        }
    }
}

/// An array's or a map's header: the fix form up to 15 entries, then 16 and 32 bits.
fn header(out: &mut Vec<u8>, n: usize, fix: u8, wide: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Why decoding stopped.
enum Bad {
    /// The input ends inside a value.
    Missing,
    /// A byte no value starts with.
    Format,
    /// An error already pushed (a Lua error to raise as it is).
    Raised,
    /// The Lua stack cannot hold another level (in the C library's function of that name).
    Overflow(&'static str),
}

/// `unpack`, `unpack_one` and `unpack_limit`: `limit` values (all when both are 0) from byte
/// `offset`, preceded by the offset of the next value (-1 at the end) unless all are read.
fn unpack(lua: &mut Lua, limit: i32, offset: i32) -> Result<i32, Raise> {
    let s = lua.check_vec(1)?;
    let all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        let msg = format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            s.len() as i32
        );
        return Err(lua.error_here(msg.as_bytes()));
    }
    if offset as usize > s.len() {
        let msg = format!(
            "Start offset {offset} greater than input length {}.",
            s.len() as i32
        );
        return Err(lua.error_here(msg.as_bytes()));
    }
    let limit = if all { i32::MAX } else { limit };
    let mut cur = Cursor {
        s: &s,
        at: offset as usize,
    };
    let mut count = 0;
    while cur.at < s.len() && count < limit {
        if !lua.check_stack(1) {
            return Err(lua.error_here(b"stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"));
        }
        match decode(lua, &mut cur) {
            Ok(()) => {}
            Err(Bad::Missing) => return Err(lua.error_here(b"Missing bytes in input.")),
            Err(Bad::Format) => return Err(lua.error_here(b"Bad data format in input.")),
            Err(Bad::Raised) => return Err(Raise),
            Err(Bad::Overflow(which)) => {
                let msg = format!("stack overflow (in function {which})");
                return Err(lua.error_here(msg.as_bytes()));
            }
        }
        count += 1;
    }
    if !all {
        if !lua.check_stack(1) {
            return Err(lua.error_here(b"stack overflow (in function mp_unpack_full)"));
        }
        let next = if cur.at == s.len() {
            -1.0
        } else {
            f64::from(cur.at as i32)
        };
        lua.push_number(next);
        lua.insert(2);
        count += 1;
    }
    Ok(count)
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], Bad> {
        if self.s.len() - self.at < n {
            return Err(Bad::Missing);
        }
        let out = &self.s[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    /// A big-endian unsigned integer of `n` bytes.
    fn uint(&mut self, n: usize) -> Result<u64, Bad> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }
}

/// An array or map being filled while decoding.
enum Open {
    /// An array: entries left, the next index.
    Array(u64, i32),
    /// A map: pairs left, whether its key is on the stack.
    Map(u64, bool),
}

/// Pushes the next value. Iterative (nested containers are kept in `open`, not on the
/// machine stack); the Lua stack bounds the depth as it does in the C library, where each
/// level holds a table and a key.
fn decode(lua: &mut Lua, c: &mut Cursor) -> Result<(), Bad> {
    let mut open: Vec<Open> = Vec::new();
    loop {
        let b = c.take(1)?[0];
        let container = match b {
            0xdc => Some(Open::Array(c.uint(2)?, 1)),
            0xdd => Some(Open::Array(c.uint(4)?, 1)),
            0xde => Some(Open::Map(c.uint(2)?, false)),
            0xdf => Some(Open::Map(c.uint(4)?, false)),
            _ if b & 0xf0 == 0x90 => Some(Open::Array(u64::from(b & 0x0f), 1)),
            _ if b & 0xf0 == 0x80 => Some(Open::Map(u64::from(b & 0x0f), false)),
            _ => {
                scalar(lua, c, b)?;
                None
            }
        };
        if let Some(container) = container {
            lua.new_table(0, 0);
            let (room, which) = match container {
                Open::Array(..) => (2, "mp_decode_to_lua_array"),
                Open::Map(..) => (3, "mp_decode_to_lua_hash"),
            };
            if !lua.check_stack(room + open.len() as i32) {
                return Err(Bad::Overflow(which));
            }
            if matches!(container, Open::Array(n, _) | Open::Map(n, _) if n > 0) {
                open.push(container);
                continue;
            }
        }
        // A whole value is on top: it goes into the containers it completes.
        loop {
            match open.last_mut() {
                None => return Ok(()),
                Some(Open::Array(left, index)) => {
                    lua.raw_seti(-2, *index);
                    *index = index.wrapping_add(1);
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                }
                Some(Open::Map(left, key)) => {
                    if !*key {
                        *key = true;
                        break;
                    }
                    // Setting a nil or NaN key is Lua's own error (no position: raised in C).
                    let bad = match lua.type_of(-2) {
                        Type::Nil => Some(&b"table index is nil"[..]),
                        Type::Number if lua.to_number(-2).is_some_and(f64::is_nan) => {
                            Some(&b"table index is NaN"[..])
                        }
                        _ => None,
                    };
                    if let Some(msg) = bad {
                        lua.push_bytes(msg);
                        return Err(Bad::Raised);
                    }
                    lua.raw_set(-3);
                    *key = false;
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                }
            }
            open.pop();
        }
    }
}

/// Pushes the value of the scalar starting with byte `b`.
fn scalar(lua: &mut Lua, c: &mut Cursor, b: u8) -> Result<(), Bad> {
    match b {
        0xcc..=0xce => {
            let n = c.uint(1 << (b - 0xcc))?;
            lua.push_number(n as f64);
        }
        0xcf | 0xd3 => {
            let n = c.uint(8)? as i64;
            lua.push_number(n as f64);
        }
        0xd0 => {
            let n = c.uint(1)? as u8 as i8;
            lua.push_number(f64::from(n));
        }
        0xd1 => {
            let n = c.uint(2)? as u16 as i16;
            lua.push_number(f64::from(n));
        }
        0xd2 => {
            let n = c.uint(4)? as u32 as i32;
            lua.push_number(f64::from(n));
        }
        0xc0 => lua.push_nil(),
        0xc2 => lua.push_bool(false),
        0xc3 => lua.push_bool(true),
        0xca => {
            let f = f32::from_bits(c.uint(4)? as u32);
            lua.push_number(f64::from(f));
        }
        0xcb => lua.push_number(f64::from_bits(c.uint(8)?)),
        0xd9..=0xdb => {
            let n = c.uint(1 << (b - 0xd9))? as usize;
            lua.push_bytes(c.take(n)?);
        }
        _ if b & 0x80 == 0 => lua.push_number(f64::from(b)),
        _ if b & 0xe0 == 0xe0 => lua.push_number(f64::from(b as i8)),
        _ if b & 0xe0 == 0xa0 => {
            let n = usize::from(b & 0x1f);
            lua.push_bytes(c.take(n)?);
        }
        _ => return Err(Bad::Format),
    }
    Ok(())
}

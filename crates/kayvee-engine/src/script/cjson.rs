//! The `cjson` library scripts get (lua-cjson 2.1's API and error texts, as Redis loads it),
//! written here as host functions: `encode`, `decode`, `null`, and the settings Redis's tests
//! use (`encode_max_depth`, `decode_max_depth`, `encode_invalid_numbers`,
//! `encode_keep_buffer`). Numbers are written with `%.14g`; a table is an array when all its
//! keys are positive integers (not too sparse), else an object; an empty table is `{}`.

use alloc::format;
use alloc::vec::Vec;
use kayvee_lua::{Lua, Raise, Type};

/// The first host function number of the library.
pub const FIRST: i32 = 200;

/// The library's functions, in host-number order.
pub const NAMES: &[&str] = &[
    "encode",
    "decode",
    "encode_max_depth",
    "decode_max_depth",
    "encode_invalid_numbers",
    "encode_keep_buffer",
];

/// The library's settings (per VM).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    encode_max_depth: u32,
    decode_max_depth: u32,
    invalid_numbers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            invalid_numbers: false,
        }
    }
}

fn fail(lua: &mut Lua, msg: &str) -> Raise {
    lua.error_here(msg.as_bytes())
}

/// Runs `cjson.<NAMES[id - FIRST]>`.
pub fn call(lua: &mut Lua, id: i32, cfg: &mut Config) -> Result<i32, Raise> {
    match NAMES[(id - FIRST) as usize] {
        "encode" => {
            if lua.top() != 1 {
                return Err(fail(
                    lua,
                    "bad argument #1 to 'encode' (expected 1 argument)",
                ));
            }
            let mut out = Vec::new();
            encode(lua, 1, cfg, 0, &mut out).map_err(|m| fail(lua, &m))?;
            lua.push_bytes(&out);
            Ok(1)
        }
        "decode" => {
            let Some(text) = lua.to_vec(1) else {
                return Err(fail(lua, "bad argument #1 to 'decode' (string expected)"));
            };
            let mut d = Decoder {
                s: &text,
                i: 0,
                depth: 0,
                max: cfg.decode_max_depth,
            };
            d.value(lua).map_err(|m| fail(lua, &m))?;
            d.skip_ws();
            if d.i < text.len() {
                let msg = format!(
                    "Expected the end but found invalid token at character {}",
                    d.i + 1
                );
                return Err(fail(lua, &msg));
            }
            Ok(1)
        }
        "encode_max_depth" | "decode_max_depth" => {
            let setting = if id - FIRST == 2 {
                &mut cfg.encode_max_depth
            } else {
                &mut cfg.decode_max_depth
            };
            if let Some(n) = lua.to_number(1) {
                *setting = n.clamp(1.0, 2_147_483_647.0) as u32;
            }
            lua.push_number(f64::from(*setting));
            Ok(1)
        }
        "encode_invalid_numbers" => {
            if lua.type_of(1) != Type::None {
                cfg.invalid_numbers = lua.to_bool(1);
            }
            lua.push_bool(cfg.invalid_numbers);
            Ok(1)
        }
        _ => {
            lua.push_bool(true);
            Ok(1)
        }
    }
}

/// `%.14g`, as Lua prints numbers (exactly as C's, `-0` included).
fn number(n: f64, out: &mut Vec<u8>) {
    kayvee_lua::libc::format::g(n, 14, out);
}

fn string(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode(
    lua: &mut Lua,
    idx: i32,
    cfg: &Config,
    depth: u32,
    out: &mut Vec<u8>,
) -> Result<(), alloc::string::String> {
    match lua.type_of(idx) {
        Type::Nil | Type::LightUserdata => out.extend_from_slice(b"null"),
        Type::Boolean => out.extend_from_slice(if lua.to_bool(idx) { b"true" } else { b"false" }),
        Type::Number => {
            let n = lua.to_number(idx).unwrap_or(0.0);
            if !n.is_finite() {
                if !cfg.invalid_numbers {
                    return Err("Cannot serialise number: must not be NaN or Infinity".into());
                }
                out.extend_from_slice(if n.is_nan() {
                    b"nan"
                } else if n > 0.0 {
                    b"inf"
                } else {
                    b"-inf"
                });
            } else {
                number(n, out);
            }
        }
        Type::String => string(lua.to_bytes(idx).unwrap_or_default(), out),
        Type::Table => {
            if depth + 1 > cfg.encode_max_depth {
                return Err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                ));
            }
            if !lua.check_stack(4) {
                return Err("Cannot serialise, excessive nesting".into());
            }
            table(lua, idx, cfg, depth + 1, out)?;
        }
        t => {
            let name = match t {
                Type::Function => "function",
                Type::Userdata => "userdata",
                _ => "thread",
            };
            return Err(format!("Cannot serialise {name}: type not supported"));
        }
    }
    Ok(())
}

/// The array length of the table at `idx` (`Some(0)` when empty: an object), `None` for an
/// object, `Err` for an excessively sparse array.
fn array_len(lua: &mut Lua, idx: i32) -> Result<Option<usize>, alloc::string::String> {
    let (mut max, mut count) = (0usize, 0usize);
    lua.push_nil();
    while lua.next(idx) {
        lua.pop(1);
        let k = if lua.type_of(-1) == Type::Number {
            lua.to_number(-1)
        } else {
            None
        };
        match k {
            Some(k) if k >= 1.0 && k == libm::floor(k) => {
                max = max.max(k as usize);
                count += 1;
            }
            _ => {
                lua.pop(1);
                return Ok(None);
            }
        }
    }
    if max > 10 && max > count * 2 {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    Ok(Some(max))
}

fn table(
    lua: &mut Lua,
    idx: i32,
    cfg: &Config,
    depth: u32,
    out: &mut Vec<u8>,
) -> Result<(), alloc::string::String> {
    let idx = lua.absolute(idx);
    if let Some(n) = array_len(lua, idx)?.filter(|&n| n > 0) {
        out.push(b'[');
        for i in 1..=n {
            if i > 1 {
                out.push(b',');
            }
            lua.raw_geti(idx, i as i32);
            let r = encode(lua, -1, cfg, depth, out);
            lua.pop(1);
            r?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    let mut first = true;
    lua.push_nil();
    while lua.next(idx) {
        if !first {
            out.push(b',');
        }
        first = false;
        match lua.type_of(-2) {
            Type::String => string(lua.to_bytes(-2).unwrap_or_default(), out),
            Type::Number => {
                out.push(b'"');
                number(lua.to_number(-2).unwrap_or(0.0), out);
                out.push(b'"');
            }
            _ => {
                lua.pop(2);
                return Err("Cannot serialise table: table key must be a number or string".into());
            }
        }
        out.push(b':');
        let r = encode(lua, -1, cfg, depth, out);
        lua.pop(1);
        if r.is_err() {
            lua.pop(1);
            return r;
        }
    }
    out.push(b'}');
    Ok(())
}

struct Decoder<'a> {
    s: &'a [u8],
    i: usize,
    depth: u32,
    max: u32,
}

impl Decoder<'_> {
    fn skip_ws(&mut self) {
        while self
            .s
            .get(self.i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.i += 1;
        }
    }

    fn invalid(&self, what: &str) -> alloc::string::String {
        format!(
            "Expected {what} but found invalid token at character {}",
            self.i + 1
        )
    }

    fn value(&mut self, lua: &mut Lua) -> Result<(), alloc::string::String> {
        self.skip_ws();
        if !lua.check_stack(4) {
            return Err("Found too many nested data structures".into());
        }
        match self.s.get(self.i) {
            Some(b'{') => self.object(lua),
            Some(b'[') => self.array(lua),
            Some(b'"') => {
                let b = self.string()?;
                lua.push_bytes(&b);
                Ok(())
            }
            Some(b't') if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                lua.push_bool(true);
                Ok(())
            }
            Some(b'f') if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                lua.push_bool(false);
                Ok(())
            }
            Some(b'n') if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                lua.push_null_userdata();
                Ok(())
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|c| {
                    c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.i += 1;
                }
                let text = core::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                let n: f64 = text.parse().map_err(|_| {
                    self.i = start;
                    self.invalid("value")
                })?;
                lua.push_number(n);
                Ok(())
            }
            _ => Err(self.invalid("value")),
        }
    }

    fn nest(&mut self) -> Result<(), alloc::string::String> {
        self.depth += 1;
        if self.depth > self.max {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                self.i + 1
            ));
        }
        Ok(())
    }

    fn array(&mut self, lua: &mut Lua) -> Result<(), alloc::string::String> {
        self.nest()?;
        self.i += 1;
        lua.new_table(0, 0);
        self.skip_ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        let mut n = 1;
        loop {
            self.value(lua)?;
            lua.raw_seti(-2, n);
            n += 1;
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.invalid("comma or array end")),
            }
        }
    }

    fn object(&mut self, lua: &mut Lua) -> Result<(), alloc::string::String> {
        self.nest()?;
        self.i += 1;
        lua.new_table(0, 0);
        self.skip_ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.invalid("object key string"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.invalid("colon"));
            }
            self.i += 1;
            lua.push_bytes(&key);
            self.value(lua)?;
            lua.raw_set(-3);
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.invalid("comma or object end")),
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, alloc::string::String> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                self.i = start;
                return Err(self.invalid("value"));
            };
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.invalid("value"));
                    };
                    self.i += 1;
                    match e {
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = self
                                .s
                                .get(self.i..self.i + 4)
                                .and_then(|h| core::str::from_utf8(h).ok());
                            let Some(cp) = hex.and_then(|h| u32::from_str_radix(h, 16).ok()) else {
                                return Err(self.invalid("value"));
                            };
                            self.i += 4;
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

//! The `struct` library scripts get (Roberto Ierusalimschy's struct 0.2 API, behaviour and
//! error texts, as Redis 7.0 loads it), written here as host functions: `pack(fmt, ...)`,
//! `unpack(fmt, data [, init])` and `size(fmt)`.
//!
//! A format is a sequence of options: `>` / `<` big / little endian (little is the default,
//! the native order of the machines Redis runs on), `!n` maximum alignment (a power of 2;
//! `!` alone is 8; 1 until set), `x` one zero byte, `b`/`B` `h`/`H` `l`/`L` `T` `in`/`In`
//! signed/unsigned integers of 1, 2, 8, 8 and n bytes (4 by default, at most 32), `f` / `d`
//! float and double, `s` a zero-terminated string, `cn` n bytes (1 by default; `c0`: the whole
//! string when packing, the length given by the value before it when unpacking), and spaces.
//! Items are aligned to their size, at most the maximum alignment.

use alloc::format;
use alloc::vec::Vec;
use kayvee_lua::{Lua, Raise};

/// The first host function number of the library.
pub const FIRST: i32 = 400;

/// The library's functions, in host-number order.
pub const NAMES: &[&str] = &["pack", "unpack", "size"];

/// The largest integer size (`in`).
const MAX_INT_SIZE: usize = 32;
/// The alignment `!` alone sets (a double's).
const MAX_ALIGN: usize = 8;

/// The format's running state.
struct Header {
    big: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            big: false,
            align: 1,
        }
    }
}

/// Runs `struct.<NAMES[id - FIRST]>`.
pub fn call(lua: &mut Lua, id: i32) -> Result<i32, Raise> {
    match id - FIRST {
        0 => pack(lua),
        1 => unpack(lua),
        _ => size(lua),
    }
}

/// Reads a decimal number at `fmt[*i..]`, `default` when there is none.
fn number(lua: &mut Lua, fmt: &[u8], i: &mut usize, default: usize) -> Result<usize, Raise> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: i32 = 0;
    while let Some(&d) = fmt.get(*i).filter(|d| d.is_ascii_digit()) {
        let digit = i32::from(d - b'0');
        if a > i32::MAX / 10 || a * 10 > i32::MAX - digit {
            return Err(lua.error_here(b"integral size overflow"));
        }
        a = a * 10 + digit;
        *i += 1;
    }
    Ok(a as usize)
}

/// The size of option `opt` (0 for the ones that have none), reading its number.
fn option_size(lua: &mut Lua, opt: u8, fmt: &[u8], i: &mut usize) -> Result<usize, Raise> {
    Ok(match opt {
        b'b' | b'B' | b'x' => 1,
        b'h' | b'H' => 2,
        b'l' | b'L' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => number(lua, fmt, i, 1)?,
        b'i' | b'I' => {
            let n = number(lua, fmt, i, 4)?;
            if n > MAX_INT_SIZE {
                let msg = format!("integral size {n} is larger than limit of {MAX_INT_SIZE}");
                return Err(lua.error_here(msg.as_bytes()));
            }
            n
        }
        _ => 0,
    })
}

/// Padding before an item of `size` bytes of option `opt` at offset `at`.
fn padding(at: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (at & (size - 1))) & (size - 1)
}

/// The options that set the byte order and the alignment (and spaces); any other is an error.
fn control(lua: &mut Lua, opt: u8, fmt: &[u8], i: &mut usize, h: &mut Header) -> Result<(), Raise> {
    match opt {
        b' ' => {}
        b'>' => h.big = true,
        b'<' => h.big = false,
        b'!' => {
            let a = number(lua, fmt, i, MAX_ALIGN)?;
            if !a.is_power_of_two() {
                let msg = format!("alignment {a} is not a power of 2");
                return Err(lua.error_here(msg.as_bytes()));
            }
            h.align = a;
        }
        _ => {
            let msg = [&b"invalid format option '"[..], &[opt], b"'"].concat();
            return Err(lua.arg_error(1, &msg));
        }
    }
    Ok(())
}

/// Argument `arg` of `pack` as a number. The C library pushes a nil right after its
/// arguments (before its buffer), so the first missing one is reported as nil.
fn pack_number(lua: &mut Lua, arg: i32, nargs: i32) -> Result<f64, Raise> {
    if arg == nargs + 1 {
        return Err(lua.arg_error(arg, b"number expected, got nil"));
    }
    lua.check_number(arg)
}

fn pack(lua: &mut Lua) -> Result<i32, Raise> {
    let fmt = lua.check_vec(1)?;
    let nargs = lua.top();
    let mut h = Header::default();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while let Some(&opt) = fmt.get(i) {
        i += 1;
        let mut size = option_size(lua, opt, &fmt, &mut i)?;
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = pack_number(lua, arg, nargs)?;
                arg += 1;
                let value = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let bytes = (0..size).map(|k| if k < 8 { (value >> (8 * k)) as u8 } else { 0 });
                let start = out.len();
                out.extend(bytes);
                if h.big {
                    out[start..].reverse();
                }
            }
            b'x' => out.push(0),
            b'f' | b'd' => {
                let n = pack_number(lua, arg, nargs)?;
                arg += 1;
                let start = out.len();
                if opt == b'f' {
                    out.extend_from_slice(&(n as f32).to_le_bytes());
                } else {
                    out.extend_from_slice(&n.to_le_bytes());
                }
                if h.big {
                    out[start..].reverse();
                }
            }
            b'c' | b's' => {
                if arg == nargs + 1 {
                    return Err(lua.arg_error(arg, b"string expected, got nil"));
                }
                let s = lua.check_vec(arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(lua.arg_error(arg, b"string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(lua, opt, &fmt, &mut i, &mut h)?,
        }
    }
    lua.push_bytes(&out);
    Ok(1)
}

/// An integer of `bytes`, sign-extended from its top bit when `signed` (as the C library
/// does it with 64-bit arithmetic: only the low 8 bytes count).
fn integer(bytes: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut add = |b: u8| l = (l << 8) | u64::from(b);
    if big {
        bytes.iter().for_each(|&b| add(b));
    } else {
        bytes.iter().rev().for_each(|&b| add(b));
    }
    if !signed {
        return l as f64;
    }
    let shift = (bytes.len() * 8).wrapping_sub(1) & 63;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &mut Lua) -> Result<i32, Raise> {
    let fmt = lua.check_vec(1)?;
    let data = lua.check_vec(2)?;
    let pos = lua.opt_integer(3, 1)? - 1;
    if pos < 0 {
        return Err(lua.arg_error(3, b"offset must be 1 or greater"));
    }
    let mut pos = pos as usize;
    let mut h = Header::default();
    let mut n = 0;
    let mut i = 0;
    while let Some(&opt) = fmt.get(i) {
        i += 1;
        let mut size = option_size(lua, opt, &fmt, &mut i)?;
        pos += padding(pos, &h, opt, size);
        if pos + size > data.len() {
            return Err(lua.arg_error(2, b"data string too short"));
        }
        if !lua.check_stack(2) {
            return Err(lua.error_here(b"stack overflow (too many results)"));
        }
        let at = &data[pos..pos + size];
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                lua.push_number(integer(at, h.big, opt.is_ascii_lowercase()));
                n += 1;
            }
            b'x' => {}
            b'f' | b'd' => {
                let mut b = at.to_vec();
                if h.big {
                    b.reverse();
                }
                let v = match opt {
                    b'f' => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    _ => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
                };
                lua.push_number(v);
                n += 1;
            }
            b'c' => {
                if size == 0 {
                    let Some(len) = (n > 0).then(|| lua.to_number(-1)).flatten() else {
                        return Err(lua.error_here(b"format 'c0' needs a previous size"));
                    };
                    size = len as usize;
                    lua.pop(1);
                    n -= 1;
                    if pos + size > data.len() {
                        return Err(lua.arg_error(2, b"data string too short"));
                    }
                }
                lua.push_bytes(&data[pos..pos + size]);
                n += 1;
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(lua.error_here(b"unfinished string in data"));
                };
                lua.push_bytes(&data[pos..pos + len]);
                size = len + 1;
                n += 1;
            }
            _ => control(lua, opt, &fmt, &mut i, &mut h)?,
        }
        pos += size;
    }
    lua.push_number((pos + 1) as f64);
    Ok(n + 1)
}

fn size(lua: &mut Lua) -> Result<i32, Raise> {
    let fmt = lua.check_vec(1)?;
    let mut h = Header::default();
    let mut pos = 0usize;
    let mut i = 0;
    while let Some(&opt) = fmt.get(i) {
        i += 1;
        let size = option_size(lua, opt, &fmt, &mut i)?;
        pos += padding(pos, &h, opt, size);
        if opt == b's' {
            return Err(lua.arg_error(1, b"option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(lua.arg_error(1, b"option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control(lua, opt, &fmt, &mut i, &mut h)?;
        }
        pos += size;
    }
    lua.push_number(pos as f64);
    Ok(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn integers_sign_extend_from_their_top_bit() {
        assert_eq!(super::integer(&[0xfe, 0xff], false, true), -2.0);
        assert_eq!(super::integer(&[0xff, 0xfe], true, false), 65534.0);
        assert_eq!(super::integer(&[0xff; 16], false, true), -1.0);
        assert_eq!(super::integer(&[], false, true), 0.0);
    }
}

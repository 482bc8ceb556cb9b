//! The `bit` library scripts get (LuaBitOp 1.0's API, as Redis loads it): 32-bit operations
//! on Lua numbers. Written here as host functions; numbers become 32-bit integers as LuaBitOp
//! converts them (modulo 2^32, rounding a fraction to nearest even through the 2^52+2^51 trick).

use alloc::format;
use kayvee_lua::{Lua, Raise, Type};

/// The first host function number of the library (`bit.<NAMES[i]>` is `FIRST + i`).
pub const FIRST: i32 = 100;

/// The library's functions, in host-number order.
pub const NAMES: &[&str] = &[
    "tobit", "tohex", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol", "ror",
    "bswap",
];

/// A number's 32-bit value, as LuaBitOp's `barg`.
fn tobit(n: f64) -> i32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

/// Argument `i` of function `name`, checked to be a number.
fn arg(lua: &mut Lua, i: i32, name: &str) -> Result<i32, Raise> {
    match lua.type_of(i) {
        Type::Number => Ok(tobit(lua.to_number(i).unwrap_or(0.0))),
        Type::String if lua.to_number(i).is_some() => Ok(tobit(lua.to_number(i).unwrap_or(0.0))),
        t => {
            let got = match t {
                Type::None => "no value",
                Type::Nil => "nil",
                Type::Boolean => "boolean",
                Type::String => "string",
                Type::Table => "table",
                Type::Function => "function",
                _ => "userdata",
            };
            let msg = format!("bad argument #{i} to '{name}' (number expected, got {got})");
            Err(lua.error_here(msg.as_bytes()))
        }
    }
}

/// Runs `bit.<NAMES[id - FIRST]>`.
pub fn call(lua: &mut Lua, id: i32) -> Result<i32, Raise> {
    let name = NAMES[(id - FIRST) as usize];
    let r: i32 = match name {
        "tobit" => arg(lua, 1, name)?,
        "bnot" => !arg(lua, 1, name)?,
        "band" | "bor" | "bxor" => {
            let mut acc = arg(lua, 1, name)?;
            for i in 2..=lua.top() {
                let v = arg(lua, i, name)?;
                acc = match name {
                    "band" => acc & v,
                    "bor" => acc | v,
                    _ => acc ^ v,
                };
            }
            acc
        }
        "lshift" | "rshift" | "arshift" | "rol" | "ror" => {
            let x = arg(lua, 1, name)?;
            let n = (arg(lua, 2, name)? & 31) as u32;
            match name {
                "lshift" => ((x as u32) << n) as i32,
                "rshift" => ((x as u32) >> n) as i32,
                "arshift" => x >> n,
                "rol" => (x as u32).rotate_left(n) as i32,
                _ => (x as u32).rotate_right(n) as i32,
            }
        }
        "bswap" => arg(lua, 1, name)?.swap_bytes(),
        _ => return tohex(lua),
    };
    lua.push_number(f64::from(r));
    Ok(1)
}

/// `bit.tohex(x [, n])`: `n` hex digits (8 by default), uppercase when `n` is negative.
fn tohex(lua: &mut Lua) -> Result<i32, Raise> {
    let x = arg(lua, 1, "tohex")? as u32;
    let n = if lua.type_of(2) == Type::None || lua.type_of(2) == Type::Nil {
        8
    } else {
        arg(lua, 2, "tohex")?
    };
    let upper = n < 0;
    let digits = n.unsigned_abs().min(8) as usize;
    let masked = if digits < 8 {
        x & ((1u32 << (4 * digits)) - 1)
    } else {
        x
    };
    let text = if upper {
        format!("{masked:0digits$X}")
    } else {
        format!("{masked:0digits$x}")
    };
    lua.push_bytes(text.as_bytes());
    Ok(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tobit_wraps_and_rounds_as_luabitop() {
        assert_eq!(super::tobit(4_294_967_295.0), -1);
        assert_eq!(super::tobit(2_147_483_648.0), -2_147_483_648);
        assert_eq!(super::tobit(-1.0), -1);
        assert_eq!(super::tobit(1.5), 2);
    }
}

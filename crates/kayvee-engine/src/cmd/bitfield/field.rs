//! Integer fields inside a string, as BITFIELD reads and writes them: `bits` bits from bit
//! `offset` (bit 0 is the most significant bit of byte 0), big-endian, two's complement when
//! signed; and the overflow rules (WRAP, SAT, FAIL) of a SET or INCRBY.

/// What happens when a value does not fit its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Modulo 2^bits (two's complement for signed fields).
    Wrap,
    /// Clamped to the field's minimum or maximum.
    Sat,
    /// Not written; the reply is a null.
    Fail,
}

/// The unsigned field at `offset` of `bits` bits (1 to 64); bytes past the end read as 0.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..u64::from(bits) {
        let pos = offset + j;
        let byte = s.get((pos >> 3) as usize).copied().unwrap_or(0);
        v = v << 1 | u64::from((byte >> (7 - (pos & 7))) & 1);
    }
    v
}

/// The signed field at `offset` of `bits` bits (1 to 64).
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v >> (bits - 1) & 1 == 1 {
        (v | u64::MAX << bits) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `v` at `offset` (the string is long enough).
pub fn set(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for j in 0..u64::from(bits) {
        let pos = offset + j;
        let on = v >> (u64::from(bits) - 1 - j) & 1 == 1;
        let (byte, mask) = ((pos >> 3) as usize, 0x80u8 >> (pos & 7));
        if on {
            s[byte] |= mask;
        } else {
            s[byte] &= !mask;
        }
    }
}

/// Checks `value + incr` against an unsigned field of `bits` bits (1 to 63): `None` when it
/// fits, else the value the overflow rule gives (`None` inside for FAIL). As Redis, a SET
/// checks its value with `incr` 0, the value taken as unsigned (a negative one is too big).
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, rule: Overflow) -> Option<Option<u64>> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let limit = if value > max || (incr > 0 && incr > max_incr) {
        max
    } else if incr < 0 && incr < min_incr {
        0
    } else {
        return None;
    };
    Some(match rule {
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

/// Checks `value + incr` against a signed field of `bits` bits (1 to 64), as
/// [`unsigned_overflow`].
pub fn signed_overflow(value: i64, incr: i64, bits: u32, rule: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let limit = if value > max
        || (bits != 64 && incr > max_incr)
        || (value >= 0 && incr > 0 && incr > max_incr)
    {
        max
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        min
    } else {
        return None;
    };
    Some(match rule {
        Overflow::Wrap => Some(wrap_signed((value as u64).wrapping_add(incr as u64), bits)),
        Overflow::Sat => Some(limit),
        Overflow::Fail => None,
    })
}

/// The low `bits` bits of `v` as a two's complement number of that width.
fn wrap_signed(v: u64, bits: u32) -> i64 {
    if bits == 64 {
        return v as i64;
    }
    let mask = u64::MAX << bits;
    if v >> (bits - 1) & 1 == 1 {
        (v | mask) as i64
    } else {
        (v & !mask) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_across_bytes() {
        let mut s = [0u8; 10];
        set(&mut s, 3, 13, 0x1abc);
        assert_eq!(get_unsigned(&s, 3, 13), 0x1abc);
        assert_eq!(get_signed(&s, 3, 13), 0x1abc - 0x2000);
        set(&mut s, 0, 64, u64::MAX - 5);
        assert_eq!(get_signed(&s, 0, 64), -6);
        assert_eq!(get_unsigned(&s, 70, 8), 0, "past the end reads zeros");
    }

    #[test]
    fn overflow_rules() {
        use Overflow::*;
        assert_eq!(unsigned_overflow(100, 257, 8, Wrap), Some(Some(101)));
        assert_eq!(unsigned_overflow(100, 257, 8, Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(100, -255, 8, Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(100, 10, 8, Fail), None);
        assert_eq!(unsigned_overflow(-1i64 as u64, 0, 8, Sat), Some(Some(255)));
        assert_eq!(signed_overflow(100, 257, 8, Wrap), Some(Some(101)));
        assert_eq!(signed_overflow(100, 257, 8, Sat), Some(Some(127)));
        assert_eq!(signed_overflow(100, -255, 8, Sat), Some(Some(-128)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Fail), Some(None));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(255, 0, 8, Wrap), Some(Some(-1)));
        assert_eq!(signed_overflow(-5, -3, 8, Wrap), None);
    }
}

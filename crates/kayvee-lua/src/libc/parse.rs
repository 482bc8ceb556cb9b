//! `strtod` and `strtoul` as glibc's (the "C" locale): what they accept, where they stop, and
//! the value. Decimal numbers are scanned here and converted by `core`'s `f64` parser (correctly
//! rounded, as glibc's); hexadecimal ones (`0x1.8p3`) are rounded half to even here.

/// `isspace` in the "C" locale.
pub fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `strtod`: the value and how many bytes of `s` it used (0: no number, the value is 0), and
/// whether it was out of range (`ERANGE`).
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let apply = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    if starts_with_ci(rest, b"inf") {
        let n = if starts_with_ci(rest, b"infinity") {
            8
        } else {
            3
        };
        return (apply(f64::INFINITY), i + n, false);
    }
    if starts_with_ci(rest, b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let mut j = 4;
            while j < rest.len() && (rest[j].is_ascii_alphanumeric() || rest[j] == b'_') {
                j += 1;
            }
            if rest.get(j) == Some(&b')') {
                n = j + 1;
            }
        }
        return (apply(f64::NAN), i + n, false);
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((v, n, range)) = hex(&rest[2..]) {
            return (apply(v), i + 2 + n, range);
        }
        // "0x" with no hex digit: the "0" alone.
        return (apply(0.0), i + 1, false);
    }
    // [digits][.digits][e[sign]digits], at least one mantissa digit.
    let mut j = 0;
    let mut digits = 0;
    while j < rest.len() && rest[j].is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if rest.get(j) == Some(&b'.') {
        j += 1;
        while j < rest.len() && rest[j].is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0, false);
    }
    if j < rest.len() && (rest[j] | 0x20) == b'e' {
        let mut k = j + 1;
        if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
            k += 1;
        }
        if k < rest.len() && rest[k].is_ascii_digit() {
            while k < rest.len() && rest[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let text = core::str::from_utf8(&rest[..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    // ERANGE: overflow, or a nonzero mantissa that came out zero or subnormal.
    let mantissa = &rest[..rest[..j]
        .iter()
        .position(|c| (*c | 0x20) == b'e')
        .unwrap_or(j)];
    let nonzero = mantissa.iter().any(|c| (b'1'..=b'9').contains(c));
    let range = v.is_infinite() || (nonzero && v.abs() < f64::MIN_POSITIVE);
    (apply(v), i + j, range)
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// A hexadecimal float after its `0x`: the magnitude, bytes used, out of range; `None` without
/// a hex digit.
fn hex(s: &[u8]) -> Option<(f64, usize, bool)> {
    let mut j = 0;
    let mut mant: u64 = 0;
    let mut sticky = false;
    // The binary exponent of `mant`'s lowest bit.
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut seen_point = false;
    while let Some(&c) = s.get(j) {
        if c == b'.' && !seen_point {
            seen_point = true;
            j += 1;
            continue;
        }
        let Some(v) = (c as char).to_digit(16) else {
            break;
        };
        digits += 1;
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(v);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= v != 0;
            if !seen_point {
                exp += 4;
            }
        }
        j += 1;
    }
    if digits == 0 {
        return None;
    }
    if j < s.len() && (s[j] | 0x20) == b'p' {
        let mut k = j + 1;
        let mut neg = false;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            neg = s[k] == b'-';
            k += 1;
        }
        if k < s.len() && s[k].is_ascii_digit() {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 40);
                k += 1;
            }
            exp += if neg { -e } else { e };
            j = k;
        }
    }
    if mant == 0 {
        return Some((0.0, j, false));
    }
    // Normalize: the top bit at 63; the value is mant x 2^(exp), i.e. 1.xxx x 2^(top).
    let lz = mant.leading_zeros();
    mant <<= lz;
    let top = exp + 63 - i64::from(lz);
    if top > 1023 {
        return Some((f64::INFINITY, j, true));
    }
    // Bits kept: 53 for a normal result, fewer for a subnormal one.
    let keep: i64 = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep <= 0 {
        // Below half the smallest subnormal: 0; exactly half: 0 (ties to even); above: it.
        let half = keep == 0 && (mant << 1 != 0 || sticky);
        let v = if half { f64::from_bits(1) } else { 0.0 };
        return Some((v, j, true));
    }
    let drop = 64 - keep as u32;
    let mut kept = mant >> drop;
    let rest = if drop == 0 { 0 } else { mant << (64 - drop) };
    let halfway = 1u64 << 63;
    let up = rest > halfway || (rest == halfway && (sticky || kept & 1 == 1));
    if up {
        kept += 1;
    }
    let bits = if top >= -1022 {
        // kept is in [2^52, 2^53]; 2^53 carries into the exponent.
        let (kept, top) = if kept >> 53 != 0 {
            (kept >> 1, top + 1)
        } else {
            (kept, top)
        };
        if top > 1023 {
            return Some((f64::INFINITY, j, true));
        }
        (((top + 1023) as u64) << 52) | (kept & ((1 << 52) - 1))
    } else {
        // A subnormal: kept units of 2^-1074 (2^52 of them is the smallest normal).
        kept
    };
    let v = f64::from_bits(bits);
    Some((v, j, v.abs() < f64::MIN_POSITIVE))
}

/// `strtoul`: the value, bytes used (0: no digit) and overflow (`ERANGE`, the value is then
/// `u64::MAX`). A minus sign negates the value as an unsigned number, as C does.
pub fn strtoul(s: &[u8], base: u32) -> (u64, usize, bool) {
    let mut i = 0;
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut base = base;
    let has_hex_prefix = s.len() > i + 2
        && s[i] == b'0'
        && (s[i + 1] | 0x20) == b'x'
        && (s[i + 2] as char).is_ascii_hexdigit();
    if (base == 0 || base == 16) && has_hex_prefix {
        base = 16;
        i += 2;
    } else if base == 0 {
        base = if s.get(i) == Some(&b'0') { 8 } else { 10 };
    }
    if !(2..=36).contains(&base) {
        return (0, 0, false);
    }
    let start = i;
    let mut v: u64 = 0;
    let mut over = false;
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(base)) {
        match v
            .checked_mul(u64::from(base))
            .and_then(|x| x.checked_add(u64::from(d)))
        {
            Some(x) => v = x,
            None => over = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0, false);
    }
    if over {
        return (u64::MAX, i, true);
    }
    (if negative { v.wrapping_neg() } else { v }, i, false)
}

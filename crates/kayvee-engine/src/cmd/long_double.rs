//! Software x87 extended precision ("80-bit long double") for INCRBYFLOAT, HINCRBYFLOAT and the
//! blocking commands' timeouts, so replies are byte-identical to Redis 7.0 on x86-64, which
//! parses with `strtold`, adds in `long double` and prints with `%.17Lf` (then strips trailing
//! zeros). f64 cannot reproduce those digits:
//! `INCRBYFLOAT k 123456.789` answers `123456.78900000000000148` there.
//!
//! The format: a 64-bit significand with an explicit leading bit, exponents down to 2^-16445
//! (subnormals included) and below 2^16384. Parsing and addition round to nearest, ties to
//! even, exactly (through a small big-integer type), as glibc and the FPU do; printing is exact.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// Lowest exponent of the significand's last bit (the smallest subnormal is 2^-16445).
const EXP_MIN: i64 = -16445;
/// A leading bit at 2^16384 or above overflows.
const LEAD_EXP_LIMIT: i64 = 16384;

/// An extended-precision value: `(-1)^neg * mant * 2^exp`, or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ld {
    /// A finite value (zero has `mant == 0`).
    Finite { neg: bool, mant: u64, exp: i64 },
    /// Positive or negative infinity.
    Inf { neg: bool },
}

/// An unsigned big integer, little-endian 32-bit limbs, no trailing zero limbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Self {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(top) => self.0.len() as u64 * 32 - u64::from(top.leading_zeros()),
        }
    }
    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
    }
    /// Whether any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&l| l != 0) {
            return true;
        }
        full < self.0.len() && !i.is_multiple_of(32) && self.0[full] & ((1u32 << (i % 32)) - 1) != 0
    }
    /// `self * m + a`.
    fn mul_add_small(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    /// Divides by `d` in place, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*l);
            *l = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        self.trim();
        rem as u32
    }
    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            out.push((l << bits) | carry);
            carry = if bits == 0 { 0 } else { l >> (32 - bits) };
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }
    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if limbs >= self.0.len() {
            return Big::default();
        }
        let src = &self.0[limbs..];
        let mut out: Vec<u32> = (0..src.len())
            .map(|i| {
                let hi = src.get(i + 1).copied().unwrap_or(0);
                if bits == 0 {
                    src[i]
                } else {
                    (src[i] >> bits) | (hi << (32 - bits))
                }
            })
            .collect();
        out.truncate(src.len());
        let mut b = Big(out);
        b.trim();
        b
    }
    fn to_u64(&self) -> u64 {
        let lo = u64::from(self.0.first().copied().unwrap_or(0));
        lo | u64::from(self.0.get(1).copied().unwrap_or(0)) << 32
    }
    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
    fn add(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(o.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(o.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }
    /// `self - o`, with `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            out.push((v + (borrow << 32)) as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }
    fn pow10(n: u64) -> Big {
        let mut b = Big::from_u64(1);
        for _ in 0..n / 9 {
            b.mul_add_small(1_000_000_000, 0);
        }
        for _ in 0..n % 9 {
            b.mul_add_small(10, 0);
        }
        b
    }
    /// `(floor(self / d), self % d != 0)`, by binary long division (the quotients needed here
    /// are ~70 bits, so this is a few dozen subtractions).
    fn div_sticky(&self, d: &Big) -> (Big, bool) {
        let (nl, dl) = (self.bit_len(), d.bit_len());
        if nl < dl {
            return (Big::default(), !self.is_zero());
        }
        let mut rem = self.clone();
        let mut q = Big::default();
        for shift in (0..=nl - dl).rev() {
            let part = d.shl(shift);
            q.mul_add_small(2, 0);
            if rem.cmp(&part) != Ordering::Less {
                rem = rem.sub(&part);
                q.mul_add_small(1, 1);
            }
        }
        (q, !rem.is_zero())
    }
    /// Decimal digits.
    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut s = alloc::format!("{}", chunks.pop().unwrap_or(0));
        for c in chunks.iter().rev() {
            s.push_str(&alloc::format!("{c:09}"));
        }
        s
    }
}

/// Rounds `n * 2^s` (plus a sticky "something below" bit) to extended precision, ties to even.
fn round(neg: bool, n: &Big, s: i64) -> Ld {
    let len = n.bit_len() as i64;
    if len == 0 {
        return Ld::zero(neg);
    }
    if s + len > LEAD_EXP_LIMIT {
        return Ld::Inf { neg };
    }
    let target = (s + len - 64).max(EXP_MIN);
    let shift = target - s;
    if shift <= 0 {
        let mant = n.shl((-shift) as u64).to_u64();
        return Ld::Finite {
            neg,
            mant,
            exp: target,
        };
    }
    if shift > len {
        return Ld::zero(neg);
    }
    let shift = shift as u64;
    let mut mant = n.shr(shift).to_u64();
    let half = n.bit(shift - 1);
    let rest = n.any_below(shift - 1);
    if half && (rest || mant & 1 == 1) {
        let (m, carry) = mant.overflowing_add(1);
        if carry {
            return fix_carry(neg, target);
        }
        mant = m;
    }
    Ld::Finite {
        neg,
        mant,
        exp: target,
    }
}

/// The significand rounded up to 2^64: 2^63 at the next exponent (or infinity).
fn fix_carry(neg: bool, target: i64) -> Ld {
    if target + 1 + 63 >= LEAD_EXP_LIMIT {
        return Ld::Inf { neg };
    }
    Ld::Finite {
        neg,
        mant: 1 << 63,
        exp: target + 1,
    }
}

impl Ld {
    /// Zero with the given sign (the value of a missing counter, or of an all-zero literal).
    pub const fn zero(neg: bool) -> Ld {
        Ld::Finite {
            neg,
            mant: 0,
            exp: 0,
        }
    }

    /// `self + o`, rounded; NaN (inf - inf) comes back as `None`.
    pub fn add(self, o: Ld) -> Option<Ld> {
        let (a, b) = match (self, o) {
            (Ld::Inf { neg: x }, Ld::Inf { neg: y }) if x != y => return None,
            (Ld::Inf { neg }, _) | (_, Ld::Inf { neg }) => return Some(Ld::Inf { neg }),
            (a, b) => (a, b),
        };
        let (
            Ld::Finite {
                neg: na,
                mant: ma,
                exp: ea,
            },
            Ld::Finite {
                neg: nb,
                mant: mb,
                exp: eb,
            },
        ) = (a, b)
        else {
            return None;
        };
        let s = ea.min(eb);
        let x = Big::from_u64(ma).shl((ea - s) as u64);
        let y = Big::from_u64(mb).shl((eb - s) as u64);
        if na == nb {
            return Some(round(na, &x.add(&y), s));
        }
        Some(match x.cmp(&y) {
            Ordering::Less => round(nb, &y.sub(&x), s),
            Ordering::Greater => round(na, &x.sub(&y), s),
            Ordering::Equal => round(false, &Big::default(), s),
        })
    }

    /// Whether this is an infinity.
    pub fn is_inf(self) -> bool {
        matches!(self, Ld::Inf { .. })
    }

    /// `%.17Lf` with trailing zeros (and a bare point) removed and `-0` printed as `0`: the
    /// text Redis's `ld2string(..., LD_STR_HUMAN)` produces. Infinities are never printed.
    pub fn to_human(self) -> String {
        let Ld::Finite { neg, mant, exp } = self else {
            return String::from("inf");
        };
        let scaled = {
            let mut b = Big::from_u64(mant);
            let p = Big::pow10(17);
            b = mul(&b, &p);
            if exp >= 0 {
                b.shl(exp as u64)
            } else {
                let sh = (-exp) as u64;
                let mut q = b.shr(sh);
                if sh > 0 && b.bit(sh - 1) && (b.any_below(sh - 1) || q.bit(0)) {
                    q = q.add(&Big::from_u64(1));
                }
                q
            }
        };
        let digits = scaled.to_decimal();
        let digits = alloc::format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut s = String::new();
        if neg && !(int == "0" && frac.is_empty()) {
            s.push('-');
        }
        s.push_str(int);
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        s
    }
}

/// Schoolbook product.
fn mul(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u32; a.0.len() + b.0.len() + 1];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            let v = u64::from(out[i + j]) + u64::from(x) * u64::from(y) + carry;
            out[i + j] = v as u32;
            carry = v >> 32;
        }
        out[i + b.0.len()] = carry as u32;
    }
    let mut r = Big(out);
    r.trim();
    r
}

/// Parses text as glibc's `strtold` with Redis's `string2ld` checks: the whole text must be
/// consumed, no leading space, NaN refused, and out-of-range values (overflow to infinity or
/// underflow to zero) refused. `inf`/`infinity` and hexadecimal floats are accepted.
pub(crate) fn parse(s: &[u8]) -> Option<Ld> {
    if s.is_empty() || matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(Ld::Inf { neg });
    }
    let v = if body.len() > 1 && body[0] == b'0' && matches!(body[1], b'x' | b'X') {
        parse_hex(neg, &body[2..])?
    } else {
        parse_dec(neg, body)?
    };
    match v {
        Ld::Inf { .. } => None,
        _ => Some(v),
    }
}

/// Splits `digits[.digits]` (either side may be empty, not both) off the front of `s`,
/// feeding each digit to `push`; returns (digits seen, digits after the point, rest).
fn mantissa<'a>(s: &'a [u8], radix: u32, push: &mut dyn FnMut(u32)) -> (u64, u64, &'a [u8]) {
    let (mut n, mut frac, mut dot, mut i) = (0u64, 0u64, false, 0);
    while i < s.len() {
        match s[i] {
            b'.' if !dot => dot = true,
            c => match (c as char).to_digit(radix) {
                Some(d) => {
                    push(d);
                    n += 1;
                    frac += u64::from(dot);
                }
                None => break,
            },
        }
        i += 1;
    }
    (n, frac, &s[i..])
}

/// A literal's body (after sign and `0x`): its digits in `radix` as a big integer, how many
/// came after the point, and the exponent after `marker` (`e` decimal, `p` hex, either case;
/// 0 when absent). `None` when there are no digits or anything else follows.
fn significand(s: &[u8], radix: u32, marker: u8) -> Option<(Big, u64, i64)> {
    let mut d = Big::default();
    let (n, frac, rest) = mantissa(s, radix, &mut |x| d.mul_add_small(radix, x));
    if n == 0 {
        return None;
    }
    let e = match rest {
        [] => 0,
        [m, e @ ..] if m.eq_ignore_ascii_case(&marker) => exponent(e)?,
        _ => return None,
    };
    Some((d, frac, e))
}

/// Parses `[+-]digits` fully (saturating far beyond any meaningful exponent).
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = d
        .iter()
        .fold(0i64, |a, &c| (a * 10 + i64::from(c - b'0')).min(1 << 40));
    Some(if neg { -v } else { v })
}

/// Decimal: digits, optional point, optional `e` exponent.
fn parse_dec(neg: bool, s: &[u8]) -> Option<Ld> {
    let (d, frac, e) = significand(s, 10, b'e')?;
    if d.is_zero() {
        return Some(Ld::zero(neg));
    }
    let e = e - frac as i64;
    let digits = d.to_decimal().len() as i64;
    if e + digits > 4940 {
        return Some(Ld::Inf { neg });
    }
    if e + digits < -4960 {
        return None; // underflows to zero: ERANGE
    }
    let v = if e >= 0 {
        round(neg, &mul(&d, &Big::pow10(e as u64)), 0)
    } else {
        let den = Big::pow10((-e) as u64);
        let k = (70 + den.bit_len() as i64 - d.bit_len() as i64).max(0) as u64;
        let (q, sticky) = d.shl(k).div_sticky(&den);
        let mut n = q.shl(1);
        n.mul_add_small(1, u32::from(sticky));
        round(neg, &n, -(k as i64) - 1)
    };
    underflow_check(v)
}

/// Refuses a nonzero literal that rounded to zero (strtold's ERANGE).
fn underflow_check(v: Ld) -> Option<Ld> {
    match v {
        Ld::Finite { mant: 0, .. } => None,
        v => Some(v),
    }
}

/// Hexadecimal (after `0x`): hex digits, optional point, optional `p` binary exponent.
fn parse_hex(neg: bool, s: &[u8]) -> Option<Ld> {
    let (d, frac, p) = significand(s, 16, b'p')?;
    if d.is_zero() {
        return Some(Ld::zero(neg));
    }
    let s = (p - 4 * frac as i64).clamp(-(1 << 41), 1 << 41);
    underflow_check(round(neg, &d, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &str, b: &str) -> String {
        let x = parse(a.as_bytes()).unwrap();
        let y = parse(b.as_bytes()).unwrap();
        x.add(y).unwrap().to_human()
    }

    #[test]
    fn sums_print_as_redis() {
        // Every expected text below is redis-server 7.0.15's INCRBYFLOAT reply.
        assert_eq!(add("10.5", "0.1"), "10.6");
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("1", "-1.1"), "-0.1");
        assert_eq!(add("3.0e3", "1"), "3001");
        assert_eq!(add("0", "1e20"), "100000000000000000000");
        assert_eq!(add("0", "1e-20"), "0");
        assert_eq!(add("0", "-1e-20"), "0");
        assert_eq!(add("0", "1.0000000000000002"), "1.0000000000000002");
        assert_eq!(add("0", "123456.789"), "123456.78900000000000148");
        assert_eq!(
            add("123456.78900000000000148", "0.001"),
            "123456.78999999999999915"
        );
        assert_eq!(add("1000000000000000", "0.5"), "1000000000000000.5");
        assert_eq!(add("0x10", "0x1.8p1"), "19");
        assert_eq!(add("1.5", "-1.5"), "0");
    }

    #[test]
    fn parse_follows_strtold() {
        for ok in [
            "1",
            "+.5",
            "5.",
            "1E2",
            "-1e+1",
            "0x10",
            "0X.8P1",
            "inf",
            "-Infinity",
            "0e-9999",
        ] {
            assert!(parse(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "", " 1", "1 ", "1e", ".", "e5", "nan", "0x", "0x1q", "1e5000", "1e-5000", "--1",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(
            parse(b"1"),
            Some(Ld::Finite {
                neg: false,
                mant: 1 << 63,
                exp: -63
            })
        );
    }

    #[test]
    fn rounding_ties_to_even_and_overflow() {
        // 2^64 + 1 needs 65 bits: the tie rounds to the even significand 2^63 (x2).
        let n = Big::from_u64(u64::MAX).add(&Big::from_u64(2));
        assert_eq!(
            round(false, &n, 0),
            Ld::Finite {
                neg: false,
                mant: 1 << 63,
                exp: 1
            }
        );
        let big = parse(b"1e4930").unwrap();
        assert!(!big.add(big).unwrap().add(big).unwrap().is_inf());
        let max = parse(b"1.1e4932").unwrap();
        assert!(max.add(max).unwrap().is_inf());
    }
}

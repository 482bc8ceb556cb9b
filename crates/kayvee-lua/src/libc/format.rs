//! One `printf` conversion, formatted as glibc formats it (`libc/printf.c` parses the format and
//! fetches the argument). Floating-point conversions are exact: the double's whole decimal
//! expansion is computed ([`Decimal::exact`]) and rounded half-to-even at the digit asked for,
//! which is what glibc does in the default rounding mode, so `%.14g` (Lua's `tostring`), `%.17g`,
//! `%e` and `%f` at any precision give glibc's bytes.

/// Flag bits of [`Spec::flags`].
const LEFT: i32 = 1;
const PLUS: i32 = 2;
const SPACE: i32 = 4;
const ALT: i32 = 8;
const ZERO: i32 = 16;

/// One conversion as `printf.c` parsed it (`struct kv_spec`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Flag bits: 1 `-`, 2 `+`, 4 space, 8 `#`, 16 `0`.
    pub flags: i32,
    /// Minimum field width.
    pub width: i32,
    /// Precision, or -1 when absent.
    pub prec: i32,
    /// The conversion letter.
    pub conv: i32,
}

/// A conversion's argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// `%d`, `%i`: a signed integer; `%c`: the byte.
    Int(i64),
    /// `%o`, `%u`, `%x`, `%X`, `%p`.
    Uint(u64),
    /// `%e`, `%E`, `%f`, `%F`, `%g`, `%G` (and `%a`, `%A`, formatted as `%e`).
    Float(f64),
    /// `%s` (`None`: a null pointer).
    Str(Option<&'a [u8]>),
}

/// Formats one conversion into `out`.
pub fn format_arg(spec: &Spec, arg: Arg<'_>, out: &mut dyn FnMut(&[u8])) {
    let conv = u8::try_from(spec.conv).unwrap_or(b'?');
    match (conv, arg) {
        (b'd' | b'i', Arg::Int(v)) => {
            let sign: &[u8] = if v < 0 {
                b"-"
            } else if spec.flags & PLUS != 0 {
                b"+"
            } else if spec.flags & SPACE != 0 {
                b" "
            } else {
                b""
            };
            integer(spec, sign, v.unsigned_abs(), 10, false, out);
        }
        (b'u', Arg::Uint(v)) => integer(spec, b"", v, 10, false, out),
        (b'o', Arg::Uint(v)) => integer(spec, b"", v, 8, false, out),
        (b'x', Arg::Uint(v)) => {
            let prefix: &[u8] = if spec.flags & ALT != 0 && v != 0 {
                b"0x"
            } else {
                b""
            };
            integer(spec, prefix, v, 16, false, out);
        }
        (b'X', Arg::Uint(v)) => {
            let prefix: &[u8] = if spec.flags & ALT != 0 && v != 0 {
                b"0X"
            } else {
                b""
            };
            integer(spec, prefix, v, 16, true, out);
        }
        (b'p', Arg::Uint(0)) => {
            let s = Spec {
                prec: -1,
                flags: spec.flags & !ZERO,
                ..*spec
            };
            text(&s, b"(nil)", out);
        }
        (b'p', Arg::Uint(v)) => {
            let s = Spec {
                flags: spec.flags & !ALT,
                ..*spec
            };
            let sign: &[u8] = if spec.flags & PLUS != 0 {
                b"+0x"
            } else if spec.flags & SPACE != 0 {
                b" 0x"
            } else {
                b"0x"
            };
            integer(&s, sign, v, 16, false, out);
        }
        (b'c', Arg::Int(v)) => {
            let s = Spec { prec: -1, ..*spec };
            text(&s, &[v as u8], out);
        }
        (b's', Arg::Str(s)) => match s {
            Some(s) => text(spec, s, out),
            // glibc prints "(null)", or nothing when the precision cuts it.
            None if spec.prec >= 0 && spec.prec < 6 => text(spec, b"", out),
            None => text(spec, b"(null)", out),
        },
        (b'e' | b'E' | b'f' | b'F' | b'g' | b'G' | b'a' | b'A', Arg::Float(v)) => {
            float(spec, conv, v, out)
        }
        (b'%', _) => out(b"%"),
        _ => {}
    }
}

/// `%.<precision>g` of `v`, appended to `out` (C's `%g`, exactly as glibc).
pub fn g(v: f64, precision: i32, out: &mut alloc::vec::Vec<u8>) {
    let spec = Spec {
        flags: 0,
        width: 0,
        prec: precision,
        conv: i32::from(b'g'),
    };
    format_arg(&spec, Arg::Float(v), &mut |b: &[u8]| {
        out.extend_from_slice(b)
    });
}

/// `%s` / `%c`: the bytes, cut to the precision, padded with spaces to the width.
fn text(spec: &Spec, s: &[u8], out: &mut dyn FnMut(&[u8])) {
    let s = match usize::try_from(spec.prec) {
        Ok(p) if p < s.len() => &s[..p],
        _ => s,
    };
    let pad = width(spec).saturating_sub(s.len());
    if spec.flags & LEFT != 0 {
        out(s);
        spaces(pad, b' ', out);
    } else {
        spaces(pad, b' ', out);
        out(s);
    }
}

fn width(spec: &Spec) -> usize {
    usize::try_from(spec.width).unwrap_or(0)
}

/// `n` copies of `c`.
fn spaces(mut n: usize, c: u8, out: &mut dyn FnMut(&[u8])) {
    let block = [c; 32];
    while n > 0 {
        let k = n.min(block.len());
        out(&block[..k]);
        n -= k;
    }
}

/// An integer conversion: `prefix` (sign or `0x`), at least `precision` digits, padded.
fn integer(spec: &Spec, prefix: &[u8], v: u64, base: u64, upper: bool, out: &mut dyn FnMut(&[u8])) {
    let table: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut buf = [0u8; 24];
    let mut at = buf.len();
    let mut x = v;
    // Precision 0 with the value 0 prints no digit.
    if !(v == 0 && spec.prec == 0) {
        loop {
            at -= 1;
            buf[at] = table[(x % base) as usize];
            x /= base;
            if x == 0 {
                break;
            }
        }
    }
    let digits = &buf[at..];
    let mut zeros = usize::try_from(spec.prec)
        .unwrap_or(0)
        .saturating_sub(digits.len());
    // `%#o`: the first digit is a 0.
    if base == 8 && spec.flags & ALT != 0 && zeros == 0 && digits.first() != Some(&b'0') {
        zeros = 1;
    }
    let body = zeros + digits.len();
    let used = prefix.len() + body;
    let pad = width(spec).saturating_sub(used);
    if spec.flags & LEFT != 0 {
        out(prefix);
        spaces(zeros, b'0', out);
        out(digits);
        spaces(pad, b' ', out);
    } else if spec.flags & ZERO != 0 && spec.prec < 0 {
        out(prefix);
        spaces(pad + zeros, b'0', out);
        out(digits);
    } else {
        spaces(pad, b' ', out);
        out(prefix);
        spaces(zeros, b'0', out);
        out(digits);
    }
}

/// Most decimal digits a double's exact expansion has (2^53 x 5^1074 has 767).
const MAX_DIGITS: usize = 800;
/// Base-10^9 limbs of the exact expansion.
const LIMBS: usize = 96;

/// A non-negative decimal: `0.d1d2d3... x 10^point`, no trailing zero digit; no digit is zero.
#[derive(Clone)]
pub struct Decimal {
    digits: [u8; MAX_DIGITS],
    len: usize,
    point: i32,
}

impl Decimal {
    /// The exact decimal value of finite `v`'s magnitude.
    pub fn exact(v: f64) -> Decimal {
        let mut d = Decimal {
            digits: [0; MAX_DIGITS],
            len: 0,
            point: 0,
        };
        let bits = v.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1 << 52) - 1);
        let (mut m, mut e) = if biased == 0 {
            (frac, -1074)
        } else {
            (frac | (1 << 52), biased - 1075)
        };
        if m == 0 {
            return d;
        }
        let tz = m.trailing_zeros();
        m >>= tz;
        e += tz as i32;
        // Integers below 2^64: their digits directly.
        if (0..=10).contains(&e) || (e > 10 && e < 64 && m.leading_zeros() as i32 >= e) {
            let n = m << e;
            d.push_u64(n);
            return d;
        }
        let mut limbs = [0u32; LIMBS];
        limbs[0] = (m % 1_000_000_000) as u32;
        limbs[1] = (m / 1_000_000_000 % 1_000_000_000) as u32;
        limbs[2] = (m / 1_000_000_000_000_000_000) as u32;
        let mut used = 3;
        let k;
        if e >= 0 {
            let mut left = e;
            while left > 0 {
                let s = left.min(29);
                used = mul_small(&mut limbs, used, 1 << s);
                left -= s;
            }
            k = 0;
        } else {
            // m x 2^e = m x 5^-e / 10^-e.
            k = -e;
            let mut left = k;
            while left > 0 {
                let s = left.min(13);
                used = mul_small(&mut limbs, used, 5u64.pow(s as u32));
                left -= s;
            }
        }
        while used > 1 && limbs[used - 1] == 0 {
            used -= 1;
        }
        // Top limb without leading zeros, the rest nine digits each.
        let mut top = [0u8; 10];
        let mut t = top.len();
        let mut x = limbs[used - 1];
        while x > 0 {
            t -= 1;
            top[t] = (x % 10) as u8;
            x /= 10;
        }
        for &b in &top[t..] {
            d.digits[d.len] = b;
            d.len += 1;
        }
        for i in (0..used - 1).rev() {
            let mut x = limbs[i];
            for j in (0..9).rev() {
                d.digits[d.len + j] = (x % 10) as u8;
                x /= 10;
            }
            d.len += 9;
        }
        d.point = d.len as i32 - k;
        d.trim();
        d
    }

    fn push_u64(&mut self, mut n: u64) {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        while n > 0 {
            at -= 1;
            buf[at] = (n % 10) as u8;
            n /= 10;
        }
        let digits = &buf[at..];
        self.digits[..digits.len()].copy_from_slice(digits);
        self.len = digits.len();
        self.point = digits.len() as i32;
        self.trim();
    }

    fn trim(&mut self) {
        while self.len > 0 && self.digits[self.len - 1] == 0 {
            self.len -= 1;
        }
    }

    fn is_zero(&self) -> bool {
        self.len == 0
    }

    /// Digit `i` (0-based from the first), 0 past the end or before the start.
    fn digit(&self, i: i64) -> u8 {
        if i < 0 || i >= self.len as i64 {
            0
        } else {
            self.digits[i as usize]
        }
    }

    /// Rounds half to even, keeping the first `keep` digits (`keep` <= 0 rounds at a position
    /// above the first digit: to zero, or to one unit of that position).
    fn round(&mut self, keep: i64) {
        if keep >= self.len as i64 {
            return;
        }
        if keep < 0 {
            self.len = 0;
            return;
        }
        let k = keep as usize;
        let next = self.digits[k];
        let last_odd = k > 0 && self.digits[k - 1] % 2 == 1;
        let up = next > 5 || (next == 5 && (self.len > k + 1 || last_odd));
        self.len = k;
        if up {
            let mut i = k;
            loop {
                if i == 0 {
                    // All nines (or nothing kept): one unit of the next position up.
                    self.digits[0] = 1;
                    self.len = 1;
                    self.point += 1;
                    break;
                }
                i -= 1;
                if self.digits[i] == 9 {
                    self.digits[i] = 0;
                } else {
                    self.digits[i] += 1;
                    break;
                }
            }
        }
        self.trim();
    }
}

/// Multiplies the base-10^9 number in `limbs[..used]` by `f` (< 2^32); returns the new length.
fn mul_small(limbs: &mut [u32; LIMBS], used: usize, f: u64) -> usize {
    let mut carry = 0u64;
    for limb in limbs.iter_mut().take(used) {
        let x = u64::from(*limb) * f + carry;
        *limb = (x % 1_000_000_000) as u32;
        carry = x / 1_000_000_000;
    }
    let mut used = used;
    while carry > 0 {
        limbs[used] = (carry % 1_000_000_000) as u32;
        carry /= 1_000_000_000;
        used += 1;
    }
    used
}

/// A floating-point conversion.
fn float(spec: &Spec, conv: u8, v: f64, out: &mut dyn FnMut(&[u8])) {
    let upper = conv.is_ascii_uppercase();
    let sign: &[u8] = if v.is_sign_negative() {
        b"-"
    } else if spec.flags & PLUS != 0 {
        b"+"
    } else if spec.flags & SPACE != 0 {
        b" "
    } else {
        b""
    };
    if !v.is_finite() {
        let word: &[u8] = match (v.is_nan(), upper) {
            (true, false) => b"nan",
            (true, true) => b"NAN",
            (false, false) => b"inf",
            (false, true) => b"INF",
        };
        let pad = width(spec).saturating_sub(sign.len() + word.len());
        if spec.flags & LEFT != 0 {
            out(sign);
            out(word);
            spaces(pad, b' ', out);
        } else {
            spaces(pad, b' ', out);
            out(sign);
            out(word);
        }
        return;
    }
    let alt = spec.flags & ALT != 0;
    let mut d = Decimal::exact(v);
    let body = match conv.to_ascii_lowercase() {
        b'f' => {
            let p = if spec.prec < 0 { 6 } else { spec.prec as i64 };
            d.round(i64::from(d.point) + p);
            Body::Fixed { prec: p, alt }
        }
        b'g' => {
            let p = match spec.prec {
                p if p < 0 => 6,
                0 => 1,
                p => i64::from(p),
            };
            d.round(p);
            let x = if d.is_zero() {
                0
            } else {
                i64::from(d.point) - 1
            };
            // Without `#`, trailing fraction zeros (and a bare point) are removed: `d` is
            // trimmed, so its length says how many fraction digits are significant.
            let sig = d.len as i64;
            if p > x && x >= -4 {
                let prec = if alt { p - 1 - x } else { (sig - 1 - x).max(0) };
                Body::Fixed { prec, alt }
            } else {
                let prec = if alt { p - 1 } else { (sig - 1).max(0) };
                Body::Exp { prec, alt, upper }
            }
        }
        _ => {
            let p = if spec.prec < 0 { 6 } else { spec.prec as i64 };
            d.round(p + 1);
            Body::Exp {
                prec: p,
                alt,
                upper,
            }
        }
    };
    let mut len = 0usize;
    body.emit(&d, &mut |b: &[u8]| len += b.len());
    let pad = width(spec).saturating_sub(sign.len() + len);
    if spec.flags & LEFT != 0 {
        out(sign);
        body.emit(&d, out);
        spaces(pad, b' ', out);
    } else if spec.flags & ZERO != 0 {
        out(sign);
        spaces(pad, b'0', out);
        body.emit(&d, out);
    } else {
        spaces(pad, b' ', out);
        out(sign);
        body.emit(&d, out);
    }
}

/// How a rounded [`Decimal`] is written.
#[derive(Clone, Copy)]
enum Body {
    /// `%f`: `prec` fraction digits.
    Fixed { prec: i64, alt: bool },
    /// `%e`: one digit, `prec` fraction digits, the exponent.
    Exp { prec: i64, alt: bool, upper: bool },
}

impl Body {
    fn emit(&self, d: &Decimal, out: &mut dyn FnMut(&[u8])) {
        match *self {
            Body::Fixed { prec, alt } => fixed(d, prec, alt, out),
            Body::Exp { prec, alt, upper } => exp(d, prec, alt, upper, out),
        }
    }
}

/// `%f`'s digits of a rounded decimal.
fn fixed(d: &Decimal, prec: i64, alt: bool, out: &mut dyn FnMut(&[u8])) {
    let point = i64::from(d.point);
    if d.is_zero() || point <= 0 {
        out(b"0");
    } else {
        for i in 0..point {
            out(&[b'0' + d.digit(i)]);
        }
    }
    if prec > 0 || alt {
        out(b".");
    }
    for j in 0..prec {
        let i = point + j;
        out(&[b'0' + if d.is_zero() { 0 } else { d.digit(i) }]);
    }
}

/// `%e`'s digits of a rounded decimal.
fn exp(d: &Decimal, prec: i64, alt: bool, upper: bool, out: &mut dyn FnMut(&[u8])) {
    out(&[b'0' + d.digit(0)]);
    if prec > 0 || alt {
        out(b".");
    }
    for i in 1..=prec {
        out(&[b'0' + d.digit(i)]);
    }
    out(if upper { b"E" } else { b"e" });
    let x = if d.is_zero() {
        0
    } else {
        i64::from(d.point) - 1
    };
    out(if x < 0 { b"-" } else { b"+" });
    let mut buf = [0u8; 8];
    let mut at = buf.len();
    let mut n = x.unsigned_abs();
    while n > 0 || buf.len() - at < 2 {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out(&buf[at..]);
}

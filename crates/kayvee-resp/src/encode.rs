//! Reply encoder: the engine's `ReplySink` written as RESP2 or RESP3 bytes (Redis protocol
//! specification, RESP2 and RESP3 type tables) into a connection's output buffer, byte-identical
//! to Redis 7.0.15 (`addReply*`), doubles included (`%.17g`).
//!
//! Nothing here allocates except `out` growing: integers go through a stack itoa and doubles
//! through a stack buffer.

use alloc::vec::Vec;
use core::fmt::{self, Write as _};
use kayvee_engine::{Protocol, ReplySink};

/// Encodes replies into a connection's output buffer for its protocol version.
pub struct RespWriter<'a> {
    out: &'a mut Vec<u8>,
    protocol: Protocol,
}

impl<'a> RespWriter<'a> {
    /// Appends to `out`, encoding for `protocol`.
    pub fn new(out: &'a mut Vec<u8>, protocol: Protocol) -> Self {
        RespWriter { out, protocol }
    }

    /// Whether the connection speaks RESP3.
    #[inline]
    fn resp3(&self) -> bool {
        self.protocol == Protocol::Resp3
    }

    /// `<prefix><n>\r\n`: integers, lengths and aggregate headers.
    #[inline]
    fn header(&mut self, prefix: u8, n: i64) {
        if (0..10).contains(&n) {
            // One digit (0 and 1 from SADD, HSET, EXISTS...): one fixed-size copy.
            self.out
                .extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
            return;
        }
        let mut digits = [0u8; I64_LEN_MAX];
        let s = format_i64(n, &mut digits);
        self.out.reserve(s.len() + 3);
        self.out.push(prefix);
        self.out.extend_from_slice(s);
        self.out.extend_from_slice(b"\r\n");
    }

    /// `<prefix><len>\r\n`, a blob's header: lengths below 100 (short values, the common
    /// case) as one fixed-size copy.
    #[inline]
    fn len_header(&mut self, prefix: u8, len: usize) {
        match len {
            0..=9 => self
                .out
                .extend_from_slice(&[prefix, b'0' + len as u8, b'\r', b'\n']),
            10..=99 => self.out.extend_from_slice(&[
                prefix,
                b'0' + (len / 10) as u8,
                b'0' + (len % 10) as u8,
                b'\r',
                b'\n',
            ]),
            _ => self.header(prefix, len_i64(len)),
        }
    }

    /// `<prefix><len>\r\n<bytes>\r\n` in one reservation (bulk, verbatim payload).
    #[inline]
    fn blob(&mut self, prefix: u8, b: &[u8]) {
        self.out.reserve(b.len() + 16);
        self.len_header(prefix, b.len());
        self.out.extend_from_slice(b);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A blob whose bytes are `head` then `tail` (a two-part bulk), in one reservation.
    #[inline]
    fn blob_parts(&mut self, prefix: u8, head: &[u8], tail: &[u8]) {
        let len = head.len() + tail.len();
        self.out.reserve(len + 16);
        self.len_header(prefix, len);
        self.put(head);
        self.put(tail);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Appends `b`: a few bytes one by one (a flat hash's field and value suffixes are often
    /// one or two bytes, where a `memcpy` call costs more than the copy), longer ones at once.
    #[inline]
    fn put(&mut self, b: &[u8]) {
        if b.len() <= 4 {
            for &x in b {
                self.out.push(x);
            }
        } else {
            self.out.extend_from_slice(b);
        }
    }

    /// A fixed reply line, e.g. `$-1\r\n`.
    #[inline]
    fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
}

/// A length as the signed integer RESP headers carry (lengths never pass `i64::MAX`).
#[inline]
fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl ReplySink for RespWriter<'_> {
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn is_connection(&self) -> bool {
        true
    }
    fn set_protocol(&mut self, p: Protocol) {
        self.protocol = p;
    }
    /// `+OK\r\n` as one constant copy (the commonest reply: SET, HMSET...), where the
    /// default `simple("OK")` would copy three pieces through calls.
    fn ok(&mut self) {
        self.raw(b"+OK\r\n");
    }
    fn pong(&mut self) {
        self.raw(b"+PONG\r\n");
    }
    fn simple(&mut self, s: &str) {
        self.out.reserve(s.len() + 3);
        self.out.push(b'+');
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }
    fn error(&mut self, s: &str) {
        self.error_bytes(s.as_bytes());
    }
    fn error_bytes(&mut self, s: &[u8]) {
        self.out.reserve(s.len() + 3);
        self.out.push(b'-');
        let start = self.out.len();
        self.out.extend_from_slice(s);
        if memchr::memchr2(b'\r', b'\n', s).is_some() {
            // An error reply is one line: Redis turns CR and LF into spaces.
            for b in &mut self.out[start..] {
                if *b == b'\r' || *b == b'\n' {
                    *b = b' ';
                }
            }
        }
        self.out.extend_from_slice(b"\r\n");
    }
    fn int(&mut self, v: i64) {
        self.header(b':', v);
    }
    fn bulk(&mut self, b: &[u8]) {
        self.blob(b'$', b);
    }
    fn bulk_parts(&mut self, head: &[u8], tail: &[u8]) {
        self.blob_parts(b'$', head, tail);
    }
    fn null(&mut self) {
        self.raw(if self.resp3() { b"_\r\n" } else { b"$-1\r\n" });
    }
    fn null_array(&mut self) {
        self.raw(if self.resp3() { b"_\r\n" } else { b"*-1\r\n" });
    }
    fn array(&mut self, len: usize) {
        self.header(b'*', len_i64(len));
    }
    fn map(&mut self, len: usize) {
        if self.resp3() {
            self.header(b'%', len_i64(len));
        } else {
            self.header(b'*', len_i64(len).saturating_mul(2));
        }
    }
    fn set(&mut self, len: usize) {
        self.header(if self.resp3() { b'~' } else { b'*' }, len_i64(len));
    }
    fn push(&mut self, len: usize) {
        self.header(if self.resp3() { b'>' } else { b'*' }, len_i64(len));
    }
    fn double(&mut self, v: f64) {
        let mut buf = [0u8; G17_LEN_MAX];
        let s = format_g17(v, &mut buf);
        if self.resp3() {
            self.out.reserve(s.len() + 3);
            self.out.push(b',');
            self.out.extend_from_slice(s);
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.blob(b'$', s);
        }
    }
    fn human_double(&mut self, _: f64, text: &str) {
        if self.resp3() {
            self.out.reserve(text.len() + 3);
            self.out.push(b',');
            self.out.extend_from_slice(text.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.blob(b'$', text.as_bytes());
        }
    }
    fn boolean(&mut self, v: bool) {
        let line: &[u8] = match (self.resp3(), v) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.raw(line);
    }
    fn verbatim(&mut self, format: &str, text: &[u8]) {
        if !self.resp3() {
            self.blob(b'$', text);
            return;
        }
        self.out.reserve(format.len() + text.len() + 24);
        self.header(b'=', len_i64(format.len() + 1 + text.len()));
        self.out.extend_from_slice(format.as_bytes());
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }
    fn big_number(&mut self, digits: &str) {
        if !self.resp3() {
            self.blob(b'$', digits.as_bytes());
            return;
        }
        self.out.reserve(digits.len() + 3);
        self.out.push(b'(');
        self.out.extend_from_slice(digits.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }
    fn attribute(&mut self, len: usize) {
        self.header(b'|', len_i64(len));
    }
}

/// Longest decimal `i64` (`-9223372036854775808`).
const I64_LEN_MAX: usize = 20;

/// Two-digit pairs `00`..`99`, so itoa emits two digits per division.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `v` in decimal at the end of `buf` and returns the digits (no allocation).
pub fn format_i64(v: i64, buf: &mut [u8; I64_LEN_MAX]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Room for any `%.17g` output (`-1.2345678901234567e-308` is 24 bytes).
const G17_LEN_MAX: usize = 32;

/// A fixed buffer that `core::fmt` can write into.
struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends `v` formatted as C's `printf("%.17g")` (what Redis 7.0 replies for doubles): 17
/// significant digits correctly rounded, `%e` style when the exponent is below -4 or above 16,
/// trailing zeros dropped, `inf`/`-inf`/`nan`/`-nan` as glibc prints them.
pub fn format_double_g17(v: f64, out: &mut Vec<u8>) {
    let mut buf = [0u8; G17_LEN_MAX];
    out.extend_from_slice(format_g17(v, &mut buf));
}

/// `%.17g` into a stack buffer; returns the text.
fn format_g17(v: f64, buf: &mut [u8; G17_LEN_MAX]) -> &[u8] {
    let special: Option<&[u8]> = if v.is_nan() {
        Some(if v.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        })
    } else if v.is_infinite() {
        Some(if v < 0.0 { b"-inf" } else { b"inf" })
    } else if v == 0.0 {
        Some(if v.is_sign_negative() { b"-0" } else { b"0" })
    } else {
        None
    };
    if let Some(s) = special {
        buf[..s.len()].copy_from_slice(s);
        return &buf[..s.len()];
    }
    if v.abs() < 1e17 && (v as i64) as f64 == v {
        // An integral value below 1e17 prints as the integer itself (fewer than 18 digits):
        // skip the exact float formatting.
        let mut digits = [0u8; I64_LEN_MAX];
        let s = format_i64(v as i64, &mut digits);
        buf[..s.len()].copy_from_slice(s);
        return &buf[..s.len()];
    }
    let (digits, exp) = g17_digits(v.abs());
    let len = g17_layout(&digits, exp, v < 0.0, buf);
    &buf[..len]
}

/// The 17 significant digits of a finite non-zero `v` and its decimal exponent, correctly
/// rounded (core's `{:.16e}` is exact, with ties to even like glibc).
fn g17_digits(v: f64) -> ([u8; 17], i32) {
    let mut s = StackBuf::<40> {
        buf: [0; 40],
        len: 0,
    };
    // Cannot fail: "d.<16 digits>e-324" fits in 40 bytes.
    let _ = write!(s, "{v:.16e}");
    let text = &s.buf[..s.len];
    let mut digits = [b'0'; 17];
    digits[0] = text[0];
    digits[1..].copy_from_slice(&text[2..18]);
    let exp = text[19..]
        .iter()
        .skip_while(|&&c| c == b'-')
        .fold(0i32, |e, &c| e * 10 + i32::from(c - b'0'));
    (digits, if text[19] == b'-' { -exp } else { exp })
}

/// Lays out `%.17g` from its digits and exponent into `buf`; returns the length.
fn g17_layout(digits: &[u8; 17], exp: i32, negative: bool, buf: &mut [u8; G17_LEN_MAX]) -> usize {
    let mut n = 17;
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    let mut w = Cursor { buf, len: 0 };
    if negative {
        w.put(b"-");
    }
    if !(-4..17).contains(&exp) {
        w.put(&digits[..1]);
        if n > 1 {
            w.put(b".");
            w.put(&digits[1..n]);
        }
        w.put(if exp < 0 { b"e-" } else { b"e+" });
        let e = exp.unsigned_abs();
        if e < 10 {
            w.put(b"0");
        }
        let mut eb = [0u8; I64_LEN_MAX];
        w.put(format_i64(i64::from(e), &mut eb));
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        w.put(&digits[..int_len]);
        if n > int_len {
            w.put(b".");
            w.put(&digits[int_len..n]);
        }
    } else {
        w.put(b"0.");
        for _ in 0..(-exp - 1) {
            w.put(b"0");
        }
        w.put(&digits[..n]);
    }
    w.len
}

/// Appends slices to a stack buffer.
struct Cursor<'a> {
    buf: &'a mut [u8; G17_LEN_MAX],
    len: usize,
}

impl Cursor<'_> {
    fn put(&mut self, s: &[u8]) {
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    /// Runs `f` on a writer for `p` and returns the bytes as text.
    fn enc(p: Protocol, f: impl FnOnce(&mut RespWriter<'_>)) -> String {
        let mut out = Vec::new();
        f(&mut RespWriter::new(&mut out, p));
        String::from_utf8(out).unwrap()
    }

    /// The same call in both protocols.
    fn both(f: impl Fn(&mut RespWriter<'_>)) -> (String, String) {
        (enc(Protocol::Resp2, &f), enc(Protocol::Resp3, &f))
    }

    #[test]
    fn scalars_golden_bytes() {
        assert_eq!(
            both(|w| w.simple("OK")),
            ("+OK\r\n".into(), "+OK\r\n".into())
        );
        assert_eq!(both(|w| w.ok()).0, "+OK\r\n");
        assert_eq!(both(|w| w.pong()), ("+PONG\r\n".into(), "+PONG\r\n".into()));
        assert_eq!(
            both(|w| w.error("ERR bad\r\nthing\n")),
            ("-ERR bad  thing \r\n".into(), "-ERR bad  thing \r\n".into())
        );
        assert_eq!(both(|w| w.int(0)), (":0\r\n".into(), ":0\r\n".into()));
        assert_eq!(both(|w| w.int(-42)).1, ":-42\r\n");
        assert_eq!(both(|w| w.int(i64::MIN)).0, ":-9223372036854775808\r\n");
        assert_eq!(both(|w| w.int(i64::MAX)).0, ":9223372036854775807\r\n");
        assert_eq!(
            both(|w| w.bulk(b"a\r\nb")),
            ("$4\r\na\r\nb\r\n".into(), "$4\r\na\r\nb\r\n".into())
        );
        assert_eq!(both(|w| w.bulk(b"")).0, "$0\r\n\r\n");
        assert_eq!(both(|w| w.bulk_str("hi")).1, "$2\r\nhi\r\n");
        assert_eq!(both(|w| w.null()), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(|w| w.null_array()), ("*-1\r\n".into(), "_\r\n".into()));
        assert_eq!(
            both(|w| w.boolean(true)),
            (":1\r\n".into(), "#t\r\n".into())
        );
        assert_eq!(
            both(|w| w.boolean(false)),
            (":0\r\n".into(), "#f\r\n".into())
        );
    }

    /// The one-digit fast paths of integers, lengths and bulk headers agree with the general
    /// digit path on both sides of their bounds.
    #[test]
    fn one_digit_fast_paths_agree_with_the_general_path() {
        for n in [-11i64, -10, -9, -1, 0, 1, 5, 9, 10, 11, 99, 100, 12345] {
            assert_eq!(
                enc(Protocol::Resp2, |w| w.int(n)),
                alloc::format!(":{n}\r\n")
            );
        }
        for len in [0usize, 1, 8, 9, 10, 11, 99, 100, 1000] {
            let payload = alloc::vec![b'x'; len];
            let text = String::from_utf8(payload.clone()).unwrap();
            let want = alloc::format!("${len}\r\n{text}\r\n");
            assert_eq!(enc(Protocol::Resp2, |w| w.bulk(&payload)), want);
            for cut in [0, len / 2, len] {
                let (head, tail) = payload.split_at(cut);
                assert_eq!(enc(Protocol::Resp3, |w| w.bulk_parts(head, tail)), want);
            }
            assert_eq!(
                enc(Protocol::Resp2, |w| w.array(len)),
                alloc::format!("*{len}\r\n")
            );
        }
    }

    #[test]
    fn aggregates_golden_bytes() {
        assert_eq!(both(|w| w.array(3)), ("*3\r\n".into(), "*3\r\n".into()));
        assert_eq!(both(|w| w.array(0)).1, "*0\r\n");
        assert_eq!(both(|w| w.map(2)), ("*4\r\n".into(), "%2\r\n".into()));
        assert_eq!(both(|w| w.map(0)), ("*0\r\n".into(), "%0\r\n".into()));
        assert_eq!(both(|w| w.set(5)), ("*5\r\n".into(), "~5\r\n".into()));
        assert_eq!(both(|w| w.push(3)), ("*3\r\n".into(), ">3\r\n".into()));
    }

    #[test]
    fn typed_strings_golden_bytes() {
        assert_eq!(
            both(|w| w.verbatim("txt", b"a\r\nb")),
            ("$4\r\na\r\nb\r\n".into(), "=8\r\ntxt:a\r\nb\r\n".into())
        );
        assert_eq!(
            both(|w| w.big_number("-1234567890123456789012")),
            (
                "$23\r\n-1234567890123456789012\r\n".into(),
                "(-1234567890123456789012\r\n".into()
            )
        );
    }

    #[test]
    fn doubles_golden_bytes_as_redis_7_0_15() {
        // Replies of ZSCORE on the real server (RESP2, then HELLO 3).
        assert_eq!(
            both(|w| w.double(1.5)),
            ("$3\r\n1.5\r\n".into(), ",1.5\r\n".into())
        );
        assert_eq!(
            both(|w| w.double(0.1)),
            (
                "$19\r\n0.10000000000000001\r\n".into(),
                ",0.10000000000000001\r\n".into()
            )
        );
        assert_eq!(
            both(|w| w.double(f64::INFINITY)),
            ("$3\r\ninf\r\n".into(), ",inf\r\n".into())
        );
        assert_eq!(both(|w| w.double(f64::NEG_INFINITY)).1, ",-inf\r\n");
        assert_eq!(both(|w| w.double(-0.0)).1, ",-0\r\n");
        assert_eq!(both(|w| w.double(1e20)).1, ",1e+20\r\n");
        assert_eq!(both(|w| w.double(1e-5)).1, ",1.0000000000000001e-05\r\n");
        assert_eq!(both(|w| w.double(1e16)).1, ",10000000000000000\r\n");
        assert_eq!(both(|w| w.double(1e17)).1, ",1e+17\r\n");
        assert_eq!(
            both(|w| w.double(123456789012345678.0)).1,
            ",1.2345678901234568e+17\r\n"
        );
        assert_eq!(
            both(|w| w.double(5e-324)).0,
            "$23\r\n4.9406564584124654e-324\r\n"
        );
        assert_eq!(
            both(|w| w.double(f64::MAX)).0,
            "$23\r\n1.7976931348623157e+308\r\n"
        );
    }

    /// `%.17g` outputs printed by C (glibc printf, cross-checked with Python's `%` operator);
    /// the `x.25`/`x.75`/`x.5` rows are exact ties rounded to even.
    #[allow(clippy::excessive_precision, clippy::approx_constant)]
    const G17_TABLE: &[(f64, &str)] = &[
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (-1.0, "-1"),
        (100.0, "100"),
        (0.5, "0.5"),
        (0.1, "0.10000000000000001"),
        (0.2, "0.20000000000000001"),
        (0.3, "0.29999999999999999"),
        (1.0 / 3.0, "0.33333333333333331"),
        (-2.0 / 3.0, "-0.66666666666666663"),
        (3.14159, "3.1415899999999999"),
        (0.0001, "0.0001"),
        (0.00012345, "0.00012344999999999999"),
        (0.00001, "1.0000000000000001e-05"),
        (5e-5, "5.0000000000000002e-05"),
        (9.999999999999999e-5, "9.9999999999999991e-05"),
        (1e-10, "1e-10"),
        (1e100, "1e+100"),
        (1e22, "1e+22"),
        (1e21, "1e+21"),
        (1e15, "1000000000000000"),
        (1e16, "10000000000000000"),
        (1e17, "1e+17"),
        (12345678901234567.0, "12345678901234568"),
        (99999999999999999.0, "1e+17"),
        (9007199254740993.0, "9007199254740992"),
        (1000000000000000.25, "1000000000000000.2"),
        (1000000000000000.75, "1000000000000000.8"),
        (1000000000000000.125, "1000000000000000.1"),
        (4503599627370496.5, "4503599627370496"),
        (4503599627370497.5, "4503599627370498"),
        (2.5e-308, "2.4999999999999998e-308"),
        (2.2250738585072014e-308, "2.2250738585072014e-308"),
        (5e-324, "4.9406564584124654e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-1.5e300, "-1.5000000000000001e+300"),
        (123.456, "123.456"),
        (-123.456e-7, "-1.2345599999999999e-05"),
        (0.001, "0.001"),
        (0.30000000000000004, "0.30000000000000004"),
        (0.000123456789012345678, "0.00012345678901234567"),
        (255.0 / 256.0, "0.99609375"),
        (1.0 - f64::EPSILON, "0.99999999999999978"),
        (1.0 + f64::EPSILON, "1.0000000000000002"),
        (72057594037927936.0, "72057594037927936"),
        (144115188075855872.0, "1.4411518807585587e+17"),
        (9223372036854775808.0, "9.2233720368547758e+18"),
        (-9223372036854775808.0, "-9.2233720368547758e+18"),
    ];

    #[test]
    fn g17_matches_c_printf() {
        for &(v, want) in G17_TABLE {
            let mut out = Vec::new();
            format_double_g17(v, &mut out);
            assert_eq!(core::str::from_utf8(&out).unwrap(), want, "value {v:e}");
        }
    }

    #[test]
    fn g17_integer_fast_path_agrees_with_the_digit_path() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for i in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = ((x >> (i % 64)) as f64).min(99_999_999_999_999_990.0);
            let v = if i % 2 == 0 { v } else { -v };
            if v == 0.0 {
                continue;
            }
            let mut fast = [0u8; G17_LEN_MAX];
            let mut slow = [0u8; G17_LEN_MAX];
            let (digits, exp) = g17_digits(v.abs());
            let n = g17_layout(&digits, exp, v < 0.0, &mut slow);
            assert_eq!(format_g17(v, &mut fast), &slow[..n], "{v}");
        }
    }

    #[test]
    fn g17_specials() {
        let mut out = Vec::new();
        format_double_g17(f64::NAN, &mut out);
        out.push(b' ');
        format_double_g17(-f64::NAN, &mut out);
        out.push(b' ');
        format_double_g17(f64::NEG_INFINITY, &mut out);
        assert_eq!(out, b"nan -nan -inf");
    }

    #[test]
    fn itoa_matches_core_fmt() {
        let mut vals = alloc::vec![0i64, 1, 9, 10, 99, 100, 101, 999, 1000, i64::MIN, i64::MAX];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push((x as i64) >> (x % 63));
        }
        for v in vals {
            let mut buf = [0u8; I64_LEN_MAX];
            assert_eq!(format_i64(v, &mut buf), alloc::format!("{v}").as_bytes());
        }
    }
}

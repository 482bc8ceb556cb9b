//! Incremental request decoder: RESP multibulk (`*N\r\n$len\r\nbytes\r\n...`) and inline commands
//! (Redis protocol specification, "Sending commands to a Redis server" and "Inline commands"),
//! with the framing rules, limits and error texts of Redis 7.0.15 (checked against the real
//! server, see `docs` in the tests below).
//!
//! Framing facts this decoder reproduces (all verified on redis-server 7.0.15):
//! - a header line (`*N`, `$len`) ends at the first `\r`; the byte after it is skipped unchecked
//!   (`*1\rX$4\r\nPING\r\n` is a valid PING), and so are the two bytes after a bulk's payload;
//! - a NUL byte before a line's terminator hides the terminator (Redis scans with `strchr`): the
//!   command waits for more input until the 64 KiB line limit turns it into an error;
//! - counts and lengths are parsed strictly (no `+`, no leading zero, no `-0`, no spaces);
//! - `*N` with `N <= 0` is an empty command; `N > i32::MAX` is an invalid multibulk length;
//! - an inline line ends at `\n` (a `\r` just before it is dropped) and is split like
//!   `sdssplitargs`.

use alloc::vec::Vec;
use core::fmt;
use kayvee_engine::argv::Span;
use kayvee_engine::util::parse_i64;
use kayvee_engine::Argv;

/// Longest header line or inline request Redis buffers without its terminator
/// (`PROTO_INLINE_MAX_SIZE`).
pub const LINE_LEN_MAX: usize = 64 * 1024;
/// Largest multibulk count an unauthenticated client may announce.
pub const UNAUTH_MULTIBULK_LEN_MAX: i64 = 10;
/// Largest bulk length an unauthenticated client may announce.
pub const UNAUTH_BULK_LEN_MAX: i64 = 16 * 1024;
/// Largest multibulk count at all (Redis keeps it in an `int`).
pub const MULTIBULK_LEN_MAX: i64 = i32::MAX as i64;
/// Spans reserved up front for a big multibulk count (the rest grows as arguments arrive).
const SPANS_PREALLOC_MAX: usize = 1024;

/// Bounds on what a client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk argument (`proto-max-bulk-len`, 512 MB by default).
    pub bulk_len_max: usize,
    /// Largest amount of buffered, not yet complete input (`client-query-buffer-limit`, 1 GB).
    pub query_buffer_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_len_max: 512 * 1024 * 1024,
            query_buffer_max: 1024 * 1024 * 1024,
        }
    }
}

/// A protocol violation: the shell sends `-ERR <Display>` and closes the connection (use
/// [`ProtocolError::write_reply`] for the exact bytes, which also covers the silent close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// Protocol error: invalid multibulk length
    InvalidMultibulkLength,
    /// Protocol error: invalid bulk length
    InvalidBulkLength,
    /// Protocol error: expected '$', got 'X' (X is the byte found, CR and LF shown as spaces)
    ExpectedDollar(u8),
    /// Protocol error: too big mbulk count string
    TooBigMbulkCount,
    /// Protocol error: too big bulk count string
    TooBigBulkCount,
    /// Protocol error: too big inline request
    TooBigInline,
    /// Protocol error: unbalanced quotes in request
    UnbalancedQuotes,
    /// Protocol error: unauthenticated multibulk length
    UnauthenticatedMultibulkLength,
    /// Protocol error: unauthenticated bulk length
    UnauthenticatedBulkLength,
    /// Closing client that reached max query buffer length (Redis sends no reply for this one:
    /// it logs this line and closes the connection).
    QueryBufferLimit,
}

impl ProtocolError {
    /// The fixed part of the text (everything but the byte of `ExpectedDollar`).
    fn text(&self) -> &'static str {
        match self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(_) => "Protocol error: expected '$', got '",
            ProtocolError::TooBigMbulkCount => "Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCount => "Protocol error: too big bulk count string",
            ProtocolError::TooBigInline => "Protocol error: too big inline request",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                "Protocol error: unauthenticated bulk length"
            }
            ProtocolError::QueryBufferLimit => {
                "Closing client that reached max query buffer length"
            }
        }
    }

    /// Whether Redis closes the connection without any reply (only the query buffer limit).
    pub fn closes_silently(&self) -> bool {
        matches!(self, ProtocolError::QueryBufferLimit)
    }

    /// Appends the exact bytes Redis 7.0.15 sends before closing: `-ERR <text>\r\n`, with the
    /// raw byte for `ExpectedDollar` (Display cannot carry a non-UTF-8 byte), or nothing at all
    /// for the query buffer limit.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        if self.closes_silently() {
            return;
        }
        out.extend_from_slice(b"-ERR ");
        out.extend_from_slice(self.text().as_bytes());
        if let ProtocolError::ExpectedDollar(b) = self {
            out.push(shown_byte(*b));
            out.push(b'\'');
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// The byte as an error reply shows it: Redis turns CR and LF into spaces.
fn shown_byte(b: u8) -> u8 {
    match b {
        b'\r' | b'\n' => b' ',
        _ => b,
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())?;
        if let ProtocolError::ExpectedDollar(b) = self {
            // A byte >= 0x80 shows as its Latin-1 character here; `write_reply` sends the byte.
            write!(f, "{}'", char::from(shown_byte(*b)))?;
        }
        Ok(())
    }
}

/// One decoded command.
#[derive(Debug)]
pub struct Frame<'a> {
    /// The arguments (may be empty: an empty inline line or `*0`, which the engine ignores).
    pub argv: Argv<'a>,
    /// Bytes of the input this command used; the caller drops them before the next call.
    pub consumed: usize,
}

/// What kind of command is being decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    /// Between commands.
    #[default]
    Idle,
    /// A `*N` command (its count line not read yet while `pos == 0`).
    Multibulk,
    /// An inline line.
    Inline,
}

/// Where the arguments of a finished command lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// In the caller's buffer.
    Input,
    /// In the decoder's scratch buffer (unescaped inline arguments).
    Scratch,
}

/// A finished command: bytes used and where its arguments lie.
type Done = (usize, Source);

/// Decodes commands from a connection's input, one at a time, resuming where it stopped when a
/// command arrives in pieces.
#[derive(Debug, Default)]
pub struct Decoder {
    spans: Vec<Span>,
    limits: Limits,
    /// Unescaped inline arguments (only for lines with quotes).
    scratch: Vec<u8>,
    kind: Kind,
    /// Multibulk: the next byte to parse, relative to the command start.
    pos: usize,
    /// Multibulk: arguments still expected.
    args_left: usize,
    /// Multibulk: length of the bulk whose header was read but whose payload has not arrived.
    bulk_len: Option<usize>,
    /// Where the search for the current line's terminator resumes (bytes before it are known
    /// to hold none), so a command arriving in pieces costs O(new bytes).
    scan: usize,
}

impl Decoder {
    /// A decoder with these limits.
    pub fn new(limits: Limits) -> Self {
        Decoder {
            spans: Vec::new(),
            limits,
            ..Default::default()
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits (`CONFIG SET proto-max-bulk-len`...); they apply from the next check.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The bulk argument whose `$len` header was read but whose payload has not all arrived:
    /// where its payload starts (relative to the command's start) and its length. A
    /// connection sizes its buffer for the whole command from it, and reports only the
    /// payload as its query buffer, as Redis does with a big argument.
    pub fn pending_bulk(&self) -> Option<(usize, usize)> {
        match (self.kind, self.bulk_len) {
            (Kind::Multibulk, Some(len)) => Some((self.pos, len)),
            _ => None,
        }
    }

    /// Forgets any partly decoded command (the next call starts at a command start).
    pub fn reset(&mut self) {
        self.kind = Kind::Idle;
        self.pos = 0;
        self.args_left = 0;
        self.bulk_len = None;
        self.scan = 0;
    }

    /// Decodes the next command at the start of `buf`. `Ok(None)`: more bytes are needed (call
    /// again with the same bytes plus more). `authenticated` tightens limits for clients that
    /// have not passed AUTH, as Redis does.
    pub fn decode<'a>(
        &'a mut self,
        buf: &'a [u8],
        authenticated: bool,
    ) -> Result<Option<Frame<'a>>, ProtocolError> {
        if self.kind == Kind::Idle && buf.first() == Some(&b'*') {
            if let Some(consumed) = self.whole_multibulk(buf, authenticated) {
                return Ok(Some(Frame {
                    argv: Argv::new(buf, &self.spans),
                    consumed,
                }));
            }
        }
        if self.pos > buf.len() || self.scan > buf.len() {
            // The caller broke the contract (fewer bytes than last time): start over.
            self.reset();
        }
        if self.kind == Kind::Idle {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            self.spans.clear();
            // The argument table of one huge command is not kept for the next (Redis frees a
            // command's argv after it runs).
            self.spans.shrink_to(SPANS_PREALLOC_MAX);
            self.kind = if first == b'*' {
                Kind::Multibulk
            } else {
                Kind::Inline
            };
        }
        let step = match self.kind {
            Kind::Multibulk => self.multibulk(buf, authenticated),
            _ => self.inline(buf),
        };
        match step {
            Ok(Some((consumed, source))) => {
                self.reset();
                let bytes = match source {
                    Source::Input => buf,
                    Source::Scratch => &self.scratch[..],
                };
                Ok(Some(Frame {
                    argv: Argv::new(bytes, &self.spans),
                    consumed,
                }))
            }
            Ok(None) if buf.len() > self.limits.query_buffer_max => {
                self.reset();
                Err(ProtocolError::QueryBufferLimit)
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// The fast path of a command that is all there (what pipelined clients send): a
    /// multibulk command with plain headers within the limits and every argument complete,
    /// read in one pass with the position in a local, leaving the decoder between commands.
    /// Anything else (a command in pieces, odd headers, errors) is `None`, and the general
    /// path reads it from its start, as if this had not run.
    #[inline]
    fn whole_multibulk(&mut self, buf: &[u8], auth: bool) -> Option<usize> {
        let (n, cr) = quick_header(buf, 0)?;
        let (count_max, len_max) = if auth {
            (SPANS_PREALLOC_MAX, self.limits.bulk_len_max)
        } else {
            (
                UNAUTH_MULTIBULK_LEN_MAX as usize,
                self.limits.bulk_len_max.min(UNAUTH_BULK_LEN_MAX as usize),
            )
        };
        if n > count_max {
            return None;
        }
        self.spans.clear();
        self.spans.shrink_to(SPANS_PREALLOC_MAX);
        let mut pos = cr + 2;
        for _ in 0..n {
            let (len, cr) = quick_header(buf, pos)?;
            if buf[pos] != b'$' || len > len_max {
                return None;
            }
            let start = cr + 2;
            let end = start.checked_add(len)?;
            if buf.len().saturating_sub(end) < 2 {
                return None;
            }
            self.spans.push(start..end);
            pos = end + 2;
        }
        Some(pos)
    }

    /// Finds the `\r` ending the header line that starts at `start`, when the byte after it has
    /// arrived too. A NUL before the `\r` hides it, as in Redis. Lines longer than
    /// [`LINE_LEN_MAX`] without a terminator are `too_big`.
    fn header_line(
        &mut self,
        buf: &[u8],
        start: usize,
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        let from = self.scan.max(start);
        match find_cr_or_nul(&buf[from..]) {
            Some(i) if buf[from + i] == b'\r' => {
                let cr = from + i;
                if cr + 1 < buf.len() {
                    self.scan = cr + 2;
                    return Ok(Some(cr));
                }
                // The byte after `\r` is not there yet: look at this `\r` again next time.
                self.scan = cr;
                return Ok(None);
            }
            // A NUL: the line can never end; keep finding it in O(1).
            Some(i) => self.scan = from + i,
            None => self.scan = buf.len(),
        }
        if buf.len() - start > LINE_LEN_MAX {
            return Err(too_big);
        }
        Ok(None)
    }

    /// Continues a multibulk command: its count line, then each `$len` header and payload.
    fn multibulk(&mut self, buf: &[u8], auth: bool) -> Result<Option<Done>, ProtocolError> {
        if self.pos == 0 {
            let (n, cr) = match quick_header(buf, 0) {
                Some((n, cr)) => {
                    self.scan = cr + 2;
                    (check_multibulk_len(n as i64, auth)?, cr)
                }
                None => {
                    let Some(cr) = self.header_line(buf, 0, ProtocolError::TooBigMbulkCount)?
                    else {
                        return Ok(None);
                    };
                    (multibulk_len(&buf[1..cr], auth)?, cr)
                }
            };
            self.pos = cr + 2;
            if n == 0 {
                return Ok(Some((self.pos, Source::Input)));
            }
            self.args_left = n;
            self.spans.reserve(n.min(SPANS_PREALLOC_MAX));
        }
        if self.bulk_len.is_none() {
            self.complete_args(buf, auth);
        }
        while self.args_left > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => match self.bulk_header(buf, auth)? {
                    Some(len) => len,
                    None => return Ok(None),
                },
            };
            let end = self.pos.saturating_add(len);
            if buf.len().saturating_sub(end) < 2 {
                return Ok(None);
            }
            self.spans.push(self.pos..end);
            self.pos = end + 2;
            self.bulk_len = None;
            self.args_left -= 1;
        }
        Ok(Some((self.pos, Source::Input)))
    }

    /// The fast path of [`Decoder::multibulk`]: takes the arguments that are complete and have
    /// plain headers within the limits, with the position in locals. Stops at the first other
    /// one, which the general loop then reads (and reports, if it is an error).
    #[inline]
    fn complete_args(&mut self, buf: &[u8], auth: bool) {
        let (mut pos, mut left) = (self.pos, self.args_left);
        let max = if auth {
            self.limits.bulk_len_max
        } else {
            self.limits.bulk_len_max.min(UNAUTH_BULK_LEN_MAX as usize)
        };
        while left > 0 {
            let Some((len, cr)) = quick_header(buf, pos) else {
                break;
            };
            if buf[pos] != b'$' || len > max {
                break;
            }
            let start = cr + 2;
            let end = start.saturating_add(len);
            if buf.len().saturating_sub(end) < 2 {
                break;
            }
            self.spans.push(start..end);
            pos = end + 2;
            left -= 1;
        }
        self.pos = pos;
        self.args_left = left;
    }

    /// Reads a `$len` line at `pos`: the bulk's length, or `None` when the line is incomplete.
    fn bulk_header(&mut self, buf: &[u8], auth: bool) -> Result<Option<usize>, ProtocolError> {
        let start = self.pos;
        let (len, cr) = match quick_header(buf, start).filter(|_| buf[start] == b'$') {
            Some((len, cr)) => {
                self.scan = cr + 2;
                (Some(len), cr)
            }
            None => {
                let Some(cr) = self.header_line(buf, start, ProtocolError::TooBigBulkCount)? else {
                    return Ok(None);
                };
                if buf[start] != b'$' {
                    return Err(ProtocolError::ExpectedDollar(buf[start]));
                }
                let len = parse_i64(&buf[start + 1..cr]).and_then(|n| usize::try_from(n).ok());
                (len, cr)
            }
        };
        let len = len
            .filter(|&n| n <= self.limits.bulk_len_max)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if !auth && len as u64 > UNAUTH_BULK_LEN_MAX as u64 {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        self.pos = cr + 2;
        self.bulk_len = Some(len);
        Ok(Some(len))
    }

    /// Continues an inline command: waits for its `\n`, then splits the line.
    fn inline(&mut self, buf: &[u8]) -> Result<Option<Done>, ProtocolError> {
        let from = self.scan;
        let nl = match memchr::memchr2(b'\n', 0, &buf[from..]) {
            Some(i) if buf[from + i] == b'\n' => from + i,
            found => {
                self.scan = found.map_or(buf.len(), |i| from + i);
                if buf.len() > LINE_LEN_MAX {
                    return Err(ProtocolError::TooBigInline);
                }
                return Ok(None);
            }
        };
        // Redis refuses an inline request once 64 KiB are buffered without a newline; it
        // reads 16 KiB at a time, so a longer line whose newline came in the same read can
        // slip through there. Kayvee's reads are larger, so the length itself is the bound.
        if nl > LINE_LEN_MAX {
            return Err(ProtocolError::TooBigInline);
        }
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        let source = split_inline(&buf[..end], &mut self.spans, &mut self.scratch)?;
        Ok(Some((nl + 1, source)))
    }
}

/// The first `\r` or NUL: a plain loop over the first bytes (header lines are short, where
/// it beats the SIMD setup), then `memchr2` for the rest.
#[inline]
fn find_cr_or_nul(b: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    let head = &b[..b.len().min(SHORT)];
    if let Some(i) = head.iter().position(|&c| c == b'\r' || c == 0) {
        return Some(i);
    }
    if b.len() <= SHORT {
        return None;
    }
    memchr::memchr2(b'\r', 0, &b[SHORT..]).map(|i| i + SHORT)
}

/// The fast path of header lines: a complete, plain `*n` or `$n` line at `start` (1 to 18
/// digits, no leading zero, then `\r` and one more byte, as [`Decoder::header_line`] requires)
/// gives `(n, index of the \r)` in one pass. Anything else (`0`, signs, long or incomplete lines,
/// NULs, junk) is `None` and left to the general path, which reads these lines alike.
#[inline]
fn quick_header(buf: &[u8], start: usize) -> Option<(usize, usize)> {
    // One or two digits, the common case (command names, short keys and values), without
    // the loop.
    if let Some(&[d1, d2, c]) = buf.get(start + 1..start + 4) {
        if (b'1'..=b'9').contains(&d1) {
            let d1 = usize::from(d1 - b'0');
            if d2 == b'\r' {
                return Some((d1, start + 2));
            }
            if d2.is_ascii_digit() && c == b'\r' && buf.len() > start + 4 {
                return Some((d1 * 10 + usize::from(d2 - b'0'), start + 3));
            }
        }
    }
    let digits = buf.get(start + 1..)?;
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut n = u64::from(first - b'0');
    for (i, &c) in rest.iter().enumerate().take(18) {
        match c {
            b'0'..=b'9' if i < 17 => n = n * 10 + u64::from(c - b'0'),
            b'\r' if i + 1 < rest.len() => return Some((usize::try_from(n).ok()?, start + 2 + i)),
            _ => return None,
        }
    }
    None
}

/// Checks a multibulk count as Redis does; counts <= 0 become 0 (an empty command).
fn multibulk_len(digits: &[u8], auth: bool) -> Result<usize, ProtocolError> {
    let n = parse_i64(digits).ok_or(ProtocolError::InvalidMultibulkLength)?;
    check_multibulk_len(n, auth)
}

/// The limits on a parsed multibulk count.
fn check_multibulk_len(n: i64, auth: bool) -> Result<usize, ProtocolError> {
    if n > MULTIBULK_LEN_MAX {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    if !auth && n > UNAUTH_MULTIBULK_LEN_MAX {
        return Err(ProtocolError::UnauthenticatedMultibulkLength);
    }
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Whitespace skipped between inline arguments (C `isspace`).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Bytes that end an unquoted inline argument (note: not `\v` nor `\f`, as in Redis).
fn ends_word(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Splits an inline line into arguments like Redis's `sdssplitargs`. Without quotes the spans
/// point into `line`; with quotes every argument is unescaped into `scratch`.
fn split_inline(
    line: &[u8],
    spans: &mut Vec<Span>,
    scratch: &mut Vec<u8>,
) -> Result<Source, ProtocolError> {
    if memchr::memchr2(b'"', b'\'', line).is_none() {
        split_plain(line, spans);
        return Ok(Source::Input);
    }
    scratch.clear();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(Source::Scratch);
        }
        let start = scratch.len();
        i = quoted_word(line, i, scratch)?;
        spans.push(start..scratch.len());
    }
}

/// The quote-free case: arguments are runs between whitespace, left where they are.
fn split_plain(line: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return;
        }
        let start = i;
        while i < line.len() && !ends_word(line[i]) {
            i += 1;
        }
        spans.push(start..i);
    }
}

/// Unescapes one argument starting at `i` into `out` (a quote may open inside it, as in
/// `a"b c"`, and its closing quote ends the argument); returns the index after it.
fn quoted_word(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    while i < line.len() && !ends_word(line[i]) {
        match line[i] {
            b'"' => return double_quoted(line, i + 1, out),
            b'\'' => return single_quoted(line, i + 1, out),
            b => out.push(b),
        }
        i += 1;
    }
    Ok(i)
}

/// A closing quote at `i` must be followed by whitespace or the end of the line.
fn close_quote(line: &[u8], i: usize) -> Result<usize, ProtocolError> {
    match line.get(i + 1) {
        Some(&b) if !is_space(b) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(i + 1),
    }
}

/// A `"..."` section with C-like escapes; `i` is just after the opening quote.
fn double_quoted(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        match line.get(i) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'"') => return close_quote(line, i),
            Some(b'\\') if i + 1 < line.len() => {
                let (b, used) = escape(&line[i + 1..]);
                out.push(b);
                i += 1 + used;
            }
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// A `'...'` section where only `\'` is an escape; `i` is just after the opening quote.
fn single_quoted(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        match line.get(i) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'\'') => return close_quote(line, i),
            Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                out.push(b'\'');
                i += 2;
            }
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// Decodes the escape after a backslash inside double quotes: `\xHH`, `\n` `\r` `\t` `\b` `\a`,
/// or the byte itself. Returns the byte and how many input bytes it used.
fn escape(rest: &[u8]) -> (u8, usize) {
    if let [b'x', h, l, ..] = rest {
        if let (Some(h), Some(l)) = (hex(*h), hex(*l)) {
            return (h * 16 + l, 3);
        }
    }
    let b = match rest[0] {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        b => b,
    };
    (b, 1)
}

/// The value of a hex digit.
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn pending_bulk_names_the_payload_still_arriving() {
        let mut d = super::Decoder::new(super::Limits::default());
        let buf = b"*2\r\n$3\r\nSET\r\n$100\r\nxyz";
        assert!(d.decode(buf, true).unwrap().is_none());
        assert_eq!(d.pending_bulk(), Some((19, 100)));
        let mut d = super::Decoder::new(super::Limits::default());
        assert!(d.decode(b"*2\r\n$3\r\nSE", true).unwrap().is_none());
        assert_eq!(d.pending_bulk(), Some((8, 3)));
        assert!(d.decode(b"*2\r\n$3\r\nSET\r\n", true).unwrap().is_none());
        assert_eq!(d.pending_bulk(), None, "between arguments");
        let mut d = super::Decoder::new(super::Limits::default());
        assert!(d.decode(b"PING", true).unwrap().is_none());
        assert_eq!(d.pending_bulk(), None, "inline");
    }

    #[test]
    fn quick_header_agrees_with_the_general_path() {
        let lines: &[&[u8]] = &[
            b"$3\r\n",
            b"*2\r\n",
            b"$16\r\nx",
            b"$0\r\n",
            b"$-1\r\n",
            b"$+1\r\n",
            b"$01\r\n",
            b"$3\r",
            b"$3",
            b"$",
            b"$3x\r\n",
            b"$3\0\r\n",
            b"$123456789012345678\r\n",
            b"$1234567890123456789\r\n",
            b"$99999999999999999999\r\n",
            b"$ 3\r\n",
            b"$16\r",
            b"$16\r\n",
            b"$1\r",
            b"$1\r\n",
            b"$1x\r\n",
            b"$10\0\r\n",
            b"$9\0\r\n",
            b"$00\r\n",
            b"$99\r\n",
        ];
        for &line in lines {
            let want = line
                .iter()
                .position(|&c| c == b'\r' || c == 0)
                .and_then(|cr| {
                    let ok = line[cr] == b'\r' && cr + 1 < line.len();
                    let n = parse_i64(&line[1..cr]).and_then(|n| usize::try_from(n).ok());
                    ok.then_some(n.map(|n| (n, cr))).flatten()
                });
            match quick_header(line, 0) {
                Some(got) => assert_eq!(Some(got), want, "{line:?}"),
                // Declined lines go to the general path; the common short ones must not be.
                None => assert!(
                    !matches!(line, b"$3\r\n" | b"*2\r\n" | b"$16\r\nx"),
                    "{line:?}"
                ),
            }
        }
        let mut framed = b"xx*2\r\n".to_vec();
        assert_eq!(quick_header(&framed, 2), Some((2, 4)));
        framed.truncate(5);
        assert_eq!(
            quick_header(&framed, 2),
            None,
            "the byte after \\r is needed"
        );
    }
    use super::*;
    use crate::fuzzing::{decode_in_pieces, Run};
    use alloc::string::ToString;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Owned arguments, for comparisons.
    type Cmd = Vec<Vec<u8>>;

    /// Arguments from text.
    fn cmd(args: &[&str]) -> Cmd {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    /// Decodes `input` at once with default limits as an authenticated client.
    fn run(input: &[u8]) -> Run {
        decode_in_pieces(input, &[], Limits::default(), true)
    }

    /// The first outcome of decoding `input` (a command, `Ok(None)` or the error).
    fn first(input: &[u8], auth: bool) -> Result<Option<Cmd>, ProtocolError> {
        let mut d = Decoder::new(Limits::default());
        d.decode(input, auth)
            .map(|f| f.map(|f| f.argv.iter().map(<[u8]>::to_vec).collect()))
    }

    /// The error decoding `input` gives, as the bytes the client receives.
    fn error_reply(input: &[u8], auth: bool) -> Vec<u8> {
        let mut d = Decoder::new(Limits::default());
        let e = match d.decode(input, auth) {
            Err(e) => e,
            Ok(Some(f)) => panic!("decoded {:?}", f.argv),
            Ok(None) => panic!("incomplete"),
        };
        let mut out = Vec::new();
        e.write_reply(&mut out);
        out
    }

    #[test]
    fn multibulk_is_zero_copy() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let mut d = Decoder::new(Limits::default());
        let f = d.decode(input, true).unwrap().unwrap();
        assert_eq!(f.consumed, input.len());
        assert_eq!(f.argv.get(0).as_ptr(), input[8..].as_ptr());
        assert_eq!(f.argv.get(1), b"k");
    }

    #[test]
    fn pipeline_of_many_commands() {
        let mut input = Vec::new();
        let mut want = Vec::new();
        for i in 0..500 {
            let key = alloc::format!("key:{i}");
            if i % 3 == 0 {
                input.extend_from_slice(alloc::format!("SET {key} v{i}\r\n").as_bytes());
            } else {
                let v = alloc::format!("v{i}");
                let s = alloc::format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{v}\r\n",
                    key.len(),
                    v.len()
                );
                input.extend_from_slice(s.as_bytes());
            }
            want.push(cmd(&["SET", &key, &alloc::format!("v{i}")]));
        }
        let got = run(&input);
        assert_eq!(
            got,
            Run {
                commands: want,
                end: Ok(0)
            }
        );
        let bytewise = decode_in_pieces(&input, &vec![1; input.len()], Limits::default(), true);
        assert_eq!(bytewise, got);
    }

    #[test]
    fn header_terminator_byte_and_payload_trailer_are_not_checked() {
        // Redis 7.0.15 skips the byte after `\r` and the two after a payload unchecked.
        assert_eq!(
            first(b"*1\rX$4\r\nPING\r\n", true),
            Ok(Some(cmd(&["PING"])))
        );
        assert_eq!(
            first(b"*1\r\n$4\rXPING\r\n", true),
            Ok(Some(cmd(&["PING"])))
        );
        assert_eq!(
            run(b"*1\r\n$4\r\nPINGxxPING\r\n").commands,
            vec![cmd(&["PING"]), cmd(&["PING"])]
        );
        // ...but they must have arrived.
        assert_eq!(first(b"*1\r", true), Ok(None));
        assert_eq!(first(b"*1\r\n$4\r\nPING\r", true), Ok(None));
    }

    #[test]
    fn empty_commands() {
        for input in [
            &b"*0\r\n"[..],
            b"*-1\r\n",
            b"*-2\r\n",
            b"\r\n",
            b"\n",
            b"   \t \r\n",
        ] {
            let r = run(input);
            assert_eq!(
                r,
                Run {
                    commands: vec![vec![]],
                    end: Ok(0)
                },
                "{input:?}"
            );
        }
        assert_eq!(
            run(b"\r\n\r\nPING\r\n").commands,
            vec![vec![], vec![], cmd(&["PING"])]
        );
    }

    #[test]
    fn nul_hides_a_line_terminator_as_in_redis() {
        assert_eq!(first(b"*1\x00\r\n$4\r\nPING\r\n", true), Ok(None));
        assert_eq!(first(b"*1\r\n$4\x00\r\nPING\r\n", true), Ok(None));
        assert_eq!(first(b"PING\x00\r\n", true), Ok(None));
        // Inside a payload a NUL is just a byte.
        assert_eq!(
            first(b"*1\r\n$4\r\nPI\x00G\r\n", true),
            Ok(Some(vec![b"PI\x00G".to_vec()]))
        );
    }

    #[test]
    fn protocol_error_texts_as_redis_7_0_15() {
        // Each reply was taken from redis-server 7.0.15 with the same input.
        let cases: &[(&[u8], bool, &str)] = &[
            (b"*abc\r\n", true, "invalid multibulk length"),
            (b"*\r\n", true, "invalid multibulk length"),
            (b"*+1\r\n", true, "invalid multibulk length"),
            (b"*01\r\n", true, "invalid multibulk length"),
            (b"*-0\r\n", true, "invalid multibulk length"),
            (b"*1 \r\n", true, "invalid multibulk length"),
            (b"*1\n$4\nPING\r\n", true, "invalid multibulk length"),
            (b"*2147483648\r\n", true, "invalid multibulk length"),
            (b"*2000000000000\r\n", false, "invalid multibulk length"),
            (b"*1\r\n$-5\r\n", true, "invalid bulk length"),
            (b"*1\r\n$-1\r\n", false, "invalid bulk length"),
            (b"*1\r\n$abc\r\n", true, "invalid bulk length"),
            (b"*1\r\n$\r\n", true, "invalid bulk length"),
            (b"*1\r\n$04\r\n", true, "invalid bulk length"),
            (b"*1\r\n$ 4\r\n", true, "invalid bulk length"),
            (b"*1\r\n$536870913\r\n", true, "invalid bulk length"),
            (b"*1\r\n$600000000\r\n", false, "invalid bulk length"),
            (b"*1\r\n+foo\r\n", true, "expected '$', got '+'"),
            (b"*1\r\nabc\r\n", true, "expected '$', got 'a'"),
            (b"*1\r\n\r\n", true, "expected '$', got ' '"),
            (b"*1\r\n\n\r\n", true, "expected '$', got ' '"),
            (b"*11\r\n", false, "unauthenticated multibulk length"),
            (b"*1\r\n$16385\r\n", false, "unauthenticated bulk length"),
            (b"SET \"a b\r\n", true, "unbalanced quotes in request"),
        ];
        for &(input, auth, text) in cases {
            let want = alloc::format!("-ERR Protocol error: {text}\r\n");
            assert_eq!(error_reply(input, auth), want.as_bytes(), "{input:?}");
        }
        assert_eq!(
            error_reply(b"*1\r\n\xff\r\n", true),
            b"-ERR Protocol error: expected '$', got '\xff'\r\n"
        );
    }

    #[test]
    fn limits_accept_up_to_the_bound() {
        assert_eq!(first(b"*2147483647\r\n", true), Ok(None));
        assert_eq!(first(b"*10\r\n", false), Ok(None));
        assert_eq!(first(b"*1\r\n$16384\r\n", false), Ok(None));
        assert_eq!(first(b"*1\r\n$536870912\r\n", true), Ok(None));
        assert_eq!(first(b"*-5\r\n", false), Ok(Some(vec![])));
    }

    #[test]
    fn too_big_lines() {
        let mut long = vec![b'*'];
        long.resize(LINE_LEN_MAX, b'1');
        assert_eq!(first(&long, true), Ok(None));
        long.push(b'1');
        assert_eq!(first(&long, true), Err(ProtocolError::TooBigMbulkCount));
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.resize(4 + LINE_LEN_MAX + 1, b'1');
        assert_eq!(first(&bulk, true), Err(ProtocolError::TooBigBulkCount));
        let mut inline = vec![b'a'; LINE_LEN_MAX];
        assert_eq!(first(&inline, true), Ok(None));
        inline.push(b'a');
        assert_eq!(first(&inline, true), Err(ProtocolError::TooBigInline));
        // Even with its newline a line past the bound is refused (a 100 KB inline request).
        inline.extend_from_slice(b" b\r\n");
        assert_eq!(first(&inline, true), Err(ProtocolError::TooBigInline));
        // Up to the bound, with its newline, it is a request.
        let mut inline = vec![b'a'; LINE_LEN_MAX - 3];
        inline.extend_from_slice(b" b\n");
        assert_eq!(first(&inline, true).unwrap().unwrap().len(), 2);
        assert_eq!(
            ProtocolError::TooBigMbulkCount.to_string(),
            "Protocol error: too big mbulk count string"
        );
        assert_eq!(
            ProtocolError::TooBigBulkCount.to_string(),
            "Protocol error: too big bulk count string"
        );
        assert_eq!(
            ProtocolError::TooBigInline.to_string(),
            "Protocol error: too big inline request"
        );
    }

    #[test]
    fn query_buffer_limit_closes_silently() {
        let limits = Limits {
            query_buffer_max: 16,
            ..Limits::default()
        };
        let mut d = Decoder::new(limits);
        let input = b"*1\r\n$100\r\naaaaaaaaaaaa";
        assert_eq!(
            d.decode(&input[..15], true).unwrap().map(|f| f.consumed),
            None
        );
        let e = d.decode(input, true).unwrap_err();
        assert_eq!(e, ProtocolError::QueryBufferLimit);
        let mut out = Vec::new();
        e.write_reply(&mut out);
        assert!(out.is_empty() && e.closes_silently());
        // A complete command is returned even when bigger than the limit.
        assert!(d
            .decode(b"*1\r\n$20\r\naaaaaaaaaaaaaaaaaaaa\r\n", true)
            .unwrap()
            .is_some());
    }

    #[test]
    fn bulk_limit_comes_from_limits() {
        let mut d = Decoder::new(Limits {
            bulk_len_max: 3,
            ..Limits::default()
        });
        assert!(d.decode(b"*1\r\n$3\r\nabc\r\n", true).unwrap().is_some());
        assert_eq!(
            d.decode(b"*1\r\n$4\r\n", true).unwrap_err(),
            ProtocolError::InvalidBulkLength
        );
    }

    #[test]
    fn big_command_in_pieces_resumes() {
        let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n".to_vec();
        input.resize(input.len() + 100_000, b'x');
        input.extend_from_slice(b"\r\n");
        let mut d = Decoder::new(Limits::default());
        for end in (1..input.len()).step_by(997) {
            assert!(d.decode(&input[..end], true).unwrap().is_none());
        }
        let f = d.decode(&input, true).unwrap().unwrap();
        assert_eq!(
            (f.argv.len(), f.argv.get(2).len(), f.consumed),
            (3, 100_000, input.len())
        );
    }

    #[test]
    fn decoder_recovers_when_the_caller_shrinks_the_buffer() {
        let mut d = Decoder::new(Limits::default());
        assert!(d.decode(b"*2\r\n$3\r\nGET\r\n", true).unwrap().is_none());
        let f = d.decode(b"PING\r\n", true).unwrap().unwrap();
        assert_eq!(f.argv.get(0), b"PING");
    }

    /// Inline splitting, each case checked against redis-server 7.0.15 (arguments read back
    /// with `RPUSH l <line>` + `LRANGE l 0 -1`).
    #[test]
    fn inline_splitting_as_redis() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"SET a b", &[b"SET", b"a", b"b"]),
            (b"  SET \t a   b  ", &[b"SET", b"a", b"b"]),
            (b"SET \"a b\" c", &[b"SET", b"a b", b"c"]),
            (
                b"X \"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"",
                &[b"X", b"AJ\n\r\t\x08\x07\\\"q"],
            ),
            (b"X \"\\xZZ\"", &[b"X", b"xZZ"]),
            (b"X 'a\\'b\\n'", &[b"X", b"a'b\\n"]),
            (b"X \"\"", &[b"X", b""]),
            (b"X ''", &[b"X", b""]),
            (b"X a\"b c\"", &[b"X", b"ab c"]),
            (b"X a'b c'", &[b"X", b"ab c"]),
            (b"X a\x0bb", &[b"X", b"a\x0bb"]),
            (b"X \x0ba", &[b"X", b"a"]),
            (b"X \"a\"\x0bb", &[b"X", b"a", b"b"]),
            (b"X a\rb", &[b"X", b"a", b"b"]),
            (b"X a\x0cb\x0c", &[b"X", b"a\x0cb\x0c"]),
            (b"X \"\\x4\"", &[b"X", b"x4"]),
            (b"X \"\\X41\"", &[b"X", b"X41"]),
        ];
        for &(line, want) in cases {
            let mut input = line.to_vec();
            input.extend_from_slice(b"\r\n");
            let want: Cmd = want.iter().map(|a| a.to_vec()).collect();
            assert_eq!(first(&input, true), Ok(Some(want)), "{:?}", line);
        }
        for bad in [
            &b"X \"a"[..],
            b"X 'a",
            b"X \"a\"b",
            b"X 'a'b",
            b"X \"a\\\"",
            b"X \"a\\",
            b"X 'a\\\\'",
            b"X a\"b\"c",
        ] {
            let mut input = bad.to_vec();
            input.push(b'\n');
            assert_eq!(
                first(&input, true),
                Err(ProtocolError::UnbalancedQuotes),
                "{:?}",
                bad
            );
        }
    }
}

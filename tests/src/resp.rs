//! A small RESP2/RESP3 frame-length scanner, independent of `kayvee-resp` on purpose: the tests
//! compare raw reply bytes, so they only need to know where one reply ends.
//!
//! Follows the RESP3 specification's type table: simple types (`+ - : _ , # (`) end at CRLF,
//! blob types (`$ ! =`) carry a length, aggregates (`* ~ >`) a count, maps and attributes (`% |`)
//! a count of pairs; RESP2 nulls are `$-1` and `*-1`.

/// Deepest nesting the scanner follows before calling a frame malformed.
const DEPTH_MAX: usize = 64;

/// Why bytes are not a RESP frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A type byte that RESP2/RESP3 does not define.
    UnknownType(u8),
    /// A length or count that is not a decimal integer (or is negative where not allowed).
    BadLength,
    /// A blob not followed by CRLF.
    MissingCrlf,
    /// A bad simple value (`:` not an integer, `#` not t/f, `_` not empty).
    BadValue,
    /// More nesting than `DEPTH_MAX`.
    TooDeep,
}

/// Length in bytes of the first complete frame in `buf`: `Ok(None)` when more bytes are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    scan(buf, 0, 0)
}

/// Splits a complete top-level aggregate frame into its header line and its elements' raw bytes
/// (for a map, keys and values alternate). `None` for non-aggregates and null aggregates.
pub fn split_aggregate(frame: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    let kind = *frame.first()?;
    if !matches!(kind, b'*' | b'~' | b'%' | b'>') {
        return None;
    }
    let cr = find_crlf(frame, 1)?;
    let count = parse_int(&frame[1..cr]).ok().filter(|&n| n >= 0)? as usize;
    let count = if kind == b'%' { count * 2 } else { count };
    let mut elements = Vec::with_capacity(count);
    let mut pos = cr + 2;
    for _ in 0..count {
        let end = scan(frame, pos, 1).ok()??;
        elements.push(&frame[pos..end]);
        pos = end;
    }
    Some((&frame[..cr + 2], elements))
}

/// End offset of the frame starting at `pos`, `Ok(None)` if incomplete.
fn scan(buf: &[u8], pos: usize, depth: usize) -> Result<Option<usize>, FrameError> {
    if depth > DEPTH_MAX {
        return Err(FrameError::TooDeep);
    }
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(cr) = find_crlf(buf, pos + 1) else {
        return Ok(None);
    };
    let line = &buf[pos + 1..cr];
    let after = cr + 2;
    match kind {
        b'+' | b'-' | b',' | b'(' => Ok(Some(after)),
        b':' => parse_int(line).map(|_| Some(after)),
        b'#' if line == b"t" || line == b"f" => Ok(Some(after)),
        b'_' if line.is_empty() => Ok(Some(after)),
        b'#' | b'_' => Err(FrameError::BadValue),
        b'$' | b'!' | b'=' => scan_blob(buf, kind, line, after),
        b'*' | b'~' | b'>' => scan_elements(buf, kind, line, after, 1, depth),
        b'%' => scan_elements(buf, kind, line, after, 2, depth),
        b'|' => scan_attribute(buf, line, after, depth),
        other => Err(FrameError::UnknownType(other)),
    }
}

/// A length-prefixed blob whose header line is `line` and whose data starts at `start`.
fn scan_blob(buf: &[u8], kind: u8, line: &[u8], start: usize) -> Result<Option<usize>, FrameError> {
    let len = parse_int(line)?;
    if len == -1 && kind == b'$' {
        return Ok(Some(start));
    }
    if len < 0 {
        return Err(FrameError::BadLength);
    }
    let end = start + len as usize + 2;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(FrameError::MissingCrlf);
    }
    Ok(Some(end))
}

/// An aggregate of `count * per` nested frames starting at `start`.
fn scan_elements(
    buf: &[u8],
    kind: u8,
    line: &[u8],
    start: usize,
    per: usize,
    depth: usize,
) -> Result<Option<usize>, FrameError> {
    let count = parse_int(line)?;
    if count == -1 && kind == b'*' {
        return Ok(Some(start));
    }
    if count < 0 {
        return Err(FrameError::BadLength);
    }
    let mut pos = start;
    for _ in 0..count as usize * per {
        match scan(buf, pos, depth + 1)? {
            Some(end) => pos = end,
            None => return Ok(None),
        }
    }
    Ok(Some(pos))
}

/// An attribute map followed by the reply it annotates: both belong to one frame.
fn scan_attribute(
    buf: &[u8],
    line: &[u8],
    start: usize,
    depth: usize,
) -> Result<Option<usize>, FrameError> {
    match scan_elements(buf, b'%', line, start, 2, depth)? {
        Some(end) => scan(buf, end, depth + 1),
        None => Ok(None),
    }
}

/// Index of the next `\r\n` at or after `from`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

/// A strict decimal integer (optional leading `-`).
fn parse_int(line: &[u8]) -> Result<i64, FrameError> {
    let text = std::str::from_utf8(line).map_err(|_| FrameError::BadLength)?;
    if text.is_empty() || text.starts_with('+') {
        return Err(FrameError::BadLength);
    }
    text.parse().map_err(|_| FrameError::BadLength)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_types_end_at_crlf() {
        assert_eq!(frame_len(b"+OK\r\nrest"), Ok(Some(5)));
        assert_eq!(frame_len(b"-ERR x\r\n"), Ok(Some(8)));
        assert_eq!(frame_len(b":-12\r\n"), Ok(Some(6)));
        assert_eq!(frame_len(b"_\r\n"), Ok(Some(3)));
        assert_eq!(frame_len(b"#t\r\n"), Ok(Some(4)));
        assert_eq!(frame_len(b",1.5\r\n"), Ok(Some(6)));
        assert_eq!(frame_len(b"+OK\r"), Ok(None));
        assert_eq!(frame_len(b""), Ok(None));
    }

    #[test]
    fn blobs_use_their_length_not_crlf() {
        assert_eq!(frame_len(b"$4\r\na\r\nb\r\n"), Ok(Some(10)));
        assert_eq!(frame_len(b"$4\r\na\r\n"), Ok(None));
        assert_eq!(frame_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(frame_len(b"$0\r\n\r\n"), Ok(Some(6)));
        assert_eq!(frame_len(b"=7\r\ntxt:abc\r\n"), Ok(Some(13)));
        assert_eq!(frame_len(b"$2\r\nabcd"), Err(FrameError::MissingCrlf));
        assert_eq!(frame_len(b"!-1\r\n"), Err(FrameError::BadLength));
    }

    #[test]
    fn aggregates_count_nested_frames() {
        assert_eq!(frame_len(b"*2\r\n$1\r\na\r\n:1\r\n"), Ok(Some(15)));
        assert_eq!(frame_len(b"*2\r\n$1\r\na\r\n"), Ok(None));
        assert_eq!(frame_len(b"*-1\r\n"), Ok(Some(5)));
        assert_eq!(frame_len(b"*0\r\n"), Ok(Some(4)));
        assert_eq!(frame_len(b"%1\r\n+a\r\n*1\r\n:1\r\n"), Ok(Some(16)));
        assert_eq!(frame_len(b"%1\r\n+a\r\n"), Ok(None));
        assert_eq!(frame_len(b"|1\r\n+k\r\n+v\r\n:5\r\n"), Ok(Some(16)));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(frame_len(b"?x\r\n"), Err(FrameError::UnknownType(b'?')));
        assert_eq!(frame_len(b":1x\r\n"), Err(FrameError::BadLength));
        assert_eq!(frame_len(b"#x\r\n"), Err(FrameError::BadValue));
        assert_eq!(frame_len(b"*+1\r\n"), Err(FrameError::BadLength));
        let deep = "*1\r\n".repeat(DEPTH_MAX + 2);
        assert_eq!(frame_len(deep.as_bytes()), Err(FrameError::TooDeep));
    }

    #[test]
    fn splits_aggregates() {
        let (head, items) = split_aggregate(b"*3\r\n$1\r\nb\r\n:2\r\n$1\r\na\r\n").unwrap();
        assert_eq!(head, b"*3\r\n");
        assert_eq!(items, vec![&b"$1\r\nb\r\n"[..], b":2\r\n", b"$1\r\na\r\n"]);
        let (_, items) = split_aggregate(b"%1\r\n+k\r\n:1\r\n").unwrap();
        assert_eq!(items.len(), 2);
        assert!(split_aggregate(b"*-1\r\n").is_none());
        assert!(split_aggregate(b"+OK\r\n").is_none());
    }
}

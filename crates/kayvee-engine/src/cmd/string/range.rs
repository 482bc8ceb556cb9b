//! The string commands on part of a value: APPEND, STRLEN, GETRANGE (and SUBSTR), SETRANGE.
//!
//! Semantics and reply texts follow Redis 7.0.15 (checked against the real server).

use super::{as_str, make_room, store_raw, take_str};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::Value;
use crate::{util, Cx};
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// APPEND key value: the new length. A new key takes the value as SET would; an existing
/// string grows in place (and becomes `raw`).
pub(super) fn append(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, val) = (args.get(1), args.get(2));
    let now = cx.now_ms();
    let max = cx.core.config.proto_max_bulk_len;
    let db = cx.db();
    let Some(entry) = db.lookup_write(key, now) else {
        db.set_str(key, val, now, false);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "append", key);
        out.int(val.len() as i64);
        return Ok(());
    };
    let total = as_str(entry)?.len() + val.len();
    if total as u64 > max {
        return Err(Error::StringTooLong);
    }
    let mut bytes = take_str(entry)?;
    make_room(&mut bytes, val.len());
    bytes.extend_from_slice(val);
    store_raw(entry, bytes);
    // A modification for WATCH even when nothing was appended, as in Redis.
    db.modified(key);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "append", key);
    out.int(total as i64);
    Ok(())
}

/// STRLEN key: 0 when missing.
pub(super) fn strlen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let len = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_str(e)?.len(),
        None => 0,
    };
    out.int(len as i64);
    Ok(())
}

/// The byte range GETRANGE selects from a string of `len` bytes (inclusive indexes, negative
/// ones counting from the end), or `None` when empty.
pub(crate) fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (start <= end).then_some((start as usize, end as usize))
}

/// GETRANGE key start end (and its old name SUBSTR): an empty string when out of range or
/// missing. The indexes are checked before the key.
pub(super) fn getrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let start = util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let end = util::parse_i64(args.get(3)).ok_or(Error::NotInteger)?;
    let now = cx.now_ms();
    let s = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_str(e)?,
        None => &[],
    };
    match clamp_range(start, end, s.len()) {
        Some((a, b)) => out.bulk(&s[a..=b]),
        None => out.bulk(b""),
    }
    Ok(())
}

/// SETRANGE key offset value: overwrites from `offset`, zero-padding as needed; replies the
/// new length. An empty value changes nothing (and creates no key).
pub(super) fn setrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, val) = (args.get(1), args.get(3));
    let offset = util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    if offset < 0 {
        return Err(Error::msg("ERR offset is out of range"));
    }
    let offset = offset as u64;
    let now = cx.now_ms();
    let max = cx.core.config.proto_max_bulk_len;
    let db = cx.db();
    let Some(entry) = db.lookup_write(key, now) else {
        if val.is_empty() {
            out.int(0);
            return Ok(());
        }
        // A new string is exactly as long as asked (Redis's `sdsnewlen`); the room to grow
        // comes with the writes to an existing one.
        let exact = offset
            .checked_add(val.len() as u64)
            .filter(|&e| e <= max)
            .ok_or(Error::StringTooLong)?;
        let bytes = overwrite(Vec::with_capacity(exact as usize), offset, val, max)?;
        out.int(bytes.len() as i64);
        let mut entry = db.new_entry(Value::Str(SmallBytes::new()), now);
        store_raw(&mut entry, bytes);
        db.insert_entry(key, entry, None);
        cx.propagate_verbatim();
        emit(cx, nc::STRING, "setrange", key);
        return Ok(());
    };
    let olen = as_str(entry)?.len();
    if val.is_empty() {
        out.int(olen as i64);
        return Ok(());
    }
    if offset + val.len() as u64 > max {
        return Err(Error::StringTooLong);
    }
    let bytes = overwrite(take_str(entry)?, offset, val, max)?;
    out.int(bytes.len() as i64);
    store_raw(entry, bytes);
    // A modification for WATCH even when the bytes are the same, as in Redis.
    db.modified(key);
    cx.propagate_verbatim();
    emit(cx, nc::STRING, "setrange", key);
    Ok(())
}

/// Writes `val` into `bytes` at `offset`, zero-padding; fails past `max` bytes in total.
fn overwrite(mut bytes: Vec<u8>, offset: u64, val: &[u8], max: u64) -> Result<Vec<u8>, Error> {
    let end = offset
        .checked_add(val.len() as u64)
        .filter(|&e| e <= max)
        .ok_or(Error::StringTooLong)? as usize;
    if bytes.len() < end {
        let extra = end - bytes.len();
        make_room(&mut bytes, extra);
        bytes.resize(end, 0);
    }
    bytes[offset as usize..end].copy_from_slice(val);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_range_follows_getrange() {
        assert_eq!(clamp_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(clamp_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(clamp_range(3, 1, 5), None);
        assert_eq!(clamp_range(-1, -3, 5), None);
        assert_eq!(clamp_range(0, 0, 0), None);
        assert_eq!(clamp_range(5, 10, 5), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn overwrite_pads_and_limits() {
        assert_eq!(
            overwrite(b"abc".to_vec(), 5, b"xy", 100).unwrap(),
            b"abc\0\0xy"
        );
        assert_eq!(
            overwrite(b"abcdef".to_vec(), 1, b"XY", 100).unwrap(),
            b"aXYdef"
        );
        assert_eq!(overwrite(Vec::new(), 8, b"ab", 10).unwrap().len(), 10);
        assert_eq!(
            overwrite(Vec::new(), 9, b"ab", 10),
            Err(Error::StringTooLong)
        );
        assert_eq!(
            overwrite(Vec::new(), u64::MAX, b"ab", 10),
            Err(Error::StringTooLong)
        );
    }
}

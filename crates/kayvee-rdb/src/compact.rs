//! Writing the compact RDB encodings Redis 7.0 writes for small collections: the intset blob
//! (`RDB_TYPE_SET_INTSET`) and listpacks, grouped into quicklist 2 nodes
//! (`RDB_TYPE_LIST_QUICKLIST_2`) as Redis 7.0 fills them, so a DUMP of such a value is
//! byte for byte what redis-server answers. Formats: Redis's `intset.h` layout and the
//! listpack specification (entries `encoding data back-length`, see [`crate::object`] for the
//! reading side).

use alloc::vec::Vec;
use kayvee_engine::util::parse_i64;

/// Listpack header: total bytes (u32) and element count (u16).
const LP_HEADER: usize = 6;
/// The listpack terminator.
const LP_END: u8 = 0xFF;
/// A listpack's element count field when it does not fit 16 bits.
const LP_COUNT_UNKNOWN: usize = 65535;
/// Quicklist node container: a listpack.
pub const QUICKLIST_NODE_PACKED: u64 = 2;
/// The default `list-max-listpack-size` (-2): a node holds up to 8 KiB of listpack.
const NODE_BYTES_MAX: usize = 8192;

/// Redis's intset blob: width (u32), count (u32), the values little-endian in that width.
pub fn intset_blob(width: usize, values: impl Iterator<Item = i64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let mut n = 0u32;
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
        n += 1;
    }
    out[4..8].copy_from_slice(&n.to_le_bytes());
    out
}

/// Appends one listpack entry (encoding, data, back-length): an element that reads as an
/// integer (as Redis's `lpStringToInt64`) in the narrowest integer encoding, any other as a
/// string with a 6-, 12- or 32-bit length.
fn put_entry(out: &mut Vec<u8>, e: &[u8]) {
    let start = out.len();
    match parse_i64(e).filter(|_| e.len() <= 20) {
        Some(v @ 0..=127) => out.push(v as u8),
        Some(v @ -4096..=4095) => {
            let u = (v as u16) & 0x1FFF;
            out.extend_from_slice(&[0xC0 | (u >> 8) as u8, u as u8]);
        }
        Some(v) if i16::try_from(v).is_ok() => {
            out.push(0xF1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        Some(v) if (-(1 << 23)..1 << 23).contains(&v) => {
            out.push(0xF2);
            out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        Some(v) if i32::try_from(v).is_ok() => {
            out.push(0xF3);
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        Some(v) => {
            out.push(0xF4);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None if e.len() < 64 => {
            out.push(0x80 | e.len() as u8);
            out.extend_from_slice(e);
        }
        None if e.len() < 4096 => {
            out.extend_from_slice(&[0xE0 | (e.len() >> 8) as u8, e.len() as u8]);
            out.extend_from_slice(e);
        }
        None => {
            out.push(0xF0);
            out.extend_from_slice(&(e.len() as u32).to_le_bytes());
            out.extend_from_slice(e);
        }
    }
    put_backlen(out, out.len() - start);
}

/// Appends an entry's back-length: its length in 7-bit groups, most significant first, every
/// byte but the first flagged with the high bit (so it reads right to left).
fn put_backlen(out: &mut Vec<u8>, len: usize) {
    let groups = match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    for g in (0..groups).rev() {
        let bits = ((len >> (7 * g)) & 0x7F) as u8;
        out.push(if g == groups - 1 { bits } else { bits | 0x80 });
    }
}

/// A listpack of `items`.
pub fn listpack<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = alloc::vec![0; LP_HEADER];
    let mut n = 0;
    for e in items {
        put_entry(&mut out, e);
        n += 1;
    }
    out.push(LP_END);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = if n < LP_COUNT_UNKNOWN {
        n
    } else {
        LP_COUNT_UNKNOWN
    };
    out[4..6].copy_from_slice(&(count as u16).to_le_bytes());
    out
}

/// Bytes Redis 7.0 adds to an element's length to estimate what it grows a listpack by.
const ENTRY_OVERHEAD_ESTIMATE: usize = 8;

/// Whether Redis 7.0 lets an element of `len` bytes into a node of `node_bytes` under the
/// default fill: its estimate of the grown listpack (the element's length plus
/// [`ENTRY_OVERHEAD_ESTIMATE`], whatever the element's encoding) is at most 8 KiB. Checked
/// against redis-server 7.0.15's DUMP of lists of integers and of strings of several lengths.
fn node_takes(node_bytes: usize, len: usize) -> bool {
    node_bytes + len + ENTRY_OVERHEAD_ESTIMATE <= NODE_BYTES_MAX
}

/// A list's quicklist nodes as Redis 7.0 fills them when the elements are pushed at the tail
/// in order: each node a listpack of the elements its size estimate lets in.
pub fn quicklist_nodes<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    let mut nodes = Vec::new();
    let mut node: Vec<&[u8]> = Vec::new();
    // The node's listpack size so far, as Redis compares it.
    let mut bytes = LP_HEADER + 1;
    let mut scratch = Vec::new();
    for e in items {
        if !node.is_empty() && !node_takes(bytes, e.len()) {
            nodes.push(listpack(node.drain(..)));
            bytes = LP_HEADER + 1;
        }
        node.push(e);
        scratch.clear();
        put_entry(&mut scratch, e);
        bytes += scratch.len();
    }
    if !node.is_empty() {
        nodes.push(listpack(node.into_iter()));
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpacks_match_redis_7() {
        // The listpack inside `DUMP` of `RPUSH l element:0 element:1 5` on redis-server 7.0.15.
        let lp = listpack([&b"element:0"[..], b"element:1", b"5"].into_iter());
        assert_eq!(
            lp,
            b"\x1f\x00\x00\x00\x03\x00\x89element:0\n\x89element:1\n\x05\x01\xff"
        );
        let mut e = Vec::new();
        put_entry(&mut e, b"-1");
        assert_eq!(e, [0xDF, 0xFF, 2]);
        e.clear();
        put_entry(&mut e, b"70000");
        assert_eq!(e, [0xF2, 0x70, 0x11, 0x01, 4]);
        e.clear();
        put_entry(&mut e, &[b'x'; 200]);
        assert_eq!(e[..2], [0xE0, 200]);
        assert_eq!(e[202..], [0x01, 0xCA], "202 = 1 << 7 | 74");
    }

    #[test]
    fn intset_blobs_match_redis_7() {
        // `SADD s 1 2 300` on redis-server 7.0.15: `intset`, width 2.
        assert_eq!(
            intset_blob(2, [1, 2, 300].into_iter()),
            b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00,\x01"
        );
    }
}

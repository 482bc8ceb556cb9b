//! Encoding of RDB primitives and objects: lengths, strings (integer and LZF encodings as
//! Redis 7.0 chooses them) and values: lists as quicklist 2 and intsets in their blob, as
//! Redis 7.0 writes them (see [`crate::compact`]), the other types in the plain types.

use crate::compact;
use crate::lzf::Lzf;
use crate::types;
use alloc::vec::Vec;
use kayvee_engine::util::parse_i64;
use kayvee_engine::ValueRef;

/// Strings longer than this are tried with LZF (Redis's rule).
const LZF_MIN_LEN: usize = 20;
/// Strings up to this long are tried as integers.
const INT_MAX_LEN: usize = 11;

/// Appends an RDB length: 6 bits, 14 bits, 32 or 64 bits big-endian.
#[inline]
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The integer encoding of `v` (`0xC0`..`0xC2` + little-endian bytes) when it fits 32 bits.
fn int_encoding(v: i64, out: &mut Vec<u8>) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xC0, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Appends a string as Redis does: a canonical integer that fits 32 bits as an integer
/// encoding; with `compress`, a string over 20 bytes that LZF shrinks by 4 bytes or more as
/// `0xC3`; otherwise length and bytes.
///
/// Inlined, with the common short string written by one reservation: a background save spends
/// most of its time here for datasets of small strings (each call and each growth check is
/// dear under QEMU TCG, where the unikernel saves: each return is an indirect jump that QEMU
/// looks up in a table).
#[inline(always)]
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compress: Option<&mut Lzf>) {
    let n = s.len();
    // Only a string that starts as an integer can be one (most keys and values do not).
    if n <= INT_MAX_LEN && matches!(s.first(), Some(b'-' | b'0'..=b'9')) && int_string(out, s) {
        return;
    }
    if n > LZF_MIN_LEN {
        if let Some(lzf) = compress {
            if lzf_string(out, s, lzf) {
                return;
            }
        }
    }
    if n < 1 << 6 {
        out.reserve(n + 1);
        out.push(n as u8);
    } else {
        write_len(out, n as u64);
    }
    out.extend_from_slice(s);
}

/// The integer encoding of `s` when it is a canonical integer that fits 32 bits.
fn int_string(out: &mut Vec<u8>, s: &[u8]) -> bool {
    parse_i64(s).is_some_and(|v| int_encoding(v, out))
}

/// The LZF encoding of `s` (`0xC3`) when it saves 4 bytes or more.
fn lzf_string(out: &mut Vec<u8>, s: &[u8], lzf: &mut Lzf) -> bool {
    let Some(z) = lzf.compress(s, s.len() - 4) else {
        return false;
    };
    out.push(0xC3);
    write_len(out, z.len() as u64);
    write_len(out, s.len() as u64);
    out.extend_from_slice(&z);
    true
}

/// The type a value is written as: 0 string, 18 list (quicklist 2, as Redis 7.0 writes every
/// list), 11 set when it is an intset and 2 otherwise (Redis 7.0's choice), 4 hash, 5 zset
/// (binary scores); a hash kept as a listpack that does not decode, 16 (that listpack).
pub fn type_of(v: ValueRef<'_>) -> u8 {
    match v {
        ValueRef::Str(_) => types::STRING,
        ValueRef::List(_) => types::LIST_QUICKLIST_2,
        ValueRef::Set(s) if s.is_intset() => types::SET_INTSET,
        ValueRef::Set(_) => types::SET,
        ValueRef::Hash(h) if h.corrupt_listpack().is_some() => types::HASH_LISTPACK,
        ValueRef::Hash(_) => types::HASH,
        ValueRef::ZSet(_) => types::ZSET_2,
        ValueRef::Stream(_) => types::STREAM_LISTPACKS_2,
    }
}

/// Appends a value's type byte and body ([`type_of`], [`write_body`]).
pub fn write_value(out: &mut Vec<u8>, v: ValueRef<'_>, compress: Option<&mut Lzf>) {
    out.push(type_of(v));
    write_body(out, v, compress);
}

/// Appends a value's body in its [`type_of`] (zset members highest first, as Redis writes
/// its skiplists; a list's nodes filled as Redis fills them pushing at the tail; blobs
/// compressed as Redis compresses strings).
pub fn write_body(out: &mut Vec<u8>, v: ValueRef<'_>, mut compress: Option<&mut Lzf>) {
    match v {
        ValueRef::Str(s) => write_string(out, s, compress),
        ValueRef::List(l) => {
            let nodes = compact::quicklist_nodes(l.iter());
            write_len(out, nodes.len() as u64);
            for node in nodes {
                write_len(out, compact::QUICKLIST_NODE_PACKED);
                write_string(out, &node, compress.as_deref_mut());
            }
        }
        ValueRef::Set(s) => match s.intset() {
            Some((width, values)) => {
                write_string(out, &compact::intset_blob(width, values), compress);
            }
            None => {
                write_len(out, s.len() as u64);
                s.iter()
                    .for_each(|m| write_string(out, &m, compress.as_deref_mut()));
            }
        },
        // A listpack restored unsanitized that does not decode: as it came.
        ValueRef::Hash(h) if h.corrupt_listpack().is_some() => {
            write_string(out, h.corrupt_listpack().unwrap_or_default(), compress);
        }
        ValueRef::Hash(h) => {
            write_len(out, h.len() as u64);
            for (f, val) in h.iter() {
                // Joined on the stack: a flat hash's fields and values are short.
                f.with_contiguous(|f| write_string(out, f, compress.as_deref_mut()));
                val.with_contiguous(|v| write_string(out, v, compress.as_deref_mut()));
            }
        }
        ValueRef::ZSet(z) => {
            write_len(out, z.len() as u64);
            for e in z.iter().rev() {
                // A small set's members come in two parts (its common prefix, the rest).
                match e.1.as_slice() {
                    Some(m) => write_string(out, m, compress.as_deref_mut()),
                    None => write_string(out, &e.1.to_small_bytes(), compress.as_deref_mut()),
                }
                out.extend_from_slice(&e.0.to_le_bytes());
            }
        }
        ValueRef::Stream(s) => write_stream(out, s, compress),
    }
}

fn write_id(out: &mut Vec<u8>, id: kayvee_engine::value::StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// Appends a stream's body (type 19, layout in `crate::stream`).
fn write_stream(
    out: &mut Vec<u8>,
    s: &kayvee_engine::value::Stream,
    mut compress: Option<&mut Lzf>,
) {
    write_len(out, s.node_count() as u64);
    for n in s.nodes() {
        write_string(out, &n.master.to_be_bytes(), compress.as_deref_mut());
        write_string(out, &n.lp, compress.as_deref_mut());
    }
    write_len(out, s.length);
    write_id(out, s.last_id);
    write_id(out, s.first_id);
    write_id(out, s.max_deleted);
    write_len(out, s.entries_added);
    write_len(out, s.groups.len() as u64);
    for g in &s.groups {
        write_string(out, &g.name, compress.as_deref_mut());
        write_id(out, g.last_id);
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for p in g.pel.iter() {
            out.extend_from_slice(&p.id.to_be_bytes());
            out.extend_from_slice(&p.delivery_ms.to_le_bytes());
            write_len(out, p.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for c in &g.consumers {
            write_string(out, &c.name, compress.as_deref_mut());
            out.extend_from_slice(&c.seen_ms.to_le_bytes());
            write_len(out, c.pel.len() as u64);
            for id in c.pel.iter() {
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(s: &[u8], compress: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut lzf = Lzf::new();
        write_string(&mut out, s, compress.then_some(&mut lzf));
        out
    }

    #[test]
    fn strings_encode_as_redis_7_dumps_them() {
        // Bodies of `DUMP` replies from redis-server 7.0.15.
        assert_eq!(enc(b"hello", true), b"\x05hello");
        assert_eq!(enc(b"12345", true), b"\xc190");
        assert_eq!(enc(b"-7", true), b"\xc0\xf9");
        assert_eq!(enc(b"3000000000", true), b"\x0a3000000000");
        assert_eq!(enc(b"007", true), b"\x03007");
        let a100 = [b'a'; 100];
        assert_eq!(
            enc(&a100, true),
            b"\xc3\x09\x40\x64\x01aa\xe0\x57\x00\x01aa"
        );
        assert_eq!(enc(&a100, false)[..2], [0x40, 100]);
    }

    #[test]
    fn lengths_use_the_smallest_form() {
        let len = |n| {
            let mut o = Vec::new();
            write_len(&mut o, n);
            o
        };
        assert_eq!(len(63), [63]);
        assert_eq!(len(64), [0x40, 64]);
        assert_eq!(len(16383), [0x7f, 0xff]);
        assert_eq!(len(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(len(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    }
    #[test]
    fn intsets_dump_their_blob_whether_inline_or_on_the_heap() {
        use kayvee_engine::value::Set;
        let body = |s: &Set| {
            let mut out = Vec::new();
            write_body(&mut out, ValueRef::Set(s), None);
            out
        };
        // `SADD s 1 2 300` on redis-server 7.0.15 (a set this small is kept inline).
        let mut s = Set::new();
        for m in ["300", "1", "2"] {
            s.insert(m.as_bytes(), 512, 1);
        }
        assert_eq!(
            body(&s),
            b"\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00,\x01"
        );
        // A removal keeps the width: 4 after 70000 came and went.
        s.insert(b"70000", 512, 1);
        s.remove(b"70000");
        let blob = |w: usize, v: &[i64]| {
            let mut out = Vec::new();
            write_string(&mut out, &compact::intset_blob(w, v.iter().copied()), None);
            out
        };
        assert_eq!(body(&s), blob(4, &[1, 2, 300]));
        // 30 values spread wide are on the heap: the same blob.
        let values: Vec<i64> = (0..30).map(|i| i * 1000 - 7000).collect();
        let mut big = Set::new();
        for v in values.iter().rev() {
            big.insert(alloc::format!("{v}").as_bytes(), 512, 1);
        }
        assert!(big.is_intset());
        assert_eq!(body(&big), blob(2, &values));
    }
}

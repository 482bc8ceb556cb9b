//! Decoding of object bodies by type into engine values: the plain types, and the compact
//! encodings Redis 7.0 writes (listpack, quicklist 2, intset) or older versions wrote
//! (ziplist, quicklist 1). Each blob is checked against its own header and terminator.

use crate::listpack::{le, listpack};
use crate::read::{decimal, parse_f64, Reader};
use crate::{types, Error, Result};
use alloc::borrow::Cow;
use alloc::vec::Vec;
use kayvee_engine::value::{Hash, List, Set, ZSet, LIST_DEFAULT_FILL};
use kayvee_engine::Value;
use kayvee_pds::SmallBytes;

/// Members a loaded set keeps as an intset while reading (Redis 7.0's default
/// `set-max-intset-entries`); past it the set reads into a map, and the engine puts each value
/// in its final form once loaded ([`Value::normalize`]).
const LOAD_INTSET_MAX: u64 = 512;

/// Quicklist 2 node containers.
const QUICKLIST_NODE_PLAIN: u64 = 1;
const QUICKLIST_NODE_PACKED: u64 = 2;

/// Redis 7.0's log texts for a compact encoding that fails its structure check.
const ZIPMAP_BAD: &str = "Zipmap integrity check failed.";
const ZIPLIST_BAD: &str = "Ziplist integrity check failed.";
const HASH_ZIPLIST_BAD: &str = "Hash ziplist integrity check failed.";
const ZSET_ZIPLIST_BAD: &str = "Zset ziplist integrity check failed.";
const HASH_LISTPACK_BAD: &str = "Hash listpack integrity check failed.";
const ZSET_LISTPACK_BAD: &str = "Zset listpack integrity check failed.";
const INTSET_BAD: &str = "Intset integrity check failed.";
const QUICKLIST_ZIPLIST_BAD: &str = "Quicklist ziplist integrity check failed.";
const QUICKLIST_LISTPACK_BAD: &str = "Quicklist listpack integrity check failed.";

/// Any error decoding a blob becomes its encoding's integrity report.
fn checked<T>(what: &'static str, r: Result<T>) -> Result<T> {
    r.map_err(|_| Error::Integrity(what))
}

/// Reads the body of an object of type `ty`; `seed` keys the hash maps. A blob (listpack,
/// ziplist, intset, zipmap) that fails its checks, or a collection with a duplicate member,
/// is an [`Error::Integrity`] with Redis's log text. Every blob is checked whole whatever
/// `deep` says (Kayvee decodes them), except the nodes of a stream, which Kayvee keeps as
/// they are: without `deep` (Redis's sanitization off) a node whose header is sound is kept
/// even when its entries are not, and the stream is marked corrupt (see [`crate::stream`]).
/// Without `deep`, a hash listpack with a field twice is [`Error::ListpackDups`] (Redis's
/// report when it meets the duplicate, converting the listpack) rather than an integrity
/// failure (its report with deep sanitization), and one whose entries do not decode but whose
/// header is sound ([`crate::listpack::header_sound`]) is kept as [`Hash::corrupt`], as Redis
/// keeps it, Kayvee then refusing its commands where Redis may crash.
pub fn read_value(r: &mut Reader<'_>, ty: u8, seed: u64, deep: bool) -> Result<Value> {
    Ok(match ty {
        types::STRING => Value::Str(SmallBytes::from_slice(&r.string()?)),
        types::LIST => {
            let n = r.count()?;
            let mut list = List::new();
            for _ in 0..n {
                list.push_back(&r.string()?, LIST_DEFAULT_FILL);
            }
            Value::List(list)
        }
        types::SET => {
            let n = r.count()?;
            let mut set = Set::new();
            for _ in 0..n {
                if !set.insert(&r.string()?, LOAD_INTSET_MAX, seed) {
                    return Err(Error::Integrity("Duplicate set members detected"));
                }
            }
            Value::Set(set)
        }
        types::ZSET | types::ZSET_2 => read_zset(r, ty == types::ZSET_2, seed)?,
        types::HASH => {
            let n = r.count()?;
            let mut h = Hash::with_seed(seed);
            for _ in 0..n {
                let f = r.string()?;
                if !h.insert(&f, &r.string()?) {
                    return Err(Error::Integrity("Duplicate hash fields detected"));
                }
            }
            Value::Hash(h)
        }
        types::SET_INTSET => {
            let blob = r.string()?;
            checked(INTSET_BAD, intset(&blob, seed))?
        }
        types::LIST_ZIPLIST => {
            let blob = r.string()?;
            checked(ZIPLIST_BAD, ziplist(&blob).map(list_from))?
        }
        types::HASH_ZIPLIST => {
            let blob = r.string()?;
            checked(
                HASH_ZIPLIST_BAD,
                ziplist(&blob).and_then(|i| hash_from(i, seed)),
            )?
        }
        types::ZSET_ZIPLIST => {
            let blob = r.string()?;
            checked(
                ZSET_ZIPLIST_BAD,
                ziplist(&blob).and_then(|i| zset_from(i, seed)),
            )?
        }
        types::HASH_LISTPACK => {
            let blob = r.string()?;
            let items = match listpack(&blob) {
                // Unsanitized, Redis checks the header only: kept, never read.
                Err(_) if !deep && crate::listpack::header_sound(&blob) => {
                    return Ok(Value::Hash(Hash::corrupt(blob.into_owned())));
                }
                items => checked(HASH_LISTPACK_BAD, items)?,
            };
            match hash_from(items, seed) {
                // Unsanitized, Redis keeps the listpack and meets the duplicate converting it.
                Err(Error::Corrupt(DUP_FIELD)) if !deep => {
                    return Err(Error::ListpackDups(blob.into_owned()))
                }
                h => checked(HASH_LISTPACK_BAD, h)?,
            }
        }
        types::ZSET_LISTPACK => {
            let blob = r.string()?;
            checked(
                ZSET_LISTPACK_BAD,
                listpack(&blob).and_then(|i| zset_from(i, seed)),
            )?
        }
        types::LIST_QUICKLIST => quicklist(r, false)?,
        types::LIST_QUICKLIST_2 => quicklist(r, true)?,
        types::HASH_ZIPMAP => {
            let blob = r.string()?;
            let pairs = zipmap(&blob).and_then(|i| match i.is_empty() {
                true => Err(Error::Corrupt("empty zipmap")),
                false => hash_from(i, seed),
            });
            checked(ZIPMAP_BAD, pairs)?
        }
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 => crate::stream::read(r, ty, deep)?,
        types::MODULE_PRE_GA | types::MODULE_2 => return Err(Error::UnsupportedType(ty)),
        _ => return Err(Error::BadType(ty)),
    })
}

/// ZSET (text scores) or ZSET_2 (binary scores).
fn read_zset(r: &mut Reader<'_>, binary: bool, seed: u64) -> Result<Value> {
    let n = r.count()?;
    let mut z = ZSet::new(seed);
    for _ in 0..n {
        let m = r.string()?;
        let score = if binary {
            r.f64_le()?
        } else {
            r.double_text()?
        };
        if score.is_nan() {
            return Err(Error::Corrupt("NaN score"));
        }
        if z.insert(&m, score).is_some() {
            return Err(Error::Integrity("Duplicate zset fields detected"));
        }
    }
    Ok(Value::ZSet(z))
}

/// A list from decoded elements.
fn list_from(items: Vec<Vec<u8>>) -> Value {
    Value::List(List::from_items(items.iter().map(Vec::as_slice)))
}

/// [`hash_from`]'s error for a field present twice.
const DUP_FIELD: &str = "duplicate hash field";

/// A hash from alternating fields and values.
fn hash_from(items: Vec<Vec<u8>>, seed: u64) -> Result<Value> {
    if !items.len().is_multiple_of(2) {
        return Err(Error::Corrupt("odd hash listpack"));
    }
    let mut h = Hash::with_seed(seed);
    for pair in items.chunks(2) {
        if !h.insert(&pair[0], &pair[1]) {
            return Err(Error::Corrupt(DUP_FIELD));
        }
    }
    Ok(Value::Hash(h))
}

/// A sorted set from alternating members and scores (scores as text or integers).
fn zset_from(items: Vec<Vec<u8>>, seed: u64) -> Result<Value> {
    if !items.len().is_multiple_of(2) {
        return Err(Error::Corrupt("odd zset listpack"));
    }
    let mut z = ZSet::new(seed);
    for pair in items.chunks(2) {
        let score = parse_f64(&pair[1])?;
        if score.is_nan() {
            return Err(Error::Corrupt("NaN score"));
        }
        if z.insert(&pair[0], score).is_some() {
            return Err(Error::Corrupt("duplicate zset member"));
        }
    }
    Ok(Value::ZSet(z))
}

/// A quicklist: nodes that are ziplists (version 1) or, in version 2, listpacks (PACKED) or
/// single elements (PLAIN).
fn quicklist(r: &mut Reader<'_>, v2: bool) -> Result<Value> {
    let nodes = r.count()?;
    let mut list = List::new();
    for _ in 0..nodes {
        let container = if v2 { r.len()? } else { QUICKLIST_NODE_PACKED };
        let blob = r.string()?;
        if blob.is_empty() {
            return Err(Error::Corrupt("empty quicklist node"));
        }
        let items = match container {
            QUICKLIST_NODE_PLAIN => alloc::vec![blob.into_owned()],
            QUICKLIST_NODE_PACKED if v2 => checked(QUICKLIST_LISTPACK_BAD, listpack(&blob))?,
            QUICKLIST_NODE_PACKED => checked(QUICKLIST_ZIPLIST_BAD, ziplist(&blob))?,
            _ => return Err(Error::Corrupt("quicklist container")),
        };
        // An empty node is dropped, as Redis drops it (a list left empty is an empty key).
        items
            .iter()
            .for_each(|e| list.push_back(e, LIST_DEFAULT_FILL));
    }
    Ok(Value::List(list))
}

/// An intset: encoding width (2, 4, 8), count, sorted little-endian integers.
fn intset(blob: &[u8], seed: u64) -> Result<Value> {
    let mut r = Reader::new(blob);
    let width = r.u32_le()? as usize;
    let n = r.u32_le()? as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + width.saturating_mul(n) {
        return Err(Error::Corrupt("intset header"));
    }
    let values: Vec<i64> = blob[8..]
        .chunks(width)
        .map(|chunk| {
            let mut b = [0u8; 8];
            b[..width].copy_from_slice(chunk);
            let shift = 64 - 8 * width as u32;
            (i64::from_le_bytes(b) << shift) >> shift
        })
        .collect();
    // Kept at its width, as Redis keeps a loaded intset; one out of order is read member by
    // member instead.
    if let Some(set) = Set::from_intset(width, &values) {
        return Ok(Value::Set(set));
    }
    let mut set = Set::with_seed(seed);
    for v in values {
        if !set.insert(&decimal(v), LOAD_INTSET_MAX, seed) {
            return Err(Error::Corrupt("duplicate intset member"));
        }
    }
    Ok(Value::Set(set))
}

/// A ziplist's elements. Layout: total bytes (u32), tail offset (u32), count (u16), entries
/// (previous length, encoding, data), `0xFF`.
/// A zipmap (the hash encoding of RDB files before Redis 2.6): a count byte (254 or more:
/// count it), then for each pair the field's length and bytes, the value's length, a byte
/// of free space after the value, the value and that free space, and 255 at the end. A length
/// is one byte below 254, or 254 and four little-endian bytes. Returns fields and values
/// alternating.
pub fn zipmap(blob: &[u8]) -> Result<Vec<Vec<u8>>> {
    fn len(r: &mut Reader<'_>) -> Result<Option<usize>> {
        Ok(match r.u8()? {
            0xFF => None,
            // The long form holds lengths of 254 and more only (Redis refuses a small one).
            0xFE => match r.u32_le()? as usize {
                n if n < 0xFE => return Err(Error::Corrupt("zipmap 5-byte length below 254")),
                n => Some(n),
            },
            n => Some(usize::from(n)),
        })
    }
    let mut r = Reader::new(blob);
    let _count = r.u8()?;
    let mut items = Vec::new();
    while let Some(flen) = len(&mut r)? {
        items.push(r.take(flen)?.to_vec());
        let vlen = len(&mut r)?.ok_or(Error::Corrupt("zipmap ends after a field"))?;
        let free = usize::from(r.u8()?);
        items.push(r.take(vlen)?.to_vec());
        r.take(free)?;
    }
    if !r.is_empty() {
        return Err(Error::Corrupt("zipmap trailing bytes"));
    }
    Ok(items)
}

pub fn ziplist(blob: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut r = Reader::new(blob);
    let total = r.u32_le()? as usize;
    let tail = r.u32_le()? as usize;
    let count = usize::from(u16::from_le_bytes([r.u8()?, r.u8()?]));
    if total != blob.len() || blob.last() != Some(&0xFF) {
        return Err(Error::Corrupt("ziplist header"));
    }
    let mut out = Vec::new();
    // Each entry's previous-length field is the size of the entry before it (0 first); the
    // tail offset is where the last entry starts (the end of the header when empty).
    let (mut prev_size, mut last_start) = (0usize, r.pos());
    loop {
        let start = r.pos();
        let b = r.u8()?;
        if b == 0xFF {
            break;
        }
        let prev = if b == 0xFE {
            r.u32_le()? as usize
        } else {
            usize::from(b)
        };
        if prev != prev_size {
            return Err(Error::Corrupt("ziplist previous length"));
        }
        out.push(ziplist_entry(&mut r)?.into_owned());
        prev_size = r.pos() - start;
        last_start = start;
    }
    if !r.is_empty() || (count != 65535 && count != out.len()) {
        return Err(Error::Corrupt("ziplist count"));
    }
    if tail != last_start {
        return Err(Error::Corrupt("ziplist tail offset"));
    }
    Ok(out)
}

/// One ziplist entry after its previous-length field.
fn ziplist_entry<'a>(r: &mut Reader<'a>) -> Result<Cow<'a, [u8]>> {
    let b = r.u8()?;
    let int = |v: i64| Ok(Cow::Owned(decimal(v)));
    match b >> 6 {
        0 => return Ok(Cow::Borrowed(r.take(usize::from(b & 0x3F))?)),
        1 => {
            let n = usize::from(b & 0x3F) << 8 | usize::from(r.u8()?);
            return Ok(Cow::Borrowed(r.take(n)?));
        }
        2 => {
            let n = u32::from_be_bytes([r.u8()?, r.u8()?, r.u8()?, r.u8()?]) as usize;
            return Ok(Cow::Borrowed(r.take(n)?));
        }
        _ => {}
    }
    match b {
        0xC0 => int(i64::from(i16::from_le_bytes([r.u8()?, r.u8()?]))),
        0xD0 => int(i64::from(r.u32_le()? as i32)),
        0xE0 => int(r.u64_le()? as i64),
        0xF0 => int(((le(r.take(3)?) << 40) as i64) >> 40),
        0xFE => int(i64::from(r.u8()? as i8)),
        0xF1..=0xFD => int(i64::from(b & 0x0F) - 1),
        _ => Err(Error::Corrupt("ziplist entry encoding")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Object bodies from redis-server 7.0.15 DUMP replies (type byte first, footer cut).
    fn body(payload: &[u8]) -> Value {
        let mut r = Reader::new(&payload[1..]);
        let v = read_value(&mut r, payload[0], 7, true).unwrap();
        assert!(r.is_empty(), "trailing bytes");
        v
    }

    fn items(v: &Value) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = match v {
            Value::List(l) => return l.iter().map(|e| e.to_vec()).collect(),
            Value::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
            Value::Hash(h) => h
                .iter()
                .map(|(f, v)| [f.to_vec(), b"=".to_vec(), v.to_vec()].concat())
                .collect(),
            Value::ZSet(z) => {
                return z
                    .iter()
                    .map(|e| {
                        alloc::format!("{}:{}", e.0, core::str::from_utf8(&e.1.to_vec()).unwrap())
                            .into_bytes()
                    })
                    .collect()
            }
            Value::Str(s) => alloc::vec![s.to_vec()],
            Value::Stream(_) => alloc::vec![],
        };
        out.sort();
        out
    }

    #[test]
    fn redis_7_compact_encodings_decode() {
        let l =
            body(b"\x12\x01\x02\x11\x11\x00\x00\x00\x04\x00\x81a\x02\x81b\x02\x01\x01\x02\x01\xff");
        assert_eq!(items(&l), [&b"a"[..], b"b", b"1", b"2"]);
        let s = body(b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00");
        assert_eq!(items(&s), [&b"1"[..], b"2", b"3"]);
        let h = body(b"\x10\x13\x13\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x82f2\x03\x02\x01\xff");
        assert_eq!(items(&h), [&b"f2=2"[..], b"f=v"]);
        let z = body(b"\x11\x14\x14\x00\x00\x00\x04\x00\x81a\x02\x831.5\x04\x81b\x02\x02\x01\xff");
        assert_eq!(items(&z), [&b"1.5:a"[..], b"2:b"]);
        let plain = body(b"\x02\x02\x01b\x01a");
        assert_eq!(items(&plain), [&b"a"[..], b"b"]);
    }

    #[test]
    fn listpack_integers_of_every_width() {
        let mut lp = alloc::vec![0, 0, 0, 0, 0, 0];
        let entries: &[&[u8]] = &[
            b"\x7f",
            b"\xdf\xff",
            b"\xf1\x00\x80",
            b"\xf2\xff\xff\x7f",
            b"\xf3\x00\x00\x00\x80",
            b"\xf4\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for e in entries {
            lp.extend_from_slice(e);
            lp.push(e.len() as u8);
        }
        lp.push(0xFF);
        let n = lp.len() as u32;
        lp[..4].copy_from_slice(&n.to_le_bytes());
        lp[4] = entries.len() as u8;
        let got = listpack(&lp).unwrap();
        let want: [&[u8]; 6] = [b"127", b"-1", b"-32768", b"8388607", b"-2147483648", b"-1"];
        assert_eq!(got, want);
        lp[4] = 9;
        assert!(listpack(&lp).is_err());
    }

    #[test]
    fn ziplists_decode() {
        // A ziplist of "ab", 5 (immediate), -2 (int8), 300 (int16).
        let mut zl = alloc::vec![0u8; 10];
        zl.extend_from_slice(b"\x00\x02ab\x04\xf6\x02\xfe\xfe\x03\xc0\x2c\x01\xff");
        let n = zl.len() as u32;
        zl[..4].copy_from_slice(&n.to_le_bytes());
        zl[8] = 4;
        zl[4] = 19;
        let got = ziplist(&zl).unwrap();
        let want: [&[u8]; 4] = [b"ab", b"5", b"-2", b"300"];
        assert_eq!(got, want);
        assert!(ziplist(&zl[..zl.len() - 1]).is_err());
        // A previous length that is not the size of the entry before, a wrong tail offset.
        let mut bad = zl.clone();
        bad[14] = 5;
        assert!(ziplist(&bad).is_err());
        let mut bad = zl.clone();
        bad[4] = 16;
        assert!(ziplist(&bad).is_err());
    }

    #[test]
    fn corrupt_blobs_are_integrity_failures_with_redis_texts() {
        // Redis 7.0.15's DUMP of a hash listpack {f: v, f2: 2}; a hash listpack a, b, a, c.
        let good = b"\x10\x13\x13\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x82f2\x03\x02\x01\xff";
        let dup = b"\x10\x13\x13\x00\x00\x00\x04\x00\x81a\x02\x81b\x02\x81a\x02\x81c\x02\xff";
        let read = |p: &[u8]| read_value(&mut Reader::new(&p[1..]), p[0], 7, true).map(|_| ());
        assert_eq!(read(good), Ok(()));
        assert_eq!(
            read(dup),
            Err(Error::Integrity("Hash listpack integrity check failed."))
        );
        // Without deep checks, the duplicate is reported with the listpack's hex dump.
        let unsanitized = read_value(&mut Reader::new(&dup[1..]), dup[0], 7, false);
        assert_eq!(unsanitized, Err(Error::ListpackDups(dup[2..].to_vec())));
        let report = alloc::string::ToString::to_string(&unsanitized.unwrap_err());
        assert_eq!(
            report,
            "listpack with dup elements dump (hexdump of 19 bytes):\n\
             130000000400816102816202816102816302ff"
        );
        // A back-length that does not match its entry.
        let mut back = good.to_vec();
        back[10] = 3;
        assert_eq!(
            read(&back),
            Err(Error::Integrity("Hash listpack integrity check failed."))
        );
        // Plain encodings: a duplicate set member, a duplicate hash field.
        assert_eq!(
            read(b"\x02\x02\x01a\x01a"),
            Err(Error::Integrity("Duplicate set members detected"))
        );
        assert_eq!(
            read(b"\x04\x02\x01a\x01b\x01a\x01c"),
            Err(Error::Integrity("Duplicate hash fields detected"))
        );
        // A zipmap with no pair.
        assert_eq!(
            read(b"\x09\x02\x00\xff"),
            Err(Error::Integrity("Zipmap integrity check failed."))
        );
    }
}

#[cfg(test)]
mod unsanitized_tests {
    use super::*;

    /// The hash listpack of Redis's 'lpFind invalid access' fuzzer finding: ten pairs claimed,
    /// the last value a 32-bit string header running past the end.
    const LP_FIND: &str = "1039390000001400060106010301825f33030701825f370300010001040104010901825f39030501825f3503080108010101825f31030201f001ff0a0029d7e452797a9582";

    #[test]
    fn a_hash_listpack_with_a_sound_header_is_kept_unread_without_deep_checks() {
        use kayvee_engine::persist::RestoreError;
        let payload = crate::unhex(LP_FIND);
        assert_eq!(
            crate::dump::restore(&payload, 7, true, true),
            Err(RestoreError::Integrity(
                "Hash listpack integrity check failed."
            ))
        );
        let Ok(Value::Hash(h)) = crate::dump::restore(&payload, 7, true, false) else {
            panic!("refused without deep checks")
        };
        assert_eq!(h.corrupt_listpack(), Some(&payload[2..payload.len() - 10]));
        assert!(!h.is_empty() && h.get(b"6").is_none() && h.iter().next().is_none());
        // DUMP gives the payload back, byte for byte (with its right CRC-64).
        let v = Value::Hash(h);
        let n = payload.len() - 8;
        assert_eq!(crate::dump::dump(v.view(), false)[..n], payload[..n]);
        // A header that is not sound is refused even so: a wrong total.
        let mut bad = payload.clone();
        bad[2] = 0x3a;
        assert_eq!(
            crate::dump::restore(&bad, 7, true, false),
            Err(RestoreError::Integrity(
                "Hash listpack integrity check failed."
            ))
        );
    }
}

#[cfg(test)]
mod zipmap_tests {
    use super::*;

    #[test]
    fn zipmap_pairs_with_free_space_and_long_lengths() {
        // Two pairs: "a" => "bc" with 2 free bytes, then a 300-byte field (254 + u32 length).
        let long = alloc::vec![b'f'; 300];
        let mut blob = alloc::vec![2u8, 1, b'a', 2, 2, b'b', b'c', 0, 0, 0xFE];
        blob.extend_from_slice(&300u32.to_le_bytes());
        blob.extend_from_slice(&long);
        blob.extend_from_slice(&[1, 0, b'v', 0xFF]);
        let items = zipmap(&blob).unwrap();
        assert_eq!(
            items,
            alloc::vec![b"a".to_vec(), b"bc".to_vec(), long, b"v".to_vec()]
        );
    }

    #[test]
    fn corrupt_zipmaps_are_errors() {
        for blob in [
            &[1u8, 0xFE, 1, 0, 0, 0, b'a', 0, 0, 0xFF][..],
            &[1u8, 1, b'a'][..],
            &[1, 1, b'a', 0xFF],
            &[1, 5, b'a'],
            &[0, 0xFF, 7],
        ] {
            assert!(zipmap(blob).is_err(), "{blob:?}");
        }
    }
}

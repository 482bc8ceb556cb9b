//! DEBUG DIGEST and DIGEST-VALUE: a 40-hex-digit signature of the whole dataset or of some
//! values, with Redis's semantics (not its exact bits): equal datasets give equal digests
//! whatever their encodings or the order keys and members were added in, any difference
//! changes it (with overwhelming probability), and an empty dataset or a missing key gives 40
//! zeros. Built from SHA-256 (truncated to 160 bits): unordered collections (sets, hashes, the
//! keys of a database) combine their elements' digests by XOR, ordered ones (lists, sorted sets)
//! chain them.

use crate::argv::Argv;
use crate::error::CmdResult;
use crate::reply::ReplySink;
use crate::value::ValueRef;
use crate::Cx;
use sha2::{Digest as _, Sha256};

/// A digest: 160 bits, shown as 40 hex digits.
type Sig = [u8; 20];

/// The digest of a sequence of byte strings (each length-prefixed, so boundaries count).
fn hash(parts: &[&[u8]]) -> Sig {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let full = h.finalize();
    let mut out = [0u8; 20];
    out.copy_from_slice(&full[..20]);
    out
}

/// `acc ^= d`.
fn xor(acc: &mut Sig, d: &Sig) {
    acc.iter_mut().zip(d).for_each(|(a, b)| *a ^= b);
}

/// A score as bytes, with `-0.0` the same as `0.0` (Redis treats them as equal).
fn score_bytes(v: f64) -> [u8; 8] {
    let v = if v == 0.0 { 0.0 } else { v };
    v.to_bits().to_le_bytes()
}

/// The digest of a value: its type and its logical content.
fn value_sig(v: ValueRef<'_>) -> Sig {
    match v {
        ValueRef::Str(s) => hash(&[b"string", s]),
        ValueRef::List(l) => l.iter().fold(hash(&[b"list"]), |acc, e| hash(&[&acc, e])),
        ValueRef::Set(s) => {
            let mut acc = [0u8; 20];
            for m in s.iter() {
                xor(&mut acc, &hash(&[&m]));
            }
            hash(&[b"set", &acc])
        }
        // A hash whose listpack cannot be read: its bytes, as they are.
        ValueRef::Hash(h) if h.corrupt_listpack().is_some() => {
            hash(&[b"hash", h.corrupt_listpack().unwrap_or_default()])
        }
        ValueRef::Hash(h) => {
            let mut acc = [0u8; 20];
            for (f, v) in h.iter() {
                xor(&mut acc, &hash(&[&f.to_vec(), &v.to_vec()]));
            }
            hash(&[b"hash", &acc])
        }
        ValueRef::ZSet(z) => z.iter().fold(hash(&[b"zset"]), |acc, r| {
            hash(&[&acc, &r.1.to_small_bytes(), &score_bytes(r.0)])
        }),
        // The entries, in order (as Redis digests a stream: not its groups).
        // A stream whose nodes cannot be read: their bytes, as they are.
        ValueRef::Stream(st) if st.corrupt => st.nodes().fold(hash(&[b"stream"]), |acc, n| {
            hash(&[&acc, &n.master.to_be_bytes(), &n.lp[..]])
        }),
        ValueRef::Stream(st) => {
            use crate::value::StreamId;
            let mut acc = hash(&[b"stream"]);
            st.range(StreamId::MIN, StreamId::MAX, false, |e| {
                acc = hash(&[&acc, &e.id.to_be_bytes()]);
                for f in &e.fields {
                    f.with_bytes(|b| acc = hash(&[&acc, b]));
                }
                true
            });
            acc
        }
    }
}

/// 40 lower-case hex digits.
fn hex(sig: &Sig) -> alloc::string::String {
    use core::fmt::Write;
    let mut s = alloc::string::String::with_capacity(40);
    for b in sig {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// DEBUG DIGEST: every non-empty database's keys (name, value, TTL) combined, the databases
/// chained by index.
pub(super) fn digest(cx: &mut Cx<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut total = [0u8; 20];
    for (i, db) in cx.core.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let mut acc = [0u8; 20];
        for (key, entry) in db.keys.iter() {
            let ttl = db.expire_at(key).map(u64::to_le_bytes).unwrap_or_default();
            xor(&mut acc, &hash(&[key, &value_sig(entry.value()), &ttl]));
        }
        total = hash(&[&total, &(i as u64).to_le_bytes(), &acc]);
    }
    out.simple(&hex(&total));
    Ok(())
}

/// DEBUG DIGEST-VALUE key...: each value's digest (40 zeros for a missing key).
pub(super) fn digest_value(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let db = &cx.core.dbs[cx.db_index];
    out.array(args.len() - 2);
    for key in args.iter().skip(2) {
        let sig = db.keys.get(key).map_or([0u8; 20], |e| value_sig(e.value()));
        out.simple(&hex(&sig));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Hash, Value};
    use kayvee_pds::SmallBytes;

    #[test]
    fn unordered_collections_ignore_order() {
        let mut a = Hash::new();
        a.insert(b"f1", b"v1");
        a.insert(b"f2", b"v2");
        let mut b = Hash::new();
        b.insert(b"f2", b"v2");
        b.insert(b"f1", b"v1");
        assert_eq!(
            value_sig(Value::Hash(a.clone()).view()),
            value_sig(Value::Hash(b).view())
        );
        b = a.clone();
        b.insert(b"f1", b"v2");
        assert_ne!(
            value_sig(Value::Hash(a).view()),
            value_sig(Value::Hash(b).view())
        );
        // The type counts: "x" as a string and as a list differ.
        let s = Value::Str(SmallBytes::from_slice(b"x"));
        assert_ne!(value_sig(s.view()), hash(&[b"list"]));
        assert_eq!(hex(&[0u8; 20]), "0".repeat(40));
    }
}

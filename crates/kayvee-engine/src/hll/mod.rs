//! HyperLogLog as Redis 7.0 stores it in a string value, so that the bytes are the same on
//! both servers (GET, DUMP, RDB and replication interoperate). No command logic: the codec the
//! `cmd::hll` group runs on.
//!
//! An HLL estimates the number of distinct elements added to it (Flajolet, Fusy, Gandouet,
//! Meunier, "HyperLogLog: the analysis of a near-optimal cardinality estimation algorithm",
//! 2007), with the sparse representation of Heule, Nunkesser, Hall ("HyperLogLog in practice",
//! 2013) and Ertl's estimator (see [`estimate`]). An element is hashed with MurmurHash64A (seed
//! `0xadc83b19`); the low 14 bits pick one of 16384 registers, and the register keeps the
//! largest "position of the first 1 bit" seen in the 50 bits above them (1 to 51).
//!
//! The string is a 16-byte header then the registers:
//! - `HYLL`, the encoding (0 dense, 1 sparse), three unused bytes, and the cached cardinality
//!   as a little-endian u64 whose top bit marks the cache invalid (a write sets it and leaves
//!   the old number below it; PFCOUNT stores a fresh number);
//! - dense: 16384 registers of 6 bits ([`dense`]); sparse: a run-length code ([`sparse`]),
//!   made dense once a register exceeds 32 or the string would pass `hll-sparse-max-bytes`.

pub mod dense;
mod estimate;
mod murmur;
pub mod sparse;

use alloc::string::String;
use alloc::vec::Vec;

/// Bytes of the header.
pub const HDR_LEN: usize = 16;
/// log2 of the number of registers.
const P: u32 = 14;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Hash bits left for the run of zeros once the register index is taken.
const Q: u32 = 64 - P;
/// Largest value a 6-bit register holds.
pub const REGISTER_MAX: u8 = 63;
/// Bytes of the dense registers.
pub const DENSE_REGS_LEN: usize = REGISTERS * 6 / 8;
/// Bytes of a dense HLL string.
pub const DENSE_LEN: usize = HDR_LEN + DENSE_REGS_LEN;
/// The encoding byte of a dense HLL.
const ENCODING_DENSE: u8 = 0;
/// The encoding byte of a sparse HLL.
const ENCODING_SPARSE: u8 = 1;
/// The hash seed Redis uses.
const SEED: u64 = 0xadc8_3b19;
/// The cache-invalid bit, in the last byte of the cached cardinality.
const CACHE_INVALID: u8 = 0x80;

/// The representation of an HLL string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed 6-bit registers.
    Dense,
    /// The run-length code.
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING gives.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// The string is no HLL: too short, no `HYLL` magic, an unknown encoding, or a dense HLL of
/// the wrong length (Redis's "Key is not a valid HyperLogLog string value").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotHll;

/// The registers do not decode (Redis's "Corrupted HLL object detected").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// An empty HLL, as PFADD creates it: sparse, every register 0, cardinality 0 cached.
pub fn empty() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR_LEN + 2);
    s.extend_from_slice(b"HYLL");
    s.extend_from_slice(&[ENCODING_SPARSE, 0, 0, 0]);
    s.extend_from_slice(&[0; 8]);
    sparse::empty_code(&mut s);
    s
}

/// The representation of `s`, or [`NotHll`].
pub fn encoding(s: &[u8]) -> Result<Encoding, NotHll> {
    if s.len() < HDR_LEN || &s[..4] != b"HYLL" {
        return Err(NotHll);
    }
    match s[4] {
        ENCODING_DENSE if s.len() == DENSE_LEN => Ok(Encoding::Dense),
        ENCODING_SPARSE => Ok(Encoding::Sparse),
        _ => Err(NotHll),
    }
}

/// The register an element goes to and the value it offers: the position of the lowest 1 bit
/// in the hash bits above the index (bit `Q` forced to 1, so at most `Q + 1`).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur::murmur64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | 1 << Q;
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Adds an element to the HLL `hll` (checked with [`encoding`]); whether a register changed.
/// `sparse_max_bytes` is `hll-sparse-max-bytes`.
pub fn add(hll: &mut Vec<u8>, element: &[u8], sparse_max_bytes: u64) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    raise(hll, index, count, sparse_max_bytes)
}

/// Raises register `index` to `count` if it is lower (making the HLL dense when the sparse
/// form cannot hold it); whether it changed.
pub fn raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: u64,
) -> Result<bool, Corrupt> {
    if hll[4] == ENCODING_DENSE {
        return Ok(dense::raise(&mut hll[HDR_LEN..], index, count));
    }
    match sparse::raise(hll, index, count, sparse_max_bytes)? {
        sparse::Raised::Unchanged => Ok(false),
        sparse::Raised::Updated => Ok(true),
        sparse::Raised::Promote => {
            make_dense(hll)?;
            Ok(dense::raise(&mut hll[HDR_LEN..], index, count))
        }
    }
}

/// Makes a sparse HLL dense; whether it was sparse.
pub fn make_dense(hll: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if hll[4] == ENCODING_DENSE {
        return Ok(false);
    }
    *hll = sparse::to_dense(hll)?;
    Ok(true)
}

/// Raises each `max[i]` (16384 bytes, one per register) to register `i` of `hll`.
pub fn merge_into(hll: &[u8], max: &mut [u8]) -> Result<(), Corrupt> {
    if hll[4] == ENCODING_DENSE {
        dense::merge_into(&hll[HDR_LEN..], max);
        Ok(())
    } else {
        sparse::merge_into(hll, max)
    }
}

/// The estimated cardinality of the HLL `hll` (the cache is not looked at).
pub fn count(hll: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u32; 64];
    if hll[4] == ENCODING_DENSE {
        dense::histogram(&hll[HDR_LEN..], &mut histo);
    } else {
        sparse::histogram(hll, &mut histo)?;
    }
    Ok(estimate::estimate(&histo))
}

/// The estimated cardinality of registers held one per byte (a merge of several HLLs).
pub fn count_registers(max: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    max.iter()
        .for_each(|&v| histo[usize::from(v & REGISTER_MAX)] += 1);
    estimate::estimate(&histo)
}

/// The cached cardinality, when the cache is valid.
pub fn cached(hll: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(hll[8..16].try_into().expect("8 bytes"));
    (hll[15] & CACHE_INVALID == 0).then_some(card)
}

/// Stores a fresh cardinality in the cache (clearing the invalid bit).
pub fn set_cached(hll: &mut [u8], card: u64) {
    hll[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cache invalid, leaving the old number under the flag as Redis does.
pub fn invalidate(hll: &mut [u8]) {
    hll[15] |= CACHE_INVALID;
}

/// The 16384 register values of a dense HLL.
pub fn registers(hll: &[u8]) -> Vec<u8> {
    (0..REGISTERS)
        .map(|i| dense::get(&hll[HDR_LEN..], i))
        .collect()
}

/// The sparse code as text (PFDEBUG DECODE).
pub fn decode_sparse(hll: &[u8]) -> String {
    sparse::decode(hll)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_bytes_for_a_b_c() {
        // `PFADD h a b c` on redis-server 7.0.15.
        let mut h = empty();
        for e in [b"a", b"b", b"c"] {
            assert_eq!(add(&mut h, e, 3000), Ok(true));
        }
        invalidate(&mut h);
        let mut want = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
        want.extend_from_slice(&[
            0x60, 0xf3, 0x80, 0x50, 0xb1, 0x84, 0x4b, 0xfb, 0x80, 0x42, 0x5a,
        ]);
        assert_eq!(h, want);
        assert_eq!(count(&h), Ok(3));
        assert_eq!(
            decode_sparse(&h),
            "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
        );
        // Then `PFADD h d` splits the first run.
        assert_eq!(add(&mut h, b"d", 3000), Ok(true));
        assert_eq!(
            decode_sparse(&h),
            "Z:7292 v:1,1 Z:1143 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
        );
    }

    #[test]
    fn checks_the_string() {
        assert_eq!(encoding(&empty()), Ok(Encoding::Sparse));
        assert_eq!(encoding(b"HYLL"), Err(NotHll));
        let mut h = empty();
        h[4] = 0;
        assert_eq!(encoding(&h), Err(NotHll));
        assert_eq!(make_dense(&mut empty()), Ok(true));
        let mut d = empty();
        make_dense(&mut d).unwrap();
        assert_eq!(encoding(&d), Ok(Encoding::Dense));
        assert_eq!(d.len(), DENSE_LEN);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let (mut s, mut d) = (empty(), empty());
        make_dense(&mut d).unwrap();
        for i in 0..2000u32 {
            let e = i.to_le_bytes();
            assert_eq!(add(&mut s, &e, 1 << 30), add(&mut d, &e, 1 << 30));
        }
        let mut sd = s.clone();
        make_dense(&mut sd).unwrap();
        assert_eq!(registers(&sd), registers(&d));
        assert_eq!(count(&s), count(&d));
        let c = count(&d).unwrap();
        assert!((1900..2100).contains(&c), "{c}");
    }
}

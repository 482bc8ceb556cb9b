//! MurmurHash64A (Austin Appleby's public-domain 64-bit MurmurHash2, the variant for 64-bit
//! platforms), as Redis's HyperLogLog hashes its elements: 8-byte blocks read little-endian,
//! the tail folded in byte by byte, then the final avalanche.

/// The multiplier of the hash.
const M: u64 = 0xc6a4_a793_5bd1_e995;
/// The shift of the mixing steps.
const R: u32 = 47;

/// MurmurHash64A of `data` with `seed`.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    // The C code multiplies the length as an `int`: only its low 32 bits (sign-extended)
    // reach the hash; elements are far shorter than 2 GiB.
    let len = data.len() as i32 as i64 as u64;
    let mut h = seed ^ len.wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Empty input: only the length mix and the avalanche.
        let h = murmur64a(b"", 0);
        assert_eq!(h, 0);
        // Distinct inputs of every tail length hash apart.
        let mut seen = alloc::vec::Vec::new();
        for n in 0..20 {
            let data: alloc::vec::Vec<u8> = (0..n as u8).collect();
            let h = murmur64a(&data, 0xadc8_3b19);
            assert!(!seen.contains(&h));
            seen.push(h);
        }
    }
}

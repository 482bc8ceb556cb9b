//! LZF compression as RDB strings use it (encoding `0xC3`): a compressor producing the same
//! bytes as liblzf 3.6 with Redis's settings (16-bit hash table, `VERY_FAST`), so DUMP
//! payloads of long strings match Redis's, and a bounds-checked decompressor.
//!
//! Format: a control byte `c`; `c < 32`: `c + 1` literal bytes follow; otherwise a
//! back-reference of length `(c >> 5) + 2` (when `c >> 5 == 7`, one more byte adds to it) at
//! distance `((c & 31) << 8 | next byte) + 1`.

use alloc::vec;
use alloc::vec::Vec;

/// Log2 of the hash table size.
const HLOG: u32 = 16;
/// Longest literal run.
const MAX_LIT: usize = 1 << 5;
/// Farthest back-reference.
const MAX_OFF: usize = 1 << 13;
/// Longest back-reference.
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// The hash slot of the three bytes packed in `h`.
#[inline]
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << HLOG) - 1)) as usize
}

/// Compresses `input` into at most `out_max` bytes with a fresh table (see [`Lzf`]).
pub fn compress(input: &[u8], out_max: usize) -> Option<Vec<u8>> {
    Lzf::new().compress(input, out_max)
}

/// A compressor whose hash table is reused across calls: each call bumps a generation, and
/// slots of older generations read as empty, so output does not depend on earlier inputs
/// (as with a freshly zeroed table) without zeroing 512 KiB per string.
pub struct Lzf {
    htab: Vec<u64>,
    generation: u32,
}

impl Default for Lzf {
    fn default() -> Self {
        Self::new()
    }
}

impl Lzf {
    /// A compressor (allocates its table once).
    pub fn new() -> Self {
        Lzf {
            htab: vec![0; 1 << HLOG],
            generation: 0,
        }
    }

    /// Compresses `input` into at most `out_max` bytes; None when it does not fit (Redis
    /// then stores the string plain). Empty input gives None, as liblzf's 0.
    pub fn compress(&mut self, input: &[u8], out_max: usize) -> Option<Vec<u8>> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.htab.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        compress_with(input, out_max, &mut self.htab, self.generation)
    }
}

/// liblzf's compression loop over a generation-stamped table (`generation << 32 | pos + 1`).
fn compress_with(
    input: &[u8],
    out_max: usize,
    htab: &mut [u64],
    generation: u32,
) -> Option<Vec<u8>> {
    let n = input.len();
    if n == 0 || out_max == 0 {
        return None;
    }
    let stamp = u64::from(generation) << 32;
    let slot_pos = |v: u64| {
        if v >> 32 == u64::from(generation) {
            (v & 0xFFFF_FFFF) as usize
        } else {
            0
        }
    };
    // Slots hold position + 1; 0 means empty (liblzf compares against the buffer start).
    let mut out: Vec<u8> = Vec::with_capacity(out_max + 1);
    let mut lit: usize = 0;
    out.push(0); // start a literal run
    let mut ip = 0usize;
    let first = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let next = |h: u32, p: usize| (h << 8) | u32::from(input[p + 2]);
    let mut hval = if n >= 2 { first(0) } else { 0 };
    while n >= 3 && ip < n - 2 {
        hval = next(hval, ip);
        let slot = idx(hval);
        let r = slot_pos(htab[slot]);
        htab[slot] = stamp | (ip as u64 + 1);
        let matched = r > 1 && {
            let rp = r - 1;
            let off = ip - rp - 1;
            off < MAX_OFF
                && input[rp + 2] == input[ip + 2]
                && input[rp..rp + 2] == input[ip..ip + 2]
        };
        if !matched {
            if out.len() >= out_max {
                return None;
            }
            lit += 1;
            out.push(input[ip]);
            ip += 1;
            if lit == MAX_LIT {
                let at = out.len() - lit - 1;
                out[at] = (lit - 1) as u8;
                lit = 0;
                out.push(0);
            }
            continue;
        }
        let rp = r - 1;
        let off = ip - rp - 1;
        let mut len = 2usize;
        let maxlen = (n - ip - len).min(MAX_REF);
        if out.len() + 3 + 1 >= out_max && out.len() - usize::from(lit == 0) + 3 + 1 >= out_max {
            return None;
        }
        let at = out.len() - lit - 1;
        out[at] = (lit.wrapping_sub(1)) as u8;
        if lit == 0 {
            out.pop();
        }
        len = match_len(input, rp, ip, len, maxlen);
        len -= 2;
        ip += 1;
        if len < 7 {
            out.push(((off >> 8) + (len << 5)) as u8);
        } else {
            out.push(((off >> 8) + (7 << 5)) as u8);
            out.push((len - 7) as u8);
        }
        out.push(off as u8);
        lit = 0;
        out.push(0);
        ip += len + 1;
        if ip >= n - 2 {
            break;
        }
        ip -= 2;
        hval = first(ip);
        hval = next(hval, ip);
        htab[idx(hval)] = stamp | (ip as u64 + 1);
        ip += 1;
        hval = next(hval, ip);
        htab[idx(hval)] = stamp | (ip as u64 + 1);
        ip += 1;
    }
    if out.len() + 3 > out_max {
        return None;
    }
    while ip < n {
        lit += 1;
        out.push(input[ip]);
        ip += 1;
        if lit == MAX_LIT {
            let at = out.len() - lit - 1;
            out[at] = (lit - 1) as u8;
            lit = 0;
            out.push(0);
        }
    }
    let at = out.len() - lit - 1;
    out[at] = (lit.wrapping_sub(1)) as u8;
    if lit == 0 {
        out.pop();
    }
    (out.len() <= out_max).then_some(out)
}

/// The length of the match at `ip` against `rp` (liblzf's loop: 16 unrolled compares
/// without the `maxlen` bound when more than 16 bytes may match, then a bounded scan).
fn match_len(input: &[u8], rp: usize, ip: usize, mut len: usize, maxlen: usize) -> usize {
    if maxlen > 16 {
        for _ in 0..16 {
            len += 1;
            if input[rp + len] != input[ip + len] {
                return len;
            }
        }
    }
    loop {
        len += 1;
        if !(len < maxlen && input[rp + len] == input[ip + len]) {
            return len;
        }
    }
}

/// Why LZF data could not be expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LzfError;

/// Expands `input` into exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lits = input.get(i..i + run).ok_or(LzfError)?;
            if out.len() + run > out_len {
                return Err(LzfError);
            }
            out.extend_from_slice(lits);
            i += run;
            continue;
        }
        let mut len = ctrl >> 5;
        if len == 7 {
            len += usize::from(*input.get(i).ok_or(LzfError)?);
            i += 1;
        }
        len += 2;
        let low = usize::from(*input.get(i).ok_or(LzfError)?);
        i += 1;
        let back = ((ctrl & 0x1f) << 8) + low + 1;
        if back > out.len() || out.len() + len > out_len {
            return Err(LzfError);
        }
        let start = out.len() - back;
        for k in 0..len {
            out.push(out[start + k]);
        }
    }
    if out.len() != out_len {
        return Err(LzfError);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_bytes_for_a_run() {
        // Redis 7.0.15: DUMP of 100 x 'a' holds `c3 09 40 64 01 61 61 e0 57 00 01 61 61`.
        let z = compress(&[b'a'; 100], 96).unwrap();
        assert_eq!(z, [0x01, b'a', b'a', 0xe0, 0x57, 0x00, 0x01, b'a', b'a']);
        assert_eq!(decompress(&z, 100).unwrap(), [b'a'; 100]);
    }

    #[test]
    fn round_trips_and_refuses_what_does_not_fit() {
        let text: Vec<u8> = (0..5000u32)
            .map(|i| b"abcdefgh"[(i * i % 7) as usize])
            .collect();
        let z = compress(&text, text.len() - 4).unwrap();
        assert!(z.len() < text.len() / 2);
        assert_eq!(decompress(&z, text.len()).unwrap(), text);
        let noise: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert_eq!(compress(&noise, noise.len() - 4), None);
    }

    #[test]
    fn a_reused_compressor_gives_the_fresh_output() {
        let mut z = Lzf::new();
        let a: Vec<u8> = b"abcabcabcXYZabcabc".repeat(20);
        let b: Vec<u8> = b"XYZabcQQQabcXYZ".repeat(20);
        z.compress(&a, a.len());
        assert_eq!(z.compress(&b, b.len()), compress(&b, b.len()));
    }

    #[test]
    fn corrupt_input_is_an_error() {
        assert_eq!(decompress(&[0x05, 1, 2], 6), Err(LzfError));
        assert_eq!(decompress(&[0x20, 0x00], 3), Err(LzfError));
        assert_eq!(decompress(&[0x00, 1], 2), Err(LzfError));
        assert_eq!(decompress(&[0x00, 1, 0xe0], 300), Err(LzfError));
    }
}

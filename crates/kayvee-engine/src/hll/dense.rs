//! The dense representation: 16384 registers of 6 bits packed after the header, register `i`
//! at bit `6 * i` counting from the least significant bit of the first byte (a register may
//! straddle two bytes: its low bits in the high bits of one byte, its high bits in the low bits
//! of the next).

use super::{REGISTERS, REGISTER_MAX};

/// Register `i` of the packed registers `regs` (a byte past the end reads as 0).
#[inline]
pub fn get(regs: &[u8], i: usize) -> u8 {
    let bit = i * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    let lo = u16::from(regs[byte]);
    let hi = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((lo | hi << 8) >> shift) as u8) & REGISTER_MAX
}

/// Sets register `i` of `regs` to `v` (at most 63).
#[inline]
pub fn put(regs: &mut [u8], i: usize, v: u8) {
    let bit = i * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    let mask = u16::from(REGISTER_MAX) << shift;
    let val = u16::from(v & REGISTER_MAX) << shift;
    regs[byte] = (u16::from(regs[byte]) & !mask | val) as u8;
    if shift > 2 {
        let (mask, val) = ((mask >> 8) as u8, (val >> 8) as u8);
        regs[byte + 1] = regs[byte + 1] & !mask | val;
    }
}

/// Raises register `i` to `count` if it is lower; whether it changed.
#[inline]
pub fn raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if get(regs, i) < count {
        put(regs, i, count);
        true
    } else {
        false
    }
}

/// Adds the registers' values to the histogram `histo` (indexed by value).
pub fn histogram(regs: &[u8], histo: &mut [u32; 64]) {
    for i in 0..REGISTERS {
        histo[usize::from(get(regs, i))] += 1;
    }
}

/// Raises each `max[i]` to register `i` of `regs`.
pub fn merge_into(regs: &[u8], max: &mut [u8]) {
    for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
        *m = (*m).max(get(regs, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn registers_round_trip_without_touching_neighbours() {
        let mut regs = vec![0u8; super::super::DENSE_REGS_LEN];
        let mut x = 12345u32;
        let mut model = vec![0u8; REGISTERS];
        for step in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = (x as usize) % REGISTERS;
            let v = (x >> 16) as u8 & 63;
            put(&mut regs, i, v);
            model[i] = v;
            if step % 997 == 0 {
                assert!((0..REGISTERS).all(|j| get(&regs, j) == model[j]));
            }
        }
    }
}

//! The sparse representation: after the header, a run-length code of the 16384 registers in
//! three opcodes (Redis's published format, described in the comments of its `hyperloglog.c`):
//! - `ZERO`  `00xxxxxx`: `xxxxxx + 1` registers (1 to 64) at 0;
//! - `XZERO` `01xxxxxx yyyyyyyy`: the 14-bit `xxxxxxyyyyyyyy + 1` registers (1 to 16384) at 0;
//! - `VAL`   `1vvvvvxx`: `xx + 1` registers (1 to 4) at `vvvvv + 1` (1 to 32).
//!
//! A valid code covers exactly 16384 registers. Updates are made in place the way Redis makes
//! them (split the opcode covering the register, then merge equal neighbouring `VAL`s a few
//! opcodes around it), so the bytes are the ones redis-server produces for the same inputs.

use super::{dense, Corrupt, HDR_LEN, REGISTERS};
use alloc::string::String;
use alloc::vec::Vec;

/// Largest run of a `ZERO` opcode.
const ZERO_LEN_MAX: usize = 64;
/// Largest run of an `XZERO` opcode.
const XZERO_LEN_MAX: usize = 16384;
/// Largest value a `VAL` opcode holds: a higher register makes the HLL dense.
pub const VAL_MAX: u8 = 32;
/// Largest run of a `VAL` opcode.
const VAL_LEN_MAX: usize = 4;
/// Opcodes scanned for merges after an update, from the opcode before the updated one.
const MERGE_SCAN: usize = 5;

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `ZERO` of this run.
    Zero(usize),
    /// `XZERO` of this run.
    XZero(usize),
    /// `VAL` of this value and run.
    Val(u8, usize),
}

impl Op {
    /// Registers covered.
    pub fn run(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    /// Bytes taken.
    pub fn size(self) -> usize {
        if matches!(self, Op::XZero(_)) {
            2
        } else {
            1
        }
    }
}

/// The opcode at byte `p` of `s` (a second `XZERO` byte past the end reads as 0, as the
/// string's terminating NUL does in Redis).
pub fn op_at(s: &[u8], p: usize) -> Op {
    let b = s[p];
    if b & 0x80 != 0 {
        Op::Val(((b >> 2) & 0x1f) + 1, usize::from(b & 0x03) + 1)
    } else if b & 0x40 != 0 {
        let lo = s.get(p + 1).copied().unwrap_or(0);
        Op::XZero((usize::from(b & 0x3f) << 8 | usize::from(lo)) + 1)
    } else {
        Op::Zero(usize::from(b & 0x3f) + 1)
    }
}

/// The byte of a `VAL` opcode.
fn val_byte(v: u8, run: usize) -> u8 {
    0x80 | (v - 1) << 2 | (run - 1) as u8
}

/// Appends the shortest zero run opcode for `run` registers.
fn push_zeros(seq: &mut Vec<u8>, run: usize) {
    if run > ZERO_LEN_MAX {
        let n = run - 1;
        seq.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else {
        seq.push((run - 1) as u8);
    }
}

/// An empty HLL's code: 16384 zero registers as `XZERO` opcodes.
pub fn empty_code(out: &mut Vec<u8>) {
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_LEN_MAX);
        let n = run - 1;
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
        left -= run;
    }
}

/// What [`raise`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Raised {
    /// The register already held as much.
    Unchanged,
    /// The code was updated.
    Updated,
    /// The value or the grown code does not fit the sparse form: make the HLL dense first.
    Promote,
}

/// Raises register `index` of the sparse HLL `hll` to `count` if it is lower, in place;
/// promotes when `count` exceeds [`VAL_MAX`] or the code would grow past `max_bytes`.
pub fn raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> Result<Raised, Corrupt> {
    if count > VAL_MAX {
        return Ok(Raised::Promote);
    }
    // Find the opcode covering the register, and the one before it.
    let end = hll.len();
    let (mut p, mut first, mut prev) = (HDR_LEN, 0usize, None);
    let mut op = None;
    while p < end {
        let o = op_at(hll, p);
        if index < first + o.run() {
            op = Some(o);
            break;
        }
        prev = Some(p);
        p += o.size();
        first += o.run();
    }
    let op = op.ok_or(Corrupt)?;
    // The trivial cases: a VAL already high enough, a single register rewritten in place.
    match op {
        Op::Val(v, _) if v >= count => return Ok(Raised::Unchanged),
        Op::Val(_, 1) | Op::Zero(1) => {
            hll[p] = val_byte(count, 1);
            merge_values(hll, prev.unwrap_or(HDR_LEN));
            return Ok(Raised::Updated);
        }
        _ => {}
    }
    // The general case: split the opcode into (before, the register, after).
    let last = first + op.run() - 1;
    let mut seq = Vec::with_capacity(5);
    match op {
        Op::Val(v, _) => {
            if index != first {
                seq.push(val_byte(v, index - first));
            }
            seq.push(val_byte(count, 1));
            if index != last {
                seq.push(val_byte(v, last - index));
            }
        }
        Op::Zero(_) | Op::XZero(_) => {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_byte(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
    }
    let old = op.size();
    if seq.len() > old && (end + seq.len() - old) as u64 > max_bytes {
        return Ok(Raised::Promote);
    }
    // Redis sizes the string by the length difference, even when a final XZERO's second byte
    // was missing (a corrupt code): the same truncation keeps the same bytes.
    let new_len = end + seq.len() - old;
    let tail_from = (p + old).min(end);
    hll.splice(p..tail_from, seq);
    hll.truncate(new_len);
    merge_values(hll, prev.unwrap_or(HDR_LEN));
    Ok(Raised::Updated)
}

/// Merges neighbouring `VAL` opcodes of equal value whose runs fit one opcode, scanning
/// [`MERGE_SCAN`] opcodes from byte `p` (a merge rescans at the same place).
fn merge_values(hll: &mut Vec<u8>, mut p: usize) {
    let mut scan = MERGE_SCAN;
    while p < hll.len() && scan > 0 {
        scan -= 1;
        match op_at(hll, p) {
            Op::XZero(_) => {
                p += 2;
                continue;
            }
            Op::Zero(_) => {
                p += 1;
                continue;
            }
            Op::Val(v1, n1) => {
                if p + 1 < hll.len() {
                    if let Op::Val(v2, n2) = op_at(hll, p + 1) {
                        if v1 == v2 && n1 + n2 <= VAL_LEN_MAX {
                            hll[p + 1] = val_byte(v1, n1 + n2);
                            hll.remove(p);
                            continue;
                        }
                    }
                }
                p += 1;
            }
        }
    }
}

/// Walks the code of `hll`, calling `f(first_register, op)` for every opcode while the runs
/// stay within the 16384 registers; `Corrupt` unless they cover exactly all of them.
fn walk(hll: &[u8], mut f: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let mut p = HDR_LEN;
    let mut idx = 0usize;
    while p < hll.len() {
        let op = op_at(hll, p);
        if idx + op.run() > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, op);
        idx += op.run();
        p += op.size();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The dense form of the sparse HLL `hll`: the same header (cached cardinality included)
/// marked dense, then the packed registers.
pub fn to_dense(hll: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut out = alloc::vec![0u8; super::DENSE_LEN];
    out[..HDR_LEN].copy_from_slice(&hll[..HDR_LEN]);
    out[4] = super::ENCODING_DENSE;
    let regs = &mut out[HDR_LEN..];
    walk(hll, |first, op| {
        if let Op::Val(v, n) = op {
            (first..first + n).for_each(|i| dense::put(regs, i, v));
        }
    })?;
    Ok(out)
}

/// Adds the registers' values to the histogram `histo`.
pub fn histogram(hll: &[u8], histo: &mut [u32; 64]) -> Result<(), Corrupt> {
    walk(hll, |_, op| match op {
        Op::Val(v, n) => histo[usize::from(v)] += n as u32,
        Op::Zero(n) | Op::XZero(n) => histo[0] += n as u32,
    })
}

/// Raises each `max[i]` to register `i` of `hll`.
pub fn merge_into(hll: &[u8], max: &mut [u8]) -> Result<(), Corrupt> {
    walk(hll, |first, op| {
        if let Op::Val(v, n) = op {
            max[first..first + n]
                .iter_mut()
                .for_each(|m| *m = (*m).max(v));
        }
    })
}

/// The code as PFDEBUG DECODE shows it: `z:run`, `Z:run`, `v:value,run`, space separated
/// (whatever the code holds, corrupt or not).
pub fn decode(hll: &[u8]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    let mut p = HDR_LEN;
    while p < hll.len() {
        let op = op_at(hll, p);
        let _ = match op {
            Op::Zero(n) => write!(s, "z:{n} "),
            Op::XZero(n) => write!(s, "Z:{n} "),
            Op::Val(v, n) => write!(s, "v:{v},{n} "),
        };
        p += op.size();
    }
    s.truncate(s.trim_end_matches(' ').len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Vec<u8> {
        super::super::empty()
    }

    #[test]
    fn empty_code_is_one_xzero() {
        let h = fresh();
        assert_eq!(&h[HDR_LEN..], &[0x7f, 0xff]);
        assert_eq!(decode(&h), "Z:16384");
    }

    #[test]
    fn splits_and_merges_as_redis() {
        let mut h = fresh();
        assert_eq!(raise(&mut h, 7292, 1, 3000), Ok(Raised::Updated));
        assert_eq!(decode(&h), "Z:7292 v:1,1 Z:9091");
        assert_eq!(raise(&mut h, 7293, 1, 3000), Ok(Raised::Updated));
        assert_eq!(decode(&h), "Z:7292 v:1,2 Z:9090");
        assert_eq!(raise(&mut h, 7293, 1, 3000), Ok(Raised::Unchanged));
        assert_eq!(raise(&mut h, 0, 3, 3000), Ok(Raised::Updated));
        assert_eq!(decode(&h), "v:3,1 Z:7291 v:1,2 Z:9090");
        assert_eq!(raise(&mut h, 5, 40, 3000), Ok(Raised::Promote));
        assert_eq!(raise(&mut h, 100, 2, 20), Ok(Raised::Promote));
    }

    #[test]
    fn corrupt_codes_are_detected() {
        let mut h = fresh();
        h.push(0x00);
        let mut histo = [0u32; 64];
        assert_eq!(histogram(&h, &mut histo), Err(Corrupt));
        assert_eq!(to_dense(&h), Err(Corrupt));
        let mut h = fresh();
        h.truncate(HDR_LEN);
        assert_eq!(raise(&mut h, 3, 1, 3000), Err(Corrupt));
    }
}

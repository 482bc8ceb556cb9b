//! The cardinality estimate from a register histogram: Otmar Ertl's improved raw estimator
//! ("New cardinality estimation algorithms for HyperLogLog sketches", arXiv:1702.01284,
//! section 4, Algorithm 6), which Redis 7.0 uses. No bias tables and no switch between linear
//! counting and the raw estimate: the σ and τ series correct for registers at 0 and at their
//! maximum `q + 1`.

use super::{Q, REGISTERS};

/// `α∞ = 1 / (2 ln 2)`, the constant of the estimator as the register count grows.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Ertl's σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k-1), summed until it stops changing (∞ at 1).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's τ(x) = (1/3)(1 - x - Σ_{k≥1} (1 - x^(2^-k))² 2^-k), summed until it stops changing.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = libm::sqrt(x);
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// The estimate for a histogram of register values (`histo[v]` registers hold `v`),
/// rounded half away from zero as C's `llroundl`.
pub fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    let e = ALPHA_INF * m * m / z;
    // `llroundl` of a finite positive double, or of +inf when every register is 0.
    libm::round(e) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_full_histograms() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32 - 3;
        h[1] = 2;
        h[2] = 1;
        assert_eq!(estimate(&h), 3);
    }
}

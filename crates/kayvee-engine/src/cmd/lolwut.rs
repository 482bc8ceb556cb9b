//! LOLWUT [VERSION v] [args...]: a piece of computer art and the version line, as Redis 7.0
//! answers it (a verbatim string; the art is Kayvee's own). VERSION 5 draws squares that come
//! loose row after row (after Georg Nees's "Schotter"), VERSION 6 a landscape of shades; any
//! other version, and the default, only the version line. The arguments after the version are
//! integers (the canvas size), clamped as Redis clamps them.

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::Cx;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "lolwut",
    arity: -1,
    flags: flags::READONLY | flags::FAST,
    acl: acl::READ | acl::FAST,
    summary: "Display some computer art and the Redis version",
    since: "5.0.0",
    group: "server",
    handler: lolwut,
    ..CommandSpec::DEFAULT
}];

/// The line every LOLWUT ends with.
const VERSION_LINE: &str = "Redis ver. 7.0.15\n";

/// A small deterministic generator (the art is the same on every call).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    /// A value in `-1.0..1.0`.
    fn signed(&mut self) -> f64 {
        (self.next() % 2001) as f64 / 1000.0 - 1.0
    }
}

/// The integer argument `i` (or `default` when absent), clamped to `lo..=hi`.
fn arg(args: &Argv<'_>, i: usize, default: i64, lo: i64, hi: i64) -> Result<usize, Error> {
    let v = if i < args.len() {
        parse_i64(args.get(i)).ok_or(Error::NotInteger)?
    } else {
        default
    };
    Ok(v.clamp(lo, hi) as usize)
}

/// VERSION 5: a grid of square outlines, each row more displaced and turned than the one
/// above, on a character canvas.
fn schotter(cols: usize, per_row: usize, per_col: usize) -> String {
    let side = (cols / per_row).max(2);
    let (w, h) = (cols.max(side), side * per_col / 2 + 2);
    let mut canvas = vec![vec![b' '; w]; h];
    let mut rng = Lcg(0x5eed);
    for r in 0..per_col {
        let disorder = r as f64 / per_col as f64;
        for c in 0..per_row {
            let cx = (c * side + side / 2) as f64 + rng.signed() * disorder * side as f64 / 2.0;
            let cy =
                ((r * side + side / 2) / 2) as f64 + rng.signed() * disorder * side as f64 / 4.0;
            let angle = rng.signed() * disorder * core::f64::consts::FRAC_PI_4;
            let (sin, cos) = (libm_sin(angle), libm_cos(angle));
            let half = (side as f64 - 1.0) / 2.0;
            let steps = side * 4;
            for s in 0..steps {
                // A point on the square's outline, then turned and moved.
                let t = s as f64 / steps as f64 * 4.0;
                let (edge, along) = (t as usize, t - (t as usize) as f64);
                let (px, py) = match edge {
                    0 => (-half + along * 2.0 * half, -half),
                    1 => (half, -half + along * 2.0 * half),
                    2 => (half - along * 2.0 * half, half),
                    _ => (-half, half - along * 2.0 * half),
                };
                let x = cx + px * cos - py * sin;
                let y = cy + (px * sin + py * cos) / 2.0;
                if x >= 0.0 && y >= 0.0 && (x as usize) < w && (y as usize) < h {
                    canvas[y as usize][x as usize] = b'#';
                }
            }
        }
    }
    let mut out = String::new();
    for line in canvas {
        out.push_str(core::str::from_utf8(&line).unwrap_or_default().trim_end());
        out.push('\n');
    }
    out.push_str("\nAfter Georg Nees - schotter, plotter on paper, 1968. ");
    out
}

/// VERSION 6: rolling hills of shades under a sky.
fn landscape(cols: usize, rows: usize) -> String {
    const SHADES: &[u8] = b" .:-=+*#%@";
    let mut rng = Lcg(0x1a2d);
    let phase = rng.signed();
    let mut out = String::new();
    for y in 0..rows {
        let mut line: Vec<u8> = Vec::with_capacity(cols);
        for x in 0..cols {
            let fx = x as f64 / cols.max(1) as f64;
            let ridge = 0.5 + 0.2 * libm_sin(fx * 6.0 + phase) + 0.1 * libm_cos(fx * 17.0);
            let fy = y as f64 / rows.max(1) as f64;
            let depth = ((fy - ridge) * 2.0 * (SHADES.len() - 1) as f64).clamp(0.0, 9.0);
            line.push(SHADES[depth as usize]);
        }
        out.push_str(core::str::from_utf8(&line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("Hills at dusk, a terminal landscape. ");
    out
}

/// sin(x) by its Taylor series after reducing x to -pi..pi (no_std has no libm).
fn libm_sin(x: f64) -> f64 {
    use core::f64::consts::PI;
    let mut x = x % (2.0 * PI);
    if x > PI {
        x -= 2.0 * PI;
    } else if x < -PI {
        x += 2.0 * PI;
    }
    let (mut term, mut sum) = (x, x);
    for n in 1..12 {
        term *= -x * x / ((2 * n) as f64 * (2 * n + 1) as f64);
        sum += term;
    }
    sum
}

/// cos(x) = sin(x + pi/2).
fn libm_cos(x: f64) -> f64 {
    libm_sin(x + core::f64::consts::FRAC_PI_2)
}

fn lolwut(_cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut version = 7;
    let mut first = 1;
    if args.len() >= 3 && args.get(1).eq_ignore_ascii_case(b"version") {
        version = parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
        first = 3;
    }
    let mut text = match version {
        5 => schotter(
            arg(args, first, 66, 1, 1000)?,
            arg(args, first + 1, 8, 1, 200)?,
            arg(args, first + 2, 12, 1, 200)?,
        ),
        6 => landscape(
            arg(args, first, 80, 1, 1000)?,
            arg(args, first + 1, 20, 1, 1000)?,
        ),
        _ => String::new(),
    };
    text.push_str(VERSION_LINE);
    out.verbatim("txt", text.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn art_ends_with_the_version_line() {
        assert!(schotter(66, 8, 12).ends_with("1968. "));
        assert!(schotter(1, 200, 200).contains('\n'));
        assert_eq!(landscape(10, 3).lines().count(), 4);
        assert!((libm_sin(1.0) - 0.841_470_984_807_896_5).abs() < 1e-12);
        assert!((libm_cos(0.0) - 1.0).abs() < 1e-12);
    }
}

//! GEOADD (Redis 7.0.15 semantics): parses its NX/XX/CH options and the
//! (longitude, latitude, member) triples, then runs ZADD with each point's 52-bit geohash as
//! the score, which replies, notifies (`zadd`) and wakes blocked clients as ZADD does. The
//! write propagates as that ZADD, with Redis's lower-case `zadd`.

use super::parse_lon_lat;
use crate::argv::{Argv, ArgvBuf};
use crate::cmd::zset::zadd;
use crate::error::{CmdResult, Error};
use crate::geohash;
use crate::reply::ReplySink;
use crate::Cx;
use alloc::vec::Vec;

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
pub(super) fn geoadd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (mut first, mut nx, mut xx) = (2, false, false);
    while first < args.len() {
        let a = args.get(first);
        if a.eq_ignore_ascii_case(b"nx") {
            nx = true;
        } else if a.eq_ignore_ascii_case(b"xx") {
            xx = true;
        } else if !a.eq_ignore_ascii_case(b"ch") {
            break;
        }
        first += 1;
    }
    if !(args.len() - first).is_multiple_of(3) || (nx && xx) {
        return Err(Error::Syntax);
    }
    let mut zadd_args = ArgvBuf::new();
    zadd_args.push(b"zadd");
    args.iter()
        .take(first)
        .skip(1)
        .for_each(|a| zadd_args.push(a));
    for i in (first..args.len()).step_by(3) {
        let (lon, lat) = parse_lon_lat(args.get(i), args.get(i + 1))?;
        let bits = geohash::point_to_score(lon, lat).ok_or(Error::NotFloat)?;
        zadd_args.push(alloc::format!("{bits}").as_bytes());
        zadd_args.push(args.get(i + 2));
    }
    let zadd_argv = zadd_args.argv();
    zadd(cx, &zadd_argv, out)?;
    // ZADD asked to propagate as sent: the ZADD it ran, not this GEOADD.
    if core::mem::take(&mut cx.core.aof.verbatim) {
        let parts: Vec<&[u8]> = zadd_argv.iter().collect();
        cx.propagate(&parts);
    }
    Ok(())
}

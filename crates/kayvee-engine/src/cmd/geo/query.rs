//! GEOPOS, GEODIST and GEOHASH (Redis 7.0.15 semantics): read lookups of the sorted set; a
//! missing key or member answers nulls. Coordinates are the centers of the members' 52-bit
//! boxes, so they differ from what GEOADD was given in the last digits, as in Redis.

use super::{parse_unit, reply_coordinate, reply_distance};
use crate::argv::Argv;
use crate::cmd::zset::read_zset;
use crate::error::{CmdResult, Error};
use crate::geohash;
use crate::reply::ReplySink;
use crate::Cx;

/// GEOPOS key [member ...]: `[longitude, latitude]` per member, a null array when missing.
pub(super) fn geopos(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let zs = read_zset(cx, args.get(1))?.map(|(z, _)| z);
    out.array(args.len() - 2);
    for member in args.iter().skip(2) {
        match zs.as_ref().and_then(|z| z.score(member)) {
            Some(score) => {
                let (lon, lat) = geohash::score_to_point(score);
                out.array(2);
                reply_coordinate(out, lon);
                reply_coordinate(out, lat);
            }
            None => out.null_array(),
        }
    }
    Ok(())
}

/// GEODIST key member1 member2 [M|KM|FT|MI]: the distance, null when a member is missing.
pub(super) fn geodist(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => parse_unit(args.get(4))?,
        _ => return Err(Error::Syntax),
    };
    let Some((zs, _)) = read_zset(cx, args.get(1))? else {
        out.null();
        return Ok(());
    };
    match (zs.score(args.get(2)), zs.score(args.get(3))) {
        (Some(a), Some(b)) => {
            let (lon1, lat1) = geohash::score_to_point(a);
            let (lon2, lat2) = geohash::score_to_point(b);
            let d = geohash::distance(&cx.core.host.trig, lon1, lat1, lon2, lat2);
            reply_distance(out, d / to_meters);
        }
        _ => out.null(),
    }
    Ok(())
}

/// GEOHASH key [member ...]: each member's 11-character standard geohash, null when missing.
pub(super) fn geohash(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let zs = read_zset(cx, args.get(1))?.map(|(z, _)| z);
    out.array(args.len() - 2);
    for member in args.iter().skip(2) {
        match zs.as_ref().and_then(|z| z.score(member)) {
            Some(score) => out.bulk(&geohash::standard_geohash(score)),
            None => out.null(),
        }
    }
    Ok(())
}

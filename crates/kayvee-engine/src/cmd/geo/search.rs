//! The geo searches (Redis 7.0.15's `georadiusGeneric`): GEORADIUS and GEORADIUSBYMEMBER (a
//! circle around a point or a member, optionally STORE/STOREDIST), their `_RO` forms without
//! the store options, GEOSEARCH (FROMMEMBER/FROMLONLAT, BYRADIUS/BYBOX) and GEOSEARCHSTORE.
//!
//! A search reads the sorted set's score ranges of the center's geohash box and its
//! neighbours ([`geohash::areas_for`]) in Redis's order, keeps the points inside the shape, and
//! sorts them by distance when asked (stably, as glibc's `qsort` does; COUNT without ANY sorts
//! ascending). Options are checked in Redis's order, so the same bad command gets the same
//! error; a missing source key answers an empty array (or 0, deleting the destination).

use super::{parse_lon_lat, parse_unit, reply_coordinate, reply_distance};
use crate::argv::Argv;
use crate::cmd::double::parse_score;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::zset::{read_zset, store_zset};
use crate::error::{CmdResult, Error};
use crate::geohash::{self, Search, Shape};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Split, ZSet};
use crate::Cx;
use alloc::vec::Vec;

/// Which command runs the search.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS: center and radius at fixed positions.
    Radius,
    /// GEORADIUSBYMEMBER: a member and a radius at fixed positions.
    ByMember,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE: GEOSEARCH storing into argument 1.
    SearchStore,
}

/// The result order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// GEORADIUS key longitude latitude radius unit [options]
pub(super) fn georadius(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    run(cx, args, Kind::Radius, true, out)
}

/// GEORADIUS_RO: GEORADIUS without STORE/STOREDIST.
pub(super) fn georadius_ro(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    run(cx, args, Kind::Radius, false, out)
}

/// GEORADIUSBYMEMBER key member radius unit [options]
pub(super) fn georadiusbymember(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    run(cx, args, Kind::ByMember, true, out)
}

/// GEORADIUSBYMEMBER_RO: GEORADIUSBYMEMBER without STORE/STOREDIST.
pub(super) fn georadiusbymember_ro(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    run(cx, args, Kind::ByMember, false, out)
}

/// GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit [options]
pub(super) fn geosearch(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    run(cx, args, Kind::Search, false, out)
}

/// GEOSEARCHSTORE dest src ... [STOREDIST]
pub(super) fn geosearchstore(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
) -> CmdResult {
    run(cx, args, Kind::SearchStore, false, out)
}

/// Everything a search's arguments say.
struct Query<'a> {
    center: Option<(f64, f64)>,
    shape: Option<Shape>,
    to_meters: f64,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    sort: Sort,
    /// 0: no limit.
    count: usize,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

/// A radius and its unit (`extractDistanceOrReply`).
fn parse_radius(radius: &[u8], unit: &[u8]) -> Result<(Shape, f64), Error> {
    let r = parse_score(radius).ok_or_else(|| Error::msg("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(Error::msg("ERR radius cannot be negative"));
    }
    Ok((Shape::Radius(r), parse_unit(unit)?))
}

/// A box's width, height and unit (`extractBoxOrReply`).
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(Shape, f64), Error> {
    let w = parse_score(width).ok_or_else(|| Error::msg("ERR need numeric width"))?;
    let h = parse_score(height).ok_or_else(|| Error::msg("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Error::msg("ERR height or width cannot be negative"));
    }
    Ok((Shape::Box(w, h), parse_unit(unit)?))
}

/// The point of a member of the source, or Redis's error for a missing one.
fn member_point(zs: &ZSet, member: &[u8]) -> Result<(f64, f64), Error> {
    let score = zs
        .score(member)
        .ok_or_else(|| Error::msg("ERR could not decode requested zset member"))?;
    Ok(geohash::score_to_point(score))
}

/// Parses the fixed arguments of GEORADIUS/GEORADIUSBYMEMBER; returns the first option's index.
fn parse_fixed<'a>(
    args: &Argv<'a>,
    kind: Kind,
    zs: Option<&ZSet>,
    q: &mut Query<'a>,
) -> Result<usize, Error> {
    let shape = |q: &mut Query<'a>, at: usize| -> Result<(), Error> {
        let (s, m) = parse_radius(args.get(at), args.get(at + 1))?;
        (q.shape, q.to_meters) = (Some(s), m);
        Ok(())
    };
    match kind {
        Kind::Radius => {
            q.center = Some(parse_lon_lat(args.get(2), args.get(3))?);
            shape(q, 4)?;
            Ok(6)
        }
        Kind::ByMember => {
            // Without a source key the member and radius go unchecked, as in Redis.
            if let Some(zs) = zs {
                q.center = Some(member_point(zs, args.get(2))?);
                shape(q, 3)?;
            }
            Ok(5)
        }
        Kind::Search => Ok(2),
        Kind::SearchStore => {
            q.store = Some(args.get(1));
            Ok(3)
        }
    }
}

/// Parses the options from `base` in Redis's order of checks.
fn parse_options<'a>(
    args: &Argv<'a>,
    kind: Kind,
    can_store: bool,
    zs: Option<&ZSet>,
    base: usize,
    q: &mut Query<'a>,
) -> Result<(), Error> {
    let search = matches!(kind, Kind::Search | Kind::SearchStore);
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut i = base;
    while i < args.len() {
        let left = args.len() - i - 1;
        let a = args.get(i);
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        if is(b"withdist") {
            q.with_dist = true;
        } else if is(b"withhash") {
            q.with_hash = true;
        } else if is(b"withcoord") {
            q.with_coord = true;
        } else if is(b"any") {
            q.any = true;
        } else if is(b"asc") {
            q.sort = Sort::Asc;
        } else if is(b"desc") {
            q.sort = Sort::Desc;
        } else if is(b"count") && left >= 1 {
            let n = parse_i64(args.get(i + 1)).ok_or(Error::NotInteger)?;
            if n <= 0 {
                return Err(Error::msg("ERR COUNT must be > 0"));
            }
            q.count = n as usize;
            i += 1;
        } else if (is(b"store") || is(b"storedist")) && left >= 1 && can_store && !search {
            q.store = Some(args.get(i + 1));
            q.store_dist = is(b"storedist");
            i += 1;
        } else if is(b"storedist") && kind == Kind::SearchStore {
            q.store_dist = true;
        } else if is(b"frommember") && left >= 1 && search && !from_lonlat {
            if let Some(zs) = zs {
                q.center = Some(member_point(zs, args.get(i + 1))?);
            }
            from_member = true;
            i += 1;
        } else if is(b"fromlonlat") && left >= 2 && search && !from_member {
            q.center = Some(parse_lon_lat(args.get(i + 1), args.get(i + 2))?);
            from_lonlat = true;
            i += 2;
        } else if is(b"byradius") && left >= 2 && search && !by_box {
            let (s, m) = parse_radius(args.get(i + 1), args.get(i + 2))?;
            (q.shape, q.to_meters, by_radius) = (Some(s), m, true);
            i += 2;
        } else if is(b"bybox") && left >= 3 && search && !by_radius {
            let (s, m) = parse_box(args.get(i + 1), args.get(i + 2), args.get(i + 3))?;
            (q.shape, q.to_meters, by_box) = (Some(s), m, true);
            i += 3;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    check_options(
        args,
        kind,
        q,
        from_member || from_lonlat,
        by_radius || by_box,
    )
}

/// The checks after the options, in Redis's order.
fn check_options(args: &Argv<'_>, kind: Kind, q: &Query<'_>, from: bool, by: bool) -> CmdResult {
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let who = if kind == Kind::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Error::msg(alloc::format!(
            "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let search = matches!(kind, Kind::Search | Kind::SearchStore);
    let name = crate::util::c_str_prefix(args.get(0), usize::MAX);
    let named = |text: &[u8]| {
        let mut msg = text.to_vec();
        msg.extend_from_slice(name);
        Error::Bytes(msg)
    };
    if search && !from {
        return Err(named(
            b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ",
        ));
    }
    if search && !by {
        return Err(named(
            b"ERR exactly one of BYRADIUS and BYBOX can be specified for ",
        ));
    }
    if q.any && q.count == 0 {
        return Err(Error::msg("ERR the ANY argument requires COUNT argument"));
    }
    Ok(())
}

/// One point found.
struct Found<'z> {
    member: Split<'z>,
    score: f64,
    lon: f64,
    lat: f64,
    /// Meters from the center.
    dist: f64,
}

/// Parses, searches, then replies or stores.
fn run(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    kind: Kind,
    can_store: bool,
    out: &mut dyn ReplySink,
) -> CmdResult {
    let source = args.get(if kind == Kind::SearchStore { 2 } else { 1 });
    let zs = read_zset(cx, source)?.map(|(z, _)| z);
    let mut q = Query {
        center: None,
        shape: None,
        to_meters: 1.0,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        sort: Sort::None,
        count: 0,
        store: None,
        store_dist: false,
    };
    let base = parse_fixed(args, kind, zs.as_ref(), &mut q)?;
    parse_options(args, kind, can_store, zs.as_ref(), base, &mut q)?;
    let (Some(zs), Some((lon, lat)), Some(shape)) = (zs, q.center, q.shape) else {
        // No source key.
        return match q.store {
            Some(dest) => {
                store_zset(cx, dest, ZSet::new_flat());
                out.int(0);
                Ok(())
            }
            None => {
                out.array(0);
                Ok(())
            }
        };
    };
    if q.count != 0 && q.sort == Sort::None && !q.any {
        q.sort = Sort::Asc;
    }
    let s = Search {
        lon,
        lat,
        shape,
        to_meters: q.to_meters,
        trig: cx.core.host.trig,
    };
    let mut found = collect(&zs, &s, if q.any { q.count } else { 0 });
    match q.sort {
        Sort::Asc => found.sort_by(|a, b| {
            a.dist
                .partial_cmp(&b.dist)
                .unwrap_or(core::cmp::Ordering::Equal)
        }),
        Sort::Desc => found.sort_by(|a, b| {
            b.dist
                .partial_cmp(&a.dist)
                .unwrap_or(core::cmp::Ordering::Equal)
        }),
        Sort::None => {}
    }
    if q.count != 0 {
        found.truncate(q.count);
    }
    match q.store {
        None => reply(out, &q, &found),
        Some(dest) => store(cx, dest, kind, &q, &found, out),
    }
    Ok(())
}

/// The points inside the shape, box by box in Redis's order; with `limit` (ANY), stops once
/// that many are found.
fn collect<'z>(zs: &'z ZSet, s: &Search, limit: usize) -> Vec<Found<'z>> {
    let boxes = geohash::areas_for(s);
    let mut found = Vec::new();
    let mut last = 0;
    for (i, &b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        // Neighbours of a huge search may be the same box: not read twice in a row.
        if last != 0 && b == boxes[last] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        in_box(zs, b, s, limit, &mut found);
        last = i;
    }
    found
}

/// Appends the points of one geohash box (its score range) that lie inside the shape.
fn in_box<'z>(
    zs: &'z ZSet,
    b: geohash::Hash,
    s: &Search,
    limit: usize,
    found: &mut Vec<Found<'z>>,
) {
    let (min, max) = b.score_range();
    let (min, max) = (min as f64, max as f64);
    let start = zs.partition_point(|e| e.0 < min);
    for e in zs.range_by_rank(start, usize::MAX) {
        if e.0 >= max {
            break;
        }
        let (lon, lat) = geohash::score_to_point(e.0);
        if let Some(dist) = geohash::within(s, lon, lat) {
            found.push(Found {
                member: e.1,
                score: e.0,
                lon,
                lat,
                dist,
            });
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
    }
}

/// The members, each with the distance, hash and coordinates asked for.
fn reply(out: &mut dyn ReplySink, q: &Query<'_>, found: &[Found<'_>]) {
    let extra = usize::from(q.with_dist) + usize::from(q.with_hash) + usize::from(q.with_coord);
    out.array(found.len());
    for f in found {
        if extra > 0 {
            out.array(extra + 1);
        }
        out.bulk_parts(f.member.head, f.member.tail);
        if q.with_dist {
            reply_distance(out, f.dist / q.to_meters);
        }
        if q.with_hash {
            out.int(f.score as i64);
        }
        if q.with_coord {
            out.array(2);
            reply_coordinate(out, f.lon);
            reply_coordinate(out, f.lat);
        }
    }
}

/// Stores the members (scored by geohash, or by distance for STOREDIST) under `dest`, or
/// deletes it when none was found; replies the count.
fn store(
    cx: &mut Cx<'_>,
    dest: &[u8],
    kind: Kind,
    q: &Query<'_>,
    found: &[Found<'_>],
    out: &mut dyn ReplySink,
) {
    let mut zs = ZSet::new_flat();
    for f in found {
        let score = if q.store_dist {
            f.dist / q.to_meters
        } else {
            f.score
        };
        zs.insert(&f.member.to_small_bytes(), score);
    }
    if store_zset(cx, dest, zs) > 0 {
        cx.propagate_verbatim();
        let event = if kind == Kind::SearchStore || kind == Kind::Search {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        emit(cx, nc::ZSET, event, dest);
    }
    out.int(found.len() as i64);
}

//! Geo commands (Redis "geo" group) on sorted sets whose scores are 52-bit geohashes
//! ([`crate::geohash`]): the command table and the helpers its files share (coordinate and
//! unit arguments, Redis's number formats). GEOADD is in `add`, GEOPOS, GEODIST and GEOHASH in
//! `query`, the searches (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their
//! `_RO` forms) in `search`.
//!
//! Semantics, replies and error texts follow Redis 7.0.15 (checked against the real server;
//! the transcripts in `tests/transcripts/geo*.txt` were recorded from it). GEOADD is ZADD of
//! the computed scores and propagates as that ZADD; a search that stores propagates as sent.

mod add;
mod query;
mod search;

use crate::cmd::double::parse_score;
use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::error::Error;
use crate::geohash;
use crate::keyspec::{kf, BeginSearch, FindKeys, KeySpec};
use crate::reply::ReplySink;
use alloc::format;
use alloc::string::String;

/// A geo command spec with its key at argument 1 (a table row).
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::first_key(
        "geo", name, arity, flags, acl, summary, since, complexity, handler,
    )
}

const R: u32 = flags::READONLY;
const W: u32 = flags::WRITE | flags::DENYOOM;
const A_R: u32 = acl::READ | acl::GEO | acl::SLOW;
const A_W: u32 = acl::WRITE | acl::GEO | acl::SLOW;
const C_RADIUS: &str = "O(N+log(M)) where N is the number of elements inside the bounding box \
of the circular area delimited by center and radius and M is the number of items inside the index.";
const C_SEARCH: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned \
bounding box area around the shape provided as the filter and M is the number of items inside the shape";

/// The destination of GEORADIUS/GEORADIUSBYMEMBER: the argument after `keyword`, searched
/// from argument `from`.
const fn store_key(keyword: &'static str, from: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags: kf::OW_UPDATE,
        begin_search: BeginSearch::Keyword {
            keyword,
            startfrom: from,
        },
        find_keys: FindKeys::Range {
            lastkey: 0,
            keystep: 1,
            limit: 0,
        },
    }
}

/// The key specs of GEORADIUS and GEORADIUSBYMEMBER: the source, then the STORE or STOREDIST
/// destination after its keyword from argument `from`.
const fn radius_keys(from: i32) -> [KeySpec; 3] {
    [
        KeySpec::range(kf::RO_ACCESS, 1, 0, 1),
        store_key("STORE", from),
        store_key("STOREDIST", from),
    ]
}
const GEORADIUS_KEYS: &[KeySpec] = &radius_keys(6);
const GEORADIUSBYMEMBER_KEYS: &[KeySpec] = &radius_keys(5);

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_flags: kf::RW_UPDATE,
        ..spec("geoadd", -5, W, A_W, "Add one or more geospatial items in the geospatial index represented using a sorted set", "3.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", add::geoadd)
    },
    spec("geodist", -4, R, A_R, "Returns the distance between two members of a geospatial index", "3.2.0", "O(log(N))", query::geodist),
    spec("geohash", -2, R, A_R, "Returns members of a geospatial index as standard geohash strings", "3.2.0", "O(log(N)) for each member requested, where N is the number of elements in the sorted set.", query::geohash),
    spec("geopos", -2, R, A_R, "Returns longitude and latitude of members of a geospatial index", "3.2.0", "O(N) where N is the number of members requested.", query::geopos),
    CommandSpec {
        key_specs: GEORADIUS_KEYS,
        ..spec("georadius", -6, W | flags::MOVABLEKEYS, A_W, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", "3.2.0", C_RADIUS, search::georadius)
    },
    spec("georadius_ro", -6, R, A_R, "A read-only variant for GEORADIUS", "3.2.10", C_RADIUS, search::georadius_ro),
    CommandSpec {
        key_specs: GEORADIUSBYMEMBER_KEYS,
        ..spec("georadiusbymember", -5, W | flags::MOVABLEKEYS, A_W, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", "3.2.0", C_RADIUS, search::georadiusbymember)
    },
    spec("georadiusbymember_ro", -5, R, A_R, "A read-only variant for GEORADIUSBYMEMBER", "3.2.10", C_RADIUS, search::georadiusbymember_ro),
    spec("geosearch", -7, R, A_R, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", "6.2.0", C_SEARCH, search::geosearch),
    CommandSpec {
        last_key: 2,
        key_specs: &[KeySpec::range(kf::OW_UPDATE, 1, 0, 1), KeySpec::range(kf::RO_ACCESS, 2, 0, 1)],
        ..spec("geosearchstore", -8, W, A_W, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", "6.2.0", C_SEARCH, search::geosearchstore)
    },
];

/// Parses a longitude and a latitude argument (Redis's `extractLongLatOrReply`): floats, then
/// inside the grid.
fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Error> {
    let lon = parse_score(lon).ok_or(Error::NotFloat)?;
    let lat = parse_score(lat).ok_or(Error::NotFloat)?;
    let lon_ok = (geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon);
    let lat_ok = (geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat);
    if !lon_ok || !lat_ok {
        return Err(Error::msg(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Meters per unit: `m`, `km`, `ft` or `mi`, any case.
fn parse_unit(arg: &[u8]) -> Result<f64, Error> {
    let is = |u: &[u8]| arg.eq_ignore_ascii_case(u);
    if is(b"m") {
        Ok(1.0)
    } else if is(b"km") {
        Ok(1000.0)
    } else if is(b"ft") {
        Ok(0.3048)
    } else if is(b"mi") {
        Ok(1609.34)
    } else {
        Err(Error::msg(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// A distance as Redis prints one: `%.4f`, always a bulk string.
fn reply_distance(out: &mut dyn ReplySink, d: f64) {
    out.bulk(format!("{d:.4}").as_bytes());
}

/// A coordinate as Redis's `addReplyHumanLongDouble` prints it: `%.17Lf` without trailing
/// zeros (a bulk string in RESP2, a double in RESP3).
fn reply_coordinate(out: &mut dyn ReplySink, v: f64) {
    out.human_double(v, &human(v));
}

/// `%.17Lf` of `v` (exact: a double is exact in a long double) without trailing zeros.
fn human(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
    }
    if s == "-0" {
        s = String::from("0");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_print_as_redis() {
        assert_eq!(human(13.361389338970184), "13.36138933897018433");
        assert_eq!(human(2.000_000_185_646_549), "2.0000001856465488");
        assert_eq!(human(-0.0), "0");
        assert_eq!(human(10.0), "10");
    }
}

//! Geohash as Redis's geo commands use it: a point's longitude and latitude become a 52-bit
//! integer (26 bits each, interleaved, longitude in the odd bits) that is the member's score in
//! a sorted set, so a box of the geohash grid is a range of scores. No command logic: the
//! `cmd::geo` group runs on it.
//!
//! The grid covers longitudes -180..180 and latitudes -85.05112878..85.05112878 (the Web
//! Mercator limits). A search covers its shape with the grid box of the center, at a precision
//! estimated from the radius, and its eight neighbours (see [`areas_for`]); the points in those
//! boxes are then filtered by exact distance. Distances use the haversine formula on a sphere of
//! radius 6372797.560856 m. Every operation follows the floating-point steps of Redis 7.0's
//! geohash code, so boxes, coordinates and distances come out bit for bit the same.

/// Smallest longitude.
pub const LONG_MIN: f64 = -180.0;
/// Largest longitude.
pub const LONG_MAX: f64 = 180.0;
/// Smallest latitude.
pub const LAT_MIN: f64 = -85.051_128_78;
/// Largest latitude.
pub const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate of a stored score.
pub const STEP_MAX: u8 = 26;
/// The Earth's radius in meters, as Redis uses it.
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Earth's circumference along the Web Mercator equator, in meters.
const MERCATOR_MAX_M: f64 = 20_037_726.37;
/// Degrees to radians.
const D_R: f64 = core::f64::consts::PI / 180.0;

/// The trigonometric functions distances and search boxes use. Redis calls the C library's,
/// whose last bits differ from the `libm` crate's in a few percent of cases: a shell that has
/// the C library installs its functions ([`crate::HostInfo::trig`]) so that full-precision
/// distances (STOREDIST scores) are Redis's bit for bit; the default is `libm`'s.
#[derive(Clone, Copy, Debug)]
pub struct Trig {
    /// Sine.
    pub sin: fn(f64) -> f64,
    /// Cosine.
    pub cos: fn(f64) -> f64,
    /// Arc sine.
    pub asin: fn(f64) -> f64,
}

impl Trig {
    /// The `libm` crate's functions.
    pub const LIBM: Trig = Trig {
        sin: libm::sin,
        cos: libm::cos,
        asin: libm::asin,
    };
}

impl Default for Trig {
    fn default() -> Self {
        Trig::LIBM
    }
}

/// A geohash: `2 * step` bits, latitude in the even bits, longitude in the odd ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate (0: "no box", a neighbour left out of a search).
    pub step: u8,
}

impl Hash {
    /// Whether this is the "no box" marker.
    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as a 52-bit score prefix (the bits shifted to the top of 52).
    pub fn align52(self) -> u64 {
        self.bits << (52 - 2 * u32::from(self.step))
    }

    /// The scores `[min, max)` of the points inside this box.
    pub fn score_range(self) -> (u64, u64) {
        let next = Hash {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

/// A closed range of one coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Range {
    /// Low end.
    pub min: f64,
    /// High end.
    pub max: f64,
}

/// The box of the grid a hash names.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Area {
    /// Its longitudes.
    pub longitude: Range,
    /// Its latitudes.
    pub latitude: Range,
}

/// The ranges of the stored scores' grid (longitude, latitude).
const WGS84: (Range, Range) = (
    Range {
        min: LONG_MIN,
        max: LONG_MAX,
    },
    Range {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `x` into a u32 (the inverse of [`spread`]).
fn gather(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x >> 4) & 0x00ff_00ff_00ff_00ff;
    x = (x | x >> 8) & 0x0000_ffff_0000_ffff;
    (x | x >> 16) as u32
}

/// Interleaves latitude (even bits) and longitude (odd bits) cells.
pub fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | spread(lon) << 1
}

/// Splits interleaved bits into (latitude, longitude) cells.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (gather(bits), gather(bits >> 1))
}

/// C's conversion of a double to `uint32_t` for the grid cell of a coordinate (in range, or
/// at most 2^step: the truncation of a non-negative value).
fn cell(v: f64) -> u32 {
    v as u32
}

/// The geohash of a point at `step` bits per coordinate over the given ranges, or `None` when
/// the point is outside the grid or the ranges.
pub fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    Some(Hash {
        bits: interleave(cell(lat_offset), cell(lon_offset)),
        step,
    })
}

/// [`encode`] on the stored scores' grid.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode(WGS84.0, WGS84.1, lon, lat, step)
}

/// The box a hash names over the given ranges.
pub fn decode(lon_range: Range, lat_range: Range, hash: Hash) -> Area {
    let (ilat, ilon) = deinterleave(hash.bits);
    let cells = (1u64 << hash.step) as f64;
    let (lat_scale, lon_scale) = (lat_range.max - lat_range.min, lon_range.max - lon_range.min);
    let at = |c: u32, min: f64, scale: f64| min + (f64::from(c) * 1.0 / cells) * scale;
    let next = |c: u32| c.wrapping_add(1);
    Area {
        latitude: Range {
            min: at(ilat, lat_range.min, lat_scale),
            max: at(next(ilat), lat_range.min, lat_scale),
        },
        longitude: Range {
            min: at(ilon, lon_range.min, lon_scale),
            max: at(next(ilon), lon_range.min, lon_scale),
        },
    }
}

/// The center of a box, clamped to the grid: (longitude, latitude).
pub fn area_center(area: &Area) -> (f64, f64) {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// x86-64's conversion of a double to `uint64_t` (what C compilers emit there), for scores of
/// sorted sets that were not made by GEOADD.
fn c_double_to_u64(v: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    // `cvttsd2si` answers i64::MIN for what does not fit; Rust's saturating cast differs
    // only above i64::MAX, handled by hand.
    let trunc = |x: f64| if x >= TWO63 { i64::MIN } else { x as i64 };
    if v < TWO63 {
        trunc(v) as u64
    } else {
        (trunc(v - TWO63) as u64) ^ (1 << 63)
    }
}

/// The point a score stands for (the center of its 26-bit box): (longitude, latitude).
pub fn score_to_point(score: f64) -> (f64, f64) {
    let hash = Hash {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    area_center(&decode(WGS84.0, WGS84.1, hash))
}

/// The score GEOADD stores for a point (in the grid).
pub fn point_to_score(lon: f64, lat: f64) -> Option<u64> {
    encode_wgs84(lon, lat, STEP_MAX).map(Hash::align52)
}

/// The 11-character standard geohash (latitudes -90..90, base 32) of a stored score, the last
/// character standing for bits a score does not have.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = score_to_point(score);
    let ranges = (
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
    );
    let bits = encode(ranges.0, ranges.1, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// The hash one box east (`dx` 1) or west (-1) and north (`dy` 1) or south (-1), wrapping
/// around the grid, as Redis moves in the interleaved bits (bits above `2 * step` of the
/// coordinate that moves are dropped; the other coordinate's are kept).
fn moved(hash: Hash, dx: i8, dy: i8) -> Hash {
    let width = 64 - 2 * u32::from(hash.step);
    let step_along = |bits: u64, lane: u64, d: i8| -> u64 {
        if d == 0 {
            return bits;
        }
        let (mine, other) = (bits & lane, bits & !lane);
        // Fill the other lane with ones so a carry or borrow crosses it.
        let fill = (!lane & 0x5555_5555_5555_5555 | !lane & 0xaaaa_aaaa_aaaa_aaaa)
            .checked_shr(width)
            .unwrap_or(0);
        let one = fill.wrapping_add(1);
        let moved = if d > 0 {
            mine.wrapping_add(one)
        } else {
            (mine | fill).wrapping_sub(one)
        };
        moved & lane.checked_shr(width).unwrap_or(0) | other
    };
    let bits = step_along(hash.bits, 0xaaaa_aaaa_aaaa_aaaa, dx);
    let bits = step_along(bits, 0x5555_5555_5555_5555, dy);
    Hash {
        bits,
        step: hash.step,
    }
}

/// The eight neighbours of a box in the order a search visits them: north, south, east, west,
/// north-east, north-west, south-east, south-west.
pub fn neighbors(hash: Hash) -> [Hash; 8] {
    [
        moved(hash, 0, 1),
        moved(hash, 0, -1),
        moved(hash, 1, 0),
        moved(hash, -1, 0),
        moved(hash, 1, 1),
        moved(hash, -1, 1),
        moved(hash, 1, -1),
        moved(hash, -1, -1),
    ]
}

/// A search shape around its center, in the unit of its arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// A circle of this radius.
    Radius(f64),
    /// A box of this width and height (aligned with meridians and parallels).
    Box(f64, f64),
}

/// A search: its center (longitude, latitude), shape, the unit's length in meters, and the
/// trigonometric functions to measure with.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    /// Longitude of the center.
    pub lon: f64,
    /// Latitude of the center.
    pub lat: f64,
    /// The shape.
    pub shape: Shape,
    /// Meters per unit of the shape's sizes.
    pub to_meters: f64,
    /// Sine, cosine, arc sine.
    pub trig: Trig,
}

/// The precision (bits per coordinate) whose boxes suit a search of this radius at this
/// latitude: boxes at least about as big as the radius, one or two steps coarser near the poles.
pub fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut step = 1i32;
    while range_m < MERCATOR_MAX_M {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// Radians to degrees.
fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// Degrees to radians.
fn deg_rad(d: f64) -> f64 {
    d * D_R
}

/// The search's bounding box: [min longitude, min latitude, max longitude, max latitude].
pub fn bounding_box(s: &Search) -> [f64; 4] {
    let (half_h, half_w) = match s.shape {
        Shape::Radius(r) => (s.to_meters * r, s.to_meters * r),
        Shape::Box(w, h) => (s.to_meters * (h / 2.0), s.to_meters * (w / 2.0)),
    };
    let lat_delta = rad_deg(half_h / EARTH_RADIUS_M);
    let lon_delta_top = rad_deg(half_w / EARTH_RADIUS_M / libm::cos(deg_rad(s.lat + lat_delta)));
    let lon_delta_bottom = rad_deg(half_w / EARTH_RADIUS_M / libm::cos(deg_rad(s.lat - lat_delta)));
    // The wider side of the box is toward the equator.
    let lon_delta = if s.lat < 0.0 {
        lon_delta_bottom
    } else {
        lon_delta_top
    };
    [
        s.lon - lon_delta,
        s.lat - lat_delta,
        s.lon + lon_delta,
        s.lat + lat_delta,
    ]
}

/// The boxes a search reads: the center's box and its eight neighbours, the useless ones
/// zeroed ([`Hash::is_zero`]), in visiting order.
pub fn areas_for(s: &Search) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let radius_m = match s.shape {
        Shape::Radius(r) => r,
        Shape::Box(w, h) => libm::sqrt((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)),
    } * s.to_meters;
    let mut steps = steps_for_radius(radius_m, s.lat);
    let at = |steps: u8| {
        let hash = encode_wgs84(s.lon, s.lat, steps).unwrap_or(Hash {
            bits: 0,
            step: steps,
        });
        (hash, neighbors(hash), decode(WGS84.0, WGS84.1, hash))
    };
    let (mut hash, mut nb, mut area) = at(steps);
    // A neighbour too close to the center to cover the shape: one step coarser.
    let [north, south, east, west] =
        [nb[0], nb[1], nb[2], nb[3]].map(|h| decode(WGS84.0, WGS84.1, h));
    let decrease = north.latitude.max < max_lat
        || south.latitude.min > min_lat
        || east.longitude.max < max_lon
        || west.longitude.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (hash, nb, area) = at(steps);
    }
    // Leave out the neighbours the shape cannot reach.
    if steps >= 2 {
        let zero = |nb: &mut [Hash; 8], which: &[usize]| {
            which.iter().for_each(|&i| nb[i] = Hash::default())
        };
        if area.latitude.min < min_lat {
            zero(&mut nb, &[1, 6, 7]);
        }
        if area.latitude.max > max_lat {
            zero(&mut nb, &[0, 4, 5]);
        }
        if area.longitude.min < min_lon {
            zero(&mut nb, &[3, 5, 7]);
        }
        if area.longitude.max > max_lon {
            zero(&mut nb, &[2, 4, 6]);
        }
    }
    [hash, nb[0], nb[1], nb[2], nb[3], nb[4], nb[5], nb[6], nb[7]]
}

/// The distance in meters along a meridian between two latitudes.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The great-circle distance in meters between two points (haversine).
pub fn distance(t: &Trig, lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = (t.sin)((deg_rad(lon2) - deg_rad(lon1)) / 2.0);
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = (t.sin)((lat2r - lat1r) / 2.0);
    let a = u * u + (t.cos)(lat1r) * (t.cos)(lat2r) * v * v;
    2.0 * EARTH_RADIUS_M * (t.asin)(libm::sqrt(a))
}

/// The distance from the search's center to a point when the point is inside its shape.
pub fn within(s: &Search, lon: f64, lat: f64) -> Option<f64> {
    match s.shape {
        Shape::Radius(r) => {
            let d = distance(&s.trig, s.lon, s.lat, lon, lat);
            (d <= r * s.to_meters).then_some(d)
        }
        Shape::Box(w, h) => {
            let (w_m, h_m) = (w * s.to_meters, h * s.to_meters);
            if lat_distance(lat, s.lat) > h_m / 2.0 {
                return None;
            }
            if distance(&s.trig, lon, lat, s.lon, lat) > w_m / 2.0 {
                return None;
            }
            Some(distance(&s.trig, s.lon, s.lat, lon, lat))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for (a, b) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(a, b)), (a, b));
        }
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
    }

    #[test]
    fn redis_scores_and_points() {
        // GEOADD Sicily 13.361389 38.115556 Palermo on redis-server 7.0.15.
        assert_eq!(point_to_score(13.361389, 38.115556), Some(3479099956230698));
        let (lon, lat) = score_to_point(3479099956230698.0);
        assert_eq!(lon, 13.361389338970184);
        assert_eq!(lat, 38.115_556_395_496_3);
        assert_eq!(&standard_geohash(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(point_to_score(200.0, 0.0), None);
    }

    #[test]
    fn neighbours_wrap_and_step() {
        let h = Hash {
            bits: 0b11,
            step: 1,
        };
        let n = neighbors(h);
        // One bit per coordinate: every move flips that coordinate's bit.
        assert_eq!(n[0].bits, 0b10, "north");
        assert_eq!(n[2].bits, 0b01, "east");
        assert_eq!(n[4].bits, 0b00, "north-east");
    }
}

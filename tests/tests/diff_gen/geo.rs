//! Differential generator for the geo commands over the shared key space (sorted sets of the
//! zset family read as points, WRONGTYPE on other types). Every member has its own fixed
//! point, so distances do not tie (Redis's partial sort for COUNT orders ties its own way).
//! STOREDIST scores are full-precision distances: kayvee-server measures with the C library's
//! `sin`/`cos`/`asin`, as Redis does, so they match to the last bit.

use super::{args, Args, Gen};

/// Members and their points: Sicily, New York, and places near the poles and the date line.
const PLACES: &[(&str, &str, &str)] = &[
    ("Palermo", "13.361389", "38.115556"),
    ("Catania", "15.087269", "37.502669"),
    ("edge1", "12.758489", "38.788135"),
    ("wtc", "-74.0131604", "40.7126674"),
    ("jfk", "-73.7858139", "40.6428986"),
    ("q4", "-73.9375699", "40.7498929"),
    ("north", "45", "84.9"),
    ("south", "-120.5", "-84.1"),
    ("east", "179.9", "1.5"),
    ("west", "-179.95", "1.6"),
    ("a", "0.001", "0.002"),
    ("0", "10", "20"),
];
/// Search centers.
const CENTERS: &[(&str, &str)] = &[
    ("15", "37"),
    ("-73.98", "40.76"),
    ("0", "0"),
    ("179.5", "2"),
    ("-10", "84"),
    ("200", "0"),
    ("x", "1"),
];
/// Radii, widths and heights.
const SIZES: &[&str] = &[
    "1", "5", "50", "200", "1000", "5000", "20000", "0", "-1", "abc",
];
/// Units.
const UNITS: &[&str] = &["m", "km", "KM", "mi", "ft", "furlong"];

impl Gen {
    /// A member, mostly one with a point.
    fn place(&mut self) -> (&'static str, &'static str, &'static str) {
        const ODD: &[(&str, &str, &str)] =
            &[("nope", "1", "2"), ("bad", "181", "0"), ("bad", "1", "x")];
        let from = if self.rng.chance(90) { PLACES } else { ODD };
        from[self.rng.below(from.len())]
    }

    /// One geo command.
    pub(crate) fn geo_command(&mut self) -> Args {
        let k = self.key();
        match self.rng.below(12) {
            0..=2 => self.geoadd(k),
            3 => self.with_places(&["GEOPOS", k]),
            4 => self.with_places(&["GEOHASH", k]),
            5 => {
                let mut cmd = args(&["GEODIST", k, self.place().0, self.place().0]);
                if self.rng.chance(70) {
                    cmd.push(self.rng.pick(UNITS).into());
                }
                cmd
            }
            6..=8 => self.geosearch(k),
            _ => self.georadius(k),
        }
    }

    /// GEOADD with options and one to three points.
    fn geoadd(&mut self, k: &str) -> Args {
        let mut cmd = args(&["GEOADD", k]);
        for opt in ["NX", "XX", "CH"] {
            if self.rng.chance(15) {
                cmd.push(opt.into());
            }
        }
        for _ in 0..1 + self.rng.below(3) {
            let (m, lon, lat) = self.place();
            cmd.extend([lon, lat, m].map(|s| s.as_bytes().to_vec()));
        }
        if self.rng.chance(5) {
            cmd.pop();
        }
        cmd
    }

    /// `head` then one to three members.
    fn with_places(&mut self, head: &[&str]) -> Args {
        let mut cmd = args(head);
        (0..1 + self.rng.below(3)).for_each(|_| cmd.push(self.place().0.into()));
        cmd
    }

    /// The options every search takes.
    fn search_options(&mut self, cmd: &mut Args, with: bool) {
        let mut opts: Vec<&str> = Vec::new();
        if with {
            for w in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                if self.rng.chance(30) {
                    opts.push(w);
                }
            }
        }
        if self.rng.chance(40) {
            opts.push(self.rng.pick(&["ASC", "DESC", "asc"]));
        }
        if self.rng.chance(30) {
            opts.extend(["COUNT", self.rng.pick(&["1", "2", "5", "0", "x"])]);
            if self.rng.chance(30) {
                opts.push("ANY");
            }
        } else if self.rng.chance(5) {
            opts.push("ANY");
        }
        cmd.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    }

    /// GEOSEARCH or GEOSEARCHSTORE.
    fn geosearch(&mut self, k: &str) -> Args {
        let store = self.rng.chance(30);
        let mut cmd = if store {
            args(&["GEOSEARCHSTORE", self.key(), k])
        } else {
            args(&["GEOSEARCH", k])
        };
        match self.rng.below(10) {
            0..=4 => {
                let (lon, lat) = CENTERS[self.rng.below(CENTERS.len())];
                cmd.extend(["FROMLONLAT", lon, lat].map(|s| s.as_bytes().to_vec()));
            }
            5..=8 => cmd.extend(["FROMMEMBER", self.place().0].map(|s| s.as_bytes().to_vec())),
            _ => {}
        }
        let (unit, a, b) = (
            self.rng.pick(UNITS),
            self.rng.pick(SIZES),
            self.rng.pick(SIZES),
        );
        match self.rng.below(10) {
            0..=4 => cmd.extend(["BYRADIUS", a, unit].map(|s| s.as_bytes().to_vec())),
            5..=8 => cmd.extend(["BYBOX", a, b, unit].map(|s| s.as_bytes().to_vec())),
            _ => {}
        }
        let with = !store || self.rng.chance(5);
        self.search_options(&mut cmd, with);
        if store && self.rng.chance(40) {
            cmd.push(b"STOREDIST".to_vec());
        }
        cmd
    }

    /// GEORADIUS, GEORADIUSBYMEMBER and their _RO forms, sometimes with STORE.
    fn georadius(&mut self, k: &str) -> Args {
        let by_member = self.rng.chance(50);
        let ro = self.rng.chance(25);
        let name = match (by_member, ro) {
            (false, false) => "GEORADIUS",
            (false, true) => "GEORADIUS_RO",
            (true, false) => "GEORADIUSBYMEMBER",
            (true, true) => "GEORADIUSBYMEMBER_RO",
        };
        let mut cmd = args(&[name, k]);
        if by_member {
            cmd.push(self.place().0.into());
        } else {
            let (lon, lat) = CENTERS[self.rng.below(CENTERS.len())];
            cmd.extend([lon, lat].map(|s| s.as_bytes().to_vec()));
        }
        cmd.extend([self.rng.pick(SIZES), self.rng.pick(UNITS)].map(|s| s.as_bytes().to_vec()));
        let store = self.rng.chance(25);
        let with = !store || self.rng.chance(5);
        self.search_options(&mut cmd, with);
        if store {
            let how = self.rng.pick(&["STORE", "STOREDIST"]);
            cmd.extend([how, self.key()].map(|s| s.as_bytes().to_vec()));
        }
        cmd
    }
}

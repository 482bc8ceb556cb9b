//! Property tests of the HyperLogLog codec and of geohash, against simple models.
//!
//! - HLL: any sequence of element additions and register raises, under any
//!   `hll-sparse-max-bytes`, keeps the registers of a plain array model (one byte per register,
//!   the maximum seen), whether the string stays sparse, turns dense, or is merged; the count is
//!   the model's, and the sparse code always covers exactly 16384 registers.
//! - Geohash: the center of any 52-bit box encodes back to the same box; a point encodes to a
//!   box that contains it; neighbours are one box away.

use kayvee_engine::geohash;
use kayvee_engine::hll::{self, Encoding, REGISTERS};
use proptest::prelude::*;

/// An operation on an HLL.
#[derive(Clone, Debug)]
enum Op {
    Add(Vec<u8>),
    Raise(usize, u8),
    MakeDense,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(Op::Add),
        3 => (0..REGISTERS, 1u8..=51).prop_map(|(i, v)| Op::Raise(i, v)),
        1 => Just(Op::MakeDense),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn hll_matches_a_register_array(
        ops in proptest::collection::vec(op(), 0..300),
        max_bytes in prop_oneof![Just(0u64), Just(40), Just(300), Just(3000), Just(1 << 20)],
    ) {
        let mut h = hll::empty();
        let mut model = vec![0u8; REGISTERS];
        for op in &ops {
            match op {
                Op::Add(e) => {
                    let (i, v) = hll::pattern(e);
                    let changed = hll::add(&mut h, e, max_bytes).unwrap();
                    prop_assert_eq!(changed, v > model[i]);
                    model[i] = model[i].max(v);
                }
                Op::Raise(i, v) => {
                    let changed = hll::raise(&mut h, *i, *v, max_bytes).unwrap();
                    prop_assert_eq!(changed, *v > model[*i]);
                    model[*i] = model[*i].max(*v);
                }
                Op::MakeDense => {
                    hll::make_dense(&mut h).unwrap();
                }
            }
            if hll::encoding(&h).unwrap() == Encoding::Sparse {
                prop_assert!(h.len() as u64 <= max_bytes.max(18), "sparse past the limit");
            }
        }
        let mut merged = vec![0u8; REGISTERS];
        hll::merge_into(&h, &mut merged).unwrap();
        prop_assert_eq!(&merged, &model);
        prop_assert_eq!(hll::count(&h).unwrap(), hll::count_registers(&model));
        let mut dense = h.clone();
        hll::make_dense(&mut dense).unwrap();
        prop_assert_eq!(hll::registers(&dense), model);
        prop_assert_eq!(hll::encoding(&dense).unwrap(), Encoding::Dense);
    }

    #[test]
    fn geohash_boxes_round_trip(bits in 0u64..(1 << 52)) {
        let (lon, lat) = geohash::score_to_point(bits as f64);
        prop_assert_eq!(geohash::point_to_score(lon, lat), Some(bits));
    }

    #[test]
    fn points_fall_in_their_box(lon in -180.0f64..180.0, lat in -85.05f64..85.05, step in 1u8..=26) {
        let h = geohash::encode_wgs84(lon, lat, step).unwrap();
        let area = geohash::decode(
            geohash::Range { min: -180.0, max: 180.0 },
            geohash::Range { min: geohash::LAT_MIN, max: geohash::LAT_MAX },
            h,
        );
        prop_assert!(area.longitude.min <= lon && lon <= area.longitude.max);
        prop_assert!(area.latitude.min <= lat && lat <= area.latitude.max);
        for n in geohash::neighbors(h) {
            let (a, b) = (geohash::deinterleave(h.bits), geohash::deinterleave(n.bits));
            let cells = 1i64 << step;
            let d = |x: u32, y: u32| {
                let d = (i64::from(x) - i64::from(y)).rem_euclid(cells);
                d.min(cells - d)
            };
            prop_assert!(d(a.0, b.0) <= 1 && d(a.1, b.1) <= 1);
            prop_assert!(n != h || step == 1);
        }
    }
}

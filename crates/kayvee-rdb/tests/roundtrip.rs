//! Engine -> RDB -> engine round trips as a property: every value type, TTLs, several
//! databases, compression on and off, any chunk size; the loaded databases equal the saved
//! ones key by key (value, TTL, and the big-encoding flag Redis would choose).

use kayvee_engine::value::{Entry, ZSet};
use kayvee_engine::{Config, Db, Snapshot, Value};
use kayvee_pds::SmallBytes;
use kayvee_rdb::{load, LoadOptions, RdbWriter, StepLoad, WriteOptions};
use proptest::prelude::*;

const SEED: u64 = 42;
const NOW_MS: u64 = 1_700_000_000_000;

/// Short byte strings that are often integers (to exercise the integer encodings) and
/// sometimes long and repetitive (LZF).
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        (-200i64..70000).prop_map(|v| v.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..30),
        (1usize..400, any::<u8>()).prop_map(|(n, b)| vec![b'a' + b % 3; n]),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
        (-1000i32..1000).prop_map(f64::from),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
    ]
}

/// Half the generated lists are in the tree form (both forms must round-trip).
fn v_len_is_odd(l: &kayvee_engine::value::List) -> bool {
    l.len() % 2 == 1
}

fn value() -> impl Strategy<Value = Value> {
    let small = || proptest::collection::vec(bytes(), 1..12);
    prop_oneof![
        bytes().prop_map(|b| Value::Str(SmallBytes::from_vec(b))),
        small().prop_map(|v| {
            let mut l: kayvee_engine::value::List =
                v.into_iter().map(SmallBytes::from_vec).collect();
            if v_len_is_odd(&l) {
                l.make_tree();
            }
            Value::List(l)
        }),
        small().prop_map(|v| {
            let mut m = kayvee_engine::value::Set::new();
            v.into_iter().for_each(|b| {
                m.insert(&b, 512, SEED);
            });
            Value::Set(m)
        }),
        proptest::collection::vec((bytes(), bytes()), 1..12).prop_map(|v| {
            let mut m = kayvee_engine::value::Hash::new();
            v.into_iter().for_each(|(f, x)| {
                m.insert(&f, &x);
            });
            Value::Hash(m)
        }),
        proptest::collection::vec((bytes(), score()), 1..12).prop_map(|v| {
            let mut z = ZSet::new_flat();
            v.into_iter().for_each(|(m, s)| {
                z.insert(&m, s);
            });
            Value::ZSet(z)
        }),
    ]
}

/// A key with its value, optional TTL (some already past) and database.
fn keyspace() -> impl Strategy<Value = Vec<(usize, Vec<u8>, Value, Option<u64>)>> {
    let ttl = prop_oneof![
        3 => Just(None),
        1 => (NOW_MS - 5000..NOW_MS + 5_000_000).prop_map(Some),
    ];
    proptest::collection::vec((0usize..3, bytes(), value(), ttl), 0..40)
}

fn build(keys: &[(usize, Vec<u8>, Value, Option<u64>)]) -> Vec<Db> {
    let mut dbs: Vec<Db> = (0..16).map(|_| Db::new(SEED)).collect();
    for (db, k, v, ttl) in keys {
        dbs[*db].insert_entry(k, Entry::new(v.clone(), NOW_MS), *ttl);
    }
    dbs
}

fn save(dbs: &[Db], compress: bool, chunk_len: usize) -> Vec<u8> {
    let snapshot = Snapshot {
        dbs: dbs.iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let opts = WriteOptions {
        compress,
        chunk_len,
        ..WriteOptions::default()
    };
    let mut w = RdbWriter::new(snapshot, opts);
    let mut out = Vec::new();
    let mut chunk = Vec::new();
    while w.next_chunk(&mut chunk) {
        assert!(!chunk.is_empty() || chunk_len == 0);
        out.extend_from_slice(&chunk);
        chunk.clear();
    }
    // The whole file's CRC, which the unikernel's disk header takes from the writer.
    assert_eq!(w.file_crc(), Some(kayvee_rdb::CRC64.checksum(&out)));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn engine_rdb_engine(keys in keyspace(), compress in any::<bool>(), chunk in 1usize..5000) {
        let mut dbs = build(&keys);
        let file = save(&dbs, compress, chunk);
        let config = Config::default();
        let opts = LoadOptions { config: &config, seed: SEED, now_ms: NOW_MS };
        let loaded = load(&file, &opts).unwrap();
        let mut expired = 0;
        for (i, db) in dbs.iter_mut().enumerate() {
            let got = &loaded.dbs[i];
            got.check_invariants();
            let live = db.keys_matching(NOW_MS, |_| true);
            expired += db.len() - live.len();
            prop_assert_eq!(got.len(), live.len());
            for k in live {
                let want = db.peek(&k, NOW_MS).unwrap().clone();
                let mut got_db = got.clone();
                let e = got_db.peek(&k, NOW_MS).unwrap();
                prop_assert_eq!(e.value(), want.value());
                prop_assert_eq!(got.expire_at(&k), db.expire_at(&k));
                let big = kayvee_engine::persist::loads_big(&want.to_value(), &config);
                prop_assert_eq!(e.meta().has(kayvee_engine::value::Meta::BIG), big);
            }
        }
        prop_assert_eq!(loaded.keys_expired as usize, expired);
        // The same snapshot gives the same bytes whatever the chunking.
        prop_assert_eq!(save(&dbs, compress, 1 << 20), file);
    }

    /// A load in steps of any size (a replica's, which keeps expired keys) ends with every
    /// key, its value and TTL; its progress only grows; a damaged checksum fails its last step.
    #[test]
    fn a_load_in_steps_keeps_every_key(keys in keyspace(), step in 1u64..40) {
        let dbs = build(&keys);
        let file = save(&dbs, true, 1 << 16);
        let config = Config::default();
        let opts = LoadOptions { config: &config, seed: SEED, now_ms: NOW_MS };
        let mut load = StepLoad::new(&file[..], &opts, true).unwrap();
        let mut last = load.progress();
        let loaded = loop {
            if let Some(l) = load.step(&opts, step).unwrap() {
                break l;
            }
            let p = load.progress();
            prop_assert!(p.keys == last.keys + step && p.bytes > last.bytes);
            last = p;
        };
        prop_assert_eq!(loaded.consumed, file.len());
        for (i, db) in dbs.iter().enumerate() {
            let got = &loaded.dbs[i];
            got.check_invariants();
            prop_assert_eq!(got.len(), db.len());
            let mut want_db = db.clone();
            for k in db.keys_matching(0, |_| true) {
                let mut got_db = got.clone();
                let e = got_db.peek(&k, 0).unwrap();
                prop_assert_eq!(e.value(), want_db.peek(&k, 0).unwrap().value());
                prop_assert_eq!(got.expire_at(&k), db.expire_at(&k));
            }
        }
        let mut damaged = file.clone();
        let at = damaged.len() - 1;
        damaged[at] ^= 1;
        let mut load = StepLoad::new(&damaged[..], &opts, true).unwrap();
        let failed = loop {
            match load.step(&opts, step) {
                Ok(None) => {}
                Ok(Some(_)) => break None,
                Err(e) => break Some(e),
            }
        };
        prop_assert!(matches!(failed, Some(kayvee_rdb::Error::BadChecksum { .. })), "{:?}", failed);
    }
}

#[test]
fn empty_keyspace_is_header_aux_eof_and_checksum() {
    let file = save(&build(&[]), true, 100);
    assert!(file.starts_with(b"REDIS0010\xfa\x09redis-ver\x067.0.15"));
    assert_eq!(file[file.len() - 9], 0xFF);
    let crc = kayvee_rdb::CRC64.checksum(&file[..file.len() - 8]);
    assert_eq!(file[file.len() - 8..], crc.to_le_bytes());
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: 1,
        now_ms: NOW_MS,
    };
    assert_eq!(load(&file, &opts).unwrap().keys_loaded, 0);
}

/// The replication AUX fields go between `used-mem` and `aof-base`, as Redis 7.0 writes
/// them, and come back from the loaded file.
#[test]
fn replication_aux_fields_round_trip() {
    let snapshot = Snapshot {
        dbs: build(&[]).iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let repl = kayvee_rdb::ReplAux {
        stream_db: 3,
        replid: "a".repeat(40),
        offset: 1234,
    };
    let opts = WriteOptions {
        repl: Some(repl.clone()),
        ..WriteOptions::default()
    };
    let mut w = RdbWriter::new(snapshot, opts);
    let mut file = Vec::new();
    let mut chunk = Vec::new();
    while w.next_chunk(&mut chunk) {
        file.append(&mut chunk);
    }
    let text = String::from_utf8_lossy(&file);
    let used = text.find("used-mem").unwrap();
    let id = text.find("repl-id").unwrap();
    assert!(used < text.find("repl-stream-db").unwrap() && id < text.find("aof-base").unwrap());
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: 1,
        now_ms: NOW_MS,
    };
    let loaded = load(&file, &opts).unwrap();
    assert_eq!(kayvee_rdb::ReplAux::from_aux(&loaded.aux), Some(repl));
}

#[test]
fn checksum_off_writes_zero_and_loads() {
    let dbs = build(&[(0, b"k".to_vec(), Value::Str(SmallBytes::from("v")), None)]);
    let snapshot = Snapshot {
        dbs: dbs.iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let opts = WriteOptions {
        checksum: false,
        ..WriteOptions::default()
    };
    let file = RdbWriter::new(snapshot, opts).write_all();
    assert_eq!(file[file.len() - 8..], [0; 8]);
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: 1,
        now_ms: NOW_MS,
    };
    assert_eq!(load(&file, &opts).unwrap().keys_loaded, 1);
}

#[test]
fn progress_is_reported_in_order_up_to_the_whole_file() {
    let entries: Vec<_> = (0..5000u32)
        .map(|i| {
            (
                0,
                format!("key:{i}").into_bytes(),
                Value::Str(SmallBytes::from("v")),
                None,
            )
        })
        .collect();
    let dbs = build(&entries);
    let snapshot = Snapshot {
        dbs: dbs.iter().map(Db::snapshot).collect(),
        taken_ms: NOW_MS,
        functions: Vec::new(),
    };
    let opts = WriteOptions {
        used_mem: 123_456,
        ..WriteOptions::default()
    };
    let file = RdbWriter::new(snapshot, opts).write_all();
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: SEED,
        now_ms: NOW_MS,
    };
    let mut seen = Vec::new();
    let loaded = kayvee_rdb::load_with_progress(&file, &opts, &mut |p| seen.push(p)).unwrap();
    assert_eq!(loaded.keys_loaded, 5000);
    assert!(seen.len() >= 5, "{} reports", seen.len());
    assert!(seen
        .windows(2)
        .all(|w| w[0].bytes < w[1].bytes && w[0].keys < w[1].keys));
    let last = seen.last().unwrap();
    assert_eq!((last.bytes, last.keys), (file.len() as u64, 5000));
    assert!(seen.iter().all(|p| p.rdb_used_mem == 123_456));
}

//! Loads `fixtures/redis7.rdb`, written by redis-server 7.0.15 (`SAVE`), whose keys use every
//! encoding 7.0 writes: listpack hashes and zsets, quicklist 2 lists (several nodes, and a
//! PLAIN node for a 9000-byte element), intsets, hashtable sets and hashes, a skiplist zset,
//! LZF-compressed strings, integer strings, TTLs, and a key in database 3.

use kayvee_engine::value::Meta;
use kayvee_engine::{Config, Value};
use kayvee_rdb::{load, LoadOptions, Loaded};

/// The file's `ctime` (unix seconds): the load runs "then", so no TTL has passed.
const CTIME_MS: u64 = 1_795_270_096_000;

fn fixture() -> Loaded {
    let file = include_bytes!("fixtures/redis7.rdb");
    let config = Config::default();
    load(
        file,
        &LoadOptions {
            config: &config,
            seed: 9,
            now_ms: CTIME_MS,
        },
    )
    .unwrap()
}

fn get(l: &Loaded, db: usize, key: &str) -> (Value, bool) {
    let mut d = l.dbs[db].clone();
    let e = d
        .peek(key.as_bytes(), CTIME_MS)
        .unwrap_or_else(|| panic!("{key} missing"));
    (e.to_value(), e.meta().has(Meta::BIG))
}

fn strs(items: impl Iterator<Item = Vec<u8>>) -> Vec<String> {
    let mut v: Vec<String> = items.map(|b| String::from_utf8(b).unwrap()).collect();
    v.sort();
    v
}

fn list(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l
            .iter()
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect(),
        _ => panic!("not a list"),
    }
}

fn set(v: &Value) -> Vec<String> {
    match v {
        Value::Set(s) => strs(s.iter().map(|m| m.to_vec())),
        _ => panic!("not a set"),
    }
}

#[test]
fn every_key_and_ttl_is_there() {
    let l = fixture();
    assert_eq!((l.keys_loaded, l.keys_expired), (19, 0));
    assert_eq!(l.dbs[0].len(), 18);
    assert_eq!(l.dbs[0].expires_len(), 2);
    assert_eq!(get(&l, 3, "in3").0, Value::Str("x".into()));
    let redis_ver = l.aux.iter().find(|(k, _)| k == b"redis-ver").unwrap();
    assert_eq!(redis_ver.1, b"7.0.15");
    assert!(l.dbs[0].expire_at(b"ex1").unwrap() > CTIME_MS + 990_000);
}

#[test]
fn lists_from_quicklists() {
    let l = fixture();
    assert_eq!(list(&get(&l, 0, "l").0), ["a", "b", "1", "2"]);
    let big: Vec<String> = (1..=2000).map(|i| i.to_string()).collect();
    assert_eq!(list(&get(&l, 0, "biglist").0), big);
    let plain = list(&get(&l, 0, "plainlist").0);
    assert_eq!(plain, ["L".repeat(9000), "x".into()]);
}

#[test]
fn sets_hashes_zsets_and_encodings() {
    let l = fixture();
    let (iset, big) = get(&l, 0, "iset");
    assert_eq!(
        (set(&iset), big),
        (vec!["1".into(), "2".into(), "3".into()], false)
    );
    let (bigset, big) = get(&l, 0, "bigset");
    assert_eq!((set(&bigset).len(), big), (600, true));
    assert_eq!(set(&get(&l, 0, "sset").0), ["a", "b", "c"]);
    let Value::Hash(bh) = get(&l, 0, "bh").0 else {
        panic!()
    };
    assert_eq!(bh.len(), 200);
    assert_eq!(bh.get(b"f17").unwrap(), b"v17");
    let (hlong, big) = get(&l, 0, "hlong");
    let Value::Hash(h) = hlong else { panic!() };
    assert_eq!((h.get(&b"f"[..]).unwrap().len(), big), (100, true));
    assert!(h.is_big(), "a hashtable loads in the map form");
    let (bz, big) = get(&l, 0, "bz");
    let Value::ZSet(z) = bz else { panic!() };
    assert_eq!((z.len(), big), (200, true));
    assert_eq!(z.score(b"m150"), Some(150.0));
    let Value::ZSet(z) = get(&l, 0, "z").0 else {
        panic!()
    };
    assert_eq!(z.score(b"c"), Some(f64::NEG_INFINITY));
    assert!(!z.is_big(), "a listpack loads in the flat form");
    assert_eq!(z.score(b"a"), Some(1.5));
}

#[test]
fn strings_of_every_encoding() {
    let l = fixture();
    assert_eq!(get(&l, 0, "big3").0, Value::Str("3000000000".into()));
    assert_eq!(get(&l, 0, "neg").0, Value::Str("-5".into()));
    assert_eq!(get(&l, 0, "n").0, Value::Str("12345".into()));
    assert_eq!(
        get(&l, 0, "long").0,
        Value::Str("xyz".repeat(100).as_str().into())
    );
}

#[test]
fn a_later_time_drops_expired_keys() {
    let file = include_bytes!("fixtures/redis7.rdb");
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: 9,
        now_ms: CTIME_MS + 2_000_000,
    };
    let l = load(file, &opts).unwrap();
    assert_eq!((l.keys_loaded, l.keys_expired), (17, 2));
}

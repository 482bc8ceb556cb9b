//! Model-based property tests of the keyspace: random sequences of key and expiry commands run
//! through `Engine::execute` (values stored through the `Db` API where no command exists yet)
//! against a `BTreeMap` model, with time advancing, active expiry running, and O(1) snapshots
//! taken mid-sequence that must still show exactly their own state at the end. Plus SCAN
//! completeness under concurrent inserts and deletes.

use kayvee_engine::{
    ArgvBuf, Config, ConnInfo, DbSnapshot, Engine, Handle, Now, Protocol, Reply, ReplyTree,
    Snapshot, Transport, Value, ValueRef,
};
use kayvee_pds::SmallBytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Databases the operations touch (of the 16 configured), few so that keys collide.
const DBS: usize = 3;
/// Start of the clock (unix ms).
const T0_MS: u64 = 1_700_000_000_000;

/// The logical state: (db, key) -> (value, absolute expiry in unix ms).
type Model = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<u64>)>;

/// One step of a test sequence.
#[derive(Clone, Debug)]
enum Op {
    /// Stores a string through the `Db` API (SET is another group's command), with an
    /// optional relative TTL in ms (as SET PX).
    Set(usize, u8, u8, Option<u64>),
    Del(Vec<u8>),
    Exists(Vec<u8>),
    Type(u8),
    Rename(u8, u8, bool),
    Copy(u8, u8, Option<usize>, bool),
    Move(u8, usize),
    SwapDb(usize, usize),
    FlushDb,
    FlushAll,
    /// EXPIRE (seconds) or PEXPIRE (ms) with a relative time and a condition.
    Expire(u8, i64, bool, Cond),
    Persist(u8),
    Ttl(u8, bool),
    Select(usize),
    Advance(u64),
    Cron,
    Snapshot,
}

/// EXPIRE's NX/XX/GT/LT (or none).
#[derive(Clone, Copy, Debug)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    let db = 0usize..DBS;
    let cond = prop_oneof![
        Just(Cond::None),
        Just(Cond::Nx),
        Just(Cond::Xx),
        Just(Cond::Gt),
        Just(Cond::Lt)
    ];
    prop_oneof![
        6 => (db.clone(), k.clone(), any::<u8>(), prop::option::of(1u64..5000))
            .prop_map(|(d, k, v, px)| Op::Set(d, k, v, px)),
        2 => prop::collection::vec(k.clone(), 1..4).prop_map(Op::Del),
        2 => prop::collection::vec(k.clone(), 1..4).prop_map(Op::Exists),
        1 => k.clone().prop_map(Op::Type),
        2 => (k.clone(), k.clone(), any::<bool>()).prop_map(|(a, b, nx)| Op::Rename(a, b, nx)),
        2 => (k.clone(), k.clone(), prop::option::of(db.clone()), any::<bool>())
            .prop_map(|(a, b, d, r)| Op::Copy(a, b, d, r)),
        2 => (k.clone(), db.clone()).prop_map(|(a, d)| Op::Move(a, d)),
        1 => (db.clone(), db.clone()).prop_map(|(a, b)| Op::SwapDb(a, b)),
        1 => Just(Op::FlushDb),
        1 => Just(Op::FlushAll),
        3 => (k.clone(), -3i64..20, any::<bool>(), cond)
            .prop_map(|(k, t, ms, c)| Op::Expire(k, if ms { t * 300 } else { t }, ms, c)),
        1 => k.clone().prop_map(Op::Persist),
        2 => (k.clone(), any::<bool>()).prop_map(|(k, ms)| Op::Ttl(k, ms)),
        2 => db.prop_map(Op::Select),
        3 => (0u64..4000).prop_map(Op::Advance),
        1 => Just(Op::Cron),
        1 => Just(Op::Snapshot),
    ]
}

/// The engine under test, one client, and the clock.
struct Harness {
    engine: Engine,
    client: Handle,
    now_ms: u64,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let mut engine = Engine::new(Config::default(), seed, Now::from_ms(T0_MS));
        let conn = ConnInfo {
            transport: Transport::Tcp {
                addr: "127.0.0.1:40001".into(),
                laddr: "127.0.0.1:6379".into(),
            },
            fd: 8,
        };
        let client = engine.connect(conn, Now::from_ms(T0_MS));
        Harness {
            engine,
            client,
            now_ms: T0_MS,
        }
    }

    /// Runs one command and returns its single reply.
    fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let argv = ArgvBuf::from_args(args);
        let mut tree = ReplyTree::new(Protocol::Resp2);
        let now = Now::from_ms(self.now_ms);
        self.engine
            .execute(self.client, &argv.argv(), now, &mut tree);
        let mut replies = tree.take();
        assert_eq!(replies.len(), 1, "one reply per command");
        replies.pop().unwrap()
    }

    fn set(&mut self, db: usize, key: &[u8], value: &[u8], px: Option<u64>) {
        let d = &mut self.engine.core.dbs[db];
        d.set(
            key,
            Value::Str(SmallBytes::from_slice(value)),
            self.now_ms,
            false,
        );
        if let Some(ms) = px {
            assert!(d.set_expire(key, self.now_ms + ms));
        }
    }
}

/// Whether a model entry is live at `now_ms`.
fn live(exp: Option<u64>, now_ms: u64) -> bool {
    !matches!(exp, Some(at) if at <= now_ms)
}

/// The model's state at `now_ms`, without the entries whose time has passed.
fn purge(model: &mut Model, now_ms: u64) {
    model.retain(|_, (_, exp)| live(*exp, now_ms));
}

/// The logical content of one database map pair at `now_ms` (expired entries left out).
fn logical(db: &DbSnapshot, index: usize, now_ms: u64, out: &mut Model) {
    for (k, e) in db.keys.iter() {
        let exp = db.expires.get(&k[..]).copied();
        if !live(exp, now_ms) {
            continue;
        }
        let ValueRef::Str(v) = e.value() else {
            panic!("the model only stores strings")
        };
        out.insert((index, k.to_vec()), (v.to_vec(), exp));
    }
}

/// The logical content of a snapshot's first `DBS` databases.
fn snapshot_state(s: &Snapshot, now_ms: u64) -> Model {
    let mut m = Model::new();
    for (i, db) in s.dbs.iter().enumerate().take(DBS) {
        logical(db, i, now_ms, &mut m);
    }
    m
}

/// Checks every database's invariants and its logical content against the model.
fn check_state(h: &Harness, model: &Model) {
    for db in &h.engine.core.dbs {
        db.check_invariants();
    }
    let now = Now::from_ms(h.now_ms);
    assert_eq!(&snapshot_state(&h.engine.snapshot(now), h.now_ms), model);
    for db in &h.engine.core.dbs[DBS..] {
        assert!(
            db.is_empty(),
            "a database outside the tested range was written"
        );
    }
}

/// The model side of one run: current database and the state.
struct ModelRun {
    db: usize,
    state: Model,
    snapshots: Vec<(Snapshot, u64, Model)>,
}

impl ModelRun {
    fn get(&self, db: usize, k: &[u8]) -> Option<&(Vec<u8>, Option<u64>)> {
        self.state.get(&(db, k.to_vec()))
    }

    fn take(&mut self, db: usize, k: &[u8]) -> Option<(Vec<u8>, Option<u64>)> {
        self.state.remove(&(db, k.to_vec()))
    }
}

fn int(n: i64) -> Reply {
    Reply::Int(n)
}

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// Applies one operation to engine and model; returns (got, want) replies when it ran one.
fn step(h: &mut Harness, m: &mut ModelRun, op: &Op) -> Option<(Reply, Reply)> {
    let now = h.now_ms;
    let cur = m.db;
    match op {
        Op::Set(db, k, v, px) => {
            h.set(*db, &key(*k), &[*v], *px);
            m.state
                .insert((*db, key(*k)), (vec![*v], px.map(|ms| now + ms)));
            None
        }
        Op::Del(ks) => {
            let names: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
            let mut args = vec![b"DEL".to_vec()];
            args.extend(names.iter().cloned());
            let want = names.iter().filter(|n| m.take(cur, n).is_some()).count();
            Some((h.run(&args), int(want as i64)))
        }
        Op::Exists(ks) => {
            let names: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
            let mut args = vec![b"EXISTS".to_vec()];
            args.extend(names.iter().cloned());
            let want = names.iter().filter(|n| m.get(cur, n).is_some()).count();
            Some((h.run(&args), int(want as i64)))
        }
        Op::Type(k) => {
            let want = if m.get(cur, &key(*k)).is_some() {
                "string"
            } else {
                "none"
            };
            Some((
                h.run(&[b"TYPE".to_vec(), key(*k)]),
                Reply::Simple(want.into()),
            ))
        }
        Op::Rename(a, b, nx) => {
            let name: &[u8] = if *nx { b"RENAMENX" } else { b"RENAME" };
            let got = h.run(&[name.to_vec(), key(*a), key(*b)]);
            let want = if m.get(cur, &key(*a)).is_none() {
                err("ERR no such key")
            } else if a == b {
                if *nx {
                    int(0)
                } else {
                    ok()
                }
            } else if *nx && m.get(cur, &key(*b)).is_some() {
                int(0)
            } else {
                let e = m.take(cur, &key(*a)).unwrap();
                m.state.insert((cur, key(*b)), e);
                if *nx {
                    int(1)
                } else {
                    ok()
                }
            };
            Some((got, want))
        }
        Op::Copy(a, b, db, replace) => {
            let mut args = vec![b"COPY".to_vec(), key(*a), key(*b)];
            if let Some(d) = db {
                args.extend([b"DB".to_vec(), d.to_string().into_bytes()]);
            }
            if *replace {
                args.push(b"REPLACE".to_vec());
            }
            let dst = db.unwrap_or(cur);
            let want = if dst == cur && a == b {
                err("ERR source and destination objects are the same")
            } else {
                match m.get(cur, &key(*a)).cloned() {
                    None => int(0),
                    Some(_) if !replace && m.get(dst, &key(*b)).is_some() => int(0),
                    Some(e) => {
                        m.state.insert((dst, key(*b)), e);
                        int(1)
                    }
                }
            };
            Some((h.run(&args), want))
        }
        Op::Move(k, db) => {
            let got = h.run(&[b"MOVE".to_vec(), key(*k), db.to_string().into_bytes()]);
            let want = if *db == cur {
                err("ERR source and destination objects are the same")
            } else if m.get(cur, &key(*k)).is_none() || m.get(*db, &key(*k)).is_some() {
                int(0)
            } else {
                let e = m.take(cur, &key(*k)).unwrap();
                m.state.insert((*db, key(*k)), e);
                int(1)
            };
            Some((got, want))
        }
        Op::SwapDb(a, b) => {
            let got = h.run(&["SWAPDB".to_string(), a.to_string(), b.to_string()]);
            m.state = std::mem::take(&mut m.state)
                .into_iter()
                .map(|((d, k), v)| {
                    let d = if d == *a {
                        *b
                    } else if d == *b {
                        *a
                    } else {
                        d
                    };
                    ((d, k), v)
                })
                .collect();
            Some((got, ok()))
        }
        Op::FlushDb => {
            m.state.retain(|(d, _), _| *d != cur);
            Some((h.run(&["FLUSHDB"]), ok()))
        }
        Op::FlushAll => {
            m.state.clear();
            Some((h.run(&["FLUSHALL", "ASYNC"]), ok()))
        }
        Op::Expire(k, t, ms, cond) => Some(expire_step(h, m, *k, *t, *ms, *cond)),
        Op::Persist(k) => {
            let got = h.run(&[b"PERSIST".to_vec(), key(*k)]);
            let want = match m.state.get_mut(&(cur, key(*k))) {
                Some((_, exp @ Some(_))) => {
                    *exp = None;
                    1
                }
                _ => 0,
            };
            Some((got, int(want)))
        }
        Op::Ttl(k, ms) => {
            let name: &[u8] = if *ms { b"PTTL" } else { b"TTL" };
            let want = match m.get(cur, &key(*k)) {
                None => -2,
                Some((_, None)) => -1,
                Some((_, Some(at))) if *ms => (at - now) as i64,
                Some((_, Some(at))) => ((at - now + 500) / 1000) as i64,
            };
            Some((h.run(&[name.to_vec(), key(*k)]), int(want)))
        }
        Op::Select(db) => {
            m.db = *db;
            Some((h.run(&["SELECT".to_string(), db.to_string()]), ok()))
        }
        Op::Advance(ms) => {
            h.now_ms += ms;
            purge(&mut m.state, h.now_ms);
            None
        }
        Op::Cron => {
            h.engine.cron(Now::from_ms(now));
            None
        }
        Op::Snapshot => {
            let s = h.engine.snapshot(Now::from_ms(now));
            m.snapshots.push((s, now, m.state.clone()));
            None
        }
    }
}

/// EXPIRE / PEXPIRE with a condition, against the model.
fn expire_step(
    h: &mut Harness,
    m: &mut ModelRun,
    k: u8,
    t: i64,
    ms: bool,
    cond: Cond,
) -> (Reply, Reply) {
    let now = h.now_ms;
    let mut args = vec![
        if ms { "PEXPIRE" } else { "EXPIRE" }.to_string(),
        String::from_utf8(key(k)).unwrap(),
        t.to_string(),
    ];
    let flag = match cond {
        Cond::None => None,
        Cond::Nx => Some("NX"),
        Cond::Xx => Some("XX"),
        Cond::Gt => Some("GT"),
        Cond::Lt => Some("LT"),
    };
    args.extend(flag.map(String::from));
    let got = h.run(&args);
    let when = now as i64 + if ms { t } else { t * 1000 };
    let slot = (m.db, key(k));
    let Some((_, cur)) = m.state.get(&slot).cloned() else {
        return (got, int(0));
    };
    let allowed = match (cond, cur) {
        (Cond::None, _) => true,
        (Cond::Nx, c) => c.is_none(),
        (Cond::Xx, c) => c.is_some(),
        (Cond::Gt, c) => c.is_some_and(|c| when > c as i64),
        (Cond::Lt, c) => !matches!(c, Some(c) if when >= c as i64),
    };
    if !allowed {
        return (got, int(0));
    }
    if when <= now as i64 {
        m.state.remove(&slot);
    } else {
        m.state.get_mut(&slot).unwrap().1 = Some(when as u64);
    }
    (got, int(1))
}

/// Runs a sequence; checks each reply, the state after each step, and every snapshot at the end.
fn run_sequence(seed: u64, ops: &[Op]) {
    let mut h = Harness::new(seed);
    let mut m = ModelRun {
        db: 0,
        state: Model::new(),
        snapshots: Vec::new(),
    };
    for (i, op) in ops.iter().enumerate() {
        if let Some((got, want)) = step(&mut h, &mut m, op) {
            assert_eq!(got, want, "step {i}: {op:?}");
        }
        check_state(&h, &m.state);
    }
    for (j, (snap, taken_ms, state)) in m.snapshots.iter().enumerate() {
        assert_eq!(snap.taken_ms, *taken_ms);
        assert_eq!(&snapshot_state(snap, *taken_ms), state, "snapshot {j}");
        for db in &snap.dbs {
            db.keys.check_invariants();
            db.expires.check_invariants();
            assert!(db.expires.iter().all(|(k, _)| db.keys.contains_key(&k[..])));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn keyspace_matches_model(seed in any::<u64>(), ops in prop::collection::vec(op_strategy(), 1..120)) {
        run_sequence(seed, &ops);
    }

    #[test]
    fn scan_returns_every_key_present_throughout(
        seed in any::<u64>(),
        stable in 0usize..200,
        count in 1usize..15,
        churn in prop::collection::vec((any::<bool>(), 0u16..400), 0..200),
    ) {
        scan_completeness(seed, stable, count, &churn);
    }
}

/// Fills a database with `stable` keys, then runs a full SCAN with COUNT `count`, inserting and
/// deleting other keys between calls (`churn`: insert or delete, key number). Every stable key
/// must come back at least once, and no key that never existed.
fn scan_completeness(seed: u64, stable: usize, count: usize, churn: &[(bool, u16)]) {
    let mut h = Harness::new(seed);
    for i in 0..stable {
        h.set(0, format!("stable:{i}").as_bytes(), b"v", None);
    }
    let mut ever: BTreeSet<Vec<u8>> = (0..stable)
        .map(|i| format!("stable:{i}").into_bytes())
        .collect();
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut churn = churn.iter();
    for calls in 0.. {
        assert!(
            calls <= stable + churn.len() + 1000,
            "SCAN does not terminate"
        );
        let Reply::Array(parts) = h.run(&[
            "SCAN".to_string(),
            cursor.clone(),
            "COUNT".into(),
            count.to_string(),
        ]) else {
            panic!("SCAN reply is not an array");
        };
        let [Reply::Bulk(next), Reply::Array(keys)] = &parts[..] else {
            panic!("SCAN reply shape: {parts:?}");
        };
        for k in keys {
            let Reply::Bulk(k) = k else {
                panic!("key is not a bulk")
            };
            assert!(ever.contains(k), "SCAN returned a key that never existed");
            seen.insert(k.clone());
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
        if let Some(&(insert, n)) = churn.next() {
            let name = format!("churn:{n}").into_bytes();
            if insert {
                h.set(0, &name, b"x", None);
                ever.insert(name);
            } else {
                h.run(&[b"DEL".to_vec(), name]);
            }
        }
    }
    for i in 0..stable {
        assert!(
            seen.contains(format!("stable:{i}").as_bytes()),
            "stable:{i} missed"
        );
    }
}

/// SCAN, KEYS and RANDOMKEY never return an expired key, and SCAN's filters apply.
#[test]
fn iteration_skips_expired_keys() {
    let mut h = Harness::new(7);
    for i in 0..50 {
        let px = if i % 2 == 0 { Some(1000) } else { None };
        h.set(0, format!("k{i}").as_bytes(), b"v", px);
    }
    h.now_ms += 1000;
    let Reply::Array(keys) = h.run(&["KEYS", "*"]) else {
        panic!()
    };
    assert_eq!(keys.len(), 25);
    assert_eq!(h.engine.core.dbs[0].len(), 50, "KEYS does not reclaim");
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Reply::Array(parts) = h.run(&["SCAN", &cursor, "MATCH", "k*", "TYPE", "string"]) else {
            panic!()
        };
        let [Reply::Bulk(next), Reply::Array(batch)] = &parts[..] else {
            panic!()
        };
        for k in batch {
            let Reply::Bulk(k) = k else { panic!() };
            let n: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            assert_eq!(n % 2, 1, "expired key k{n} returned");
            seen.insert(n);
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 25);
    assert_eq!(h.engine.core.dbs[0].len(), 25, "SCAN reclaims expired keys");
    let Reply::Array(none) = h.run(&["SCAN", "0", "COUNT", "100", "TYPE", "list"]) else {
        panic!()
    };
    assert_eq!(none[1], Reply::Array(vec![]));
    for _ in 0..20 {
        let Reply::Bulk(k) = h.run(&["RANDOMKEY"]) else {
            panic!()
        };
        let n: usize = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
        assert_eq!(n % 2, 1);
    }
}

/// KEYS returns exactly the matching keys (order aside); RANDOMKEY reaches every key.
#[test]
fn keys_and_randomkey_cover_the_keyspace() {
    let mut h = Harness::new(11);
    for i in 0..30 {
        h.set(0, format!("user:{i}").as_bytes(), b"v", None);
        h.set(0, format!("item:{i}").as_bytes(), b"v", None);
    }
    let Reply::Array(keys) = h.run(&["KEYS", "user:?"]) else {
        panic!()
    };
    let mut got: Vec<Reply> = keys;
    got.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    let want: Vec<Reply> = (0..10)
        .map(|i| Reply::Bulk(format!("user:{i}").into_bytes()))
        .collect();
    assert_eq!(got, want);
    let mut hit = BTreeSet::new();
    for _ in 0..2000 {
        let Reply::Bulk(k) = h.run(&["RANDOMKEY"]) else {
            panic!()
        };
        hit.insert(k);
    }
    assert_eq!(hit.len(), 60, "RANDOMKEY should reach every key");
}

/// Active expiry removes every expired key of a small database in one cycle, and keeps the
/// others.
#[test]
fn cron_reclaims_expired_keys() {
    let mut h = Harness::new(3);
    for db in 0..DBS {
        for i in 0..100 {
            let px = if i < 70 { Some(500) } else { Some(100_000) };
            h.set(db, format!("k{i}").as_bytes(), b"v", px);
        }
    }
    h.now_ms += 1000;
    for db in 0..DBS {
        assert_eq!(h.engine.core.dbs[db].len(), 100);
    }
    for _ in 0..5 {
        h.engine.cron(Now::from_ms(h.now_ms));
    }
    for db in 0..DBS {
        assert_eq!(h.engine.core.dbs[db].len(), 30);
        assert_eq!(h.engine.core.dbs[db].expires_len(), 30);
        h.engine.core.dbs[db].check_invariants();
    }
}

//! Model-based property tests of the hash and set commands: random sequences run through
//! `Engine::execute` against a model of `BTreeMap` hashes and `BTreeSet` sets (with the
//! encoding Redis would report, sticky once converted), with O(1) snapshots taken mid-sequence
//! that must still hold exactly their own state at the end, and full HSCAN/SSCAN walks with a
//! small COUNT that must return every member exactly once.
//!
//! Small encoding limits (4 entries, 8-byte values) make conversions frequent.

use kayvee_engine::{
    ArgvBuf, Config, ConnInfo, Engine, Handle, Now, Protocol, Reply, ReplyTree, Snapshot,
    Transport, ValueRef,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const T0_MS: u64 = 1_700_000_000_000;
/// hash-max-listpack-entries and set-max-intset-entries in these tests.
const ENTRIES_MAX: usize = 4;
/// hash-max-listpack-value in these tests.
const VALUE_MAX: usize = 8;

/// A key's modelled value: contents and whether Redis would have converted it (sticky).
#[derive(Clone, Debug, PartialEq)]
enum M {
    Hash(BTreeMap<Vec<u8>, Vec<u8>>, bool),
    Set(BTreeSet<Vec<u8>>, bool),
    Str,
}

type Model = BTreeMap<Vec<u8>, M>;

#[derive(Clone, Debug)]
enum Op {
    HSet(u8, Vec<(u8, u8)>),
    HDel(u8, Vec<u8>),
    HIncrBy(u8, u8, i8),
    HGetAll(u8),
    HScan(u8),
    SAdd(u8, Vec<u8>),
    SRem(u8, Vec<u8>),
    SMove(u8, u8, u8),
    Store(u8, u8, Vec<u8>),
    SPop(u8, u8),
    SScan(u8),
    SetStr(u8),
    Del(u8),
    Encoding(u8),
    Snapshot,
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

/// Fields and hash values: short, long (past VALUE_MAX) and numeric.
fn field(f: u8) -> Vec<u8> {
    match f % 8 {
        7 => b"a-long-field".to_vec(),
        n => format!("f{n}").into_bytes(),
    }
}

fn hvalue(v: u8) -> Vec<u8> {
    match v % 6 {
        5 => b"a value past the limit".to_vec(),
        n => format!("{}", n as i64 - 2).into_bytes(),
    }
}

/// Members: mostly integers (intset), some words.
fn member(m: u8) -> Vec<u8> {
    match m % 10 {
        8 => b"w".to_vec(),
        9 => b"007".to_vec(),
        n => format!("{}", n as i64 * 3 - 6).into_bytes(),
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..4;
    let small = prop::collection::vec(any::<u8>(), 1..4);
    prop_oneof![
        4 => (k.clone(), prop::collection::vec((any::<u8>(), any::<u8>()), 1..4))
            .prop_map(|(k, p)| Op::HSet(k, p)),
        2 => (k.clone(), small.clone()).prop_map(|(k, f)| Op::HDel(k, f)),
        2 => (k.clone(), any::<u8>(), any::<i8>()).prop_map(|(k, f, d)| Op::HIncrBy(k, f, d)),
        1 => k.clone().prop_map(Op::HGetAll),
        1 => k.clone().prop_map(Op::HScan),
        4 => (k.clone(), small.clone()).prop_map(|(k, m)| Op::SAdd(k, m)),
        2 => (k.clone(), small.clone()).prop_map(|(k, m)| Op::SRem(k, m)),
        1 => (k.clone(), k.clone(), any::<u8>()).prop_map(|(a, b, m)| Op::SMove(a, b, m)),
        2 => (0u8..3, k.clone(), prop::collection::vec(k.clone(), 1..4))
            .prop_map(|(o, d, s)| Op::Store(o, d, s)),
        1 => (k.clone(), 0u8..4).prop_map(|(k, c)| Op::SPop(k, c)),
        1 => k.clone().prop_map(Op::SScan),
        1 => k.clone().prop_map(Op::SetStr),
        1 => k.clone().prop_map(Op::Del),
        2 => k.clone().prop_map(Op::Encoding),
        1 => Just(Op::Snapshot),
    ]
}

struct Harness {
    engine: Engine,
    client: Handle,
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
        let mut h = Harness { engine, client };
        let (e, v) = (ENTRIES_MAX.to_string(), VALUE_MAX.to_string());
        for (p, x) in [
            ("hash-max-listpack-entries", &e),
            ("hash-max-listpack-value", &v),
            ("set-max-intset-entries", &e),
        ] {
            assert_eq!(h.run(&["CONFIG", "SET", p, x]), Reply::Simple("OK".into()));
        }
        h
    }

    fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let argv = ArgvBuf::from_args(args);
        let mut tree = ReplyTree::new(Protocol::Resp2);
        let now = Now::from_ms(T0_MS);
        self.engine
            .execute(self.client, &argv.argv(), now, &mut tree);
        let mut replies = tree.take();
        assert_eq!(replies.len(), 1, "one reply per command");
        replies.pop().unwrap()
    }
}

fn wrongtype() -> Reply {
    Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

/// The bulk strings of an array, set or map (pairs flattened, as RESP2 sends them).
fn bulks(r: &Reply) -> Vec<Vec<u8>> {
    match r {
        Reply::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [k.clone(), v.clone()])
            .flat_map(|x| bulks(&Reply::Array(vec![x])))
            .collect(),
        Reply::Array(items) | Reply::Set(items) => items
            .iter()
            .map(|i| match i {
                Reply::Bulk(b) => b.clone(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn is_int(m: &[u8]) -> bool {
    kayvee_engine::util::parse_i64(m).is_some()
}

/// A set's conversion state after adding members (sticky).
fn set_big(s: &BTreeSet<Vec<u8>>, was: bool) -> bool {
    was || s.len() > ENTRIES_MAX || !s.iter().all(|m| is_int(m))
}

/// A hash's conversion state after storing `f`/`v` (sticky).
fn hash_big(h: &BTreeMap<Vec<u8>, Vec<u8>>, was: bool, f: &[u8], v: &[u8]) -> bool {
    was || h.len() > ENTRIES_MAX || f.len() > VALUE_MAX || v.len() > VALUE_MAX
}

/// Walks a whole HSCAN/SSCAN with COUNT 2; returns every batch element (pairs flattened), or
/// the error reply.
fn full_scan(h: &mut Harness, cmd: &str, k: &[u8]) -> Result<Vec<Vec<u8>>, Reply> {
    let (mut cursor, mut all) = (b"0".to_vec(), Vec::new());
    for _ in 0..1000 {
        let r = h.run(&[cmd.as_bytes(), k, &cursor, b"COUNT", b"2"]);
        let Reply::Array(parts) = r else {
            return Err(r);
        };
        let Reply::Bulk(next) = &parts[0] else {
            panic!("cursor")
        };
        all.extend(bulks(&parts[1]));
        if next == b"0" {
            return Ok(all);
        }
        cursor = next.clone();
    }
    panic!("scan did not finish")
}

/// Applies one op to engine and model, checking the reply.
fn step(h: &mut Harness, model: &mut Model, op: &Op) {
    match op {
        Op::HSet(k, pairs) => hset(h, model, &key(*k), pairs),
        Op::HDel(k, fs) => {
            let k = key(*k);
            let fields: Vec<Vec<u8>> = fs.iter().map(|f| field(*f)).collect();
            let mut cmd = vec![b"HDEL".to_vec(), k.clone()];
            cmd.extend(fields.iter().cloned());
            let want = match model.get_mut(&k) {
                None => Reply::Int(0),
                Some(M::Hash(m, _)) => {
                    let n = fields.iter().filter(|f| m.remove(*f).is_some()).count();
                    if m.is_empty() {
                        model.remove(&k);
                    }
                    Reply::Int(n as i64)
                }
                Some(_) => wrongtype(),
            };
            assert_eq!(h.run(&cmd), want, "{op:?}");
        }
        Op::HIncrBy(k, f, d) => hincrby(h, model, &key(*k), &field(*f), *d),
        Op::HGetAll(k) | Op::HScan(k) => {
            let k = key(*k);
            let got = match op {
                Op::HGetAll(_) => h.run(&[b"HGETALL".as_slice(), &k]),
                _ => match full_scan(h, "HSCAN", &k) {
                    Ok(flat) => Reply::Array(flat.into_iter().map(Reply::Bulk).collect()),
                    Err(e) => e,
                },
            };
            match model.get(&k) {
                Some(M::Set(..)) | Some(M::Str) => {
                    assert_eq!(got, wrongtype(), "{op:?}");
                }
                m => {
                    let flat = bulks(&got);
                    let pairs: BTreeMap<Vec<u8>, Vec<u8>> = flat
                        .chunks(2)
                        .map(|p| (p[0].clone(), p[1].clone()))
                        .collect();
                    assert_eq!(pairs.len() * 2, flat.len(), "no field twice: {op:?}");
                    let want = match m {
                        Some(M::Hash(m, _)) => m.clone(),
                        _ => BTreeMap::new(),
                    };
                    assert_eq!(pairs, want, "{op:?}");
                }
            }
        }
        Op::SAdd(k, ms) | Op::SRem(k, ms) => {
            let add = matches!(op, Op::SAdd(..));
            sadd_srem(h, model, &key(*k), ms, add)
        }
        Op::SMove(a, b, m) => smove(h, model, &key(*a), &key(*b), &member(*m)),
        Op::Store(o, d, srcs) => store(h, model, *o, &key(*d), srcs),
        Op::SPop(k, c) => spop(h, model, &key(*k), *c),
        Op::SScan(k) => {
            let k = key(*k);
            let got = full_scan(h, "SSCAN", &k);
            match model.get(&k) {
                Some(M::Hash(..)) | Some(M::Str) => assert_eq!(got, Err(wrongtype())),
                m => {
                    let got = got.expect("a set or nothing scans");
                    let set: BTreeSet<Vec<u8>> = got.iter().cloned().collect();
                    assert_eq!(set.len(), got.len(), "no member twice");
                    let want = match m {
                        Some(M::Set(s, _)) => s.clone(),
                        _ => BTreeSet::new(),
                    };
                    assert_eq!(set, want);
                }
            }
        }
        Op::SetStr(k) => {
            h.run(&[b"SET".as_slice(), &key(*k), b"v"]);
            model.insert(key(*k), M::Str);
        }
        Op::Del(k) => {
            h.run(&[b"DEL".as_slice(), &key(*k)]);
            model.remove(&key(*k));
        }
        Op::Encoding(k) => {
            let want = match model.get(&key(*k)) {
                None => Reply::Null,
                Some(M::Hash(_, big)) => {
                    Reply::Bulk(if *big { "hashtable" } else { "listpack" }.into())
                }
                Some(M::Set(_, big)) => {
                    Reply::Bulk(if *big { "hashtable" } else { "intset" }.into())
                }
                Some(M::Str) => Reply::Bulk("embstr".into()),
            };
            let got = h.run(&[b"OBJECT".as_slice(), b"ENCODING", &key(*k)]);
            assert_eq!(got, want, "{op:?} in {model:?}");
        }
        Op::Snapshot => {}
    }
}

fn hset(h: &mut Harness, model: &mut Model, k: &[u8], pairs: &[(u8, u8)]) {
    let mut cmd = vec![b"HSET".to_vec(), k.to_vec()];
    let entry = model
        .entry(k.to_vec())
        .or_insert_with(|| M::Hash(BTreeMap::new(), false));
    let M::Hash(m, big) = entry else {
        pairs
            .iter()
            .for_each(|(f, v)| cmd.extend([field(*f), hvalue(*v)]));
        assert_eq!(h.run(&cmd), wrongtype());
        return;
    };
    let mut added = 0;
    for (f, v) in pairs {
        let (f, v) = (field(*f), hvalue(*v));
        cmd.extend([f.clone(), v.clone()]);
        added += i64::from(m.insert(f.clone(), v.clone()).is_none());
        *big = hash_big(m, *big, &f, &v);
    }
    assert_eq!(h.run(&cmd), Reply::Int(added));
}

fn hincrby(h: &mut Harness, model: &mut Model, k: &[u8], f: &[u8], d: i8) {
    let d_text = d.to_string().into_bytes();
    let got = h.run(&[b"HINCRBY".as_slice(), k, f, &d_text]);
    let entry = model
        .entry(k.to_vec())
        .or_insert_with(|| M::Hash(BTreeMap::new(), false));
    let M::Hash(m, big) = entry else {
        assert_eq!(got, wrongtype());
        return;
    };
    let old = m.get(f).map(|v| kayvee_engine::util::parse_i64(v));
    let want = match old {
        Some(None) => Reply::Error("ERR hash value is not an integer".into()),
        Some(Some(n)) => Reply::Int(n + i64::from(d)),
        None => Reply::Int(i64::from(d)),
    };
    if let Reply::Int(n) = want {
        let v = n.to_string().into_bytes();
        m.insert(f.to_vec(), v.clone());
        *big = hash_big(m, *big, f, &v);
    }
    if m.is_empty() {
        model.remove(k);
    }
    assert_eq!(got, want);
}

fn sadd_srem(h: &mut Harness, model: &mut Model, k: &[u8], ms: &[u8], add: bool) {
    let members: Vec<Vec<u8>> = ms.iter().map(|m| member(*m)).collect();
    let mut cmd = vec![
        if add {
            b"SADD".to_vec()
        } else {
            b"SREM".to_vec()
        },
        k.to_vec(),
    ];
    cmd.extend(members.iter().cloned());
    let got = h.run(&cmd);
    let want = match model.get_mut(k) {
        None if !add => Reply::Int(0),
        None => {
            let s: BTreeSet<Vec<u8>> = members.into_iter().collect();
            let n = s.len() as i64;
            let big = set_big(&s, false);
            model.insert(k.to_vec(), M::Set(s, big));
            Reply::Int(n)
        }
        Some(M::Set(s, big)) => {
            let n = members
                .iter()
                .filter(|m| {
                    if add {
                        s.insert((*m).clone())
                    } else {
                        s.remove(*m)
                    }
                })
                .count();
            *big = add && set_big(s, *big) || *big;
            if s.is_empty() {
                model.remove(k);
            }
            Reply::Int(n as i64)
        }
        Some(_) => wrongtype(),
    };
    assert_eq!(got, want);
}

fn smove(h: &mut Harness, model: &mut Model, a: &[u8], b: &[u8], m: &[u8]) {
    let got = h.run(&[b"SMOVE".as_slice(), a, b, m]);
    let want = match (model.get(a), model.get(b)) {
        (None, _) => Reply::Int(0),
        (Some(M::Set(..)), None | Some(M::Set(..))) if a == b => {
            let Some(M::Set(s, _)) = model.get(a) else {
                unreachable!()
            };
            Reply::Int(i64::from(s.contains(m)))
        }
        (Some(M::Set(s, _)), None | Some(M::Set(..))) if !s.contains(m) => Reply::Int(0),
        (Some(M::Set(..)), None | Some(M::Set(..))) => {
            let Some(M::Set(s, _)) = model.get_mut(a) else {
                unreachable!()
            };
            s.remove(m);
            if s.is_empty() {
                model.remove(a);
            }
            let dst = model
                .entry(b.to_vec())
                .or_insert_with(|| M::Set(BTreeSet::new(), false));
            let M::Set(d, big) = dst else { unreachable!() };
            d.insert(m.to_vec());
            *big = set_big(d, *big);
            Reply::Int(1)
        }
        _ => wrongtype(),
    };
    assert_eq!(got, want);
}

fn store(h: &mut Harness, model: &mut Model, o: u8, dst: &[u8], srcs: &[u8]) {
    let name = ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"][o as usize];
    let keys: Vec<Vec<u8>> = srcs.iter().map(|k| key(*k)).collect();
    let mut cmd = vec![name.as_bytes().to_vec(), dst.to_vec()];
    cmd.extend(keys.iter().cloned());
    let got = h.run(&cmd);
    let mut sets = Vec::new();
    for k in &keys {
        match model.get(k) {
            None => sets.push(BTreeSet::new()),
            Some(M::Set(s, _)) => sets.push(s.clone()),
            Some(_) => return assert_eq!(got, wrongtype()),
        }
    }
    let result: BTreeSet<Vec<u8>> = match o {
        0 => sets.iter().skip(1).fold(sets[0].clone(), |acc, s| &acc & s),
        1 => sets.iter().flatten().cloned().collect(),
        _ => sets.iter().skip(1).fold(sets[0].clone(), |acc, s| &acc - s),
    };
    assert_eq!(got, Reply::Int(result.len() as i64), "{name}");
    if result.is_empty() {
        model.remove(dst);
    } else {
        let big = set_big(&result, false);
        model.insert(dst.to_vec(), M::Set(result, big));
    }
}

fn spop(h: &mut Harness, model: &mut Model, k: &[u8], c: u8) {
    let got = h.run(&[b"SPOP".as_slice(), k, c.to_string().as_bytes()]);
    match model.get_mut(k) {
        None => assert_eq!(got, Reply::Set(vec![])),
        Some(M::Set(s, _)) => {
            let popped = bulks(&got);
            assert_eq!(popped.len(), (c as usize).min(s.len()));
            for m in &popped {
                assert!(s.remove(m), "popped a non-member or twice: {m:?}");
            }
            if s.is_empty() {
                model.remove(k);
            }
        }
        Some(_) => assert_eq!(got, wrongtype()),
    }
}

/// The modelled contents of a snapshot's database 0.
fn snapshot_model(snap: &Snapshot) -> Model {
    snap.dbs[0]
        .keys
        .iter()
        .map(|(k, e)| {
            let big = e.meta().has(kayvee_engine::value::Meta::BIG);
            let m = match e.value() {
                ValueRef::Hash(h) => M::Hash(
                    {
                        assert_eq!(h.is_big(), big, "map form exactly when hashtable");
                        h.check_invariants();
                        h.iter()
                    }
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect(),
                    big,
                ),
                ValueRef::Set(s) => M::Set(s.iter().map(|m| m.to_vec()).collect(), big),
                _ => M::Str,
            };
            (k.to_vec(), m)
        })
        .collect()
}

fn run_sequence(seed: u64, ops: &[Op]) {
    let mut h = Harness::new(seed);
    let mut model = Model::new();
    let mut snaps = Vec::new();
    for op in ops {
        if let Op::Snapshot = op {
            snaps.push((h.engine.snapshot(Now::from_ms(T0_MS)), model.clone()));
        }
        step(&mut h, &mut model, op);
        h.engine.core.dbs[0].check_invariants();
    }
    let live = h.engine.snapshot(Now::from_ms(T0_MS));
    assert_eq!(snapshot_model(&live), model, "final state");
    for (snap, want) in &snaps {
        assert_eq!(&snapshot_model(snap), want, "a snapshot changed");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn hashes_and_sets_follow_the_model(
        seed in any::<u64>(),
        ops in prop::collection::vec(op_strategy(), 1..120),
    ) {
        run_sequence(seed, &ops);
    }
}

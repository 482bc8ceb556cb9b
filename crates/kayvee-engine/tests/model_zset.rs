//! Model-based property tests of the sorted-set commands: random sequences of ZADD (with
//! flags), ZINCRBY, ZREM, ZPOPMIN/MAX, ZREMRANGEBYSCORE/RANK and ZUNIONSTORE run through
//! `Engine::execute` against a `BTreeMap<member, score>` model per key; after every step the
//! reads (ZCARD, ZSCORE, ZRANK, ZRANGE WITHSCORES, ZRANGEBYSCORE, ZCOUNT) must agree with the
//! model and the stored `ZSet` must pass its invariants. Snapshots taken mid-sequence must
//! still show exactly their own state at the end.

use kayvee_engine::{
    value::ZSet, ArgvBuf, ConnInfo, Engine, Handle, Now, Protocol, Reply, ReplyTree, Snapshot,
    Transport, ValueRef,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One sorted set in the model.
type ZModel = BTreeMap<Vec<u8>, f64>;
/// The whole model: key to sorted set.
type Model = BTreeMap<Vec<u8>, ZModel>;

const T0_MS: u64 = 1_700_000_000_000;

/// One step.
#[derive(Clone, Debug)]
enum Op {
    Zadd(u8, Vec<(i8, u8)>, Flag),
    Zincrby(u8, i8, u8),
    Zrem(u8, Vec<u8>),
    Pop(u8, bool, u8),
    RemRangeByScore(u8, i8, i8),
    RemRangeByRank(u8, i8, i8),
    UnionStore(u8, u8, u8),
    Snapshot,
}

/// A ZADD condition flag.
#[derive(Clone, Copy, Debug)]
enum Flag {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

fn key(k: u8) -> Vec<u8> {
    format!("z{k}").into_bytes()
}

fn member(m: u8) -> Vec<u8> {
    format!("m{m}").into_bytes()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..3;
    let m = 0u8..8;
    let s = -5i8..6;
    let flag = prop_oneof![
        3 => Just(Flag::None),
        1 => Just(Flag::Nx),
        1 => Just(Flag::Xx),
        1 => Just(Flag::Gt),
        1 => Just(Flag::Lt)
    ];
    prop_oneof![
        6 => (k.clone(), prop::collection::vec((s.clone(), m.clone()), 1..4), flag)
            .prop_map(|(k, p, f)| Op::Zadd(k, p, f)),
        2 => (k.clone(), s.clone(), m.clone()).prop_map(|(k, s, m)| Op::Zincrby(k, s, m)),
        2 => (k.clone(), prop::collection::vec(m.clone(), 1..3)).prop_map(|(k, m)| Op::Zrem(k, m)),
        2 => (k.clone(), any::<bool>(), 0u8..4).prop_map(|(k, max, n)| Op::Pop(k, max, n)),
        1 => (k.clone(), s.clone(), s.clone()).prop_map(|(k, a, b)| Op::RemRangeByScore(k, a, b)),
        1 => (k.clone(), -4i8..5, -4i8..5).prop_map(|(k, a, b)| Op::RemRangeByRank(k, a, b)),
        1 => (k.clone(), k.clone(), k).prop_map(|(d, a, b)| Op::UnionStore(d, a, b)),
        1 => Just(Op::Snapshot),
    ]
}

struct Harness {
    engine: Engine,
    client: Handle,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let now = Now::from_ms(T0_MS);
        let mut engine = Engine::new(Default::default(), seed, now);
        let conn = ConnInfo {
            transport: Transport::Tcp {
                addr: "127.0.0.1:40001".into(),
                laddr: "127.0.0.1:6379".into(),
            },
            fd: 8,
        };
        let client = engine.connect(conn, now);
        Harness {
            engine,
            client,
            model: Model::new(),
            snapshots: Vec::new(),
        }
    }

    fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let argv = ArgvBuf::from_args(args);
        let mut tree = ReplyTree::new(Protocol::Resp2);
        let now = Now::from_ms(T0_MS);
        self.engine
            .execute(self.client, &argv.argv(), now, &mut tree);
        tree.take().pop().expect("one reply")
    }

    fn zset(&mut self, k: u8) -> &mut ZModel {
        self.model.entry(key(k)).or_default()
    }

    /// Drops emptied sets from the model (Redis deletes empty keys).
    fn prune(&mut self) {
        self.model.retain(|_, z| !z.is_empty());
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Zadd(k, pairs, flag) => self.zadd(*k, pairs, *flag),
            Op::Zincrby(k, s, m) => {
                let r = self.run(&[
                    b"ZINCRBY".to_vec(),
                    key(*k),
                    s.to_string().into_bytes(),
                    member(*m),
                ]);
                let v = self.zset(*k).entry(member(*m)).or_insert(0.0);
                *v += f64::from(*s);
                assert_eq!(r, Reply::Double(*v));
            }
            Op::Zrem(k, ms) => {
                let mut cmd = vec![b"ZREM".to_vec(), key(*k)];
                cmd.extend(ms.iter().map(|m| member(*m)));
                let r = self.run(&cmd);
                let z = self.zset(*k);
                let mut uniq = ms.clone();
                uniq.sort_unstable();
                uniq.dedup();
                let n = uniq
                    .iter()
                    .filter(|m| z.remove(&member(**m)).is_some())
                    .count();
                assert_eq!(r, Reply::Int(n as i64));
            }
            Op::Pop(k, max, n) => self.pop(*k, *max, *n),
            Op::RemRangeByScore(k, a, b) => {
                let r = self.run(&[
                    b"ZREMRANGEBYSCORE".to_vec(),
                    key(*k),
                    a.to_string().into_bytes(),
                    b.to_string().into_bytes(),
                ]);
                let (lo, hi) = (f64::from(*a), f64::from(*b));
                let z = self.zset(*k);
                let before = z.len();
                z.retain(|_, s| !(*s >= lo && *s <= hi));
                assert_eq!(r, Reply::Int((before - z.len()) as i64));
            }
            Op::RemRangeByRank(k, a, b) => {
                let r = self.run(&[
                    b"ZREMRANGEBYRANK".to_vec(),
                    key(*k),
                    a.to_string().into_bytes(),
                    b.to_string().into_bytes(),
                ]);
                let order = ordered(self.zset(*k));
                let len = order.len() as i64;
                let s = if *a < 0 {
                    (i64::from(*a) + len).max(0)
                } else {
                    i64::from(*a)
                };
                let e = if *b < 0 {
                    i64::from(*b) + len
                } else {
                    i64::from(*b)
                }
                .min(len - 1);
                let mut n = 0;
                if s <= e && s < len {
                    for (m, _) in &order[s as usize..=e as usize] {
                        self.zset(*k).remove(m);
                        n += 1;
                    }
                }
                assert_eq!(r, Reply::Int(n));
            }
            Op::UnionStore(d, a, b) => {
                let r = self.run(&[
                    b"ZUNIONSTORE".to_vec(),
                    key(*d),
                    b"2".to_vec(),
                    key(*a),
                    key(*b),
                ]);
                let mut u = self.model.get(&key(*a)).cloned().unwrap_or_default();
                for (m, s) in self.model.get(&key(*b)).cloned().unwrap_or_default() {
                    *u.entry(m).or_insert(0.0) += s;
                }
                assert_eq!(r, Reply::Int(u.len() as i64));
                self.model.insert(key(*d), u);
            }
            Op::Snapshot => {
                let snap = self.engine.snapshot(Now::from_ms(T0_MS));
                self.prune();
                self.snapshots.push((snap, self.model.clone()));
            }
        }
        self.prune();
    }

    fn zadd(&mut self, k: u8, pairs: &[(i8, u8)], flag: Flag) {
        let mut cmd = vec![b"ZADD".to_vec(), key(k)];
        match flag {
            Flag::None => {}
            Flag::Nx => cmd.push(b"NX".to_vec()),
            Flag::Xx => cmd.push(b"XX".to_vec()),
            Flag::Gt => cmd.push(b"GT".to_vec()),
            Flag::Lt => cmd.push(b"LT".to_vec()),
        }
        for (s, m) in pairs {
            cmd.push(s.to_string().into_bytes());
            cmd.push(member(*m));
        }
        let r = self.run(&cmd);
        let z = self.zset(k);
        let mut added = 0;
        for (s, m) in pairs {
            let (s, m) = (f64::from(*s), member(*m));
            match (z.get(&m).copied(), flag) {
                (None, Flag::Xx) | (Some(_), Flag::Nx) => {}
                (Some(old), Flag::Gt) if s <= old => {}
                (Some(old), Flag::Lt) if s >= old => {}
                (old, _) => {
                    added += i64::from(old.is_none());
                    z.insert(m, s);
                }
            }
        }
        assert_eq!(r, Reply::Int(added));
    }

    fn pop(&mut self, k: u8, max: bool, n: u8) {
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        let r = self.run(&[name.to_vec(), key(k), n.to_string().into_bytes()]);
        let mut order = ordered(self.zset(k));
        if max {
            order.reverse();
        }
        let mut want = Vec::new();
        for (m, s) in order.into_iter().take(n as usize) {
            self.zset(k).remove(&m);
            want.push(Reply::Bulk(m));
            want.push(Reply::Double(s));
        }
        assert_eq!(r, Reply::Array(want));
    }

    /// Every read agrees with the model, and the stored sets are well formed.
    fn check(&mut self) {
        for k in 0..3u8 {
            let want = self.model.get(&key(k)).cloned().unwrap_or_default();
            let order = ordered(&want);
            assert_eq!(
                self.run(&[b"ZCARD".to_vec(), key(k)]),
                Reply::Int(want.len() as i64)
            );
            let mut flat = Vec::new();
            for (m, s) in &order {
                flat.push(Reply::Bulk(m.clone()));
                flat.push(Reply::Double(*s));
            }
            assert_eq!(
                self.run(&[
                    b"ZRANGE".to_vec(),
                    key(k),
                    b"0".to_vec(),
                    b"-1".to_vec(),
                    b"WITHSCORES".to_vec()
                ]),
                Reply::Array(flat)
            );
            for (rank, (m, s)) in order.iter().enumerate() {
                assert_eq!(
                    self.run(&[b"ZRANK".to_vec(), key(k), m.clone()]),
                    Reply::Int(rank as i64)
                );
                assert_eq!(
                    self.run(&[b"ZSCORE".to_vec(), key(k), m.clone()]),
                    Reply::Double(*s)
                );
            }
            let in_range: Vec<Reply> = order
                .iter()
                .filter(|(_, s)| *s > -1.0 && *s <= 2.0)
                .map(|(m, _)| Reply::Bulk(m.clone()))
                .collect();
            assert_eq!(
                self.run(&[b"ZCOUNT".to_vec(), key(k), b"(-1".to_vec(), b"2".to_vec()]),
                Reply::Int(in_range.len() as i64)
            );
            assert_eq!(
                self.run(&[
                    b"ZRANGEBYSCORE".to_vec(),
                    key(k),
                    b"(-1".to_vec(),
                    b"2".to_vec()
                ]),
                Reply::Array(in_range)
            );
            if let Some(e) = self.engine.core.dbs[0].snapshot().keys.get(&key(k)[..]) {
                match e.value() {
                    ValueRef::ZSet(z) => {
                        z.check_invariants();
                        let big = e.meta().has(kayvee_engine::value::Meta::BIG);
                        assert_eq!(z.is_big(), big, "tree form exactly when skiplist");
                    }
                    other => panic!("not a zset: {other:?}"),
                }
            }
        }
    }

    /// Each snapshot still shows exactly the model it was taken with.
    fn check_snapshots(&self) {
        for (snap, model) in &self.snapshots {
            let keys = &snap.dbs[0].keys;
            assert_eq!(keys.len(), model.len());
            for (k, want) in model {
                let e = keys.get(&k[..]).expect("key in snapshot");
                let ValueRef::ZSet(z) = e.value() else {
                    panic!("not a zset")
                };
                assert_eq!(&as_model(z), want);
            }
        }
    }
}

/// A model set in Redis order: by score, then member.
fn ordered(z: &ZModel) -> Vec<(Vec<u8>, f64)> {
    let mut v: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
    v
}

fn as_model(z: &ZSet) -> ZModel {
    z.check_invariants();
    z.iter().map(|e| (e.1.to_vec(), e.0)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn zset_commands_match_a_btreemap_model(seed in any::<u64>(), ops in prop::collection::vec(op_strategy(), 1..60)) {
        let mut h = Harness::new(seed);
        for op in &ops {
            h.apply(op);
            h.check();
        }
        h.check_snapshots();
    }
}

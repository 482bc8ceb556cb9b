//! Model-based property tests of the list commands: random sequences of pushes, pops, ranges,
//! LSET/LREM/LTRIM/LINSERT/LPOS, LMOVE and blocking BLPOP/BRPOP (three extra clients) run
//! through `Engine::execute` against a `VecDeque` model with a FIFO queue of waiters per key.
//! Snapshots taken mid-sequence must still show exactly their own lists at the end.

use kayvee_engine::{
    ArgvBuf, ConnInfo, Engine, Handle, Now, Reply, ReplyTree, Snapshot, Transport, ValueRef,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

const T0_MS: u64 = 1_700_000_000_000;
const KEYS: u8 = 3;
const WAITERS: usize = 3;

type Lists = BTreeMap<u8, VecDeque<Vec<u8>>>;

#[derive(Clone, Debug)]
enum Op {
    Push(u8, bool, Vec<u8>),
    Pop(u8, bool, Option<u8>),
    Range(u8, i8, i8),
    Set(u8, i8, u8),
    Rem(u8, i8, u8),
    Trim(u8, i8, i8),
    Insert(u8, bool, u8, u8),
    Pos(u8, u8, i8, Option<u8>, u8),
    Move(u8, u8, bool, bool),
    Block(usize, u8, bool),
    Snapshot,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..KEYS;
    let e = 0u8..4;
    prop_oneof![
        6 => (k.clone(), any::<bool>(), prop::collection::vec(e.clone(), 1..4))
            .prop_map(|(k, f, v)| Op::Push(k, f, v)),
        3 => (k.clone(), any::<bool>(), prop::option::of(0u8..4)).prop_map(|(k, f, c)| Op::Pop(k, f, c)),
        2 => (k.clone(), -5i8..5, -5i8..5).prop_map(|(k, a, b)| Op::Range(k, a, b)),
        1 => (k.clone(), -5i8..5, e.clone()).prop_map(|(k, i, v)| Op::Set(k, i, v)),
        1 => (k.clone(), -2i8..3, e.clone()).prop_map(|(k, c, v)| Op::Rem(k, c, v)),
        1 => (k.clone(), -5i8..5, -5i8..5).prop_map(|(k, a, b)| Op::Trim(k, a, b)),
        1 => (k.clone(), any::<bool>(), e.clone(), e.clone()).prop_map(|(k, a, p, v)| Op::Insert(k, a, p, v)),
        2 => (k.clone(), e.clone(), prop_oneof![-3i8..0, 1i8..4], prop::option::of(0u8..3), 0u8..4)
            .prop_map(|(k, v, r, c, m)| Op::Pos(k, v, r, c, m)),
        2 => (k.clone(), k.clone(), any::<bool>(), any::<bool>()).prop_map(|(a, b, f, t)| Op::Move(a, b, f, t)),
        2 => (0..WAITERS, k.clone(), any::<bool>()).prop_map(|(c, k, f)| Op::Block(c, k, f)),
        1 => Just(Op::Snapshot),
    ]
}

fn key(k: u8) -> String {
    format!("l{k}")
}

fn elem(e: u8) -> Vec<u8> {
    vec![b'a' + e]
}

fn bulk(v: &[u8]) -> Reply {
    Reply::Bulk(v.to_vec())
}

fn bulks(items: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Array(items.into_iter().map(Reply::Bulk).collect())
}

/// Redis's inclusive, possibly negative range, clamped.
fn range(a: i64, b: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let s = if a < 0 { a + len } else { a }.max(0);
    let e = if b < 0 { b + len } else { b }.min(len - 1);
    (s <= e && s < len).then(|| (s as usize, e as usize + 1))
}

struct Harness {
    engine: Engine,
    main: Handle,
    waiters: Vec<Handle>,
    now: Now,
    lists: Lists,
    /// Per key, the model's waiting clients (index into `waiters`, pops from the head?).
    queues: BTreeMap<u8, VecDeque<(usize, bool)>>,
    blocked: Vec<bool>,
}

fn conn(n: i64) -> ConnInfo {
    ConnInfo {
        transport: Transport::Tcp {
            addr: format!("127.0.0.1:{}", 50000 + n),
            laddr: "127.0.0.1:6379".into(),
        },
        fd: n,
    }
}

impl Harness {
    fn new() -> Self {
        let now = Now::from_ms(T0_MS);
        let mut engine = Engine::new(Default::default(), 7, now);
        let main = engine.connect(conn(0), now);
        let waiters = (1..=WAITERS as i64)
            .map(|i| engine.connect(conn(i), now))
            .collect();
        Harness {
            engine,
            main,
            waiters,
            now,
            lists: Lists::new(),
            queues: BTreeMap::new(),
            blocked: vec![false; WAITERS],
        }
    }

    fn run_as(&mut self, h: Handle, args: &[Vec<u8>]) -> Vec<Reply> {
        let argv = ArgvBuf::from_args(args);
        let mut tree = ReplyTree::new(self.engine.protocol(h));
        self.engine.execute(h, &argv.argv(), self.now, &mut tree);
        tree.take()
    }

    fn run(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut r = self.run_as(self.main, args);
        assert_eq!(r.len(), 1, "{args:?}");
        r.pop().unwrap()
    }

    /// Serves the model's waiters of key `k` while it has elements; returns the expected
    /// wakeups.
    fn serve(&mut self, k: u8, woken: &mut Vec<(Handle, Vec<Reply>)>) {
        loop {
            let Some(list) = self.lists.get_mut(&k) else {
                return;
            };
            let Some(&(c, front)) = self.queues.get(&k).and_then(|q| q.front()) else {
                return;
            };
            self.queues.get_mut(&k).unwrap().pop_front();
            let v = if front {
                list.pop_front()
            } else {
                list.pop_back()
            }
            .unwrap();
            if list.is_empty() {
                self.lists.remove(&k);
            }
            self.blocked[c] = false;
            let r = Reply::Array(vec![bulk(key(k).as_bytes()), bulk(&v)]);
            woken.push((self.waiters[c], vec![r]));
        }
    }

    fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        parts.iter().map(|p| p.to_vec()).collect()
    }

    /// Runs one op on the engine and the model; checks the reply and the wakeups.
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let mut woken = Vec::new();
        let (got, want) = match op {
            Op::Push(k, front, items) => {
                let name: &[u8] = if *front { b"LPUSH" } else { b"RPUSH" };
                let mut a = Self::args(&[name, key(*k).as_bytes()]);
                a.extend(items.iter().map(|&e| elem(e)));
                let got = self.run(&a);
                let l = self.lists.entry(*k).or_default();
                for &e in items {
                    if *front {
                        l.push_front(elem(e))
                    } else {
                        l.push_back(elem(e))
                    }
                }
                let want = Reply::Int(l.len() as i64);
                self.serve(*k, &mut woken);
                (got, want)
            }
            Op::Pop(k, front, count) => {
                let name: &[u8] = if *front { b"LPOP" } else { b"RPOP" };
                let mut a = Self::args(&[name, key(*k).as_bytes()]);
                if let Some(c) = count {
                    a.push(c.to_string().into_bytes());
                }
                let got = self.run(&a);
                let want = match (self.lists.get_mut(k), count) {
                    (None, None) => Reply::Null,
                    (None, Some(_)) => Reply::NullArray,
                    (Some(l), c) => {
                        let n = c.map_or(1, |c| c as usize).min(l.len());
                        let items: Vec<Vec<u8>> = (0..n)
                            .map(|_| if *front { l.pop_front() } else { l.pop_back() }.unwrap())
                            .collect();
                        if l.is_empty() {
                            self.lists.remove(k);
                        }
                        match c {
                            None => bulk(&items[0]),
                            Some(_) => bulks(items),
                        }
                    }
                };
                (got, want)
            }
            Op::Range(k, a, b) => {
                let got = self.run(&Self::args(&[
                    b"LRANGE",
                    key(*k).as_bytes(),
                    a.to_string().as_bytes(),
                    b.to_string().as_bytes(),
                ]));
                let l = self.lists.get(k).cloned().unwrap_or_default();
                let want = match range(*a as i64, *b as i64, l.len()) {
                    Some((s, e)) => bulks(l.range(s..e).cloned()),
                    None => Reply::Array(vec![]),
                };
                (got, want)
            }
            Op::Set(k, i, v) => {
                let got = self.run(&Self::args(&[
                    b"LSET",
                    key(*k).as_bytes(),
                    i.to_string().as_bytes(),
                    &elem(*v),
                ]));
                let want = match self.lists.get_mut(k) {
                    None => Reply::Error("ERR no such key".into()),
                    Some(l) => {
                        let j = if *i < 0 {
                            *i as i64 + l.len() as i64
                        } else {
                            *i as i64
                        };
                        if (0..l.len() as i64).contains(&j) {
                            l[j as usize] = elem(*v);
                            Reply::Simple("OK".into())
                        } else {
                            Reply::Error("ERR index out of range".into())
                        }
                    }
                };
                (got, want)
            }
            Op::Rem(k, c, v) => {
                let got = self.run(&Self::args(&[
                    b"LREM",
                    key(*k).as_bytes(),
                    c.to_string().as_bytes(),
                    &elem(*v),
                ]));
                let mut removed = 0;
                if let Some(l) = self.lists.get_mut(k) {
                    let limit = if *c == 0 {
                        usize::MAX
                    } else {
                        c.unsigned_abs() as usize
                    };
                    let idx: Vec<usize> = if *c < 0 {
                        (0..l.len())
                            .rev()
                            .filter(|&i| l[i] == elem(*v))
                            .take(limit)
                            .collect()
                    } else {
                        (0..l.len())
                            .filter(|&i| l[i] == elem(*v))
                            .take(limit)
                            .collect()
                    };
                    let mut sorted = idx.clone();
                    sorted.sort_unstable();
                    for &i in sorted.iter().rev() {
                        l.remove(i);
                    }
                    removed = idx.len();
                    if l.is_empty() {
                        self.lists.remove(k);
                    }
                }
                (got, Reply::Int(removed as i64))
            }
            Op::Trim(k, a, b) => {
                let got = self.run(&Self::args(&[
                    b"LTRIM",
                    key(*k).as_bytes(),
                    a.to_string().as_bytes(),
                    b.to_string().as_bytes(),
                ]));
                if let Some(l) = self.lists.get_mut(k) {
                    match range(*a as i64, *b as i64, l.len()) {
                        Some((s, e)) => *l = l.range(s..e).cloned().collect(),
                        None => l.clear(),
                    }
                    if l.is_empty() {
                        self.lists.remove(k);
                    }
                }
                (got, Reply::Simple("OK".into()))
            }
            Op::Insert(k, after, p, v) => {
                let w: &[u8] = if *after { b"AFTER" } else { b"BEFORE" };
                let got = self.run(&Self::args(&[
                    b"LINSERT",
                    key(*k).as_bytes(),
                    w,
                    &elem(*p),
                    &elem(*v),
                ]));
                let want = match self.lists.get_mut(k) {
                    None => Reply::Int(0),
                    Some(l) => match l.iter().position(|x| *x == elem(*p)) {
                        None => Reply::Int(-1),
                        Some(i) => {
                            l.insert(i + usize::from(*after), elem(*v));
                            Reply::Int(l.len() as i64)
                        }
                    },
                };
                (got, want)
            }
            Op::Pos(k, v, rank, count, maxlen) => {
                let mut a = Self::args(&[b"LPOS", key(*k).as_bytes(), &elem(*v), b"RANK"]);
                a.push(rank.to_string().into_bytes());
                if let Some(c) = count {
                    a.push(b"COUNT".to_vec());
                    a.push(c.to_string().into_bytes());
                }
                a.push(b"MAXLEN".to_vec());
                a.push(maxlen.to_string().into_bytes());
                let got = self.run(&a);
                let l = self.lists.get(k).cloned().unwrap_or_default();
                let lim = if *maxlen == 0 {
                    l.len()
                } else {
                    (*maxlen as usize).min(l.len())
                };
                let order: Vec<usize> = if *rank > 0 {
                    (0..lim).collect()
                } else {
                    (l.len() - lim..l.len()).rev().collect()
                };
                let found: Vec<usize> = order
                    .into_iter()
                    .filter(|&i| l[i] == elem(*v))
                    .skip(rank.unsigned_abs() as usize - 1)
                    .take(match count {
                        None => 1,
                        Some(0) => usize::MAX,
                        Some(c) => *c as usize,
                    })
                    .collect();
                let want = match count {
                    None => found.first().map_or(Reply::Null, |&i| Reply::Int(i as i64)),
                    Some(_) => Reply::Array(found.iter().map(|&i| Reply::Int(i as i64)).collect()),
                };
                (got, want)
            }
            Op::Move(s, d, from, to) => {
                let side = |f: bool| -> &'static [u8] {
                    if f {
                        b"LEFT"
                    } else {
                        b"RIGHT"
                    }
                };
                let got = self.run(&Self::args(&[
                    b"LMOVE",
                    key(*s).as_bytes(),
                    key(*d).as_bytes(),
                    side(*from),
                    side(*to),
                ]));
                let want = match self.lists.get_mut(s) {
                    None => Reply::Null,
                    Some(l) => {
                        let v = if *from { l.pop_front() } else { l.pop_back() }.unwrap();
                        if l.is_empty() {
                            self.lists.remove(s);
                        }
                        let dl = self.lists.entry(*d).or_default();
                        if *to {
                            dl.push_front(v.clone())
                        } else {
                            dl.push_back(v.clone())
                        }
                        self.serve(*d, &mut woken);
                        bulk(&v)
                    }
                };
                (got, want)
            }
            Op::Block(c, k, front) => {
                if self.blocked[*c] {
                    return Ok(());
                }
                let name: &[u8] = if *front { b"BLPOP" } else { b"BRPOP" };
                let h = self.waiters[*c];
                let got = self.run_as(h, &Self::args(&[name, key(*k).as_bytes(), b"0"]));
                let want = match self.lists.get_mut(k) {
                    Some(l) => {
                        let v = if *front { l.pop_front() } else { l.pop_back() }.unwrap();
                        if l.is_empty() {
                            self.lists.remove(k);
                        }
                        vec![Reply::Array(vec![bulk(key(*k).as_bytes()), bulk(&v)])]
                    }
                    None => {
                        self.blocked[*c] = true;
                        self.queues.entry(*k).or_default().push_back((*c, *front));
                        vec![]
                    }
                };
                prop_assert_eq!(got, want);
                prop_assert_eq!(self.engine.is_blocked(h), self.blocked[*c]);
                return Ok(());
            }
            Op::Snapshot => return Ok(()),
        };
        prop_assert_eq!(got, want, "{:?}", op);
        prop_assert_eq!(self.engine.take_wakeups(), woken, "{:?}", op);
        Ok(())
    }

    /// The engine's lists of database 0, as the model shows them.
    fn lists_of(snapshot: &Snapshot) -> Lists {
        let mut out = Lists::new();
        for k in 0..KEYS {
            if let Some(e) = snapshot.dbs[0].keys.get(key(k).as_bytes()) {
                match e.value() {
                    ValueRef::List(l) => {
                        assert!(!l.is_empty(), "empty list stored");
                        out.insert(k, l.iter().map(|v| v.to_vec()).collect());
                    }
                    other => panic!("not a list: {other:?}"),
                }
            }
        }
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn lists_match_the_model(ops in prop::collection::vec(op_strategy(), 1..120)) {
        let mut h = Harness::new();
        let mut snaps: Vec<(Snapshot, Lists)> = Vec::new();
        for op in &ops {
            if let Op::Snapshot = op {
                snaps.push((h.engine.snapshot(h.now), h.lists.clone()));
            }
            h.step(op)?;
            h.now = Now::from_ms(h.now.ms() + 1);
        }
        let now = h.engine.snapshot(h.now);
        prop_assert_eq!(Harness::lists_of(&now), h.lists.clone());
        for (snap, model) in &snaps {
            prop_assert_eq!(&Harness::lists_of(snap), model);
        }
        let blocked = h.blocked.iter().filter(|&&b| b).count();
        prop_assert_eq!(h.engine.core.blocking.len(), blocked);
    }
}

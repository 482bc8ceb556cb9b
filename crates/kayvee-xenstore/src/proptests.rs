//! Property test of transactions: random interleavings of transactions from several
//! connections (and plain writes from another) against an independent `BTreeMap` model.
//! Under every policy each committed transaction saw exactly the replies a serial execution
//! at its commit point gives, and the store equals the model. Under `coalesce`, additionally,
//! a transaction gets EAGAIN only when that serial execution would have answered differently
//! (a real conflict).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::node::Node;
use crate::Now;

/// Paths the generated operations use (nested, with shared parents).
const PATHS: [&str; 7] = ["/k/a", "/k/b", "/k/c", "/k/d", "/k/d/x", "/k/d/y", "/k/e/f"];

/// The independent model: every node path to its value.
type Model = BTreeMap<String, Vec<u8>>;

/// The parent of a path in the model.
fn parent(p: &str) -> &str {
    crate::path::parent(p)
}

/// Create `p` and any missing ancestors with empty values.
fn ensure(m: &mut Model, p: &str) {
    if p != "/" && !m.contains_key(p) {
        ensure(m, parent(p));
        m.insert(String::from(p), Vec::new());
    }
}

/// Apply an operation to the model and return the reply the protocol requires.
fn model_apply(m: &mut Model, op: &Op) -> Reply {
    let s = |p: &[u8]| String::from(core::str::from_utf8(p).unwrap());
    match op {
        Op::Read(p) => m.get(&s(p)).map_or(Reply::Error(XsError::Enoent), |v| {
            Reply::Value(v.as_slice().into())
        }),
        Op::Write(p, v) => {
            ensure(m, &s(p));
            m.insert(s(p), v.clone());
            Reply::Ok
        }
        Op::Mkdir(p) => {
            ensure(m, &s(p));
            Reply::Ok
        }
        Op::Rm(p) => {
            let p = s(p);
            if !m.contains_key(&p) {
                return match m.contains_key(parent(&p)) {
                    true => Reply::Ok,
                    false => Reply::Error(XsError::Enoent),
                };
            }
            let below = format!("{p}/");
            m.retain(|k, _| *k != p && !k.starts_with(&below));
            Reply::Ok
        }
        Op::Directory(p) => {
            let p = s(p);
            if !m.contains_key(&p) {
                return Reply::Error(XsError::Enoent);
            }
            let kids = m.keys().filter(|k| *k != "/" && parent(k) == p);
            Reply::List(
                kids.map(|k| k.as_bytes()[k.rfind('/').unwrap() + 1..].to_vec())
                    .collect(),
            )
        }
        _ => unreachable!(),
    }
}

/// The store's contents as a model.
fn dump(store: &Store) -> Model {
    fn walk(n: &Node, path: &str, out: &mut Model) {
        out.insert(String::from(path), n.value.to_vec());
        for (name, c) in &n.children {
            let p = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            walk(c, &p, out);
        }
    }
    let mut out = Model::new();
    walk(&store.root, "/", &mut out);
    out
}

/// A generated store operation.
fn op_strategy() -> impl Strategy<Value = Op> {
    let path = (0..PATHS.len()).prop_map(|i| PATHS[i].as_bytes().to_vec());
    prop_oneof![
        3 => path.clone().prop_map(Op::Read),
        3 => (path.clone(), 0u8..3).prop_map(|(p, v)| Op::Write(p, alloc::vec![b'0' + v])),
        1 => path.clone().prop_map(Op::Rm),
        1 => path.clone().prop_map(Op::Mkdir),
        1 => path.prop_map(Op::Directory),
    ]
}

/// One generated scenario: transactions' op lists, the interleaving, and plain writes.
#[derive(Clone, Debug)]
struct Scenario {
    txs: Vec<Vec<Op>>,
    /// Which actor moves next: `i < txs.len()` = transaction i's next step, else plain op.
    schedule: Vec<usize>,
    plain: Vec<Op>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let txs = prop::collection::vec(prop::collection::vec(op_strategy(), 1..5), 2..5);
    (
        txs,
        prop::collection::vec(0usize..6, 0..40),
        prop::collection::vec(op_strategy(), 0..4),
    )
        .prop_map(|(txs, schedule, plain)| Scenario {
            txs,
            schedule,
            plain,
        })
}

/// Run a scenario under `policy`, checking the properties at every commit.
fn check(sc: &Scenario, policy: ConflictPolicy) -> Result<(), TestCaseError> {
    let mut xs = Xenstored::new(XsConfig {
        policy,
        ..XsConfig::default()
    });
    let plain_conn: ConnId = 999;
    xs.connect(plain_conn, 0);
    let mut model = dump(xs.store());
    let n = sc.txs.len();
    let mut next = alloc::vec![0usize; n];
    let mut seen: Vec<Vec<Reply>> = alloc::vec![Vec::new(); n];
    let mut plain = sc.plain.iter();
    for i in 0..n {
        xs.connect(i as ConnId, 0);
        prop_assert_eq!(
            xs.handle(i as ConnId, 0, &Op::TransactionStart, Now::default()),
            Reply::Text("1".into())
        );
    }
    // The schedule, then every transaction runs to its end in order.
    let tail = (0..n).flat_map(|i| (0..=sc.txs[i].len()).map(move |_| i));
    for who in sc.schedule.iter().copied().chain(tail) {
        if who >= n {
            if let Some(op) = plain.next() {
                let r = xs.handle(plain_conn, 0, op, Now::default());
                prop_assert_eq!(&r, &model_apply(&mut model, op));
            }
            continue;
        }
        let conn = who as ConnId;
        if next[who] < sc.txs[who].len() {
            let op = &sc.txs[who][next[who]];
            seen[who].push(xs.handle(conn, 1, op, Now::default()));
            next[who] += 1;
        } else if next[who] == sc.txs[who].len() {
            next[who] += 1;
            let r = xs.handle(conn, 1, &Op::TransactionEnd(true), Now::default());
            let mut serial = model.clone();
            let replies: Vec<Reply> = sc.txs[who]
                .iter()
                .map(|op| model_apply(&mut serial, op))
                .collect();
            let same = replies == seen[who];
            match r {
                Reply::Ok => {
                    prop_assert!(
                        same,
                        "committed but a serial run answers {:?}, tx saw {:?}",
                        replies,
                        seen[who]
                    );
                    model = serial;
                }
                Reply::Error(XsError::Eagain) => {
                    if policy == ConflictPolicy::Coalesce {
                        prop_assert!(!same, "EAGAIN without a real conflict: {:?}", sc.txs[who]);
                    }
                }
                other => prop_assert!(false, "unexpected commit reply {:?}", other),
            }
        }
        prop_assert_eq!(dump(xs.store()), model.clone());
        xs.store().check_invariants();
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn transactions_serialise_under_every_policy(sc in scenario()) {
        for policy in ConflictPolicy::ALL {
            check(&sc, policy)?;
        }
    }
}

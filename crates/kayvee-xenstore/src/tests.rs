//! Table-driven semantic tests: (connection/domain, transaction, operation, expected reply),
//! with the expectations checked against cxenstored 4.17 where a socket client can reach them.

use alloc::string::String;
use alloc::vec::Vec;

use super::*;
use crate::Now;

/// One step: connection name, transaction slot (0 = none), request, expected reply.
struct Step(&'static str, u32, Op, Reply);

/// Shorthands for building requests and replies.
fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}
fn read(p: &str) -> Op {
    Op::Read(b(p))
}
fn write(p: &str, v: &str) -> Op {
    Op::Write(b(p), b(v))
}
fn dir(p: &str) -> Op {
    Op::Directory(b(p))
}
fn rm(p: &str) -> Op {
    Op::Rm(b(p))
}
fn val(v: &str) -> Reply {
    Reply::Value(b(v).into())
}
fn list(items: &[&str]) -> Reply {
    Reply::List(items.iter().map(|s| b(s)).collect())
}
fn text(s: &str) -> Reply {
    Reply::Text(String::from(s))
}
fn err(e: XsError) -> Reply {
    Reply::Error(e)
}
const OK: Reply = Reply::Ok;

/// Connections by name: `d0`, `d0b` are dom0; `gN` is domain N.
fn conn_of(name: &str) -> (ConnId, u32) {
    match name {
        "d0" => (1, 0),
        "d0b" => (2, 0),
        g => (
            100 + g[1..].parse::<u64>().unwrap(),
            g[1..].parse().unwrap(),
        ),
    }
}

/// Run a table against a fresh daemon; the transaction slot in a step is a real tid
/// (tids are per-connection counters from 1).
fn run_table(policy: ConflictPolicy, steps: &[Step]) -> Xenstored {
    let config = XsConfig {
        policy,
        ..XsConfig::default()
    };
    let mut xs = Xenstored::new(config);
    for name in ["d0", "d0b", "g1", "g2", "g3"] {
        let (id, dom) = conn_of(name);
        xs.connect(id, dom);
    }
    for (i, Step(conn, tx, op, want)) in steps.iter().enumerate() {
        let got = xs.handle(conn_of(conn).0, *tx, op, Now::from_ms(i as u64));
        assert_eq!(&got, want, "step {i}: {conn} tx{tx} {op:?}");
        xs.store().check_invariants();
    }
    xs
}

#[test]
fn basic_nodes_and_paths() {
    run_table(
        ConflictPolicy::Coalesce,
        &[
            Step("d0", 0, dir("/"), list(&["local", "tool"])),
            Step("d0", 0, read("/tool/xenstored"), val("")),
            Step("d0", 0, write("/a/b/c", "v"), OK),
            Step("d0", 0, read("/a/b"), val("")),
            Step("d0", 0, read("/a/b/c"), val("v")),
            Step("d0", 0, read("/a/b/c/d"), err(XsError::Enoent)),
            Step("d0", 0, read(""), err(XsError::Einval)),
            Step("d0", 0, read("/a/"), err(XsError::Einval)),
            Step("d0", 0, read("/a//b"), err(XsError::Einval)),
            Step("d0", 0, read("@introduceDomain"), err(XsError::Einval)),
            Step("d0", 0, Op::Mkdir(b("/a/b")), OK),
            Step("d0", 0, read("/a/b/c"), val("v")),
            Step("d0", 0, write("rel/x", "1"), OK),
            Step("d0", 0, dir("/local/domain/0"), list(&["rel"])),
            Step("d0", 0, read("rel/x"), val("1")),
            Step("d0", 0, rm("/a/zz"), OK),
            Step("d0", 0, rm("/zz/yy"), err(XsError::Enoent)),
            Step("d0", 0, rm("/"), err(XsError::Einval)),
            Step("d0", 0, rm("/a"), OK),
            Step("d0", 0, read("/a/b/c"), err(XsError::Enoent)),
            Step("d0", 0, Op::GetPerms(b("/tool")), list(&["n0"])),
            Step(
                "d0",
                0,
                Op::SetPerms(b("/tool"), Vec::new()),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                Op::SetPerms(b("/tool"), alloc::vec![b("x0")]),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                Op::SetPerms(b("/tool"), alloc::vec![b("r0"), b("b9")]),
                OK,
            ),
            Step("d0", 0, Op::GetPerms(b("/tool")), list(&["r0", "b9"])),
            Step("d0", 0, Op::GetPerms(b("/tool/xenstored")), list(&["n0"])),
            Step("d0", 0, Op::Invalid(XsError::Enosys), err(XsError::Enosys)),
        ],
    );
}

#[test]
fn transactions_isolate_and_end() {
    run_table(
        ConflictPolicy::Coalesce,
        &[
            Step("d0", 0, Op::TransactionStart, text("1")),
            Step("d0", 0, Op::TransactionStart, text("2")),
            Step("d0", 1, Op::TransactionStart, err(XsError::Ebusy)),
            Step("d0", 5, read("/tool"), err(XsError::Enoent)),
            Step("d0", 1, write("/t/x", "1"), OK),
            Step("d0", 1, read("/t/x"), val("1")),
            Step("d0", 0, read("/t/x"), err(XsError::Enoent)),
            Step("d0b", 0, read("/t/x"), err(XsError::Enoent)),
            Step("d0", 1, Op::TransactionEnd(true), OK),
            Step("d0", 1, Op::TransactionEnd(true), err(XsError::Enoent)),
            Step("d0", 0, read("/t/x"), val("1")),
            Step("d0", 2, write("/t/y", "2"), OK),
            Step("d0", 2, Op::TransactionEnd(false), OK),
            Step("d0", 0, read("/t/y"), err(XsError::Enoent)),
            Step("d0", 0, Op::TransactionEnd(true), err(XsError::Enoent)),
            Step("d0", 0, Op::TransactionStart, text("3")),
            Step("d0", 0, Op::ResetWatches, OK),
            Step("d0", 3, Op::TransactionEnd(true), err(XsError::Enoent)),
        ],
    );
}

/// The conflict table of the notes (two concurrent transactions, first commits first), for
/// each policy: (setup, tx A ops, tx B ops, interleaved plain op, expected A, expected B).
#[test]
fn conflict_table() {
    type Case = (
        &'static str,
        Vec<Op>,
        Vec<Op>,
        Vec<Op>,
        [Reply; 3],
        [Reply; 3],
    );
    let setup = || {
        alloc::vec![
            write("/s/shared", "0"),
            write("/s/a", "0"),
            write("/s/b", "0")
        ]
    };
    let e = || err(XsError::Eagain);
    let ok3 = || [OK, OK, OK];
    let cases: Vec<Case> = alloc::vec![
        (
            "disjoint writes",
            alloc::vec![write("/s/a", "1")],
            alloc::vec![write("/s/b", "1")],
            alloc::vec![],
            ok3(),
            [OK, OK, e()]
        ),
        (
            "read shared, write own",
            alloc::vec![read("/s/shared"), write("/s/a", "1")],
            alloc::vec![read("/s/shared"), write("/s/b", "1")],
            alloc::vec![],
            ok3(),
            [OK, OK, e()]
        ),
        (
            "blind write same node",
            alloc::vec![write("/s/a", "1")],
            alloc::vec![write("/s/a", "2")],
            alloc::vec![],
            ok3(),
            [OK, e(), e()]
        ),
        (
            "sibling creation",
            alloc::vec![write("/s/new/1", "x")],
            alloc::vec![write("/s/new/2", "y")],
            alloc::vec![],
            ok3(),
            [OK, e(), e()]
        ),
        (
            "read then outside write",
            alloc::vec![read("/s/a")],
            alloc::vec![read("/s/b")],
            alloc::vec![write("/s/a", "9")],
            [e(), e(), e()],
            [OK, OK, e()]
        ),
        (
            "missing then created",
            alloc::vec![read("/s/m")],
            alloc::vec![read("/s/b")],
            alloc::vec![write("/s/m", "1")],
            [e(), e(), e()],
            [OK, OK, e()]
        ),
        (
            "directory then child created",
            alloc::vec![dir("/s"), write("/s/c", "1")],
            alloc::vec![read("/s/b")],
            alloc::vec![write("/s/c", "0")],
            [e(), e(), e()],
            [OK, OK, e()]
        ),
    ];
    for (name, a_ops, b_ops, outside, want_a, want_b) in cases {
        for (pi, policy) in ConflictPolicy::ALL.into_iter().enumerate() {
            let mut xs = Xenstored::new(XsConfig {
                policy,
                ..XsConfig::default()
            });
            xs.connect(1, 0);
            xs.connect(2, 0);
            for op in setup() {
                assert_eq!(xs.handle(1, 0, &op, Now::default()), OK);
            }
            assert_eq!(
                xs.handle(1, 0, &Op::TransactionStart, Now::default()),
                text("1")
            );
            assert_eq!(
                xs.handle(2, 0, &Op::TransactionStart, Now::default()),
                text("1")
            );
            for op in &a_ops {
                xs.handle(1, 1, op, Now::default());
            }
            for op in &b_ops {
                xs.handle(2, 1, op, Now::default());
            }
            for op in &outside {
                assert_eq!(xs.handle(1, 0, op, Now::default()), OK);
            }
            let a = xs.handle(1, 1, &Op::TransactionEnd(true), Now::default());
            let b = xs.handle(2, 1, &Op::TransactionEnd(true), Now::default());
            let want = (want_a[pi].clone(), want_b[pi].clone());
            assert_eq!((a, b), want, "{name} under {}", policy.name());
            xs.store().check_invariants();
        }
    }
}

/// The paper's Section 7.1 workload in miniature: every client's transaction reads one shared
/// path and writes its own; all transactions are open at once, then commit in turn. Under
/// `coalesce` none gets EAGAIN: with pre-created nodes by grafting, with nodes created inside
/// the transaction (sibling creations under one parent) by replay.
#[test]
fn section_7_1_has_no_conflicts_under_coalesce() {
    for precreate in [true, false] {
        let mut xs = Xenstored::new(XsConfig::default());
        let clients = 16u64;
        xs.connect(0, 0);
        xs.handle(0, 0, &write("/shared", "s"), Now::default());
        for c in 1..=clients {
            xs.connect(c, 0);
            if precreate {
                xs.handle(
                    0,
                    0,
                    &write(&alloc::format!("/vm/{c}/state"), "0"),
                    Now::default(),
                );
            }
        }
        for round in 0..5 {
            for c in 1..=clients {
                let tid = round + 1;
                assert_eq!(
                    xs.handle(c, 0, &Op::TransactionStart, Now::default()),
                    text(&alloc::format!("{tid}"))
                );
                assert_eq!(
                    xs.handle(c, tid, &read("/shared"), Now::default()),
                    val("s")
                );
                let own = alloc::format!("/vm/{c}/state");
                assert_eq!(xs.handle(c, tid, &write(&own, "1"), Now::default()), OK);
            }
            for c in 1..=clients {
                let tid = round + 1;
                assert_eq!(
                    xs.handle(c, tid, &Op::TransactionEnd(true), Now::default()),
                    OK
                );
            }
        }
        let s = xs.stats;
        assert_eq!(s.conflicts, 0);
        if precreate {
            assert_eq!(s.replays, 0, "{s:?}");
            assert!(s.grafts >= 5 * (clients - 1), "{s:?}");
        } else {
            assert!(s.replays > 0, "{s:?}");
        }
        xs.store().check_invariants();
    }
}

/// A transaction end leaves the trees it let go of for `sweep` (snapshot and private copy;
/// after a commit also the replaced store), which frees them without changing the store; a
/// shell that never sweeps keeps at most `DEAD_MAX` of them.
#[test]
fn transaction_ends_leave_trees_for_sweep() {
    let mut xs = Xenstored::new(XsConfig::default());
    xs.connect(1, 0);
    let now = Now::default();
    assert_eq!(xs.handle(1, 0, &Op::TransactionStart, now), text("1"));
    assert_eq!(xs.handle(1, 1, &write("/a", "x"), now), OK);
    let before = xs.unswept();
    assert_eq!(xs.handle(1, 1, &Op::TransactionEnd(true), now), OK);
    assert_eq!(xs.unswept(), before + 3);
    assert_eq!(xs.handle(1, 0, &Op::TransactionStart, now), text("2"));
    assert_eq!(xs.handle(1, 2, &write("/a", "y"), now), OK);
    assert_eq!(xs.handle(1, 2, &Op::TransactionEnd(false), now), OK);
    assert_eq!(xs.unswept(), before + 5);
    xs.sweep();
    assert_eq!(xs.unswept(), 0);
    assert_eq!(xs.handle(1, 0, &read("/a"), now), val("x"));
    for n in 0..crate::xenstored::DEAD_MAX {
        let tid = n as u32 + 3;
        assert_eq!(
            xs.handle(1, 0, &Op::TransactionStart, now),
            text(&alloc::format!("{tid}"))
        );
        let v = alloc::format!("{n}");
        assert_eq!(xs.handle(1, tid, &write("/a", &v), now), OK);
        assert_eq!(xs.handle(1, tid, &Op::TransactionEnd(true), now), OK);
        assert!(xs.unswept() <= crate::xenstored::DEAD_MAX);
    }
    let last = alloc::format!("{}", crate::xenstored::DEAD_MAX - 1);
    assert_eq!(xs.handle(1, 0, &read("/a"), now), val(&last));
    xs.store().check_invariants();
}

#[test]
fn watches_events_and_specials() {
    let mut xs = run_table(
        ConflictPolicy::Coalesce,
        &[
            Step("d0", 0, Op::Watch(b("/w"), b("t")), OK),
            Step("d0", 0, Op::Watch(b("/w"), b("t")), err(XsError::Eexist)),
            Step("d0", 0, Op::Watch(b("relw"), b("r")), OK),
            Step("d0", 0, Op::Watch(b("@introduceDomain"), b("i")), OK),
            Step("d0", 0, Op::Watch(b("@releaseDomain"), b("x")), OK),
            Step(
                "d0",
                0,
                Op::Unwatch(b("/nope"), b("t")),
                err(XsError::Enoent),
            ),
            Step("d0b", 0, Op::TransactionStart, text("1")),
            Step("d0b", 1, write("/w/a", "1"), OK),
            Step("d0b", 0, write("relw/x", "1"), OK),
            Step("d0b", 1, Op::TransactionEnd(true), OK),
            Step("d0b", 0, Op::Introduce(b("7"), b("100"), b("5")), OK),
            Step("d0b", 0, Op::IsDomainIntroduced(b("7")), text("T")),
            Step("d0b", 0, Op::IsDomainIntroduced(b("8")), text("F")),
            Step(
                "d0b",
                0,
                Op::GetDomainPath(b("xx")),
                text("/local/domain/0"),
            ),
            Step("d0b", 0, Op::Release(b("7")), OK),
            Step("d0b", 0, Op::Release(b("7")), err(XsError::Enoent)),
            Step("d0b", 0, Op::Release(b("0")), err(XsError::Einval)),
            Step("d0b", 0, rm("/w"), OK),
        ],
    );
    let evs: Vec<(u64, String, String)> = xs
        .take_events()
        .into_iter()
        .map(|e| {
            (
                e.conn,
                String::from_utf8(e.path).unwrap(),
                String::from_utf8(e.token).unwrap(),
            )
        })
        .collect();
    let want: Vec<(u64, String, String)> = [
        ("/w", "t"),
        ("relw", "r"),
        ("@introduceDomain", "i"),
        ("@releaseDomain", "x"),
        ("relw/x", "r"),
        ("/w/a", "t"),
        ("@introduceDomain", "i"),
        ("@releaseDomain", "x"),
        ("/w", "t"),
    ]
    .iter()
    .map(|(p, t)| (1, String::from(*p), String::from(*t)))
    .collect();
    assert_eq!(evs, want);
}

#[test]
fn guest_permissions_quotas_and_targets() {
    let q = Quota {
        nodes: 4,
        watches: 1,
        transactions: 1,
        ..Quota::default()
    };
    let mut xs = Xenstored::new(XsConfig {
        quota: q,
        ..XsConfig::default()
    });
    xs.connect(1, 0);
    xs.connect(101, 1);
    xs.connect(102, 2);
    let h = |xs: &mut Xenstored, c: u64, op: Op| xs.handle(c, 0, &op, Now::default());
    assert_eq!(
        h(&mut xs, 101, Op::Introduce(b("1"), b("1"), b("1"))),
        err(XsError::Eacces)
    );
    assert_eq!(h(&mut xs, 1, Op::Introduce(b("1"), b("1"), b("1"))), OK);
    assert_eq!(h(&mut xs, 1, Op::Introduce(b("2"), b("1"), b("1"))), OK);
    assert_eq!(h(&mut xs, 1, write("/local/domain/1", "")), OK);
    let perms = alloc::vec![b("n1"), b("r2")];
    assert_eq!(h(&mut xs, 1, Op::SetPerms(b("/local/domain/1"), perms)), OK);
    // Relative paths resolve against the guest's home; it owns what it creates.
    assert_eq!(h(&mut xs, 101, write("name", "g1")), OK);
    assert_eq!(
        h(&mut xs, 101, Op::GetPerms(b("name"))),
        list(&["n1", "r2"])
    );
    assert_eq!(h(&mut xs, 102, read("/local/domain/1/name")), val("g1"));
    assert_eq!(
        h(&mut xs, 102, write("/local/domain/1/name", "x")),
        err(XsError::Eacces)
    );
    assert_eq!(
        h(&mut xs, 102, read("/tool/xenstored")),
        err(XsError::Eacces)
    );
    assert_eq!(
        h(&mut xs, 101, Op::SetPerms(b("name"), alloc::vec![b("n2")])),
        err(XsError::Eperm)
    );
    let six = (0..6)
        .map(|i| b(&alloc::format!("r{i}")))
        .collect::<Vec<_>>();
    let mut with_owner = alloc::vec![b("n1")];
    with_owner.extend(six);
    assert_eq!(
        h(&mut xs, 101, Op::SetPerms(b("name"), with_owner)),
        err(XsError::Enospc)
    );
    // Quotas: 4 nodes (home + name + 2 more), 1 watch, 1 transaction, node size.
    assert_eq!(h(&mut xs, 101, write("a/b", "")), OK);
    assert_eq!(h(&mut xs, 101, write("c", "")), err(XsError::Enospc));
    assert_eq!(h(&mut xs, 101, Op::Watch(b("name"), b("t"))), OK);
    assert_eq!(
        h(&mut xs, 101, Op::Watch(b("a"), b("t"))),
        err(XsError::E2big)
    );
    assert_eq!(h(&mut xs, 101, Op::TransactionStart), text("1"));
    assert_eq!(h(&mut xs, 101, Op::TransactionStart), err(XsError::Enospc));
    let big = alloc::vec![b'x'; 2049];
    assert_eq!(
        h(&mut xs, 101, Op::Write(b("name"), big)),
        err(XsError::Enospc)
    );
    // SET_TARGET lets domain 2 act as domain 1's owner.
    assert_eq!(
        h(&mut xs, 1, Op::SetTarget(b("2"), b("9"))),
        err(XsError::Enoent)
    );
    assert_eq!(h(&mut xs, 1, Op::SetTarget(b("2"), b("1"))), OK);
    assert_eq!(h(&mut xs, 102, write("/local/domain/1/name", "x")), OK);
    assert_eq!(h(&mut xs, 1, Op::Resume(b("2"))), OK);
    assert_eq!(h(&mut xs, 1, Op::Resume(b("0"))), err(XsError::Einval));
    assert_eq!(
        h(&mut xs, 1, Op::GetQuota(alloc::vec![b("2"), b("nodes")])),
        text("4")
    );
    assert_eq!(
        h(
            &mut xs,
            1,
            Op::SetQuota(alloc::vec![b("1"), b("nodes"), b("10")])
        ),
        OK
    );
    assert_eq!(h(&mut xs, 101, write("c", "")), OK);
    assert_eq!(
        h(&mut xs, 1, Op::Control(alloc::vec![b("nope")])),
        err(XsError::Einval)
    );
    assert_eq!(
        h(&mut xs, 1, Op::Control(alloc::vec![b("check")])),
        text("OK")
    );
    xs.store().check_invariants();
}

/// A daemon with `quota`, dom0 on connection 1 and guests 1 and 2 (introduced) on 101, 102.
fn with_quota(quota: Quota) -> Xenstored {
    let mut xs = Xenstored::new(XsConfig {
        quota,
        ..XsConfig::default()
    });
    for name in ["d0", "g1", "g2"] {
        let (id, dom) = conn_of(name);
        xs.connect(id, dom);
    }
    for d in ["1", "2"] {
        let op = Op::Introduce(b(d), b("1"), b("1"));
        assert_eq!(xs.handle(1, 0, &op, Now::default()), OK);
    }
    let home = |d| {
        Op::SetPerms(
            b(&alloc::format!("/local/domain/{d}")),
            alloc::vec![b(&alloc::format!("n{d}"))],
        )
    };
    for d in [1, 2] {
        let p = alloc::format!("/local/domain/{d}");
        assert_eq!(xs.handle(1, 0, &write(&p, ""), Now::default()), OK);
        assert_eq!(xs.handle(1, 0, &home(d), Now::default()), OK);
    }
    xs
}

/// Run steps (connection name, tid, op, expected) against `xs`.
fn run_on(xs: &mut Xenstored, steps: &[Step]) {
    for (i, Step(conn, tx, op, want)) in steps.iter().enumerate() {
        let got = xs.handle(conn_of(conn).0, *tx, op, Now::from_ms(i as u64));
        assert_eq!(&got, want, "step {i}: {conn} tx{tx} {op:?}");
        xs.store().check_invariants();
    }
}

#[test]
fn transaction_nodes_quota() {
    // cxenstored 4.17: the request that would make a guest's transaction touch more than
    // `transaction-nodes` distinct nodes fails with ENOSPC and changes nothing; the
    // transaction is then doomed: commit answers ENOMEM, abort OK. Dom0 has no limit.
    let q = Quota {
        transaction_nodes: 3,
        ..Quota::default()
    };
    let mut xs = with_quota(q);
    run_on(
        &mut xs,
        &[
            Step("g1", 0, Op::TransactionStart, text("1")),
            Step("g1", 1, write("a", "1"), OK),
            Step("g1", 1, read("a"), val("1")),
            Step("g1", 1, write("b", "2"), OK),
            Step("g1", 1, read("a"), val("1")),
            Step("g1", 1, read("b"), val("2")),
            Step("g1", 1, write("c", "3"), err(XsError::Enospc)),
            Step("g1", 1, read("c"), err(XsError::Enospc)),
            Step("g1", 1, Op::TransactionEnd(true), err(XsError::Enomem)),
            Step("g1", 0, read("a"), err(XsError::Enoent)),
            // Aborting a failed transaction is fine.
            Step("g1", 0, Op::TransactionStart, text("2")),
            Step("g1", 2, write("a", "1"), OK),
            Step("g1", 2, write("b", "1"), OK),
            Step("g1", 2, write("c", "1"), err(XsError::Enospc)),
            Step("g1", 2, Op::TransactionEnd(false), OK),
            // Exactly at the limit commits; outside a transaction there is no limit.
            Step("g1", 0, Op::TransactionStart, text("3")),
            Step("g1", 3, write("x", "1"), OK),
            Step("g1", 3, read("x"), val("1")),
            Step("g1", 3, Op::TransactionEnd(true), OK),
            Step("g1", 0, write("p", "1"), OK),
            Step("g1", 0, write("q", "1"), OK),
            Step("g1", 0, write("r", "1"), OK),
            // Dom0 is not limited.
            Step("d0", 0, Op::TransactionStart, text("1")),
            Step("d0", 1, write("/d/1", ""), OK),
            Step("d0", 1, write("/d/2", ""), OK),
            Step("d0", 1, write("/d/3", ""), OK),
            Step("d0", 1, write("/d/4", ""), OK),
            Step("d0", 1, Op::TransactionEnd(true), OK),
        ],
    );
    assert!(xs.store().get("/local/domain/1/x").is_some());
}

/// A 48-byte watch token (watches count towards a domain's memory).
const TOKEN: &str = "tttttttttttttttttttttttttttttttttttttttttttttttt";

#[test]
fn outstanding_and_memory_quotas_hold_back_reading() {
    // cxenstored 4.17 `domain_can_read`: a guest at its outstanding-request quota, or at or
    // over its hard memory quota, is not read from (no error); dom0 always is.
    let q = Quota {
        outstanding: 2,
        memory: 400,
        ..Quota::default()
    };
    let mut xs = with_quota(q);
    let (g1, g2) = (conn_of("g1").0, conn_of("g2").0);
    // (connection, its undelivered replies, may read?)
    let table: &[(ConnId, usize, bool)] = &[
        (1, 0, true),
        (1, 1000, true),
        (g1, 0, true),
        (g1, 1, true),
        (g1, 2, false),
        (g1, 5, false),
        (g1, 1, true),
        (g2, 0, true),
    ];
    for (i, (c, n, want)) in table.iter().enumerate() {
        assert_eq!(xs.may_read(*c, *n), *want, "row {i}");
    }
    // The count is per domain: a second connection of domain 1 adds to it.
    xs.connect(201, 1);
    assert!(!xs.may_read(201, 1), "1 + 1 outstanding for domain 1");
    assert!(xs.may_read(201, 0));
    // Memory: home node (24 + 8 + 16 bytes of path) + children. Fill towards 400 bytes.
    let before = xs.memory_of(1);
    assert_eq!(before, 24 + 8 + "/local/domain/1".len() as u64);
    let v = alloc::vec![b'v'; 250];
    let h = |xs: &mut Xenstored, op: Op| xs.handle(g1, 0, &op, Now::default());
    assert_eq!(h(&mut xs, Op::Write(b("big"), v)), OK);
    // 51 (home with child "big") + 24 + 8 + 19 + 250 = 352.
    assert_eq!(xs.memory_of(1), 352);
    assert!(xs.may_read(g1, 0));
    assert_eq!(h(&mut xs, Op::Watch(b("big"), b(TOKEN))), OK);
    assert_eq!(xs.memory_of(1), 352 + 3 + 48);
    assert!(!xs.may_read(g1, 0));
    assert!(xs.may_read(g2, 0), "other domains are unaffected");
    assert_eq!(h(&mut xs, Op::Unwatch(b("big"), b(TOKEN))), OK);
    assert!(xs.may_read(g1, 0));
    // Memory 0 means unlimited (SET_QUOTA of newer Xen).
    let set = Op::SetQuota(alloc::vec![b("memory"), b("0")]);
    assert_eq!(xs.handle(1, 0, &set, Now::default()), OK);
    assert_eq!(h(&mut xs, Op::Watch(b("big"), b(TOKEN))), OK);
    assert!(xs.may_read(g1, 0));
}

#[test]
fn memory_quota_reports_as_cxenstored_syslog_lines() {
    // cxenstored 4.17 domain_chk_quota: memory is the only quota with a soft limit; crossing
    // it (or the hard one) is logged once per state change, to syslog, at most once per 10 s
    // per domain except the hard-quota error; dom0 is never reported.
    let q = Quota {
        memory: 400,
        memory_soft: 300,
        ..Quota::default()
    };
    let mut xs = with_quota(q);
    let g1 = conn_of("g1").0;
    let at = |s: u64| Now::from_ms(s * 1000);
    // A request at second `t` from g1, then the flow-control check the transport makes.
    let step = |xs: &mut Xenstored, t: u64, op: Op| {
        xs.handle(g1, 0, &op, at(t));
        xs.may_read(g1, 0)
    };
    let line = |severity, text: &str| LogLine {
        severity,
        text: String::from(text),
    };
    let big = Op::Write(b("big"), alloc::vec![b'v'; 250]);
    assert!(
        step(&mut xs, 100, big.clone()),
        "352 bytes: over soft, under hard"
    );
    assert_eq!(
        xs.take_log(),
        [line(
            Severity::Warning,
            "Domain 1 exceeds soft memory quota"
        )]
    );
    assert!(step(&mut xs, 101, read("big")));
    assert_eq!(xs.take_log(), [], "reported once");
    assert!(!step(&mut xs, 102, Op::Watch(b("big"), b(TOKEN))));
    let stalled = "Domain 1 exceeds hard memory quota, Xenstore interface to domain stalled";
    assert_eq!(
        xs.take_log(),
        [line(Severity::Err, stalled)],
        "not rate limited"
    );
    assert!(step(&mut xs, 105, Op::Unwatch(b("big"), b(TOKEN))));
    assert_eq!(xs.take_log(), [], "within 10 s of the last line");
    assert!(step(&mut xs, 112, read("big")));
    assert_eq!(
        xs.take_log(),
        [line(
            Severity::Info,
            "Domain 1 below hard memory quota again"
        )]
    );
    assert!(step(&mut xs, 113, rm("big")));
    assert_eq!(xs.take_log(), []);
    assert!(step(&mut xs, 122, read("big")));
    assert_eq!(
        xs.take_log(),
        [line(
            Severity::Info,
            "Domain 1 below soft memory quota again"
        )]
    );
    // Dom0 is exempt however much it stores.
    xs.handle(1, 0, &write("/d0", &"x".repeat(2000)), at(200));
    assert!(xs.may_read(1, 0));
    assert_eq!(xs.take_log(), []);
}

#[test]
fn dom0_only_operations_from_a_guest() {
    // cxenstored 4.17 process_message: XS_FLAG_PRIV types from an unprivileged domain get
    // EACCES, checked before the transaction id (so a bogus tid still gets EACCES).
    let mut xs = with_quota(Quota::default());
    let ops = [
        Op::Control(alloc::vec![b("help")]),
        Op::Introduce(b("5"), b("1"), b("1")),
        Op::Release(b("9")),
        Op::IsDomainIntroduced(b("2")),
        Op::Resume(b("2")),
        Op::SetTarget(b("1"), b("2")),
        Op::SetQuota(alloc::vec![b("nodes"), b("5")]),
        Op::SetFeature(alloc::vec![b("1"), b("0")]),
    ];
    for op in &ops {
        for tx in [0, 77] {
            let got = xs.handle(conn_of("g1").0, tx, op, Now::default());
            assert_eq!(got, err(XsError::Eacces), "guest tx{tx} {op:?}");
        }
        let got = xs.handle(1, 0, op, Now::default());
        assert!(!matches!(got, Reply::Error(XsError::Eacces)), "dom0 {op:?}");
    }
    // Not dom0-only: GET_DOMAIN_PATH, and a guest's own node operations.
    run_on(
        &mut xs,
        &[
            Step("g2", 0, Op::GetDomainPath(b("7")), text("/local/domain/7")),
            Step("g2", 0, read("/local/domain/2"), val("")),
            Step("g2", 77, read("/local/domain/2"), err(XsError::Enoent)),
        ],
    );
}

#[test]
fn control_logfile_quota_soft_and_domain_report() {
    // Replies checked against cxenstored 4.17 over its socket (raw CONTROL messages).
    let mut xs = with_quota(Quota::default());
    let c = |args: &[&str]| Op::Control(args.iter().map(|a| b(a)).collect());
    let soft = "Quota settings:\nmemory           :  2097152 Total Xenstore memory per domain (warning level)\n";
    let soft100 = "Quota settings:\nmemory           :      100 Total Xenstore memory per domain (warning level)\n";
    run_on(
        &mut xs,
        &[
            Step("d0", 0, c(&["logfile"]), err(XsError::Einval)),
            Step("d0", 0, c(&["logfile", "a", "b"]), err(XsError::Einval)),
            Step("d0", 0, c(&["logfile", "/tmp/t"]), text("OK")),
            Step("d0", 0, c(&["quota-soft"]), text(soft)),
            Step(
                "d0",
                0,
                c(&["quota-soft", "set", "memory", "100"]),
                text("OK"),
            ),
            Step("d0", 0, c(&["quota-soft"]), text(soft100)),
            Step(
                "d0",
                0,
                c(&["quota-soft", "set", "nodes", "5"]),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                c(&["quota-soft", "set", "memory", "0"]),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                c(&["quota-soft", "set", "memory"]),
                err(XsError::Einval),
            ),
            Step("d0", 0, c(&["quota-soft", "x"]), err(XsError::Einval)),
            Step(
                "d0",
                0,
                c(&["quota", "set", "nodes", "0"]),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                c(&["quota", "set", "nodes", "-1"]),
                err(XsError::Einval),
            ),
            Step(
                "d0",
                0,
                c(&["quota", "set", "memory", "x"]),
                err(XsError::Einval),
            ),
            Step("d0", 0, c(&["quota", "set", "nodes", "5x"]), text("OK")),
            Step(
                "d0",
                0,
                c(&["quota", "set", "transaction-nodes", "7"]),
                text("OK"),
            ),
            Step("d0", 0, c(&["quota", "5"]), err(XsError::Enoent)),
        ],
    );
    assert_eq!(xs.take_logfile(), Some(b("/tmp/t")));
    assert_eq!(xs.take_logfile(), None);
    assert_eq!(xs.config.quota.nodes, 5);
    assert_eq!(xs.config.quota.transaction_nodes, 7);
    assert_eq!(xs.config.quota.memory_soft, 100);
    let Reply::Text(all) = xs.handle(1, 0, &c(&["quota"]), Now::default()) else {
        panic!("quota report");
    };
    assert!(all.contains(
        "outstanding      :       20 Outstanding requests per domain\n\
         transaction-nodes:        7 Max. number of accessed nodes per transaction\n\
         memory           :  2621440 Total Xenstore memory per domain (error level)\n"
    ));
    let Reply::Text(help) = xs.handle(1, 0, &c(&["help"]), Now::default()) else {
        panic!("help");
    };
    assert!(
        help.contains("logfile\t<file>\n") && help.contains("quota-soft\t[set <name> <val>]\n")
    );
    // Per-domain report: cxenstored's rows and layout.
    assert_eq!(xs.handle(102, 0, &write("w", "xyz"), Now::default()), OK);
    assert_eq!(
        xs.handle(102, 0, &Op::Watch(b("w"), b("t")), Now::default()),
        OK
    );
    xs.may_read(102, 1);
    let mem = 24 + 8 + 15 + 2 + (24 + 8 + 17 + 3) + 2;
    let want = alloc::format!(
        "Domain 2:\nnodes           :        2\nwatches         :        1\n\
         transactions    :        0\noutstanding     :        1\nmemory          : {mem:>8}\n"
    );
    assert_eq!(
        xs.handle(1, 0, &c(&["quota", "2"]), Now::default()),
        text(&want)
    );
}

#[test]
fn features_are_set_before_introduce_and_read_by_their_domain() {
    // Newer Xen's GET_FEATURE / SET_FEATURE: a toolstack restricts a domain's ring features
    // before INTRODUCE; afterwards they are fixed (EBUSY), and a guest reads only its own.
    let mut xs = Xenstored::new(XsConfig {
        features: 3,
        ..XsConfig::default()
    });
    for name in ["d0", "g1", "g5"] {
        let (id, dom) = conn_of(name);
        xs.connect(id, dom);
    }
    let get = |args: &[&str]| Op::GetFeature(args.iter().map(|a| b(a)).collect());
    let set = |d: &str, v: &str| Op::SetFeature(alloc::vec![b(d), b(v)]);
    let intro = |d: &str| Op::Introduce(b(d), b("1"), b("1"));
    run_on(
        &mut xs,
        &[
            Step("d0", 0, get(&[]), text("3")),
            Step("d0", 0, get(&["0"]), text("3")),
            // Domain 5 is not introduced yet (the shell vouched that Xen knows it).
            Step("d0", 0, get(&["5"]), text("3")),
            Step("d0", 0, set("5", "4"), err(XsError::Einval)),
            Step("d0", 0, set("5", "x"), err(XsError::Einval)),
            Step("d0", 0, set("5", "2"), OK),
            Step("d0", 0, get(&["5"]), text("2")),
            Step("d0", 0, set("0", "1"), err(XsError::Ebusy)),
            Step("d0", 0, set("5", ""), err(XsError::Einval)),
            Step(
                "d0",
                0,
                Op::SetFeature(alloc::vec![b("5")]),
                err(XsError::Einval),
            ),
            Step("d0", 0, intro("5"), OK),
            Step("d0", 0, get(&["5"]), text("2")),
            Step("d0", 0, set("5", "3"), err(XsError::Ebusy)),
            Step("d0", 0, intro("1"), OK),
            Step("d0", 0, get(&["1"]), text("3")),
            // A guest reads its own features, never another domain's.
            Step("g5", 0, get(&[]), text("2")),
            Step("g1", 0, get(&[]), text("3")),
            Step("g5", 0, get(&["5"]), err(XsError::Eacces)),
            Step("g5", 0, set("5", "1"), err(XsError::Eacces)),
            Step("d0", 0, get(&["1", "2"]), err(XsError::Einval)),
            Step("d0", 0, Op::Release(b("5")), OK),
            Step("d0", 0, set("5", "1"), OK),
        ],
    );
    assert_eq!(xs.domains.preset_features.get(&5), Some(&1));
    xs.forget_preset(5);
    assert!(xs.domains.preset_features.is_empty());
    // Without rings no domain exists before INTRODUCE.
    let mut plain = Xenstored::new(XsConfig::default());
    plain.connect(1, 0);
    run_on(
        &mut plain,
        &[
            Step("d0", 0, get(&[]), text("0")),
            Step("d0", 0, get(&["5"]), err(XsError::Enoent)),
            Step("d0", 0, set("5", "0"), err(XsError::Enoent)),
        ],
    );
}

#[test]
fn a_guest_transaction_writing_existing_nodes_commits_what_it_read_back() {
    // Writes of existing nodes go to a detached copy of their parent's subtree; a read, a
    // write elsewhere or the commit puts it back. Values change length, so the memory
    // accounting (checked after every step) follows each path.
    let start = || Op::TransactionStart;
    let end = |commit| Op::TransactionEnd(commit);
    run_table(
        ConflictPolicy::Coalesce,
        &[
            Step("d0", 0, Op::Mkdir(b("/local/domain/1")), OK),
            Step(
                "d0",
                0,
                Op::SetPerms(b("/local/domain/1"), alloc::vec![b("n1")]),
                OK,
            ),
            Step("g1", 0, write("x/a", "1"), OK),
            Step("g1", 0, write("x/b", "1"), OK),
            // Detached, then read back (attached) while another commit lands elsewhere.
            Step("g1", 0, start(), text("1")),
            Step("g1", 1, write("x/a", "22"), OK),
            Step("d0", 0, write("/elsewhere", "z"), OK),
            Step("g1", 1, read("x/a"), val("22")),
            Step("g1", 1, write("x/b", "333"), OK),
            Step("g1", 1, end(true), OK),
            Step("g1", 0, read("x/a"), val("22")),
            Step("g1", 0, read("x/b"), val("333")),
            // Two writes in the detached subtree, grafted from it.
            Step("g1", 0, start(), text("2")),
            Step("g1", 2, write("x/a", "4444"), OK),
            Step("g1", 2, write("/local/domain/1/x/b", "5"), OK),
            Step("d0", 0, write("/elsewhere", "zz"), OK),
            Step("g1", 2, end(true), OK),
            Step("g1", 0, read("x/a"), val("4444")),
            Step("g1", 0, read("x/b"), val("5")),
            // Aborted: nothing of it shows.
            Step("g1", 0, start(), text("3")),
            Step("g1", 3, write("x/a", "6"), OK),
            Step("g1", 3, end(false), OK),
            Step("g1", 0, read("x/a"), val("4444")),
            // Nothing else committed: the private store (attached) becomes the store.
            Step("g1", 0, start(), text("4")),
            Step("g1", 4, write("x/a", "7"), OK),
            Step("g1", 4, end(true), OK),
            Step("g1", 0, read("x/a"), val("7")),
            // A write the guest may not make is refused in the detached subtree too.
            Step(
                "d0",
                0,
                Op::SetPerms(b("/local/domain/1/x/b"), alloc::vec![b("n0")]),
                OK,
            ),
            Step("g1", 0, start(), text("5")),
            Step("g1", 5, write("x/b", "8"), err(XsError::Eacces)),
            Step("g1", 5, write("x/a", "88"), OK),
            Step("g1", 5, end(true), OK),
            Step("g1", 0, read("x/a"), val("88")),
        ],
    );
}

/// Connection ids are the shell's choice: small slots and large ids alike.
#[test]
fn connections_with_any_ids() {
    let mut xs = Xenstored::new(XsConfig::default());
    let ids = [3u64, 5000, 1 << 40, 4095, 4096];
    for &id in &ids {
        xs.connect(id, 0);
    }
    assert_eq!(xs.counts().0, ids.len());
    for &id in &ids {
        let own = alloc::format!("/c/{id}");
        assert_eq!(xs.handle(id, 0, &write(&own, "v"), Now::default()), OK);
        assert_eq!(xs.domain_of(id), Some(0));
    }
    xs.disconnect(5000);
    xs.disconnect(1 << 40);
    xs.disconnect(1 << 40);
    assert_eq!(xs.counts().0, 3);
    assert_eq!(xs.domain_of(5000), None);
    let r = xs.handle(5000, 0, &read("/c/3"), Now::default());
    assert_eq!(r, err(XsError::Einval));
    assert_eq!(xs.handle(4096, 0, &read("/c/3"), Now::default()), val("v"));
}

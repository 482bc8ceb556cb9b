//! The startup-loading state: while a shell loads the dataset with clients connected, commands
//! without the `loading` flag answer `-LOADING` and INFO shows the progress (field names and
//! order as redis-server 7.0.15 prints them while it loads a 150 MB dump). A replica's load
//! of its primary's payload opens the window `repl-diskless-load` names.

use kayvee_engine::repl::LoadMode;
use kayvee_engine::{
    ArgvBuf, Config, ConnInfo, Db, Engine, Handle, Now, Protocol, Reply, ReplyTree, Transport,
};

const T0_MS: u64 = 1_795_275_997_000;

fn engine() -> (Engine, Handle) {
    let mut engine = Engine::new(Config::default(), 1, Now::from_ms(T0_MS));
    let h = connect(&mut engine);
    (engine, h)
}

fn connect(engine: &mut Engine) -> Handle {
    let conn = ConnInfo {
        transport: Transport::Tcp {
            addr: "127.0.0.1:40001".into(),
            laddr: "127.0.0.1:6379".into(),
        },
        fd: 8,
    };
    engine.connect(conn, Now::from_ms(T0_MS))
}

fn run(engine: &mut Engine, h: Handle, now_ms: u64, args: &[&str]) -> Reply {
    let argv = ArgvBuf::from_args(args);
    let mut tree = ReplyTree::new(Protocol::Resp2);
    engine.execute(h, &argv.argv(), Now::from_ms(now_ms), &mut tree);
    tree.take().pop().expect("one reply")
}

fn text(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

#[test]
fn commands_answer_loading_until_the_data_is_in() {
    let (mut e, h) = engine();
    e.begin_loading(149_775_871, Now::from_ms(T0_MS));
    assert!(e.is_loading());
    for cmd in [
        &["GET", "foo"][..],
        &["PING"],
        &["DBSIZE"],
        &["SET", "a", "b"],
    ] {
        let r = run(&mut e, h, T0_MS, cmd);
        assert_eq!(
            r,
            Reply::Error("LOADING Redis is loading the dataset in memory".into()),
            "{cmd:?}"
        );
    }
    // INFO and CONFIG carry the `loading` flag, as in Redis.
    let port = run(&mut e, h, T0_MS, &["CONFIG", "GET", "port"]);
    assert!(
        matches!(port, Reply::Map(ref m) if m.len() == 1),
        "{port:?}"
    );

    e.loading_progress(2_097_136, 56_007, 738_493_048);
    let info = text(&run(&mut e, h, T0_MS + 1_500, &["INFO", "persistence"]));
    assert!(
        info.starts_with("# Persistence\r\nloading:1\r\nasync_loading:0\r\n"),
        "{info}"
    );
    assert!(
        info.contains("rdb_last_load_keys_loaded:56007\r\n"),
        "{info}"
    );
    let tail = "loading_start_time:1795275997\r\nloading_total_bytes:149775871\r\n\
                loading_rdb_used_mem:738493048\r\nloading_loaded_bytes:2097136\r\n\
                loading_loaded_perc:1.40\r\nloading_eta_seconds:70\r\n";
    assert!(info.contains(tail), "{info}");
    // The progress fields follow the module fork fields, as in Redis 7.0.
    assert!(info.find("module_fork_last_cow_size").unwrap() < info.find(tail).unwrap());

    let mut dbs: Vec<Db> = (0..16).map(|_| Db::new(1)).collect();
    dbs[0].set(
        b"foo",
        kayvee_engine::value::Value::Str("bar".into()),
        T0_MS,
        false,
    );
    e.load_dbs(dbs, 1, 0, Now::from_ms(T0_MS + 2_000));
    assert!(!e.is_loading());
    assert_eq!(
        run(&mut e, h, T0_MS + 2_000, &["GET", "foo"]),
        Reply::Bulk(b"bar".to_vec())
    );
    let info = text(&run(&mut e, h, T0_MS + 2_000, &["INFO", "persistence"]));
    assert!(info.starts_with("# Persistence\r\nloading:0\r\n"), "{info}");
    assert!(!info.contains("loading_start_time"), "{info}");
}

#[test]
fn a_load_with_nothing_to_load_ends_the_state() {
    let (mut e, h) = engine();
    e.begin_loading(0, Now::from_ms(T0_MS));
    e.end_loading();
    assert_eq!(
        run(&mut e, h, T0_MS, &["PING"]),
        Reply::Simple("PONG".into())
    );
}

const LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// A replica's link to its primary, opened now, whose payload starts with `replid`.
fn payload(e: &mut Engine, replid: &str) -> (Handle, LoadMode) {
    let link = connect(e);
    let now = Now::from_ms(T0_MS);
    e.primary_link_opened(link, now);
    (link, e.primary_payload_begins(replid, Some(1000), now))
}

#[test]
fn a_replica_loads_its_primarys_payload_in_the_window_repl_diskless_load_names() {
    let (mut e, h) = engine();
    run(&mut e, h, T0_MS, &["SET", "k", "old"]);
    run(&mut e, h, T0_MS, &["REPLICAOF", "127.0.0.1", "1"]);
    let get = |e: &mut Engine| run(e, h, T0_MS, &["GET", "k"]);
    let old = Reply::Bulk(b"old".to_vec());
    let other = "1".repeat(40);

    // `disabled`: received whole first, the old data served meanwhile.
    let (link, mode) = payload(&mut e, &other);
    assert_eq!(mode, LoadMode::Disk);
    assert_eq!(get(&mut e), old);
    e.disconnect(link);

    // `swapdb` from another history: -LOADING until the payload is in; a cut transfer
    // leaves the old data.
    run(
        &mut e,
        h,
        T0_MS,
        &["CONFIG", "SET", "repl-diskless-load", "swapdb"],
    );
    let (link, mode) = payload(&mut e, &other);
    assert_eq!(mode, LoadMode::Loading);
    assert_eq!(get(&mut e), Reply::Error(LOADING.into()));
    let info = text(&run(&mut e, h, T0_MS, &["INFO", "persistence"]));
    assert!(
        info.contains("\r\nloading:1\r\nasync_loading:0\r\n"),
        "{info}"
    );
    e.disconnect(link);
    assert_eq!(get(&mut e), old);

    // `swapdb` from the same history: the old data stays readable; what Redis flags
    // `no-async-loading` (and CONFIG SET of `appendonly`) is refused.
    let own = e.core.repl.replid.clone();
    let (link, mode) = payload(&mut e, &own);
    assert_eq!(mode, LoadMode::AsyncLoading);
    assert_eq!(get(&mut e), old);
    let info = text(&run(&mut e, h, T0_MS, &["INFO", "persistence"]));
    assert!(
        info.contains("\r\nloading:0\r\nasync_loading:1\r\n"),
        "{info}"
    );
    for cmd in [
        &["REPLICAOF", "NO", "ONE"][..],
        &["CONFIG", "SET", "appendonly", "no"],
    ] {
        let r = run(&mut e, h, T0_MS, cmd);
        assert_eq!(r, Reply::Error(LOADING.into()), "{cmd:?}");
    }
    let dbs: Vec<Db> = (0..16).map(|_| Db::new(1)).collect();
    e.primary_full_sync(dbs, own, 0, Now::from_ms(T0_MS));
    assert_eq!(get(&mut e), Reply::Null);
    let info = text(&run(&mut e, h, T0_MS, &["INFO", "persistence"]));
    assert!(
        info.contains("\r\nloading:0\r\nasync_loading:0\r\n"),
        "{info}"
    );
    let _ = link;
}

#[test]
fn on_empty_db_loads_in_the_window_only_into_an_empty_dataset() {
    let (mut e, h) = engine();
    run(&mut e, h, T0_MS, &["REPLICAOF", "127.0.0.1", "1"]);
    run(
        &mut e,
        h,
        T0_MS,
        &["CONFIG", "SET", "repl-diskless-load", "on-empty-db"],
    );
    let other = "2".repeat(40);
    let (link, mode) = payload(&mut e, &other);
    assert_eq!(mode, LoadMode::Loading);
    e.disconnect(link);
    run(&mut e, h, T0_MS, &["REPLICAOF", "NO", "ONE"]);
    run(&mut e, h, T0_MS, &["SET", "k", "v"]);
    run(&mut e, h, T0_MS, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_eq!(payload(&mut e, &other).1, LoadMode::Disk);
}

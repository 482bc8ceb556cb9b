//! Writes refused for the disk's sake, as redis-server 7.0.15 refuses them
//! (`writeCommandsDeniedByDiskError`): after a failed AOF write while the AOF is on, write
//! commands and PING get `-MISCONF Errors writing to the AOF file: <strerror>` and reads are
//! served; a failed BGSAVE with save points and `stop-writes-on-bgsave-error yes` gives the RDB
//! text first.

use kayvee_engine::persist::MISCONF;
use kayvee_engine::{
    ArgvBuf, Config, ConnInfo, Engine, Handle, Now, Protocol, Reply, ReplyTree, Transport,
};

const T0_MS: u64 = 1_795_275_997_000;
const AOF_MISCONF: &str = "MISCONF Errors writing to the AOF file: No space left on device";

fn engine() -> (Engine, Handle) {
    let mut engine = Engine::new(Config::default(), 1, Now::from_ms(T0_MS));
    let conn = ConnInfo {
        transport: Transport::Tcp {
            addr: "127.0.0.1:40001".into(),
            laddr: "127.0.0.1:6379".into(),
        },
        fd: 8,
    };
    let h = engine.connect(conn, Now::from_ms(T0_MS));
    (engine, h)
}

fn run(engine: &mut Engine, h: Handle, args: &[&str]) -> Reply {
    let argv = ArgvBuf::from_args(args);
    let mut tree = ReplyTree::new(Protocol::Resp2);
    engine.execute(h, &argv.argv(), Now::from_ms(T0_MS), &mut tree);
    tree.take().pop().expect("one reply")
}

fn info(engine: &mut Engine, h: Handle) -> String {
    match run(engine, h, &["INFO", "persistence"]) {
        Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO: {other:?}"),
    }
}

/// The shell reports a failed AOF write (the AOF on).
fn fail_aof_write(engine: &mut Engine) {
    let s = &mut engine.core.aof.status;
    s.on = true;
    s.last_write_ok = false;
    s.last_write_error = "No space left on device".into();
}

#[test]
fn a_failed_aof_write_refuses_writes_and_ping_and_serves_reads() {
    let (mut e, h) = engine();
    assert_eq!(
        run(&mut e, h, &["SET", "k", "v"]),
        Reply::Simple("OK".into())
    );
    fail_aof_write(&mut e);
    for cmd in [
        &["SET", "k", "w"][..],
        &["PING"],
        &["DEL", "k"],
        &["INCR", "n"],
    ] {
        assert_eq!(
            run(&mut e, h, cmd),
            Reply::Error(AOF_MISCONF.into()),
            "{cmd:?}"
        );
    }
    assert_eq!(run(&mut e, h, &["GET", "k"]), Reply::Bulk(b"v".to_vec()));
    assert_eq!(run(&mut e, h, &["DBSIZE"]), Reply::Int(1));
    assert!(info(&mut e, h).contains("aof_last_write_status:err\r\n"));
    // Inside MULTI the refused write aborts the transaction, as any refused command.
    assert_eq!(run(&mut e, h, &["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(
        run(&mut e, h, &["SET", "k", "x"]),
        Reply::Error(AOF_MISCONF.into())
    );
    assert!(matches!(run(&mut e, h, &["EXEC"]), Reply::Error(m) if m.starts_with("EXECABORT")));
    // The shell's next successful write clears it.
    e.core.aof.status.last_write_ok = true;
    assert_eq!(
        run(&mut e, h, &["SET", "k", "w"]),
        Reply::Simple("OK".into())
    );
    assert!(info(&mut e, h).contains("aof_last_write_status:ok\r\n"));
}

#[test]
fn the_aof_error_counts_only_while_the_aof_is_on() {
    let (mut e, h) = engine();
    fail_aof_write(&mut e);
    e.core.aof.status.on = false;
    assert_eq!(
        run(&mut e, h, &["SET", "k", "v"]),
        Reply::Simple("OK".into())
    );
}

#[test]
fn a_failed_bgsave_gives_the_rdb_text_first() {
    let (mut e, h) = engine();
    e.core.config.save = "3600 1".into();
    e.core.persist.last_bgsave_failed = true;
    fail_aof_write(&mut e);
    assert_eq!(
        run(&mut e, h, &["SET", "k", "v"]),
        Reply::Error(MISCONF.into())
    );
    e.core.config.stop_writes_on_bgsave_error = false;
    assert_eq!(
        run(&mut e, h, &["SET", "k", "v"]),
        Reply::Error(AOF_MISCONF.into())
    );
}

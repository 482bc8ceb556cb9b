//! Blocking list, sorted-set and stream commands over real connections against kayvee-server:
//! a BLPOP served by another client's RPUSH (with the blocked client's pipelined commands held
//! until then), first-come first-served order, timeouts, a BLMOVE chain, RESP3 wakeups, blocked
//! clients that disconnect, are killed or are woken by CLIENT UNBLOCK, and XREAD/XREADGROUP
//! woken by XADD and XGROUP DESTROY. Expected bytes are redis-server 7.0.15's
//! (`KAYVEE_TARGET=redis` runs this file against it).

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use kayvee_tests::{encode_command, show, Conn, Server};

/// The server under test.
fn server() -> Option<Server> {
    Server::kayvee(&[])
}

/// Sends a command without reading its reply (the client blocks).
fn send(c: &mut Conn, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&encode_command(&args)).unwrap();
}

/// Asserts that no reply arrives within `ms`.
fn assert_silent(c: &mut Conn, ms: u64) {
    c.set_timeout(Duration::from_millis(ms));
    match c.read_reply() {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) => {}
        other => panic!("expected no reply, got {other:?}"),
    }
    c.set_timeout(Duration::from_secs(10));
}

/// Reads one reply as text.
fn reply(c: &mut Conn) -> String {
    show(&c.read_reply().unwrap())
}

/// `INFO clients`' blocked_clients once it settles at `want` (the server notices a closed
/// socket asynchronously).
fn wait_blocked(c: &mut Conn, want: usize) {
    let line = format!("blocked_clients:{want}\r\n");
    let start = Instant::now();
    loop {
        let info = String::from_utf8(c.cmd_str(&["INFO", "clients"])).unwrap();
        if info.contains(&line) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{info}");
        sleep(Duration::from_millis(20));
    }
}

/// Sends each of `cmds` (timeouts of 0.2 s) and checks it answers the null array after
/// about 0.2 s.
fn times_out_in_200ms(c: &mut Conn, cmds: &[&[&str]]) {
    for &cmd in cmds {
        let start = Instant::now();
        send(c, cmd);
        assert_eq!(reply(c), "*-1\\r\\n", "{cmd:?}");
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(190), "{cmd:?} {waited:?}");
        assert!(waited < Duration::from_secs(2), "{cmd:?} {waited:?}");
    }
}

#[test]
fn blpop_is_served_by_another_clients_push_and_holds_its_pipeline() {
    let Some(server) = server() else { return };
    let (mut waiter, mut pusher) = (server.conn(), server.conn());
    let mut cmds = encode_command(&[b"BLPOP", b"queue", b"0"]);
    cmds.extend(encode_command(&[b"PING"]));
    waiter.send(&cmds).unwrap();
    assert_silent(&mut waiter, 200);
    wait_blocked(&mut pusher, 1);
    assert_eq!(pusher.cmd_str(&["RPUSH", "queue", "job"]), b":1\r\n");
    assert_eq!(
        reply(&mut waiter),
        "*2\\r\\n$5\\r\\nqueue\\r\\n$3\\r\\njob\\r\\n"
    );
    assert_eq!(reply(&mut waiter), "+PONG\\r\\n");
    assert_eq!(pusher.cmd_str(&["EXISTS", "queue"]), b":0\r\n");
    wait_blocked(&mut pusher, 0);
}

#[test]
fn three_waiters_are_served_first_come_first_served() {
    let Some(server) = server() else { return };
    let mut w: Vec<Conn> = (0..3).map(|_| server.conn()).collect();
    let mut pusher = server.conn();
    for (i, c) in w.iter_mut().enumerate() {
        send(c, &["BRPOP", "k", "0"]);
        wait_blocked(&mut pusher, i + 1);
    }
    assert_eq!(pusher.cmd_str(&["LPUSH", "k", "a", "b"]), b":2\r\n");
    assert_eq!(reply(&mut w[0]), "*2\\r\\n$1\\r\\nk\\r\\n$1\\r\\na\\r\\n");
    assert_eq!(reply(&mut w[1]), "*2\\r\\n$1\\r\\nk\\r\\n$1\\r\\nb\\r\\n");
    assert_silent(&mut w[2], 100);
    assert_eq!(pusher.cmd_str(&["RPUSH", "k", "c"]), b":1\r\n");
    assert_eq!(reply(&mut w[2]), "*2\\r\\n$1\\r\\nk\\r\\n$1\\r\\nc\\r\\n");
}

/// `INFO clients`' connected_clients once it settles at `want`.
fn wait_connected(c: &mut Conn, want: usize) {
    let line = format!("connected_clients:{want}\r\n");
    let start = Instant::now();
    loop {
        let info = String::from_utf8(c.cmd_str(&["INFO", "clients"])).unwrap();
        if info.contains(&line) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{info}");
        sleep(Duration::from_millis(20));
    }
}

/// Two waiters whose commands reach a busy server (DEBUG SLEEP on another connection) one
/// after the other are taken in by the same round of its loop: the one that sent first must
/// block first and get the first element, whatever order the server keeps its connections
/// in (the unikernel once served a round's connections by socket, and Redis's suite's
/// "BRPOPLPUSH with multiple blocked clients" then hung). One waiter is on a connection made
/// after another closed (the unikernel reuses its socket); both orders are tried, so a server
/// that serves a round in any fixed order fails one of them.
#[test]
fn waiters_that_reach_a_busy_server_are_served_in_arrival_order() {
    let Some(server) = Server::kayvee(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut pusher = server.conn();
    let first = server.conn();
    let mut old = server.conn();
    drop(first);
    wait_connected(&mut pusher, 2);
    let mut new = server.conn();
    let mut sleeper = server.conn();
    for round in 0..2 {
        let (a, b) = match round {
            0 => (&mut old, &mut new),
            _ => (&mut new, &mut old),
        };
        send(&mut sleeper, &["DEBUG", "SLEEP", "1"]);
        // Well inside the sleep, far enough apart that nothing on the way (the unikernel's
        // relay and QEMU's user network) can swap them.
        sleep(Duration::from_millis(250));
        send(a, &["BLPOP", "q", "0"]);
        sleep(Duration::from_millis(150));
        send(b, &["BLPOP", "q", "0"]);
        assert_eq!(reply(&mut sleeper), "+OK\\r\\n");
        wait_blocked(&mut pusher, 2);
        assert_eq!(pusher.cmd_str(&["RPUSH", "q", "x", "y"]), b":2\r\n");
        let got = (reply(a), reply(b));
        let want = "*2\\r\\n$1\\r\\nq\\r\\n$1\\r\\n";
        assert_eq!(
            got,
            (format!("{want}x\\r\\n"), format!("{want}y\\r\\n")),
            "round {round}"
        );
    }
}

#[test]
fn timeouts_answer_the_null_array() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    times_out_in_200ms(
        &mut c,
        &[
            &["BLPOP", "nokey", "0.2"][..],
            &["BLMOVE", "nokey", "d", "LEFT", "RIGHT", "0.2"],
            &["BLMPOP", "0.2", "1", "nokey", "LEFT"],
        ],
    );
    c.cmd_str(&["HELLO", "3"]);
    send(&mut c, &["BRPOPLPUSH", "nokey", "d", "0.1"]);
    assert_eq!(reply(&mut c), "_\\r\\n");
    assert_eq!(
        c.cmd_str(&["BLPOP", "nokey", "-1"]),
        b"-ERR timeout is negative\r\n"
    );
}

#[test]
fn a_served_blmove_serves_the_client_waiting_on_its_destination() {
    let Some(server) = server() else { return };
    let (mut mover, mut popper, mut pusher) = (server.conn(), server.conn(), server.conn());
    send(&mut mover, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut pusher, 1);
    popper.cmd_str(&["HELLO", "3"]);
    send(
        &mut popper,
        &["BLMPOP", "0", "1", "dst", "LEFT", "COUNT", "5"],
    );
    wait_blocked(&mut pusher, 2);
    assert_eq!(pusher.cmd_str(&["RPUSH", "src", "x"]), b":1\r\n");
    assert_eq!(reply(&mut mover), "$1\\r\\nx\\r\\n");
    assert_eq!(
        reply(&mut popper),
        "*2\\r\\n$3\\r\\ndst\\r\\n*1\\r\\n$1\\r\\nx\\r\\n"
    );
    assert_eq!(pusher.cmd_str(&["EXISTS", "src", "dst"]), b":0\r\n");
}

#[test]
fn a_blocked_client_that_disconnects_takes_nothing() {
    let Some(server) = server() else { return };
    let mut other = server.conn();
    {
        let mut gone = server.conn();
        send(&mut gone, &["BLPOP", "k", "0"]);
        wait_blocked(&mut other, 1);
    }
    wait_blocked(&mut other, 0);
    assert_eq!(other.cmd_str(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_eq!(other.cmd_str(&["LLEN", "k"]), b":1\r\n");
}

#[test]
fn client_kill_closes_a_blocked_client() {
    let Some(server) = server() else { return };
    let (mut victim, mut killer) = (server.conn(), server.conn());
    let id = client_id(&mut victim);
    send(&mut victim, &["BLPOP", "k", "0"]);
    wait_blocked(&mut killer, 1);
    let list = String::from_utf8(killer.cmd_str(&["CLIENT", "LIST"])).unwrap();
    assert!(
        list.contains(" flags=b ") && list.contains(" cmd=blpop "),
        "{list}"
    );
    assert_eq!(killer.cmd_str(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
    assert!(victim.is_closed(Duration::from_secs(2)));
    wait_blocked(&mut killer, 0);
    assert_eq!(killer.cmd_str(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_eq!(killer.cmd_str(&["LLEN", "k"]), b":1\r\n");
}

/// The id `CLIENT ID` gives `c`, as text.
fn client_id(c: &mut Conn) -> String {
    let id = String::from_utf8(c.cmd_str(&["CLIENT", "ID"])).unwrap();
    id.trim_start_matches(':').trim_end().to_string()
}

#[test]
fn client_unblock_wakes_with_the_timeout_reply_or_the_unblocked_error() {
    let Some(server) = server() else { return };
    let (mut list, mut zset, mut admin) = (server.conn(), server.conn(), server.conn());
    let (list_id, zset_id) = (client_id(&mut list), client_id(&mut zset));
    send(&mut list, &["BLPOP", "k", "0"]);
    send(&mut list, &["PING"]);
    send(&mut zset, &["BZPOPMIN", "z", "0"]);
    wait_blocked(&mut admin, 2);
    assert_eq!(admin.cmd_str(&["CLIENT", "UNBLOCK", &list_id]), b":1\r\n");
    assert_eq!(reply(&mut list), "*-1\\r\\n");
    // Its pipelined command runs once it is awake.
    assert_eq!(reply(&mut list), "+PONG\\r\\n");
    assert_eq!(
        admin.cmd_str(&["CLIENT", "UNBLOCK", &zset_id, "error"]),
        b":1\r\n"
    );
    assert_eq!(
        reply(&mut zset),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\\r\\n"
    );
    wait_blocked(&mut admin, 0);
    // Not blocked (any more), unknown, or the caller itself: 0.
    let admin_id = client_id(&mut admin);
    for id in [list_id.as_str(), "999999", admin_id.as_str()] {
        assert_eq!(admin.cmd_str(&["CLIENT", "UNBLOCK", id]), b":0\r\n");
    }
    assert_eq!(
        admin.cmd_str(&["CLIENT", "UNBLOCK", "abc", "foo"]),
        b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
    );
    assert_eq!(
        admin.cmd_str(&["CLIENT", "UNBLOCK", "abc"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    let stats = String::from_utf8(admin.cmd_str(&["INFO", "errorstats"])).unwrap();
    assert!(stats.contains("errorstat_UNBLOCKED:count=1\r\n"), "{stats}");
    // The woken clients are ordinary clients again: a push is not taken by them.
    assert_eq!(admin.cmd_str(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_eq!(admin.cmd_str(&["LLEN", "k"]), b":1\r\n");
}

#[test]
fn bzpopmin_is_served_by_zadd_and_holds_its_pipeline() {
    let Some(server) = server() else { return };
    let (mut waiter, mut adder) = (server.conn(), server.conn());
    let mut cmds = encode_command(&[b"BZPOPMIN", b"nokey", b"zs", b"0"]);
    cmds.extend(encode_command(&[b"PING"]));
    waiter.send(&cmds).unwrap();
    assert_silent(&mut waiter, 200);
    wait_blocked(&mut adder, 1);
    assert_eq!(
        adder.cmd_str(&["ZADD", "zs", "2", "b", "1.5", "a"]),
        b":2\r\n"
    );
    assert_eq!(
        reply(&mut waiter),
        "*3\\r\\n$2\\r\\nzs\\r\\n$1\\r\\na\\r\\n$3\\r\\n1.5\\r\\n"
    );
    assert_eq!(reply(&mut waiter), "+PONG\\r\\n");
    assert_eq!(adder.cmd_str(&["ZCARD", "zs"]), b":1\r\n");
    wait_blocked(&mut adder, 0);
}

#[test]
fn sorted_set_waiters_are_served_in_order_in_their_own_protocol() {
    let Some(server) = server() else { return };
    let (mut max, mut mpop, mut adder) = (server.conn(), server.conn(), server.conn());
    max.cmd_str(&["HELLO", "3"]);
    send(&mut max, &["BZPOPMAX", "z", "0"]);
    wait_blocked(&mut adder, 1);
    send(
        &mut mpop,
        &["BZMPOP", "0", "2", "y", "z", "MIN", "COUNT", "5"],
    );
    wait_blocked(&mut adder, 2);
    assert_eq!(
        adder.cmd_str(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]),
        b":3\r\n"
    );
    assert_eq!(
        reply(&mut max),
        "*3\\r\\n$1\\r\\nz\\r\\n$1\\r\\nc\\r\\n,3\\r\\n"
    );
    assert_eq!(
        reply(&mut mpop),
        "*2\\r\\n$1\\r\\nz\\r\\n*2\\r\\n*2\\r\\n$1\\r\\na\\r\\n$1\\r\\n1\\r\\n*2\\r\\n$1\\r\\nb\\r\\n$1\\r\\n2\\r\\n"
    );
    assert_eq!(adder.cmd_str(&["EXISTS", "z"]), b":0\r\n");
}

#[test]
fn a_list_push_leaves_a_sorted_set_waiter_waiting() {
    let Some(server) = server() else { return };
    let (mut zwaiter, mut writer) = (server.conn(), server.conn());
    send(&mut zwaiter, &["BZPOPMIN", "k", "0"]);
    wait_blocked(&mut writer, 1);
    assert_eq!(writer.cmd_str(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_silent(&mut zwaiter, 200);
    assert_eq!(writer.cmd_str(&["DEL", "k"]), b":1\r\n");
    assert_eq!(writer.cmd_str(&["ZINCRBY", "k", "4", "m"]), b"$1\r\n4\r\n");
    assert_eq!(
        reply(&mut zwaiter),
        "*3\\r\\n$1\\r\\nk\\r\\n$1\\r\\nm\\r\\n$1\\r\\n4\\r\\n"
    );
}

#[test]
fn sorted_set_pops_time_out_with_the_null_array() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    times_out_in_200ms(
        &mut c,
        &[
            &["BZPOPMIN", "nokey", "0.2"][..],
            &["BZPOPMAX", "a", "b", "0.2"],
            &["BZMPOP", "0.2", "1", "nokey", "MAX"],
        ],
    );
    c.cmd_str(&["HELLO", "3"]);
    send(&mut c, &["BZMPOP", "0.1", "1", "nokey", "MIN"]);
    assert_eq!(reply(&mut c), "_\\r\\n");
    assert_eq!(
        c.cmd_str(&["BZMPOP", "0", "0", "k", "MIN"]),
        b"-ERR numkeys should be greater than 0\r\n"
    );
}

#[test]
fn xread_block_is_served_by_xadd_and_holds_its_pipeline() {
    let Some(server) = server() else { return };
    let (mut waiter, mut adder) = (server.conn(), server.conn());
    let mut cmds = encode_command(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
    cmds.extend(encode_command(&[b"PING"]));
    waiter.send(&cmds).unwrap();
    assert_silent(&mut waiter, 200);
    wait_blocked(&mut adder, 1);
    assert_eq!(
        adder.cmd_str(&["XADD", "s", "1-1", "f", "v"]),
        b"$3\r\n1-1\r\n"
    );
    assert_eq!(
        reply(&mut waiter),
        "*1\\r\\n*2\\r\\n$1\\r\\ns\\r\\n*1\\r\\n*2\\r\\n$3\\r\\n1-1\\r\\n*2\\r\\n$1\\r\\nf\\r\\n$1\\r\\nv\\r\\n"
    );
    assert_eq!(reply(&mut waiter), "+PONG\\r\\n");
    // `$` means "after the last entry when the command ran": an older ID added later
    // cannot exist, and the next entry wakes a new reader with only itself.
    send(
        &mut waiter,
        &["XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "s", "$"],
    );
    wait_blocked(&mut adder, 1);
    assert_eq!(
        adder.cmd_str(&["XADD", "s", "1-1", "f", "v"]),
        b"-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"
    );
    assert_silent(&mut waiter, 100);
    assert_eq!(
        adder.cmd_str(&["XADD", "s", "2-0", "g", "w"]),
        b"$3\r\n2-0\r\n"
    );
    assert_eq!(
        reply(&mut waiter),
        "*1\\r\\n*2\\r\\n$1\\r\\ns\\r\\n*1\\r\\n*2\\r\\n$3\\r\\n2-0\\r\\n*2\\r\\n$1\\r\\ng\\r\\n$1\\r\\nw\\r\\n"
    );
    wait_blocked(&mut adder, 0);
}

#[test]
fn every_stream_reader_gets_the_new_entry_in_its_own_protocol() {
    let Some(server) = server() else { return };
    let (mut r2, mut r3, mut adder) = (server.conn(), server.conn(), server.conn());
    r3.cmd_str(&["HELLO", "3"]);
    send(
        &mut r2,
        &["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "0", "0"],
    );
    send(&mut r3, &["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]);
    wait_blocked(&mut adder, 2);
    assert_eq!(
        adder.cmd_str(&["XADD", "s", "7-3", "a", "1"]),
        b"$3\r\n7-3\r\n"
    );
    assert_eq!(
        reply(&mut r2),
        "*1\\r\\n*2\\r\\n$1\\r\\ns\\r\\n*1\\r\\n*2\\r\\n$3\\r\\n7-3\\r\\n*2\\r\\n$1\\r\\na\\r\\n$1\\r\\n1\\r\\n"
    );
    assert_eq!(
        reply(&mut r3),
        "%1\\r\\n$1\\r\\ns\\r\\n*1\\r\\n*2\\r\\n$3\\r\\n7-3\\r\\n*2\\r\\n$1\\r\\na\\r\\n$1\\r\\n1\\r\\n"
    );
    wait_blocked(&mut adder, 0);
}

#[test]
fn xreadgroup_block_takes_new_entries_into_the_pending_list() {
    let Some(server) = server() else { return };
    let (mut waiter, mut adder) = (server.conn(), server.conn());
    assert_eq!(
        adder.cmd_str(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        b"+OK\r\n"
    );
    send(
        &mut waiter,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut adder, 1);
    assert_eq!(
        adder.cmd_str(&["XADD", "s", "5-1", "k", "v"]),
        b"$3\r\n5-1\r\n"
    );
    assert_eq!(
        reply(&mut waiter),
        "*1\\r\\n*2\\r\\n$1\\r\\ns\\r\\n*1\\r\\n*2\\r\\n$3\\r\\n5-1\\r\\n*2\\r\\n$1\\r\\nk\\r\\n$1\\r\\nv\\r\\n"
    );
    assert_eq!(
        adder.cmd_str(&["XPENDING", "s", "g"]),
        b"*4\r\n:1\r\n$3\r\n5-1\r\n$3\r\n5-1\r\n*1\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n"
    );
    // Destroying the group wakes its reader with an error.
    send(
        &mut waiter,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut adder, 1);
    assert_eq!(adder.cmd_str(&["XGROUP", "DESTROY", "s", "g"]), b":1\r\n");
    assert_eq!(
        reply(&mut waiter),
        "-NOGROUP the consumer group this client was blocked on no longer exists\\r\\n"
    );
    wait_blocked(&mut adder, 0);
}

#[test]
fn stream_reads_time_out_with_the_null_array() {
    let Some(server) = server() else { return };
    let mut c = server.conn();
    assert_eq!(
        c.cmd_str(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        b"+OK\r\n"
    );
    times_out_in_200ms(
        &mut c,
        &[
            &["XREAD", "BLOCK", "200", "STREAMS", "nokey", "$"][..],
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "200",
                "STREAMS",
                "s",
                ">",
            ],
        ],
    );
    c.cmd_str(&["HELLO", "3"]);
    send(&mut c, &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]);
    assert_eq!(reply(&mut c), "_\\r\\n");
    assert_eq!(
        c.cmd_str(&["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"]),
        b"-ERR timeout is negative\r\n"
    );
}

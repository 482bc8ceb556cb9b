//! Pub/sub and transactions over real connections against kayvee-server: messages reach other
//! connections (channels, patterns, shard channels; RESP2 arrays and RESP3 pushes), a RESP2
//! subscriber is restricted, MULTI/EXEC/WATCH across two connections, and a subscriber that
//! never reads is disconnected by `client-output-buffer-limit` while the server's memory stays
//! bounded. Expected bytes are redis-server 7.0.15's (`KAYVEE_TARGET=redis` runs this file
//! against it).

use std::time::{Duration, Instant};

use kayvee_tests::{show, Conn, Server};

/// The server under test.
fn server() -> Option<Server> {
    Server::kayvee(&[])
}

/// Reads one reply as text.
fn reply(c: &mut Conn) -> String {
    show(&c.read_reply().unwrap())
}

/// Runs a command and shows its reply.
fn run(c: &mut Conn, args: &[&str]) -> String {
    show(&c.cmd_str(args))
}

#[test]
fn messages_reach_channel_pattern_and_shard_subscribers() {
    let Some(server) = server() else { return };
    let (mut sub, mut publisher) = (server.conn(), server.conn());
    assert_eq!(
        run(&mut sub, &["SUBSCRIBE", "news"]),
        "*3\\r\\n$9\\r\\nsubscribe\\r\\n$4\\r\\nnews\\r\\n:1\\r\\n"
    );
    assert_eq!(
        run(&mut sub, &["PSUBSCRIBE", "n*"]),
        "*3\\r\\n$10\\r\\npsubscribe\\r\\n$2\\r\\nn*\\r\\n:2\\r\\n"
    );
    assert_eq!(
        run(&mut sub, &["SSUBSCRIBE", "s"]),
        "*3\\r\\n$10\\r\\nssubscribe\\r\\n$1\\r\\ns\\r\\n:1\\r\\n"
    );
    assert_eq!(run(&mut publisher, &["PUBLISH", "news", "hi"]), ":2\\r\\n");
    assert_eq!(
        reply(&mut sub),
        "*3\\r\\n$7\\r\\nmessage\\r\\n$4\\r\\nnews\\r\\n$2\\r\\nhi\\r\\n"
    );
    assert_eq!(
        reply(&mut sub),
        "*4\\r\\n$8\\r\\npmessage\\r\\n$2\\r\\nn*\\r\\n$4\\r\\nnews\\r\\n$2\\r\\nhi\\r\\n"
    );
    assert_eq!(run(&mut publisher, &["SPUBLISH", "s", "x"]), ":1\\r\\n");
    assert_eq!(
        reply(&mut sub),
        "*3\\r\\n$8\\r\\nsmessage\\r\\n$1\\r\\ns\\r\\n$1\\r\\nx\\r\\n"
    );
    assert_eq!(
        run(&mut sub, &["GET", "k"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
         are allowed in this context\\r\\n"
    );
    assert_eq!(
        run(&mut sub, &["PING"]),
        "*2\\r\\n$4\\r\\npong\\r\\n$0\\r\\n\\r\\n"
    );
    assert_eq!(
        run(&mut publisher, &["PUBSUB", "NUMSUB", "news"]),
        "*2\\r\\n$4\\r\\nnews\\r\\n:1\\r\\n"
    );
    drop(sub);
    let start = Instant::now();
    while run(&mut publisher, &["PUBLISH", "news", "gone"]) != ":0\\r\\n" {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "subscriber not removed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn resp3_pushes_arrive_on_an_ordinary_connection() {
    let Some(server) = server() else { return };
    let (mut sub, mut publisher) = (server.conn(), server.conn());
    let hello = sub.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with(b"%7\r\n"));
    assert_eq!(
        run(&mut sub, &["SUBSCRIBE", "c"]),
        ">3\\r\\n$9\\r\\nsubscribe\\r\\n$1\\r\\nc\\r\\n:1\\r\\n"
    );
    assert_eq!(run(&mut sub, &["SET", "k", "v"]), "+OK\\r\\n");
    assert_eq!(run(&mut publisher, &["PUBLISH", "c", "m"]), ":1\\r\\n");
    assert_eq!(
        reply(&mut sub),
        ">3\\r\\n$7\\r\\nmessage\\r\\n$1\\r\\nc\\r\\n$1\\r\\nm\\r\\n"
    );
    assert_eq!(run(&mut sub, &["GET", "k"]), "$1\\r\\nv\\r\\n");
}

#[test]
fn watch_aborts_exec_after_another_connections_write() {
    let Some(server) = server() else { return };
    let (mut a, mut b) = (server.conn(), server.conn());
    assert_eq!(run(&mut a, &["SET", "counter", "1"]), "+OK\\r\\n");
    assert_eq!(run(&mut a, &["WATCH", "counter"]), "+OK\\r\\n");
    assert_eq!(run(&mut b, &["INCR", "counter"]), ":2\\r\\n");
    assert_eq!(run(&mut a, &["MULTI"]), "+OK\\r\\n");
    assert_eq!(run(&mut a, &["INCR", "counter"]), "+QUEUED\\r\\n");
    assert_eq!(run(&mut a, &["EXEC"]), "*-1\\r\\n");
    // Retried without interference, the transaction commits.
    assert_eq!(run(&mut a, &["WATCH", "counter"]), "+OK\\r\\n");
    assert_eq!(run(&mut a, &["MULTI"]), "+OK\\r\\n");
    assert_eq!(run(&mut a, &["INCR", "counter"]), "+QUEUED\\r\\n");
    assert_eq!(run(&mut a, &["GET", "counter"]), "+QUEUED\\r\\n");
    assert_eq!(run(&mut a, &["EXEC"]), "*2\\r\\n:3\\r\\n$1\\r\\n3\\r\\n");
    assert_eq!(run(&mut b, &["GET", "counter"]), "$1\\r\\n3\\r\\n");
}

#[test]
fn slow_subscriber_is_dropped_and_memory_stays_bounded() {
    let Some(server) = server() else { return };
    let (mut sub, mut publisher) = (server.conn(), server.conn());
    assert_eq!(
        run(
            &mut publisher,
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 1mb 256kb 1"
            ]
        ),
        "+OK\\r\\n"
    );
    run(&mut sub, &["SUBSCRIBE", "flood"]);
    let before = publisher.info_field::<u64>("memory", "used_memory");
    let payload = "x".repeat(16 * 1024);
    let start = Instant::now();
    let mut published = 0u64;
    // 64 MiB offered to a subscriber that never reads: far beyond socket buffers and the limit.
    while published < 4096 {
        let n = publisher.cmd_str(&["PUBLISH", "flood", &payload]);
        published += 1;
        if n == b":0\r\n" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "flood took too long"
        );
    }
    assert!(published < 4096, "the subscriber was never dropped");
    assert_eq!(
        run(&mut publisher, &["PUBSUB", "NUMSUB", "flood"]),
        "*2\\r\\n$5\\r\\nflood\\r\\n:0\\r\\n"
    );
    let after = publisher.info_field::<u64>("memory", "used_memory");
    // Dropped at about 1 MiB pending (plus what the socket buffers took): memory did not
    // follow the tens of MiB published.
    assert!(
        after < before + 16 * 1024 * 1024,
        "used_memory grew from {before} to {after}"
    );
    assert_eq!(run(&mut publisher, &["PING"]), "+PONG\\r\\n");
}

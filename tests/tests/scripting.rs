//! End-to-end long scripts: past `busy-reply-threshold` other clients get `-BUSY` while the
//! script runs, SCRIPT KILL stops a read-only one (even in a `pcall` loop), FUNCTION KILL a
//! function, a script that wrote is UNKILLABLE, HELLO still runs, and SHUTDOWN NOSAVE stops the
//! server at once (texts as redis-server 7.0.15 gives them).

use kayvee_tests::{encode_command, Server};
use std::time::Duration;

const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

#[test]
fn busy_scripts_are_answered_killed_and_shut_down() {
    let kayvee = Server::kayvee(&["--save", ""]).unwrap();
    let (mut c, mut runner) = (kayvee.conn(), kayvee.conn());
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "lua-time-limit", "10"]),
        b"+OK\r\n"
    );
    let spin = "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end";
    runner
        .send(&encode_command(&[b"EVAL", spin.as_bytes(), b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd_str(&["PING"]), BUSY_EVAL);
    assert_eq!(c.cmd_str(&["FUNCTION", "KILL"]), BUSY_EVAL);
    let hello = c.cmd_str(&["HELLO", "2", "SETNAME", "still-served"]);
    assert!(
        hello.starts_with(b"*14\r\n"),
        "{}",
        kayvee_tests::show(&hello)
    );
    assert_eq!(c.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = runner.read_reply().unwrap();
    assert!(
        killed.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        kayvee_tests::show(&killed)
    );
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");

    let lib = "#!lua name=busy\nredis.register_function('spin', function() while 1 do end end)";
    c.cmd_str(&["FUNCTION", "LOAD", lib]);
    runner
        .send(&encode_command(&[b"FCALL", b"spin", b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd_str(&["SCRIPT", "KILL"]), BUSY_FUNCTION);
    let stats = c.cmd_str(&["FUNCTION", "STATS"]);
    assert!(
        stats.starts_with(b"*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n"),
        "{}",
        kayvee_tests::show(&stats)
    );
    assert_eq!(c.cmd_str(&["FUNCTION", "KILL"]), b"+OK\r\n");
    assert!(runner
        .read_reply()
        .unwrap()
        .starts_with(b"-ERR Script killed"));

    let wrote = "redis.call('set', 'x', 1) while 1 do end";
    runner
        .send(&encode_command(&[b"EVAL", wrote.as_bytes(), b"0"]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let unkillable = c.cmd_str(&["SCRIPT", "KILL"]);
    assert!(unkillable.starts_with(b"-UNKILLABLE Sorry the script already executed write commands"));
    c.send(&encode_command(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert!(c.is_closed(Duration::from_secs(5)));
}

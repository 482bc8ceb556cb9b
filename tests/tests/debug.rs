//! End-to-end DEBUG: RELOAD round-trips every type through the RDB codec and keeps the digest;
//! RELOAD NOSAVE loads the file on disk as it is (NOFLUSH over the dataset); function libraries
//! survive reloads and FUNCTION DUMP payloads restore both ways with redis-server;
//! DIGEST changes with any change and is 40 zeros for an empty dataset; DEBUG OBJECT's
//! `serializedlength` is the one redis-server 7.0.15 reports for the values both write in the
//! same RDB form (strings, hashtable sets: Kayvee writes small collections in the plain RDB
//! types, Redis as listpack and intset blobs).

use kayvee_tests::{tool_available, Conn, Server};

/// The text of a status reply.
fn status(reply: &[u8]) -> String {
    let s = String::from_utf8_lossy(reply);
    assert!(s.starts_with('+'), "not a status: {s}");
    s.trim_start_matches('+').trim_end().to_string()
}

/// Writes one key of every type and encoding.
fn fill(c: &mut Conn) {
    for cmd in [
        "SET s hello",
        "SET n 12345",
        "SET big xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "RPUSH l a b c 1 2 3",
        "HSET h f1 v1 f2 v2",
        "SADD si 1 2 3",
        "SADD ss a b c",
        "ZADD z 1 a 2 b 3.5 c",
        "SET ttl v EX 1000",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        let r = c.cmd_str(&args);
        assert!(!r.starts_with(b"-"), "{cmd}: {}", kayvee_tests::show(&r));
    }
}

/// `serializedlength:N` of DEBUG OBJECT.
fn serialized_length(c: &mut Conn, key: &str) -> String {
    let o = status(&c.cmd_str(&["DEBUG", "OBJECT", key]));
    o.split(' ')
        .find_map(|w| w.strip_prefix("serializedlength:"))
        .unwrap_or_else(|| panic!("{o}"))
        .to_string()
}

#[test]
fn reload_keeps_the_digest_and_digest_follows_the_data() {
    let kayvee = Server::kayvee(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let mut c = kayvee.conn();
    assert_eq!(status(&c.cmd_str(&["DEBUG", "DIGEST"])), "0".repeat(40));
    fill(&mut c);
    let before = status(&c.cmd_str(&["DEBUG", "DIGEST"]));
    assert_eq!(before.len(), 40);
    assert_ne!(before, "0".repeat(40));
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(status(&c.cmd_str(&["DEBUG", "DIGEST"])), before);
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":9\r\n");
    let ttl = String::from_utf8(c.cmd_str(&["TTL", "ttl"])).unwrap();
    assert!(ttl.starts_with(":99") || ttl == ":1000\r\n", "{ttl}");
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "si"]),
        b"$6\r\nintset\r\n"
    );
    // A change of one member changes the digest; undoing it restores it.
    c.cmd_str(&["ZADD", "z", "4", "c"]);
    assert_ne!(status(&c.cmd_str(&["DEBUG", "DIGEST"])), before);
    c.cmd_str(&["ZADD", "z", "3.5", "c"]);
    assert_eq!(status(&c.cmd_str(&["DEBUG", "DIGEST"])), before);
    // The same data written in another order in another server gives the same digest.
    let other = Server::kayvee(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let mut o = other.conn();
    fill(&mut o);
    o.cmd_str(&["DEL", "h", "ss"]);
    o.cmd_str(&["HSET", "h", "f2", "v2", "f1", "v1"]);
    o.cmd_str(&["SADD", "ss", "c", "b", "a"]);
    o.cmd_str(&["EXPIRE", "ttl", "1000"]);
    let same = status(&o.cmd_str(&["DEBUG", "DIGEST"]));
    // Only the TTL's exact millisecond may differ: compare without it.
    c.cmd_str(&["PERSIST", "ttl"]);
    o.cmd_str(&["PERSIST", "ttl"]);
    assert_eq!(
        status(&c.cmd_str(&["DEBUG", "DIGEST"])),
        status(&o.cmd_str(&["DEBUG", "DIGEST"])),
        "{same}"
    );
    let values = c.cmd_str(&["DEBUG", "DIGEST-VALUE", "h", "nokey"]);
    let text = String::from_utf8(values).unwrap();
    assert!(text.starts_with("*2\r\n+"), "{text}");
    assert!(
        text.ends_with(&format!("+{}\r\n", "0".repeat(40))),
        "{text}"
    );
}

#[test]
fn reload_nosave_loads_the_file_on_disk_as_it_is() {
    let kayvee = Server::kayvee(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let mut c = kayvee.conn();
    // No file yet: Redis's load error, and the dataset stays.
    c.cmd_str(&["SET", "kept", "1"]);
    assert_eq!(
        c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE"]),
        b"-ERR Error trying to load the RDB dump, check server logs.\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "kept"]), b"$1\r\n1\r\n");
    fill(&mut c);
    let saved = status(&c.cmd_str(&["DEBUG", "DIGEST"]));
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    // Written after the save: gone after the reload, which does not save first.
    c.cmd_str(&["SET", "should-not-exist", "1"]);
    c.cmd_str(&["DEL", "s"]);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "should-not-exist"]), b"$-1\r\n");
    assert_eq!(status(&c.cmd_str(&["DEBUG", "DIGEST"])), saved);
    // NOFLUSH loads over the dataset: keys that exist fail it unless MERGE.
    c.cmd_str(&["SET", "extra", "1"]);
    let refused = c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]);
    assert!(
        refused.starts_with(b"-ERR"),
        "{}",
        kayvee_tests::show(&refused)
    );
    assert_eq!(
        c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "extra"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":11\r\n");
}

/// The payload of a bulk reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    let start = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn functions_survive_reloads_and_dump_both_ways_with_redis() {
    let kayvee = Server::kayvee(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let mut k = kayvee.conn();
    let code = "#!lua name=lib1\nredis.register_function('f1', function() return 'one' end)";
    assert_eq!(k.cmd_str(&["FUNCTION", "LOAD", code]), b"$4\r\nlib1\r\n");
    assert_eq!(k.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(k.cmd_str(&["FCALL", "f1", "0"]), b"$3\r\none\r\n");
    // The reload wrote the file: the library comes back from it.
    assert_eq!(k.cmd_str(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    assert_eq!(k.cmd_str(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(k.cmd_str(&["FCALL", "f1", "0"]), b"$3\r\none\r\n");
    let refused = k.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]);
    assert!(
        refused.starts_with(b"-ERR"),
        "{}",
        kayvee_tests::show(&refused)
    );
    assert_eq!(
        k.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]),
        b"+OK\r\n"
    );
    let dump = bulk(&k.cmd_str(&["FUNCTION", "DUMP"]));
    if !tool_available("redis-server") {
        return;
    }
    let redis = Server::redis(&["--save", ""]).unwrap();
    let mut r = redis.conn();
    assert_eq!(
        r.cmd(&[b"FUNCTION", b"RESTORE", &dump]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(r.cmd_str(&["FCALL", "f1", "0"]), b"$3\r\none\r\n");
    let code2 = "#!lua name=lib2\nredis.register_function('f2', function() return 2 end)";
    r.cmd_str(&["FUNCTION", "LOAD", code2]);
    let back = bulk(&r.cmd_str(&["FUNCTION", "DUMP"]));
    assert_eq!(
        k.cmd(&[b"FUNCTION", b"RESTORE", &back]).unwrap(),
        b"-ERR Library lib1 already exists\r\n"
    );
    assert_eq!(
        k.cmd(&[b"FUNCTION", b"RESTORE", &back, b"REPLACE"])
            .unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(k.cmd_str(&["FCALL", "f2", "0"]), b":2\r\n");
    assert_eq!(
        k.cmd(&[b"FUNCTION", b"RESTORE", b"bad"]).unwrap(),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
}

#[test]
fn serialized_lengths_match_redis() {
    if !tool_available("redis-server") {
        return;
    }
    let kayvee = Server::kayvee(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let redis = Server::redis(&["--save", "", "--enable-debug-command", "yes"]).unwrap();
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    fill(&mut k);
    fill(&mut r);
    for key in ["s", "n", "big", "ss"] {
        assert_eq!(
            serialized_length(&mut k, key),
            serialized_length(&mut r, key),
            "{key}"
        );
    }
}

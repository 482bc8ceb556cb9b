//! The command table against redis-server 7.0.15, live: `COMMAND INFO <name>` for every command
//! and subcommand both servers have (arity, flags, legacy key positions, ACL categories, tips,
//! key specs, subcommands), and `COMMAND GETKEYS` / `GETKEYSANDFLAGS` on command lines that
//! exercise every kind of key spec, and `COMMAND DOCS <name>` (summaries, history, arguments),
//! compared byte for byte in RESP2 and RESP3 (except the order of a container's subcommands,
//! which is random in Redis).
//! Skipped when redis-server is missing, unless `KAYVEE_REQUIRE_REDIS` is set.

use kayvee_tests::{show, split_aggregate, Conn, Server};

/// Containers whose `COMMAND INFO` differs on purpose, with why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "client",
    "kayvee has CLIENT SETINFO (Redis 7.2), which 7.0.15 does not list",
)];

/// Both servers, or `None` when redis-server is unavailable (and not required).
fn servers() -> Option<(Server, Server)> {
    let redis = Server::redis(&[])?;
    let ours = Server::kayvee(&[])?;
    Some((ours, redis))
}

/// A connection speaking RESP `proto`.
fn conn(server: &Server, proto: u8) -> Conn {
    let mut c = server.conn();
    if proto == 3 {
        let hello = c.cmd_str(&["HELLO", "3"]);
        assert!(hello.starts_with(b"%"), "{}", show(&hello));
    }
    c
}

/// The names `COMMAND LIST` gives.
fn command_names(c: &mut Conn) -> Vec<String> {
    let frame = c.cmd_str(&["COMMAND", "LIST"]);
    let (_, items) = split_aggregate(&frame).expect("an array");
    items
        .iter()
        .map(|b| {
            let text = std::str::from_utf8(b).unwrap();
            let body = text.split("\r\n").nth(1).unwrap();
            body.to_string()
        })
        .collect()
}

/// A `COMMAND INFO name` reply with its subcommands sorted: Redis lists a container's
/// subcommands in the order of a dict hashed with a per-process random seed, so only the set of
/// them is comparable.
fn normalized(reply: &[u8]) -> Vec<Vec<u8>> {
    let (_, outer) = split_aggregate(reply).expect("an array");
    let Some((_, fields)) = outer.first().and_then(|info| split_aggregate(info)) else {
        return vec![reply.to_vec()];
    };
    let mut parts: Vec<Vec<u8>> = fields[..9].iter().map(|f| f.to_vec()).collect();
    let mut subs: Vec<Vec<u8>> = split_aggregate(fields[9])
        .map(|(_, s)| s.iter().map(|f| f.to_vec()).collect())
        .unwrap_or_default();
    subs.sort();
    parts.extend(subs);
    parts
}

/// The names of commands whose `COMMAND INFO` reply differs, each with both replies.
fn info_differences(ours: &mut Conn, redis: &mut Conn) -> Vec<(String, String, String)> {
    let theirs = command_names(redis);
    let mut names: Vec<String> = command_names(ours)
        .into_iter()
        .filter(|n| theirs.contains(n))
        .collect();
    names.sort();
    assert!(names.len() > 100, "only {} common commands", names.len());
    let mut diffs = Vec::new();
    for name in &names {
        let a = ours.cmd_str(&["COMMAND", "INFO", name]);
        let b = redis.cmd_str(&["COMMAND", "INFO", name]);
        if normalized(&a) != normalized(&b) {
            diffs.push((name.clone(), show(&a), show(&b)));
        }
    }
    diffs
}

#[test]
fn command_info_is_redis_for_every_common_command() {
    let Some((ours, redis)) = servers() else {
        return;
    };
    for proto in [2, 3] {
        let diffs = info_differences(&mut conn(&ours, proto), &mut conn(&redis, proto));
        let unexpected: Vec<String> = diffs
            .iter()
            .filter(|(n, _, _)| !KNOWN_DIFFERENCES.iter().any(|(k, _)| k == n))
            .map(|(n, a, b)| format!("{n}:\n  ours:  {a}\n  redis: {b}"))
            .collect();
        assert!(
            unexpected.is_empty(),
            "RESP{proto}: {} commands differ:\n{}",
            unexpected.len(),
            unexpected.join("\n")
        );
        for (known, why) in KNOWN_DIFFERENCES {
            assert!(
                diffs.iter().any(|(n, _, _)| n == known),
                "{known} no longer differs ({why}): drop it from KNOWN_DIFFERENCES"
            );
        }
    }
}

/// A `COMMAND DOCS name` reply as comparable parts: the doc map's fields in order, with a
/// container's subcommands as sorted (name, doc) pairs, each normalized the same way (Redis
/// lists them in its dict's random order).
fn docs_normalized(reply: &[u8]) -> Vec<Vec<u8>> {
    let Some((_, outer)) = split_aggregate(reply) else {
        return vec![reply.to_vec()];
    };
    let Some(doc) = outer.get(1) else {
        return vec![reply.to_vec()];
    };
    doc_parts(doc)
}

/// The fields of one doc map (see [`docs_normalized`]).
fn doc_parts(doc: &[u8]) -> Vec<Vec<u8>> {
    let Some((header, fields)) = split_aggregate(doc) else {
        return vec![doc.to_vec()];
    };
    let mut parts = vec![header.to_vec()];
    for pair in fields.chunks(2) {
        parts.push(pair[0].to_vec());
        if pair[0] == b"$11\r\nsubcommands\r\n" {
            let (_, subs) = split_aggregate(pair[1]).expect("a map of subcommands");
            let mut subs: Vec<Vec<Vec<u8>>> = subs
                .chunks(2)
                .map(|s| {
                    let mut p = vec![s[0].to_vec()];
                    p.extend(doc_parts(s[1]));
                    p
                })
                .collect();
            subs.sort();
            parts.extend(subs.into_iter().flatten());
        } else if let Some(v) = pair.get(1) {
            parts.push(v.to_vec());
        }
    }
    parts
}

#[test]
fn command_docs_are_redis_for_every_common_command() {
    let Some((ours, redis)) = servers() else {
        return;
    };
    for proto in [2, 3] {
        let (mut a, mut b) = (conn(&ours, proto), conn(&redis, proto));
        let theirs = command_names(&mut b);
        // The containers listed as differing have other subcommands.
        let names: Vec<String> = command_names(&mut a)
            .into_iter()
            .filter(|n| theirs.contains(n) && !KNOWN_DIFFERENCES.iter().any(|(k, _)| k == n))
            .collect();
        assert!(names.len() > 100, "only {} common commands", names.len());
        let differ: Vec<String> = names
            .iter()
            .filter_map(|name| {
                let x = a.cmd_str(&["COMMAND", "DOCS", name]);
                let y = b.cmd_str(&["COMMAND", "DOCS", name]);
                (docs_normalized(&x) != docs_normalized(&y))
                    .then(|| format!("{name}:\n  ours:  {}\n  redis: {}", show(&x), show(&y)))
            })
            .collect();
        assert!(
            differ.is_empty(),
            "RESP{proto}: {} commands' docs differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
}

/// Command lines for COMMAND GETKEYS[ANDFLAGS]: ranges, multiple specs, numkeys (good, zero,
/// negative, too large, not a number), SORT's STORE walk, SET's GET-dependent flags, and the
/// error paths (no keys, wrong arity, unknown command or subcommand).
const GETKEYS_LINES: &[&str] = &[
    "get a",
    "get a b",
    "set a b",
    "set a b ex get",
    "set a get",
    "set a b GeT",
    "mset a 1 b 2",
    "mset a 1 b",
    "del a b c",
    "exists a b",
    "lmove a b left right",
    "rpoplpush a b",
    "blmove a b left right 0",
    "brpoplpush a b 0",
    "copy a b db 1",
    "rename a b",
    "renamenx a b",
    "zrangestore d s 0 -1",
    "bitop and d a b",
    "lmpop 2 a b left",
    "lmpop 3 a b left",
    "lmpop 4 a b left",
    "lmpop 0 a b left",
    "blmpop 0 2 a b left",
    "blmpop 0 x a b left",
    "zmpop 2 a b min count 2",
    "zmpop -1 a b min",
    "bzmpop 1 2 a b max",
    "bzpopmin a b 0",
    "bzpopmax a 0",
    "zunion 2 a b",
    "zinter 1 a b",
    "zdiff 3 a b",
    "zintercard 2 a b limit 1",
    "zunionstore d 2 a b weights 1 2",
    "zinterstore d 3 a b",
    "zdiffstore d 1 a b",
    "sort a",
    "sort a by x get y store d",
    "sort a store",
    "sort a STORE b store",
    "sort a store b store c",
    "sort a limit store x store b",
    "sort a limit 0 store b",
    "sort a get store b",
    "sort_ro a store b",
    "object encoding a",
    "object help",
    "object nosuch a",
    "ping a",
    "config get a",
    "nosuch a b",
    "getex a persist",
    "getdel a",
    "incr a",
    "touch a b",
    "unlink a b",
    "msetnx a 1 b 2",
];

#[test]
fn getkeys_and_flags_are_redis() {
    let Some((ours, redis)) = servers() else {
        return;
    };
    let mut mismatches = Vec::new();
    for proto in [2, 3] {
        let (mut a, mut b) = (conn(&ours, proto), conn(&redis, proto));
        for line in GETKEYS_LINES {
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let mut args = vec!["COMMAND", sub];
                args.extend(line.split(' '));
                let (x, y) = (a.cmd_str(&args), b.cmd_str(&args));
                if x != y {
                    mismatches.push(format!(
                        "RESP{proto} COMMAND {sub} {line}\n  ours:  {}\n  redis: {}",
                        show(&x),
                        show(&y)
                    ));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

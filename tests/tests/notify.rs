//! Keyspace notifications, end to end and differential: one seeded random command sequence
//! (strings, lists, hashes, sets, sorted sets, SORT STORE, generic commands, short TTLs, MULTI
//! blocks, two databases) runs against redis-server 7.0.15 and kayvee-server, each with
//! `notify-keyspace-events KEAn` and a `PSUBSCRIBE __key*__:*` subscriber; the two message
//! streams must agree.
//!
//! Comparison rules. `expired` events are timing-dependent: a key past its TTL is deleted
//! either by the next command touching it (lazy) or by the active cycle, whichever comes first,
//! so where its `expired` event lands among other keys' events differs between runs. Hence:
//! - the stream without `expired` events must match exactly, in order;
//! - per (database, key), the sequence of that key's events, `expired` included, must match
//!   exactly (a key's expiry always comes before its next event, lazy or active).
//!
//! Short TTLs are 10 ms and every command that sets one is followed by a 15 ms pause on both
//! servers, so each key is past its TTL on both before the next command (never racing the
//! boundary); at the end every key is probed (EXISTS) so no pending expiry is left. (With 1 ms,
//! redis-server itself deletes the key at once - `del` instead of `expire` - whenever its clock
//! ticks between taking the base time and checking whether the TTL already passed, as happens
//! on a loaded machine.)
//!
//! Environment: `KAYVEE_NOTIFY_SEED=N` reruns one seed; `KAYVEE_NOTIFY_CMDS=N` commands per seed.

use kayvee_tests::{encode_command, show, split_aggregate, Conn, Rng, Server};

/// The short TTL (ms) of the commands that set one; each is followed by a 15 ms pause.
const SHORT_TTL_MS: &str = "10";
use std::collections::BTreeMap;
use std::time::Duration;

/// Keys (few, so commands collide).
const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4"];
/// Members and values.
const VALUES: &[&str] = &["a", "b", "c", "1", "2", "x"];
/// Commands per seed unless `KAYVEE_NOTIFY_CMDS` says otherwise.
const CMDS_DEFAULT: usize = 400;
/// The marker published last: the pattern `__key*__:*` matches it too.
const END_CHANNEL: &str = "__keyend__:done";

/// One step: a command, and whether both servers pause after it (it set a short TTL).
struct Step {
    args: Vec<String>,
    pause: bool,
}

/// The command generator.
struct Gen {
    rng: Rng,
}

impl Gen {
    fn key(&mut self) -> String {
        self.rng.pick(KEYS).to_string()
    }
    fn val(&mut self) -> String {
        self.rng.pick(VALUES).to_string()
    }

    /// One command (as words), covering every notifying family.
    fn command(&mut self) -> Vec<String> {
        let (k, k2, v) = (self.key(), self.key(), self.val());
        let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self.rng.below(60) {
            0 => w(&["SET", &k, &v]),
            1 => w(&["SET", &k, &v, "PX", SHORT_TTL_MS]),
            2 => w(&[
                "SET",
                &k,
                &v,
                self.rng.pick(&["NX", "XX", "KEEPTTL", "GET"]),
            ]),
            3 => w(&["SET", &k, &v, "EX", "100"]),
            4 => w(&["SETNX", &k, &v]),
            5 => w(&["GETSET", &k, &v]),
            6 => w(&["GETDEL", &k]),
            7 => match self.rng.below(3) {
                0 => w(&["GETEX", &k, "EX", "100"]),
                1 => w(&["GETEX", &k, "PERSIST"]),
                _ => w(&["GETEX", &k, "PX", SHORT_TTL_MS]),
            },
            8 => w(&["APPEND", &k, &v]),
            9 => w(&["SETRANGE", &k, "2", &v]),
            10 => w(&["INCR", &k]),
            11 => w(&["INCRBYFLOAT", &k, "1.5"]),
            12 => w(&["MSET", &k, &v, &k2, "1"]),
            13 => w(&["SETBIT", &k, "7", self.rng.pick(&["0", "1"])]),
            14 => w(&["DEL", &k, &k2]),
            15 => w(&["UNLINK", &k]),
            16 => w(&["EXPIRE", &k, "100"]),
            17 => w(&["PEXPIRE", &k, SHORT_TTL_MS]),
            18 => w(&["PEXPIREAT", &k, "1"]),
            19 => w(&["PERSIST", &k]),
            20 => w(&["RENAME", &k, &k2]),
            21 => w(&["RENAMENX", &k, &k2]),
            22 => w(&["COPY", &k, &k2, "REPLACE"]),
            23 => w(&["MOVE", &k, "1"]),
            24 => w(&["LPUSH", &k, &v, "b"]),
            25 => w(&["RPUSH", &k, &v]),
            26 => w(&["LPOP", &k]),
            27 => w(&["RPOP", &k, "2"]),
            28 => w(&["LREM", &k, "1", &v]),
            29 => w(&["LTRIM", &k, "1", "-1"]),
            30 => w(&["LSET", &k, "0", &v]),
            31 => w(&["LINSERT", &k, "BEFORE", &v, "z"]),
            32 => w(&["LMOVE", &k, &k2, "LEFT", "RIGHT"]),
            33 => w(&["RPOPLPUSH", &k, &k2]),
            34 => w(&["LMPOP", "2", &k, &k2, "LEFT", "COUNT", "2"]),
            35 => w(&["HSET", &k, &v, "1"]),
            36 => w(&["HDEL", &k, &v]),
            37 => w(&["HINCRBY", &k, &v, "2"]),
            38 => w(&["HINCRBYFLOAT", &k, &v, "0.5"]),
            39 => w(&["HSETNX", &k, &v, "1"]),
            40 => w(&["SADD", &k, &v, "c"]),
            41 => w(&["SREM", &k, &v]),
            42 => w(&["SMOVE", &k, &k2, &v]),
            43 => w(&[
                self.rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                &k,
                &k2,
                &v,
            ]),
            44 => w(&["SPOP", &k, "100"]),
            45 => w(&["ZADD", &k, "1", &v, "2", "b"]),
            46 => w(&["ZADD", &k, "INCR", "1", &v]),
            47 => w(&["ZINCRBY", &k, "1", &v]),
            48 => w(&["ZREM", &k, &v]),
            49 => w(&["ZREMRANGEBYRANK", &k, "0", "0"]),
            50 => w(&[self.rng.pick(&["ZPOPMIN", "ZPOPMAX"]), &k]),
            51 => w(&[
                self.rng.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]),
                &k,
                "2",
                &k2,
                &v,
            ]),
            52 => w(&["ZRANGESTORE", &k, &k2, "0", "1"]),
            53 => w(&["SORT", &k2, "ALPHA", "STORE", &k]),
            54 => w(&["GET", &k]),
            55 => w(&["EXISTS", &k, &k2]),
            56 => w(&["SELECT", self.rng.pick(&["0", "1"])]),
            57 => w(&["ZREMRANGEBYSCORE", &k, "-inf", "1"]),
            58 => w(&["LPUSHX", &k, &v]),
            _ => w(&["TYPE", &k]),
        }
    }

    /// A step: usually one command, sometimes a MULTI block of 2-4 commands.
    fn steps(&mut self, out: &mut Vec<Step>) {
        let block = self.rng.below(12) == 0;
        if block {
            out.push(step(vec!["MULTI".into()]));
        }
        for _ in 0..if block { 2 + self.rng.below(3) } else { 1 } {
            let args = self.command();
            out.push(step(args));
        }
        if block {
            out.push(Step {
                args: vec!["EXEC".into()],
                pause: true,
            });
        }
    }
}

/// A command step, pausing after it when it sets a short TTL (outside MULTI the pause follows
/// the command itself; inside, the EXEC pauses).
fn step(args: Vec<String>) -> Step {
    let pause = args.iter().any(|a| a == "PX" || a == "PEXPIRE");
    Step { args, pause }
}

/// One server with a worker connection and a subscriber.
struct Side {
    worker: Conn,
    sub: Conn,
}

impl Side {
    fn open(server: &Server) -> Side {
        let mut worker = server.conn();
        let mut sub = server.conn();
        let set = worker.cmd_str(&["CONFIG", "SET", "notify-keyspace-events", "KEAn"]);
        assert_eq!(show(&set), "+OK\\r\\n");
        worker.cmd_str(&["FLUSHALL"]);
        sub.cmd_str(&["PSUBSCRIBE", "__key*__:*"]);
        Side { worker, sub }
    }

    fn run(&mut self, args: &[String]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.worker.send(&encode_command(&args)).expect("send");
        self.worker.read_reply().expect("reply");
    }

    /// Probes every key in both databases (so every expired key is deleted and reported),
    /// publishes the end marker and reads the subscriber's messages up to it:
    /// (channel, message) pairs.
    fn finish(&mut self) -> Vec<(String, String)> {
        for db in ["0", "1"] {
            self.run(&["SELECT".into(), db.into()]);
            for k in KEYS {
                self.run(&["EXISTS".into(), k.to_string()]);
            }
        }
        self.run(&["PUBLISH".into(), END_CHANNEL.into(), "end".into()]);
        self.sub.set_timeout(Duration::from_secs(10));
        let mut messages = Vec::new();
        loop {
            let frame = self.sub.read_reply().expect("subscriber message");
            let (_, parts) = split_aggregate(&frame).expect("pmessage array");
            let text: Vec<String> = parts.iter().map(|p| bulk(p)).collect();
            assert_eq!(text[0], "pmessage", "{}", show(&frame));
            if text[2] == END_CHANNEL {
                return messages;
            }
            messages.push((text[2].clone(), text[3].clone()));
        }
    }
}

/// The payload of a bulk string frame.
fn bulk(frame: &[u8]) -> String {
    let start = frame.iter().position(|&b| b == b'\n').expect("bulk header") + 1;
    String::from_utf8_lossy(&frame[start..frame.len() - 2]).into_owned()
}

/// Whether a message reports an expiry (on either channel kind).
fn is_expired(m: &(String, String)) -> bool {
    m.0.ends_with("__:expired") || (m.0.starts_with("__keyspace@") && m.1 == "expired")
}

/// Per (database, key): that key's events in order (keyspace channel messages).
fn per_key(messages: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (channel, event) in messages {
        if let Some(key) = channel.strip_prefix("__keyspace@") {
            map.entry(key.to_string()).or_default().push(event.clone());
        }
    }
    map
}

/// Runs one seed on both servers; returns the number of messages compared.
fn run_seed(redis: &Server, kayvee: &Server, seed: u64, cmds: usize) -> usize {
    let mut gen = Gen { rng: Rng(seed) };
    let mut steps = Vec::new();
    while steps.len() < cmds {
        gen.steps(&mut steps);
    }
    let (mut r, mut k) = (Side::open(redis), Side::open(kayvee));
    let mut in_multi = false;
    for (i, s) in steps.iter().enumerate() {
        r.run(&s.args);
        k.run(&s.args);
        if s.pause {
            std::thread::sleep(Duration::from_millis(15));
        }
        in_multi = match s.args[0].as_str() {
            "MULTI" => true,
            "EXEC" => false,
            _ => in_multi,
        };
        if !in_multi {
            // A marker naming the command, so a mismatch shows which command caused it.
            let marker = vec![
                "PUBLISH".into(),
                format!("__keycmd__:{i}"),
                s.args.join(" "),
            ];
            r.run(&marker);
            k.run(&marker);
        }
    }
    if std::env::var_os("KAYVEE_NOTIFY_TRACE").is_some() {
        for (i, s) in steps.iter().enumerate() {
            eprintln!("{i}: {}", s.args.join(" "));
        }
    }
    let (rm, km) = (r.finish(), k.finish());
    let ordered = |m: &[(String, String)]| -> Vec<(String, String)> {
        m.iter().filter(|m| !is_expired(m)).cloned().collect()
    };
    let (ro, ko) = (ordered(&rm), ordered(&km));
    if let Some(i) = (0..ro.len().max(ko.len())).find(|&i| ro.get(i) != ko.get(i)) {
        let from = i.saturating_sub(12);
        panic!(
            "seed {seed}: streams differ at message {i} (expired events left out)\n\
             redis:  {:?}\nkayvee: {:?}",
            &ro[from..(i + 6).min(ro.len())],
            &ko[from..(i + 6).min(ko.len())]
        );
    }
    let (rk, kk) = (per_key(&rm), per_key(&km));
    for (key, events) in &rk {
        assert_eq!(
            Some(events),
            kk.get(key),
            "seed {seed}: events of {key} differ"
        );
    }
    assert_eq!(rk.len(), kk.len(), "seed {seed}: keys with events differ");
    assert!(
        rm.iter().any(is_expired),
        "seed {seed}: the run produced no expired event"
    );
    let expired = rm.iter().filter(|m| is_expired(m)).count();
    eprintln!(
        "seed {seed}: {} messages ({expired} expired) match",
        rm.len()
    );
    rm.len()
}

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn notification_streams_match_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let Some(kayvee) = Server::kayvee(&[]) else {
        return;
    };
    let seeds: Vec<u64> = match env_num("KAYVEE_NOTIFY_SEED") {
        Some(s) => vec![s],
        None => vec![1, 2, 3],
    };
    let cmds = env_num("KAYVEE_NOTIFY_CMDS").map_or(CMDS_DEFAULT, |n| n as usize);
    for seed in seeds {
        let n = run_seed(&redis, &kayvee, seed, cmds);
        assert!(n > cmds / 2, "seed {seed}: only {n} messages");
    }
}

#[test]
fn config_get_shows_the_canonical_form() {
    let Some(kayvee) = Server::kayvee(&[]) else {
        return;
    };
    let mut c = kayvee.conn();
    let set = c.cmd_str(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    assert_eq!(show(&set), "+OK\\r\\n");
    let get = c.cmd_str(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(
        show(&get),
        "*2\\r\\n$22\\r\\nnotify-keyspace-events\\r\\n$3\\r\\nAKE\\r\\n"
    );
}

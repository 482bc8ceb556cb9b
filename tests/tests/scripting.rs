//! End-to-end long scripts: past `busy-reply-threshold` other clients get `-BUSY` while the
//! script runs, SCRIPT KILL stops a read-only one (even in a `pcall` loop), FUNCTION KILL a
//! function, a script that wrote is UNKILLABLE, HELLO still runs, and SHUTDOWN NOSAVE stops the
//! server at once (texts as redis-server 7.0.15 gives them). Then scripts compared byte for byte
//! with redis-server 7.0.15: the script and function commands and the libraries Redis loads, and
//! a sweep of number formatting and parsing (`tostring`, `tonumber`, `string.format` of many
//! doubles), which in the unikernel goes through its own C library (kayvee-lua's `libc`).
//!
//! The Lua debugger (SCRIPT DEBUG SYNC/YES, then EVAL, as `redis-cli --ldb` drives it): sessions
//! of debugger commands compared byte for byte with redis-server 7.0.15, and YES's rollback.
//!
//! Under `KAYVEE_TARGET=unikernel` (uk-test) everything runs against the image too: its loop
//! serves the other connections from the script's hook.

use kayvee_tests::{encode_command, show, target_is_unikernel, Conn, Server};
use std::time::Duration;

const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

#[test]
fn busy_scripts_are_answered_killed_and_shut_down() {
    let kayvee = Server::kayvee(&["--save", ""]).unwrap();
    // The image under TCG takes longer to get the script going.
    let settle = Duration::from_millis(if target_is_unikernel() { 1500 } else { 200 });
    let (mut c, mut runner) = (kayvee.conn(), kayvee.conn());
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "lua-time-limit", "10"]),
        b"+OK\r\n"
    );
    let spin = "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end";
    runner
        .send(&encode_command(&[b"EVAL", spin.as_bytes(), b"0"]))
        .unwrap();
    std::thread::sleep(settle);
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
    std::thread::sleep(settle);
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
    std::thread::sleep(settle);
    let unkillable = c.cmd_str(&["SCRIPT", "KILL"]);
    assert!(unkillable.starts_with(b"-UNKILLABLE Sorry the script already executed write commands"));
    c.send(&encode_command(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert!(c.is_closed(Duration::from_secs(5)));
}

/// Runs redis-cli (a new connection) with `args` against `server`, at most 20 s.
fn cli_within(server: &Server, args: &[&str]) -> String {
    use std::process::{Command, Stdio};
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port().to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn redis-cli");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("redis-cli {args:?} got no answer while the script ran");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_client_that_connects_during_a_busy_script_can_kill_it() {
    let kayvee = Server::kayvee(&["--save", ""]).unwrap();
    let settle = Duration::from_millis(if target_is_unikernel() { 1500 } else { 200 });
    let mut runner = kayvee.conn();
    assert_eq!(
        runner.cmd_str(&["CONFIG", "SET", "busy-reply-threshold", "10"]),
        b"+OK\r\n"
    );
    runner
        .send(&encode_command(&[b"EVAL", b"while 1 do end", b"0"]))
        .unwrap();
    std::thread::sleep(settle);
    // Connections opened after the script passed the threshold are served as the others.
    let mut late = kayvee.conn();
    assert_eq!(late.cmd_str(&["PING"]), BUSY_EVAL);
    let hello = late.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with(b"%7\r\n"), "{}", show(&hello));
    assert_eq!(late.cmd_str(&["GET", "x"]), BUSY_EVAL);
    if kayvee_tests::tool_available("redis-cli") {
        // What a user types in a new terminal (redis-cli prints the error's text).
        let busy = cli_within(&kayvee, &["DBSIZE"]);
        assert!(
            busy.starts_with("BUSY Redis is busy running a script"),
            "{busy}"
        );
        assert_eq!(cli_within(&kayvee, &["SCRIPT", "KILL"]), "OK\n");
    } else {
        assert_eq!(late.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n");
    }
    let killed = runner.read_reply().unwrap();
    assert!(
        killed.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        show(&killed)
    );
    // Redis's warning, once, with the script's SHA-1.
    let slow = log_lines(&kayvee, "Slow script detected");
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert!(
        slow[0].starts_with("# Slow script detected: still in execution after ")
            && slow[0].ends_with(
                " milliseconds. You can try killing the script using the SCRIPT KILL command. \
                 Script name is: a0aa8d656b65882e2a8f491fbb37ba7fa649be34."
            ),
        "{slow:?}"
    );
    // The late connection is a client like any other afterwards (still in RESP3).
    assert_eq!(late.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(late.cmd_str(&["DBSIZE"]), b":0\r\n");
    let list = late.cmd_str(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(&list);
    assert_eq!(text.matches("id=").count(), 2, "{text}");
    assert!(text.contains("resp=3"), "{text}");
}

/// Pointers in the debugger's output (`"function@0x55d0..."`) differ between servers.
fn mask_pointers(reply: &[u8]) -> String {
    let text = show(reply);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("@0x") {
        out.push_str(&rest[..i + 3]);
        rest = rest[i + 3..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
        out.push('P');
    }
    out.push_str(rest);
    out
}

/// One debugging session on both servers: SCRIPT DEBUG `mode`, EVAL `script` with `keys` and
/// `args`, then each debugger command; every reply, the `<endsession>` and the EVAL's own
/// reply must match, and both servers must close the connection after it.
fn debug_session(
    kayvee: &Server,
    redis: &Server,
    mode: &str,
    script: &str,
    keys: &[&str],
    commands: &[&[&str]],
) {
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    for c in [&mut k, &mut r] {
        assert_eq!(c.cmd_str(&["SCRIPT", "DEBUG", mode]), b"+OK\r\n");
    }
    let numkeys = keys.len().to_string();
    let mut eval: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), numkeys.as_bytes()];
    eval.extend(keys.iter().map(|k| k.as_bytes()));
    let first = (k.cmd(&eval).unwrap(), r.cmd(&eval).unwrap());
    assert_eq!(
        mask_pointers(&first.0),
        mask_pointers(&first.1),
        "{script}: start"
    );
    let mut last = first.0;
    for command in commands {
        let argv: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        let ours = k.cmd(&argv).unwrap();
        let theirs = r.cmd(&argv).unwrap();
        assert_eq!(
            mask_pointers(&ours),
            mask_pointers(&theirs),
            "{script}: {command:?}"
        );
        last = ours;
    }
    // Continue to the end: `<endsession>`, then the EVAL's reply.
    for _ in 0..10 {
        if show(&last).contains("<endsession>") {
            break;
        }
        let ours = k.cmd(&[b"c"]).unwrap();
        let theirs = r.cmd(&[b"c"]).unwrap();
        assert_eq!(
            mask_pointers(&ours),
            mask_pointers(&theirs),
            "{script}: continue"
        );
        last = ours;
    }
    let ours = k.read_reply().unwrap();
    let theirs = r.read_reply().unwrap();
    assert_eq!(
        mask_pointers(&ours),
        mask_pointers(&theirs),
        "{script}: the reply"
    );
    assert!(k.is_closed(Duration::from_secs(5)), "{script}: still open");
}

#[test]
fn the_lua_debugger_answers_as_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let script = "local a = 1\n\
        local t = {1, 'two', {x = 3}}\n\
        redis.call('set', KEYS[1], 'v')\n\
        local function f(n)\n\
          redis.debug('in f', n, t)\n\
          return n * 2\n\
        end\n\
        local b = f(a)\n\
        redis.breakpoint()\n\
        local c = redis.call('get', KEYS[1])\n\
        return {a, b, c}\n";
    let sessions: &[&[&[&str]]] = &[
        &[
            &["help"],
            &["s"],
            &["step"],
            &["print"],
            &["p", "t"],
            &["p", "KEYS"],
            &["p", "nope"],
            &["c"],
        ],
        &[
            &["list"],
            &["l", "3", "1"],
            &["whole"],
            &["break"],
            &["b", "6"],
            &["b", "99"],
            &["b", "x"],
            &["break"],
            &["c"],
            &["trace"],
            &["b", "-6"],
            &["b", "-6"],
            &["b", "0"],
            &["c"],
        ],
        &[
            &["eval", "1", "+", "2"],
            &["e", "redis.call('ping')"],
            &["e", "(("],
            &["e", "error('boom')"],
            &["r", "set", "x", "1"],
            &["redis", "get", "x"],
            &["redis", "nosuchcommand"],
            &["redis"],
            &["m"],
            &["maxlen", "10"],
            &["m", "0"],
            &["nonsense"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
            &["n"],
        ],
        &[&["e", "string.rep('x', 300)"], &["s"], &["s"], &["a"]],
    ];
    for (i, commands) in sessions.iter().enumerate() {
        let key = format!("ldb{i}");
        debug_session(&kayvee, &redis, "SYNC", script, &[&key], commands);
    }
    // YES: the changes are rolled back once the session ends.
    debug_session(&kayvee, &redis, "YES", script, &["ldbyes"], &[&["c"]]);
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    assert_eq!(
        k.cmd_str(&["EXISTS", "ldbyes", "ldb0"]),
        r.cmd_str(&["EXISTS", "ldbyes", "ldb0"])
    );
    // EVALSHA cannot be debugged; SCRIPT DEBUG's argument errors.
    let cmds = vec![
        command(&["SCRIPT", "DEBUG", "maybe"]),
        command(&["SCRIPT", "DEBUG", "SYNC"]),
        command(&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]),
        command(&["SCRIPT", "DEBUG", "NO"]),
        command(&["EVAL", "return 1", "0"]),
    ];
    compare(&mut k, &mut r, &cmds);
}

/// Sends each command to both servers; every reply must be the same bytes (HELLO's only
/// differ by the connection id, so they are not compared).
fn compare(kayvee: &mut Conn, redis: &mut Conn, commands: &[Vec<Vec<u8>>]) {
    for args in commands {
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let ours = kayvee.cmd(&argv).unwrap();
        let theirs = redis.cmd(&argv).unwrap();
        if args[0] == b"HELLO" {
            continue;
        }
        assert_eq!(
            show(&ours),
            show(&theirs),
            "reply to {}",
            kayvee_tests::show_args(args)
        );
    }
}

fn command(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn eval(script: &str, args: &[&str]) -> Vec<Vec<u8>> {
    let n = "0".to_string();
    let mut v = vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), n.into_bytes()];
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

#[test]
fn scripts_and_functions_answer_as_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    let lib = "#!lua name=mylib\n\
        local function incrby(keys, args) return redis.call('INCRBY', keys[1], args[1]) end\n\
        redis.register_function('my_incrby', incrby)\n\
        redis.register_function{function_name='my_get', callback=function(keys) \
        return redis.call('GET', keys[1]) end, flags={'no-writes'}}";
    let one = "#!lua name=one\nredis.register_function('one_echo', function(_, a) return a[1] end)";
    let mut cmds = vec![
        command(&["EVAL", "return {1, 2.9, 'x', true, false, nil, 3}", "0"]),
        command(&["EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "v"]),
        command(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"]),
        command(&["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "k"]),
        command(&["EVAL", "return redis.call('INCR', KEYS[1])", "1", "k"]),
        command(&["EVAL", "return redis.error_reply('My Error')", "0"]),
        command(&["EVAL", "return redis.status_reply('FINE')", "0"]),
        command(&["EVAL", "return {err='bad thing'}", "0"]),
        command(&["EVAL", "error('raised')", "0"]),
        command(&["EVAL", "x = 1", "0"]),
        command(&["EVAL", "return y", "0"]),
        command(&["EVAL", "return 1 +", "0"]),
        command(&["EVAL", "return redis.sha1hex('')", "0"]),
        command(&["SCRIPT", "LOAD", "return 'cached'"]),
        command(&["EVALSHA", "7c9ac8c3ab2a6b2d6eb5d6bad2f6a5e6a31ed2e4", "0"]),
        command(&["SCRIPT", "EXISTS", "0000000000000000000000000000000000000000"]),
        command(&["SCRIPT", "FLUSH"]),
        command(&["EVAL", "return cjson.encode({1, 2.5, 'a', {b=true}})", "0"]),
        command(&["EVAL", "return cjson.decode('[1,2.5,\"x\",null]')[3]", "0"]),
        command(&["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1, 2, 3.25, 'x'}))", "0"]),
        command(&["EVAL", "return struct.unpack('>I2', struct.pack('>I2', 513))", "0"]),
        command(&["EVAL", "return {bit.band(0xff, 0x0f), bit.tohex(65535), bit.bnot(0)}", "0"]),
        command(&["EVAL", "return string.rep('ab', 3) .. string.upper('x') .. #'hello'", "0"]),
        command(&["EVAL", "return {string.find('hello world', 'o w'), string.match('key:42', '%d+')}", "0"]),
        command(&["EVAL", "return (string.gsub('hello', 'l', 'L'))", "0"]),
        command(&["EVAL", "return table.concat({1, 2, 3}, ',') .. tostring(table.getn({1}))", "0"]),
        command(&["EVAL", "local t = {3, 1, 2} table.sort(t) return t", "0"]),
        command(&["EVAL", "return math.floor(3.7) + math.ceil(1.2) + math.abs(-2) + math.max(1, 9)", "0"]),
        command(&["EVAL", "return tostring(math.sqrt(2)) .. ' ' .. tostring(math.fmod(7, 3)) .. ' ' .. tostring(2^0.5)", "0"]),
        command(&["EVAL", "return {math.random(100), math.random(100)}", "0"]),
        command(&["EVAL", "return {pcall(error, 'x')}", "0"]),
        command(&["EVAL", "local co = coroutine.create(function(a) coroutine.yield(a + 1) return 7 end) \
            local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co) return {x, y}", "0"]),
        command(&["EVAL", "return {unpack({1, 2, 3})}", "0"]),
        command(&["EVAL", "return select('#', 1, 2, 3)", "0"]),
        command(&["EVAL", "return string.format('%q', 'a\\0b\\n\\\"')", "0"]),
        command(&["EVAL", "return string.format('%5.2s|%-5d|%c%c', 'abc', 42, 72, 105)", "0"]),
        command(&["EVAL", "local t = setmetatable({}, {__index=function(t, k) return k .. '!' end}) return t.x", "0"]),
        command(&["EVAL", "return loadstring('return 1 + 1')()", "0"]),
        command(&["EVAL", "return type(loadfile) .. type(dofile)", "0"]),
        command(&["EVAL", "local s = 0 for i = 1, 100000 do s = s + i end return s", "0"]),
        command(&["EVAL", "local t = {} for i = 1, 10000 do t[i] = tostring(i) end return #table.concat(t)", "0"]),
        command(&["EVAL", "local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end return f(150)", "0"]),
        command(&["EVAL", "local function f(s) return (string.gsub(s, '.', f)) end return f('a')", "0"]),
        command(&["EVAL", "return string.rep('x', 70000):len()", "0"]),
        // One library of one function while listing and dumping: Redis lists a library's
        // functions, and dumps libraries, in its dictionaries' (randomly seeded) order.
        command(&["FUNCTION", "LOAD", one]),
        command(&["FUNCTION", "LIST"]),
        command(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "one"]),
        command(&["FUNCTION", "DUMP"]),
        command(&["FCALL", "one_echo", "0", "hi"]),
        command(&["FUNCTION", "LOAD", lib]),
        command(&["FCALL", "my_incrby", "1", "counter", "5"]),
        command(&["FCALL", "my_incrby", "1", "counter", "5"]),
        command(&["FCALL_RO", "my_get", "1", "counter"]),
        command(&["FCALL_RO", "my_incrby", "1", "counter", "1"]),
        command(&["FUNCTION", "LOAD", lib]),
        command(&["FUNCTION", "DELETE", "mylib"]),
        command(&["FCALL", "my_get", "1", "counter"]),
        command(&["HELLO", "3"]),
        command(&["EVAL", "return {map={a=1}}", "0"]),
        command(&["EVAL", "return {double=3.25}", "0"]),
        command(&["EVAL", "redis.setresp(3) return redis.call('HGETALL', 'nohash')", "0"]),
        command(&["HELLO", "2"]),
    ];
    cmds.push(eval("return #ARGV", &["a", "b"]));
    compare(&mut k, &mut r, &cmds);
}

/// Doubles of every kind, as the `%.17g` text that `tonumber` reads back exactly.
fn sweep_values() -> Vec<String> {
    let mut v: Vec<String> = [
        "0",
        "-0",
        "1",
        "-1",
        "0.5",
        "1.5",
        "2.5",
        "0.1",
        "0.2",
        "0.3",
        "100",
        "1e14",
        "1e15",
        "1e16",
        "1e17",
        "123456789012345",
        "99999999999999.5",
        "999999999999999",
        "1e21",
        "1e23",
        "1e300",
        "1e-300",
        "5e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "4.35",
        "0.045",
        "1.005",
        "3.14159",
        "1e-5",
        "0.0001",
        "9007199254740993",
        "18446744073709551616",
        "-2.5e-7",
        "123.456",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..1500 {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let d = match i % 4 {
            0 => f64::from_bits(r),
            1 => (r % 2_000_000_000_000) as f64 - 1e12,
            2 => (r % 100_000) as f64 / 10f64.powi((r >> 40) as i32 % 12),
            _ => (r % 1_000_000) as f64 + 0.5,
        };
        if d.is_finite() {
            v.push(format!("{d:e}"));
        }
    }
    v
}

/// The sweep's script: for each argument, `tonumber` of it and a row of formatted texts.
const SWEEP: &str = "local out = {}
for i, s in ipairs(ARGV) do
  local v = tonumber(s)
  out[#out + 1] = tostring(v) .. '|' .. string.format(
    '%.17g|%.3f|%e|%g|%.0f|%5.1f|%-+12.4e|%#g|%.14g|%.20f|%G|%.0e|%d|%x',
    v, v, v, v, v, v, v, v, v, v, v, v, v, v) .. '|' .. tostring(v * 3.3) .. '|' ..
    tostring(v / 7) .. '|' .. tostring(-v) .. '|' .. tostring(tonumber(tostring(v))) .. '|' ..
    tostring(v % 3) .. '|' .. tostring(math.floor(v)) .. '|' .. cjson.encode(v) .. '|' .. v .. ''
end
return out";

/// Strings `tonumber` must read (or refuse) as Redis's Lua does.
const PARSE: &str = "local out = {}
for i, s in ipairs({'0x10', '0X1p4', '0x1.8', ' 12 ', '12a', '1e', '1e+', '.5', '5.', '.',
  'inf', '-inf', 'nan', 'infinity', '0x', '1e400', '-1e-400', '1_0', '  0x1F  ', '+3', '--3',
  '1e5', '0x1p-1074', '123456789012345678901234567890', '0.1e1', '\t7\n'}) do
  out[#out + 1] = s .. '=' .. tostring(tonumber(s))
end
for _, b in ipairs({2, 8, 10, 16, 36}) do
  for _, s in ipairs({'ff', '-1', '777', 'zz', '10', ' 11 ', '0x1f', '18446744073709551616'}) do
    out[#out + 1] = s .. '/' .. b .. '=' .. tostring(tonumber(s, b))
  end
end
out[#out + 1] = tostring(0/0) .. ' ' .. tostring(1/0) .. ' ' .. tostring(-1/0) .. ' ' ..
  tostring(-0) .. ' ' .. tostring(2^63) .. ' ' .. tostring(2^53 + 1) .. ' ' .. 0.1 + 0.2
out[#out + 1] = string.format('%d %i %o %u %x %X %5.2f %c %s %%', 3.7, -3.7, 8, 42, 255, 255,
  3.14159, 65, 'str')
return out";

#[test]
fn number_formatting_and_parsing_match_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    let values = sweep_values();
    let mut cmds = vec![eval(PARSE, &[])];
    for chunk in values.chunks(100) {
        let args: Vec<&str> = chunk.iter().map(String::as_str).collect();
        cmds.push(eval(SWEEP, &args));
    }
    compare(&mut k, &mut r, &cmds);
}

/// The lines of a server's log that hold `marker`, from the level mark on (Redis's
/// `pid:M date time` prefix dropped; the unikernel's console lines have none).
fn log_lines(server: &Server, marker: &str) -> Vec<String> {
    server
        .log_text()
        .lines()
        .filter(|l| l.contains(marker))
        .map(|l| {
            let at = [" . ", " - ", " * ", " # "]
                .iter()
                .filter_map(|m| l.find(m))
                .min()
                .map_or(0, |i| i + 1);
            l[at..].to_string()
        })
        .collect()
}

/// `redis.log` at the default `loglevel` (notice): the same lines as redis-server's, level marks
/// included; debug ones are left out. (kayvee-server's log filter is fixed at startup, so a
/// later `CONFIG SET loglevel` is not checked here.)
#[test]
fn redis_log_writes_to_the_server_log_as_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let script = "redis.log(redis.LOG_WARNING, 'kvlog-warning', 42, 'x') \
        redis.log(redis.LOG_DEBUG, 'kvlog-debug') \
        redis.log(redis.LOG_NOTICE, 'kvlog-notice', {}, nil, 'end') \
        redis.log(2.9, 'kvlog-two', 1.5) \
        redis.log(redis.LOG_NOTICE, {}, 'kvlog-after-table') \
        redis.log('3', 'kvlog-string-level') \
        redis.log(-0.5, 'kvlog-level-zero') \
        return 1";
    let cmds = vec![
        eval(script, &[]),
        eval("redis.log(4, 'x')", &[]),
        eval("redis.log(-1, 'x')", &[]),
        eval("redis.log('x', 'x')", &[]),
        eval("redis.log(1)", &[]),
    ];
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    compare(&mut k, &mut r, &cmds);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (ours, theirs) = (log_lines(&kayvee, "kvlog-"), log_lines(&redis, "kvlog-"));
        if ours == theirs || std::time::Instant::now() > deadline {
            assert_eq!(ours, theirs);
            assert_eq!(ours.len(), 5, "{ours:?}");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// As redis-server 7.0.15: the Lua heap (a script left 16 MB of it to the collector) is
/// reported as `used_memory_vm_eval` and is not `used_memory`, so `maxmemory` ignores it.
#[test]
fn the_lua_heap_is_not_used_memory() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    for server in [&redis, &kayvee] {
        let mut c = server.conn();
        let (used, vm) = (
            c.info_field::<u64>("memory", "used_memory"),
            c.info_field::<u64>("memory", "used_memory_vm_eval"),
        );
        let big = "local t = {} for i = 1, 1000000 do t[i] = i end return 1";
        assert_eq!(c.cmd_str(&["EVAL", big, "0"]), b":1\r\n");
        let (used_after, vm_after) = (
            c.info_field::<u64>("memory", "used_memory"),
            c.info_field::<u64>("memory", "used_memory_vm_eval"),
        );
        assert!(
            vm_after > vm + 8_000_000,
            "{:?}: vm {vm} -> {vm_after}",
            server.kind()
        );
        assert!(
            used_after < used + 2_000_000,
            "{:?}: used_memory {used} -> {used_after}",
            server.kind()
        );
        let limit = (used_after + 1_000_000).to_string();
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "maxmemory", &limit]),
            b"+OK\r\n"
        );
        assert_eq!(c.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
        assert_eq!(c.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    }
}

/// INFO errorstats (sorted) and each command's `calls`, `rejected_calls` and `failed_calls`
/// from INFO commandstats (times left out), as one text to compare.
fn error_counts(c: &mut Conn) -> String {
    let text = |c: &mut Conn, section: &str| {
        let reply = c.cmd_str(&["INFO", section]);
        let mut lines: Vec<String> = String::from_utf8_lossy(&reply)
            .split("\r\n")
            // INFO's own calls differ, and the image's harness PINGs it on another connection.
            .filter(|l| {
                l.contains(':')
                    && !l.starts_with("cmdstat_info:")
                    && !l.starts_with("cmdstat_ping:")
            })
            .map(|l| {
                // cmdstat_x:calls=1,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..
                l.split(',')
                    .filter(|f| !f.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        lines.sort();
        lines.join("\n")
    };
    format!("{}\n{}", text(c, "errorstats"), text(c, "commandstats"))
}

#[test]
fn script_errors_are_counted_as_redis() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    let cases: &[&[&str]] = &[
        &[
            "EVAL",
            "return redis.pcall('select',99)['ignore_error_stats_update']",
            "0",
        ],
        &["EVAL", "return {1, {err='FOO x'}}", "0"],
        &["EVAL", "return redis.pcall('nosuch')", "0"],
        &["EVAL", "return redis.pcall('get')", "0"],
        &["EVAL", "return redis.pcall('subscribe', 'a')", "0"],
        &["EVAL", "local x = redis.pcall() return 1", "0"],
        &["EVAL", "return redis.pcall({})", "0"],
        &[
            "EVAL",
            "return {redis.pcall('select',99), redis.pcall('select',99)}",
            "0",
        ],
        &[
            "EVAL",
            "local t = redis.pcall('select',99) return {err=t.err}",
            "0",
        ],
        &["EVAL", "error(redis.pcall('select',99))", "0"],
        &["EVAL", "error({err='nocode'})", "0"],
        &["EVAL", "return {err='nocode'}", "0"],
        &["EVAL", "return {err='-FOO bar'}", "0"],
        &[
            "EVAL",
            "return {err='ABCDEFGHIJKLMNOPQRSTUVWXYZABCD x'}",
            "0",
        ],
        &[
            "EVAL",
            "return {err='ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE x'}",
            "0",
        ],
        &["EVAL", "return redis.error_reply('')", "0"],
        &["EVAL", "error(redis.error_reply('X\r\n+INJECTED'))", "0"],
        &["EVAL", "return redis.error_reply('\r\nA B')", "0"],
        &["EVAL", "return redis.error_reply('A B\r\n')", "0"],
        &["EVAL", "return redis.error_reply('-')", "0"],
        &[
            "EVAL",
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "0",
        ],
        &["EVAL", "return redis.error_reply('a', 'b')", "0"],
        &["EVAL", "return redis.status_reply('a', 'b')", "0"],
        &["EVAL_RO", "return redis.call('set','x','y')", "1", "x"],
        &[
            "EVAL_RO",
            "local t = redis.pcall('set','x','y') return 1",
            "1",
            "x",
        ],
        &["EVAL", "return redis.call('set','x')", "0"],
        &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["EVAL", "return 1", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"],
        &[
            "EVAL",
            "#!lua flags=allow-stale,no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ],
        &[
            "EVAL",
            "#!lua flags=allow-stale,no-writes\nreturn redis.call('echo','hi')",
            "0",
        ],
        &["REPLICAOF", "NO", "ONE"],
        &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
    ];
    assert_eq!(k.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    for args in cases {
        let (ours, theirs) = (k.cmd_str(args), r.cmd_str(args));
        assert_eq!(show(&ours), show(&theirs), "reply to {args:?}");
        assert_eq!(error_counts(&mut k), error_counts(&mut r), "after {args:?}");
    }
}

#[test]
fn library_headers_and_load_errors_are_redis_texts() {
    let Some(redis) = Server::redis(&[]) else {
        return;
    };
    let kayvee = Server::kayvee(&[]).unwrap();
    let (mut k, mut r) = (kayvee.conn(), redis.conn());
    let body = "\nredis.register_function('f', function() return 1 end)";
    let mut cmds = Vec::new();
    for header in [
        "#! name=test",
        "#!foo bar=1",
        "#!foo name=@",
        "#!lua name=a name=@",
        "#!lua name=\"quoted\"",
        "#!lua name='single'",
        "#!lua name=\"open",
        "#!LUA\tname=tab",
        "#!lua name=x9 name",
    ] {
        cmds.push(command(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            &format!("{header}{body}"),
        ]));
    }
    for code in [
        "redis.register_function('f1')",
        "return math.random()",
        "local x = string",
        "redis.math.random()",
        "redis.register_function(7, function() return 1 end)",
        // Redis's fixed load timeout (500 ms), not busy-reply-threshold.
        "local a = 1 while 1 do a = a + 1 end",
    ] {
        cmds.push(command(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            &format!("#!lua name=l\n{code}"),
        ]));
    }
    cmds.push(command(&[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=lib1\nlocal lib = redis\n\
         lib.register_function('f2', function() lib.register_function('f1', function() end) end)\n\
         lib.register_function('f3', function() return {type(math), string.rep('a', 2)} end)",
    ]));
    cmds.push(command(&["FCALL", "f2", "0"]));
    cmds.push(command(&["FCALL", "f3", "0"]));
    compare(&mut k, &mut r, &cmds);
}

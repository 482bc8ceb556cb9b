//! Differential generator for scripting: EVAL/EVALSHA/EVAL_RO of scripts assembled from
//! fragments, over the shared key space, and FCALL/FCALL_RO of one function library.
//!
//! What the scripts exercise: the conversion of every Lua value to a reply (integers cut
//! towards zero, strings, booleans, nil, nested tables stopping at the first nil, status and
//! error tables, `{double=..}`), `redis.call` and `redis.pcall` of the commands of the other
//! families (their replies converted to Lua and back, RESP2 and, after `redis.setresp(3)`,
//! RESP3 ones), errors raised by calls, by Lua itself and by the sandbox (globals, wrong
//! arguments, unknown commands, writes under `no-writes` or EVAL_RO) with their
//! `script: <sha>` suffixes, compile errors, the libraries (string, table, cjson, cmsgpack,
//! struct, bit, `redis.sha1hex`) and number formatting. Replies must not depend on hash
//! order, time or randomness: a script returning a set's members sorts them first.
//!
//! Scripts run by EVAL are remembered (their SHA1s) so EVALSHA finds them, until a SCRIPT
//! FLUSH both servers also see.

use super::{args, Args, Gen};

/// Literal returns: every shape of Lua value a script can hand back.
const LITERALS: &[&str] = &[
    "return 1",
    "return -7.9",
    "return 3.99",
    "return -0.5",
    "return 2^53",
    "return 'hello'",
    "return ''",
    "return true",
    "return false",
    "return nil",
    "return {1, 2, 3}",
    "return {1, nil, 3}",
    "return {1, {2, 'x', {}}, {}}",
    "return {'a', false, 'b'}",
    "return {1.5, 'x', true}",
    "return {ok = 'OK'}",
    "return {ok = 'fine'}",
    "return {err = 'ERR custom failure'}",
    "return {err = 'my error'}",
    "return {err = ''}",
    "return redis.status_reply('DONE')",
    "return redis.error_reply('WRONG thing')",
    "return redis.error_reply('no prefix')",
    "return {double = 3.25}",
    "return {double = 0.1}",
    "return {{ok = 'inner'}, {err = 'ERR inner'}}",
    "return tostring(1/3)",
    "return tostring(0.1 + 0.2)",
    "return tostring(1e100)",
    "return tostring(-1e-7)",
    "return tostring(123456789012345)",
    "return string.format('%.3f|%d|%s|%5.1f', 2/3, 42, 'x', 3.14159)",
    "return string.format('%g %g %g', 1e15, 1e16, 0.0001)",
    "return tostring(tonumber('0x10'))",
    "return tostring(tonumber('  12  '))",
    "return tonumber('1e2')",
    "return table.concat({1, 2, 3}, ',')",
    "return string.rep('ab', 3)",
    "return unpack({7, 8})",
    "return table.getn({1, 2, 3})",
    "return string.gsub('hello world', 'o', '0')",
    "return {string.find('hello', 'l+')}",
    "return string.upper('mIxEd') .. string.len('four')",
    "return cjson.encode({1, 'a', true, cjson.null})",
    "return cjson.decode('[1,2,\"x\",[3]]')",
    "return cjson.encode(cjson.decode('{\"a\":[1,2.5,\"s\"]}').a)",
    "return cmsgpack.unpack(cmsgpack.pack({1, 2, 'x', {3}}))",
    "return cmsgpack.pack({1, -1, 300, 'abc', 1.5})",
    "return redis.sha1hex('abc')",
    "return redis.sha1hex('')",
    "return bit.band(0xff, 0x0f) + bit.lshift(1, 10)",
    "return bit.tohex(255) .. bit.tohex(-1, 4)",
    "return struct.pack('>I2i4', 258, -2)",
    "return {struct.unpack('<I2', 'AB')}",
    "return #ARGV",
    "return ARGV[1]",
    "return KEYS[1]",
    "return tonumber(ARGV[1])",
    "return type(ARGV[1]) .. type(KEYS[2])",
    "return {KEYS[1], ARGV[1], KEYS[2]}",
    "return redis.REDIS_VERSION",
    "return redis.REDIS_VERSION_NUM",
];

/// Scripts that fail: raised errors, the sandbox, wrong calls, compile errors.
const FAILING: &[&str] = &[
    "return (",
    "return 1 +",
    "local t = nil; return t.x",
    "error('boom')",
    "error({err = 'MYERR custom'})",
    "error(redis.error_reply('ERR replied error'))",
    "x = 1",
    "return undefined_global",
    "return redis.call()",
    "return redis.call('NOSUCHCOMMAND')",
    "return redis.call('INCR', KEYS[1], 'extra')",
    "return redis.call('SET', KEYS[1], {})",
    "return redis.call('GET', nil)",
    "return redis.pcall('NOSUCHCOMMAND')",
    "return redis.pcall('INCR', KEYS[1], 'extra')",
    "return redis.call('EVAL', 'return 1', 0)",
    "return redis.call('MULTI')",
    "return redis.call('BLPOP', KEYS[1], 0)",
    "return loadstring('return 1')()",
    "return dofile('/etc/passwd')",
    "return os.time()",
    "return io.read()",
    "redis.setresp(4)",
    "return redis.setresp()",
    "return string.rep()",
    "return math.floor('x')",
    "return cjson.decode('{bad')",
    "return cmsgpack.unpack('')",
];

/// `redis.call(...)` argument lists after the key (each a Lua expression list).
const CALLS: &[(&str, &str)] = &[
    ("GET", ""),
    ("SET", ", ARGV[1]"),
    ("SET", ", ARGV[1], 'GET'"),
    ("INCR", ""),
    ("INCRBY", ", ARGV[1]"),
    ("INCRBYFLOAT", ", ARGV[1]"),
    ("APPEND", ", ARGV[1]"),
    ("STRLEN", ""),
    ("GETRANGE", ", 0, 3"),
    ("TYPE", ""),
    ("EXISTS", ""),
    ("DEL", ""),
    ("LPUSH", ", ARGV[1]"),
    ("RPUSH", ", ARGV[1], 'x', 7"),
    ("RPOP", ""),
    ("LRANGE", ", 0, -1"),
    ("LLEN", ""),
    ("LINDEX", ", 0"),
    ("HSET", ", 'f', ARGV[1]"),
    ("HGET", ", 'f'"),
    ("HINCRBY", ", 'n', ARGV[1]"),
    ("HMGET", ", 'f', 'n', 'none'"),
    ("HLEN", ""),
    ("ZADD", ", ARGV[1], 'm'"),
    ("ZADD", ", 1, 'a', 2.5, 'b'"),
    ("ZSCORE", ", 'm'"),
    ("ZINCRBY", ", ARGV[1], 'm'"),
    ("ZRANGE", ", 0, -1, 'WITHSCORES'"),
    ("ZCARD", ""),
    ("SADD", ", ARGV[1]"),
    ("SCARD", ""),
    ("SISMEMBER", ", ARGV[1]"),
    ("PFADD", ", ARGV[1]"),
    ("PFCOUNT", ""),
    ("XLEN", ""),
    ("EXPIRE", ", 100000"),
    ("PERSIST", ""),
    ("OBJECT", ""),
];

/// The function library FCALL calls (FUNCTION LOAD REPLACE loads it).
const LIBRARY: &str = "#!lua name=difflib
redis.register_function('dget', function(keys, args) return redis.call('GET', keys[1]) end)
redis.register_function{function_name = 'dro', callback = function(keys, args)
  return redis.call('GET', keys[1]) end, flags = {'no-writes'}}
redis.register_function('dincr', function(keys, args)
  return redis.call('INCRBY', keys[1], args[1]) end)
redis.register_function('dconv', function(keys, args) return {1, 'two', {3}, false, 5} end)
redis.register_function('derr', function(keys, args) return redis.error_reply('FERR failed') end)";

impl Gen {
    /// One scripting command, or a string command where the server has no Lua.
    pub(crate) fn script_family_command(&mut self) -> Args {
        if self.scripting {
            self.script_command()
        } else {
            self.string_command()
        }
    }

    /// One scripting command.
    fn script_command(&mut self) -> Args {
        match self.rng.below(40) {
            0..=7 => {
                let s = self.rng.pick(LITERALS).to_string();
                self.eval(&s)
            }
            8..=19 => {
                let s = self.call_script();
                self.eval(&s)
            }
            20..=22 => {
                let s = self.rng.pick(FAILING);
                self.eval(s)
            }
            23..=25 => self.evalsha(),
            26 => {
                // A write where none may happen: EVAL_RO, or a `no-writes` shebang.
                let s = self.call_script();
                if self.rng.chance(50) {
                    self.eval_as("EVAL_RO", &s)
                } else {
                    self.eval(&format!("#!lua flags=no-writes\n{s}"))
                }
            }
            27 => {
                let script = self.rng.pick(&["return 1", "return KEYS[1]"]);
                let n = self.rng.pick(&["-1", "3", "abc", "", "1"]);
                args(&["EVAL", script, n])
            }
            28 => {
                let mut cmd = args(&["SCRIPT", "EXISTS"]);
                let known = self.known_sha();
                cmd.push(known.into_bytes());
                cmd.push(b"ffffffffffffffffffffffffffffffffffffffff".to_vec());
                cmd
            }
            29 if self.rng.chance(10) => {
                self.scripts_seen.clear();
                args(&["SCRIPT", "FLUSH"])
            }
            29 => args(&["SCRIPT", self.rng.pick(&["LOAD", "EXISTS", "FOO"])]),
            30 => {
                let s = self.rng.pick(LITERALS);
                self.scripts_seen.push(sha1_hex(s.as_bytes()));
                args(&["SCRIPT", "LOAD", s])
            }
            31 | 32 => args(&["FUNCTION", "LOAD", "REPLACE", LIBRARY]),
            _ => {
                let (k, v) = (self.key(), self.value());
                let (name, n) = match self.rng.below(7) {
                    0 => ("dget", "1"),
                    1 => ("dro", "1"),
                    2 => ("dincr", "1"),
                    3 => ("dconv", "0"),
                    4 => ("derr", "0"),
                    5 => ("nosuch", "0"),
                    _ => ("dget", self.rng.pick(&["2", "-1", "x"])),
                };
                let verb = if self.rng.chance(30) {
                    "FCALL_RO"
                } else {
                    "FCALL"
                };
                args(&[verb, name, n, k, v])
            }
        }
    }

    /// A script of one or two `redis.call`/`redis.pcall` of the key space's commands, some
    /// in RESP3, some looking at what came back.
    fn call_script(&mut self) -> String {
        let (cmd, rest) = CALLS[self.rng.below(CALLS.len())];
        let call = |f: &str, key: &str| format!("redis.{f}('{cmd}', {key}{rest})");
        let f = if self.rng.chance(30) { "pcall" } else { "call" };
        match self.rng.below(12) {
            0..=3 => format!("return {}", call(f, "KEYS[1]")),
            4 => format!("redis.setresp(3)\nreturn {}", call(f, "KEYS[1]")),
            5 => format!(
                "local r = {}\nif type(r) == 'table' and r.err then return 'caught: ' .. r.err end\n\
                 return r",
                call("pcall", "KEYS[1]")
            ),
            6 => format!(
                "local r = {}\nreturn {{type(r), type(r) == 'table' and #r or tostring(r)}}",
                call(f, "KEYS[1]")
            ),
            7 => format!(
                "local v = redis.call('INCR', KEYS[1])\nredis.call('SET', KEYS[2], v * 2)\n\
                 return {{v, redis.call('GET', KEYS[2]), {}}}",
                call("pcall", "KEYS[2]")
            ),
            8 => "local s = redis.call('SMEMBERS', KEYS[1])\ntable.sort(s)\nreturn s".into(),
            9 => "redis.setresp(3)\nlocal r = redis.call('HGETALL', KEYS[1])\nlocal n = 0\n\
                  for _ in pairs(r.map) do n = n + 1 end\nreturn n"
                .into(),
            10 => "redis.setresp(3)\nreturn {redis.call('ZSCORE', KEYS[1], 'm'), \
                   redis.call('GET', KEYS[1] .. ':none')}"
                .into(),
            _ => format!(
                "local t = {}\nreturn {{#t, t[1], redis.call('EXISTS', KEYS[1], KEYS[2])}}",
                call("pcall", "KEYS[1]")
            ),
        }
    }

    /// `EVAL script numkeys keys... args...`, remembering the script for EVALSHA.
    fn eval(&mut self, script: &str) -> Args {
        self.eval_as("EVAL", script)
    }

    fn eval_as(&mut self, verb: &str, script: &str) -> Args {
        let sha = sha1_hex(script.as_bytes());
        if !self.scripts_seen.contains(&sha) {
            self.scripts_seen.push(sha);
        }
        let keys = self.rng.below(3);
        let mut cmd = args(&[verb, script, &keys.to_string()]);
        (0..keys).for_each(|_| cmd.push(self.key().into()));
        (0..self.rng.below(3)).for_each(|_| cmd.push(self.value().into()));
        cmd
    }

    /// EVALSHA of a script run before (or of one never seen: NOSCRIPT).
    fn evalsha(&mut self) -> Args {
        let sha = self.known_sha();
        let verb = if self.rng.chance(20) {
            "EVALSHA_RO"
        } else {
            "EVALSHA"
        };
        let mut cmd = args(&[verb, &sha, "1", self.key()]);
        cmd.push(self.value().into());
        cmd
    }

    /// A SHA1 of a script both servers ran, else of one they never saw.
    fn known_sha(&mut self) -> String {
        if self.scripts_seen.is_empty() || self.rng.chance(10) {
            return "e0e1f9fabfc9d4800c877a703b823ac0578ff8db".into();
        }
        self.scripts_seen[self.rng.below(self.scripts_seen.len())].clone()
    }
}

/// The SHA1 of `data` in lower-case hex (the name EVALSHA gives a script).
fn sha1_hex(data: &[u8]) -> String {
    use sha1::Digest;
    sha1::Sha1::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

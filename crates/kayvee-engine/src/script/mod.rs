//! Scripting's state (EVAL and the SCRIPT commands): the Lua VM with Redis 7.0's sandbox, the
//! script cache and the VM's random generator. Running a script needs the command dispatcher
//! (`redis.call` runs commands through the same path as a client's), so that is above, in
//! `dispatch::script`; this module only builds and keeps the VM.
//!
//! The VM is [`kayvee_lua::Lua`] (the real Lua 5.1.5). It is built at the first use and
//! dropped by SCRIPT FLUSH. Its environment (`sandbox.lua`) is Redis's: the base, table,
//! string and math libraries (no `loadfile`, `dofile`, `print`, `os`, `io`, `debug`), a
//! `redis` table, globals that cannot be written and whose missing names are an error, and
//! library tables that cannot be changed. Host functions (`redis.call` and the rest) are
//! numbered by [`host`].

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod library;
pub mod sha1;
pub mod structlib;

pub use library::{Function, Library, Restore};

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_lua::{Failure, Host, Lua, Raise, REGISTRY};

/// The host functions' numbers (see [`kayvee_lua::Host`]).
pub mod host {
    /// `redis.call`.
    pub const CALL: i32 = 1;
    /// `redis.pcall`.
    pub const PCALL: i32 = 2;
    /// `redis.sha1hex`.
    pub const SHA1HEX: i32 = 3;
    /// `redis.log`.
    pub const LOG: i32 = 4;
    /// `redis.setresp`.
    pub const SETRESP: i32 = 5;
    /// `redis.set_repl`.
    pub const SET_REPL: i32 = 6;
    /// `math.random`.
    pub const RANDOM: i32 = 7;
    /// `math.randomseed`.
    pub const RANDOMSEED: i32 = 8;
    /// `redis.acl_check_cmd`.
    pub const ACL_CHECK_CMD: i32 = 9;
    /// `redis.register_function` (while FUNCTION LOAD runs a library).
    pub const REGISTER_FUNCTION: i32 = 10;
    /// `redis.breakpoint` (false outside the debugger).
    pub const BREAKPOINT: i32 = 11;
    /// `redis.debug` (nothing outside the debugger).
    pub const DEBUG: i32 = 12;
    /// The names the sandbox gives them.
    pub const NAMES: &[(&str, i32)] = &[
        ("call", CALL),
        ("pcall", PCALL),
        ("sha1hex", SHA1HEX),
        ("log", LOG),
        ("setresp", SETRESP),
        ("set_repl", SET_REPL),
        ("random", RANDOM),
        ("randomseed", RANDOMSEED),
        ("acl_check_cmd", ACL_CHECK_CMD),
        ("register_function", REGISTER_FUNCTION),
        ("breakpoint", BREAKPOINT),
        ("debug", DEBUG),
    ];
}

/// Registry keys of the VM's tables.
const ENV: &[u8] = b"kayvee.env";
const VISIBLE: &[u8] = b"kayvee.visible";
const SCRIPTS: &[u8] = b"kayvee.scripts";
const FUNCTIONS: &[u8] = b"kayvee.functions";
const PENDING: &[u8] = b"kayvee.pending";
/// The metatable of the globals' proxy (its `__index` is the globals scripts read).
const ENV_META: &[u8] = b"kayvee.env_meta";
/// The globals a library's code reads while FUNCTION LOAD runs it (only `redis`).
const LOADING_GLOBALS: &[u8] = b"kayvee.loading_globals";

/// A script's or a function's flags (the `#!lua flags=` and `register_function`'s `flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `no-writes`.
    pub no_writes: bool,
    /// `allow-oom`.
    pub allow_oom: bool,
    /// `allow-stale`.
    pub allow_stale: bool,
    /// `no-cluster`.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`.
    pub allow_cross_slot_keys: bool,
}

impl Flags {
    /// The flags' names, in Redis's order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (on, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ] {
            if on {
                out.push(name);
            }
        }
        out
    }

    /// Sets flag `name`; false for an unknown name.
    pub fn set(&mut self, name: &[u8]) -> bool {
        let flag = match name {
            b"no-writes" => &mut self.no_writes,
            b"allow-oom" => &mut self.allow_oom,
            b"allow-stale" => &mut self.allow_stale,
            b"no-cluster" => &mut self.no_cluster,
            b"allow-cross-slot-keys" => &mut self.allow_cross_slot_keys,
            _ => return false,
        };
        *flag = true;
        true
    }
}

/// A 40-digit lowercase hex SHA-1, a script's name.
pub type Sha = [u8; 40];

/// The scripting state kept in `Core`.
#[derive(Default)]
pub struct Scripts {
    lua: Option<Lua>,
    /// The cached scripts' bodies by name (SCRIPT LOAD and EVAL add, SCRIPT FLUSH clears).
    pub bodies: BTreeMap<Sha, Vec<u8>>,
    /// The flags of the cached scripts that have a `#!lua` header.
    pub shebang: BTreeMap<Sha, Flags>,
    /// Bytes of the cached bodies (INFO's `used_memory_scripts_eval`).
    pub bodies_bytes: usize,
    /// The function libraries (FUNCTION LOAD), by name.
    pub libraries: BTreeMap<Vec<u8>, Library>,
    /// Every library's functions, by lowercase name.
    pub functions: BTreeMap<Vec<u8>, Function>,
    /// `cjson`'s settings.
    pub cjson: cjson::Config,
    /// `lua-enable-deprecated-api`: scripts see `setfenv`, `getfenv` and `newproxy` (set
    /// from the configuration before the VM is built).
    pub deprecated_api: bool,
    /// `math.random`'s 48-bit state (Redis's `lrand48`: its default seed at start, never
    /// reset per script; `math.randomseed` reseeds it).
    pub rand48: u64,
    /// Scripts run since the last collection step (see [`Scripts::put_vm`]).
    runs_since_gc: u32,
    /// Where `redis.log` writes (the shell's log; `Engine::set_script_log`): Redis's level
    /// (0 debug, 1 verbose, 2 notice, 3 warning) and the message.
    pub log: Option<fn(u8, &[u8])>,
}

/// Scripts between two collection steps of the VM, and the step's size (Redis's
/// `LUA_GC_CYCLE_PERIOD`): the heap stays near its live size instead of growing to twice it
/// between Lua's own cycles.
const GC_PERIOD: u32 = 50;

/// `lrand48`'s state before any seeding.
pub const RAND48_DEFAULT: u64 = 0x1234_ABCD_330E;

/// The host used while the sandbox is built: none of its functions run then.
struct NoHost;

impl Host for NoHost {
    fn call(&mut self, _: &mut Lua, _: i32) -> Result<i32, Raise> {
        Err(Raise)
    }
}

impl Scripts {
    /// The VM, built on first use.
    pub fn vm(&mut self) -> &mut Lua {
        if self.rand48 == 0 {
            self.rand48 = RAND48_DEFAULT;
        }
        let deprecated = self.deprecated_api;
        self.lua.get_or_insert_with(|| build_vm(deprecated))
    }

    /// Whether the VM exists (INFO reports its memory).
    pub fn vm_bytes(&self) -> usize {
        self.lua.as_ref().map_or(0, Lua::used_bytes)
    }

    /// Takes the VM out for a script's run (the dispatcher runs commands meanwhile).
    pub fn take_vm(&mut self) -> Lua {
        self.vm();
        self.lua.take().expect("just built")
    }

    /// Puts the VM back after a run.
    pub fn put_vm(&mut self, mut lua: Lua) {
        self.runs_since_gc += 1;
        if self.runs_since_gc >= GC_PERIOD {
            lua.gc_step(GC_PERIOD as i32);
            self.runs_since_gc = 0;
        }
        self.lua = Some(lua);
    }

    /// Drops every script (SCRIPT FLUSH); the functions stay.
    pub fn flush(&mut self) {
        if let Some(lua) = self.lua.as_mut() {
            lua.new_table(0, 0);
            lua.raw_set_field(REGISTRY, SCRIPTS);
            lua.gc_collect();
        }
        self.bodies.clear();
        self.shebang.clear();
        self.bodies_bytes = 0;
    }

    /// Drops every function library (FUNCTION FLUSH).
    pub fn flush_functions(&mut self) {
        if let Some(lua) = self.lua.as_mut() {
            lua.new_table(0, 0);
            lua.raw_set_field(REGISTRY, FUNCTIONS);
            lua.gc_collect();
        }
        self.libraries.clear();
        self.functions.clear();
    }

    /// Drops library `name` and its functions; false when there is none.
    pub fn delete_library(&mut self, name: &[u8]) -> bool {
        let Some(lib) = self.libraries.remove(name) else {
            return false;
        };
        let lua = self.vm();
        lua.raw_get_field(REGISTRY, FUNCTIONS);
        for f in &lib.functions {
            lua.push_nil();
            lua.raw_set_field(-2, f);
        }
        lua.pop(1);
        for f in &lib.functions {
            self.functions.remove(f);
        }
        true
    }

    /// Compiles `body` under its name `sha` unless cached: `Err` holds the error reply's
    /// text (a bad `#!lua` header, or `ERR Error compiling script ...`).
    pub fn compile(&mut self, sha: &Sha, body: &[u8]) -> Result<(), Vec<u8>> {
        if self.bodies.contains_key(sha) {
            return Ok(());
        }
        let flags = shebang(body).map_err(String::into_bytes)?;
        // A header line stays as an empty line, so line numbers count it.
        let code = match flags {
            Some(_) => &body[body.iter().position(|&b| b == b'\n').unwrap_or(body.len())..],
            None => body,
        };
        let lua = self.vm();
        compile_into(lua, sha, code)
            .map_err(|msg| [&b"ERR Error compiling script (new function): "[..], &msg].concat())?;
        if let Some(f) = flags {
            self.shebang.insert(*sha, f);
        }
        self.bodies_bytes += body.len();
        self.bodies.insert(*sha, body.to_vec());
        Ok(())
    }
}

/// The flags of an EVAL script's `#!lua [flags=a,b]` header (`None`: no header).
pub fn shebang(body: &[u8]) -> Result<Option<Flags>, String> {
    let Some(rest) = body.strip_prefix(b"#!") else {
        return Ok(None);
    };
    let line = &rest[..rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len())];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let engine = words.next().unwrap_or_default();
    if engine != b"lua" {
        return Err(alloc::format!(
            "ERR Unexpected engine in script shebang: #!{}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = Flags::default();
    for w in words {
        let Some(list) = w.strip_prefix(b"flags=") else {
            return Err(alloc::format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(w)
            ));
        };
        for f in list.split(|&b| b == b',').filter(|f| !f.is_empty()) {
            if !flags.set(f) {
                return Err(alloc::format!(
                    "ERR Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(f)
                ));
            }
        }
    }
    Ok(Some(flags))
}

/// Loads `body` and stores the function in the VM's script table under `sha`.
fn compile_into(lua: &mut Lua, sha: &Sha, body: &[u8]) -> Result<(), Vec<u8>> {
    if lua.load(body, c"@user_script").is_err() {
        let msg = lua.to_vec(-1).unwrap_or_default();
        lua.pop(1);
        return Err(msg);
    }
    lua.raw_get_field(REGISTRY, ENV);
    lua.set_fenv(-2);
    lua.raw_get_field(REGISTRY, SCRIPTS);
    lua.insert(-2);
    lua.raw_set_field(-2, sha);
    lua.pop(1);
    Ok(())
}

/// Loads `code` as a chunk named `name` in the scripts' environment and pushes it, or
/// returns the load error's message (nothing pushed). The debugger's `eval` runs such chunks.
pub fn load_in_env(lua: &mut Lua, code: &[u8], name: &core::ffi::CStr) -> Result<(), Vec<u8>> {
    if lua.load(code, name).is_err() {
        let msg = lua.to_vec(-1).unwrap_or_default();
        lua.pop(1);
        return Err(msg);
    }
    lua.raw_get_field(REGISTRY, ENV);
    lua.set_fenv(-2);
    Ok(())
}

/// Pushes the global `name` scripts see (KEYS, ARGV...; nil when unset).
pub fn push_global(lua: &mut Lua, name: &[u8]) {
    lua.raw_get_field(REGISTRY, VISIBLE);
    lua.raw_get_field(-1, name);
    lua.remove(-2);
}

/// Pushes function `name` (any case) of a library (nil when there is none).
pub fn push_function(lua: &mut Lua, name: &[u8]) {
    lua.raw_get_field(REGISTRY, FUNCTIONS);
    lua.raw_get_field(-1, &name.to_ascii_lowercase());
    lua.remove(-2);
}

/// Pushes the function of cached script `sha` (nil when the VM lacks it).
pub fn push_script(lua: &mut Lua, sha: &Sha) {
    lua.raw_get_field(REGISTRY, SCRIPTS);
    lua.raw_get_field(-1, sha);
    lua.remove(-2);
}

/// Sets the global `name` scripts read (KEYS, ARGV) to the table of `items`.
pub fn set_global_array<'a>(lua: &mut Lua, name: &[u8], items: impl Iterator<Item = &'a [u8]>) {
    lua.raw_get_field(REGISTRY, VISIBLE);
    lua.new_table(0, 0);
    for (i, item) in items.enumerate() {
        lua.push_bytes(item);
        lua.raw_seti(-2, i as i32 + 1);
    }
    lua.raw_set_field(-2, name);
    lua.pop(1);
}

/// A VM with Redis's sandbox.
fn build_vm(deprecated_api: bool) -> Lua {
    let mut lua = Lua::new();
    lua.new_table(0, 0);
    lua.raw_set_field(REGISTRY, SCRIPTS);
    lua.load(include_bytes!("sandbox.lua"), c"=sandbox")
        .expect("the sandbox compiles");
    lua.new_table(0, 0);
    for &(name, id) in host::NAMES {
        lua.push_host_fn(id);
        lua.raw_set_field(-2, name.as_bytes());
    }
    lua.new_table(0, 0);
    lua.new_table(0, bit::NAMES.len() as i32);
    for (i, name) in bit::NAMES.iter().enumerate() {
        lua.push_host_fn(bit::FIRST + i as i32);
        lua.raw_set_field(-2, name.as_bytes());
    }
    lua.raw_set_field(-2, b"bit");
    lua.new_table(0, cjson::NAMES.len() as i32 + 1);
    for (i, name) in cjson::NAMES.iter().enumerate() {
        lua.push_host_fn(cjson::FIRST + i as i32);
        lua.raw_set_field(-2, name.as_bytes());
    }
    lua.push_null_userdata();
    lua.raw_set_field(-2, b"null");
    lua.raw_set_field(-2, b"cjson");
    lua.new_table(0, (cmsgpack::NAMES.len() + cmsgpack::FIELDS.len()) as i32);
    for (i, name) in cmsgpack::NAMES.iter().enumerate() {
        lua.push_host_fn(cmsgpack::FIRST + i as i32);
        lua.raw_set_field(-2, name.as_bytes());
    }
    for (name, value) in cmsgpack::FIELDS {
        lua.push_bytes(value.as_bytes());
        lua.raw_set_field(-2, name.as_bytes());
    }
    lua.raw_set_field(-2, b"cmsgpack");
    lua.new_table(0, structlib::NAMES.len() as i32);
    for (i, name) in structlib::NAMES.iter().enumerate() {
        lua.push_host_fn(structlib::FIRST + i as i32);
        lua.raw_set_field(-2, name.as_bytes());
    }
    lua.raw_set_field(-2, b"struct");
    lua.raw_set_field(-2, b"libs");
    lua.push_bool(deprecated_api);
    lua.raw_set_field(-2, b"deprecated_api");
    let ran = lua.call(&mut NoHost, 1, 4);
    assert_eq!(ran, Ok::<(), Failure>(()), "the sandbox runs");
    lua.raw_set_field(REGISTRY, ENV_META);
    lua.raw_set_field(REGISTRY, LOADING_GLOBALS);
    lua.raw_set_field(REGISTRY, VISIBLE);
    lua.raw_set_field(REGISTRY, ENV);
    for name in [FUNCTIONS, PENDING] {
        lua.new_table(0, 0);
        lua.raw_set_field(REGISTRY, name);
    }
    lua
}

/// `srand48(seed)`'s state.
pub fn srand48(seed: i32) -> u64 {
    ((u64::from(seed as u32)) << 16) | 0x330E
}

/// `lrand48()`: the next state and its 31-bit output.
pub fn lrand48(state: &mut u64) -> i64 {
    *state = (state.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1);
    (*state >> 17) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrand48_matches_redis_first_draw() {
        let mut s = RAND48_DEFAULT;
        let r = (lrand48(&mut s) % 2_147_483_647) as f64 / 2_147_483_647.0;
        assert_eq!(alloc::format!("{r:.14}"), "0.39646477363839");
    }
}

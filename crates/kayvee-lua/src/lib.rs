//! The real Lua 5.1.5 VM (its C sources, compiled by `build.rs`) behind a small safe API, for
//! a host that knows what the scripts mean (the engine's scripting). This crate knows nothing
//! of Redis: it gives a [`Lua`] state with the libraries base, table, string, math and an `os`
//! holding only `clock`; a stack API (push, read, tables, globals); loading a chunk; protected
//! calls whose errors carry the position of the Lua code that raised them; and host functions:
//! Lua closures that call back into the [`Host`] given to [`Lua::call`].
//!
//! Memory: the state allocates through Rust's global allocator (`lua_newstate` with our
//! allocation function), so the Lua heap is the process's (or the unikernel's) heap and is
//! counted ([`Lua::used_bytes`]).
//!
//! Errors and `longjmp`: Lua raises errors with `longjmp`, which must never cross a Rust
//! frame. Host functions are therefore entered through a C trampoline (`src/shim.c`): the
//! Rust host returns, with the error value on the stack, and the C frame raises it. Stack
//! operations this API exposes raise nothing but memory errors; the allocation function never
//! fails short of the global allocator's own abort, so none is raised from Rust frames.
#![no_std]

extern crate alloc;

mod ffi;
pub mod libc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ffi::{c_int, c_void};
use ffi::lua_State;

/// The registry's pseudo-index.
pub const REGISTRY: i32 = ffi::LUA_REGISTRYINDEX;
/// The globals table's pseudo-index.
pub const GLOBALS: i32 = ffi::LUA_GLOBALSINDEX;
/// `nresults` for "all results".
pub const MULTRET: i32 = -1;

/// `LUA_HOOKLINE`.
const HOOK_LINE: i32 = 2;

/// Why the hook ran ([`Lua::hook_event`]), with the running function's current line and its
/// chunk's short name (`user_script` for a chunk named `@user_script`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookEvent {
    /// A new line is about to run ([`Lua::set_line_hook`]).
    Line {
        /// The line.
        line: i32,
        /// The chunk's short name.
        chunk: Vec<u8>,
    },
    /// The instruction count ran out.
    Count {
        /// The current line.
        line: i32,
        /// The chunk's short name.
        chunk: Vec<u8>,
    },
}

/// A function on the call stack ([`Lua::frame`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Its current line (-1 for C functions).
    pub line: i32,
    /// Its chunk's short name.
    pub chunk: Vec<u8>,
    /// The name it was called by, when Lua knows it.
    pub name: Option<Vec<u8>>,
}

/// A Lua value's type, as `lua_type` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// No value at that index.
    None,
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Boolean,
    /// A light userdata.
    LightUserdata,
    /// A number (a double).
    Number,
    /// A string (bytes).
    String,
    /// A table.
    Table,
    /// A function.
    Function,
    /// A userdata.
    Userdata,
    /// A coroutine.
    Thread,
}

/// Why a load or a call failed; the error value (for calls: the handler's table, see
/// [`Lua::call`]) is on top of the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A run-time error.
    Runtime,
    /// A syntax error while loading.
    Syntax,
    /// Out of memory.
    Memory,
    /// An error in the message handler.
    Handler,
}

impl Failure {
    fn from_code(rc: c_int) -> Result<(), Failure> {
        match rc {
            0 => Ok(()),
            ffi::LUA_ERRSYNTAX => Err(Failure::Syntax),
            ffi::LUA_ERRMEM => Err(Failure::Memory),
            ffi::LUA_ERRERR => Err(Failure::Handler),
            _ => Err(Failure::Runtime),
        }
    }
}

/// What host functions call back into, for the length of one [`Lua::call`].
pub trait Host {
    /// Runs host function `id` (as registered by [`Lua::push_host_fn`]; `-1` is the count
    /// hook, [`Lua::set_hook`]) on its arguments (the stack of `lua`). Returns how many results
    /// it pushed, or `Err(Raise)` with the error value pushed on top, which is raised in Lua.
    fn call(&mut self, lua: &mut Lua, id: i32) -> Result<i32, Raise>;
}

/// A host function's error: its value is on top of the stack, to be raised in Lua.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raise;

/// The state's companion: the host of the running call and the allocation count.
struct Extra {
    host: Option<*mut (dyn Host + 'static)>,
    used: usize,
}

/// A Lua state, or (inside a host function) a borrowed view of one.
pub struct Lua {
    l: *mut lua_State,
    extra: *mut Extra,
    owned: bool,
}

const ALIGN: usize = 16;

/// The allocation function Lua is given: Rust's global allocator, sizes counted.
unsafe extern "C" fn allocate(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    use alloc::alloc::{alloc, dealloc, realloc, Layout};
    // SAFETY: `ud` is the `Extra` this state was created with; it outlives the state.
    let extra = unsafe { &mut *(ud as *mut Extra) };
    if nsize == 0 {
        if !ptr.is_null() {
            extra.used -= osize;
            // SAFETY: Lua passes back a block we allocated with this size (5.1's contract).
            unsafe {
                dealloc(
                    ptr as *mut u8,
                    Layout::from_size_align_unchecked(osize, ALIGN),
                )
            };
        }
        return core::ptr::null_mut();
    }
    let Ok(layout) = Layout::from_size_align(nsize, ALIGN) else {
        return core::ptr::null_mut();
    };
    let new = if ptr.is_null() {
        // SAFETY: `nsize` is not zero.
        unsafe { alloc(layout) }
    } else {
        // SAFETY: the block is ours, of `osize` bytes; `nsize` is not zero.
        unsafe {
            realloc(
                ptr as *mut u8,
                Layout::from_size_align_unchecked(osize, ALIGN),
                nsize,
            )
        }
    };
    if !new.is_null() {
        extra.used = extra.used + nsize - if ptr.is_null() { 0 } else { osize };
    }
    new as *mut c_void
}

/// The trampoline's way back into Rust (see `src/shim.c`).
#[no_mangle]
unsafe extern "C" fn kv_lua_host_call(l: *mut lua_State, id: c_int) -> c_int {
    let mut ud = core::ptr::null_mut();
    // SAFETY: `l` is a live state; the allocator's data is its `Extra`.
    unsafe { ffi::lua_getallocf(l, &mut ud) };
    let extra = ud as *mut Extra;
    // SAFETY: as above; the host is set for the length of `Lua::call`.
    let Some(host) = (unsafe { (*extra).host }) else {
        // SAFETY: a live state.
        unsafe { ffi::lua_pushstring(l, c"no host for this call".as_ptr()) };
        return -1;
    };
    let mut lua = Lua {
        l,
        extra,
        owned: false,
    };
    // SAFETY: the host outlives the call in progress (`Lua::call` holds it borrowed).
    unsafe { (*host).call(&mut lua, id) }.unwrap_or(-1)
}

impl Lua {
    /// A new state with the base, table, string and math libraries and `os.clock`.
    pub fn new() -> Lua {
        let extra = Box::into_raw(Box::new(Extra {
            host: None,
            used: 0,
        }));
        // SAFETY: `allocate` honours Lua's allocation contract; `extra` outlives the state
        // (freed in `drop` after `lua_close`).
        let l = unsafe { ffi::lua_newstate(allocate, extra as *mut c_void) };
        assert!(!l.is_null(), "lua_newstate: out of memory");
        // SAFETY: a fresh state.
        let rc = unsafe { ffi::kv_open_libs(l) };
        assert_eq!(rc, 0, "opening the Lua libraries failed");
        Lua {
            l,
            extra,
            owned: true,
        }
    }

    /// Bytes the Lua heap holds now.
    pub fn used_bytes(&self) -> usize {
        // SAFETY: `extra` lives as long as the state.
        unsafe { (*self.extra).used }
    }

    /// Runs an incremental collection step of `size` (Lua's `LUA_GCSTEP`).
    pub fn gc_step(&mut self, size: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_gc(self.l, ffi::LUA_GCSTEP, size) };
    }

    /// Runs a full garbage collection.
    pub fn gc_collect(&mut self) {
        // SAFETY: a live state.
        unsafe { ffi::lua_gc(self.l, ffi::LUA_GCCOLLECT, 0) };
    }

    /// The index of the top element (the stack's size).
    pub fn top(&self) -> i32 {
        // SAFETY: a live state.
        unsafe { ffi::lua_gettop(self.l) }
    }

    /// Sets the stack's size (pushing nils or dropping values).
    pub fn set_top(&mut self, idx: i32) {
        // SAFETY: a live state; Lua checks nothing here, so grow only within the reserved
        // stack (callers grow by at most a few slots; `check_stack` reserves more).
        unsafe { ffi::lua_settop(self.l, idx) }
    }

    /// Pops `n` values.
    pub fn pop(&mut self, n: i32) {
        self.set_top(-n - 1);
    }

    /// Makes room for `n` more values; false when the stack cannot grow so much.
    pub fn check_stack(&mut self, n: i32) -> bool {
        // SAFETY: a live state.
        unsafe { ffi::lua_checkstack(self.l, n) != 0 }
    }

    /// The type of the value at `idx`.
    pub fn type_of(&self, idx: i32) -> Type {
        // SAFETY: a live state; any index is accepted (none gives LUA_TNONE).
        match unsafe { ffi::lua_type(self.l, idx) } {
            0 => Type::Nil,
            1 => Type::Boolean,
            2 => Type::LightUserdata,
            3 => Type::Number,
            4 => Type::String,
            5 => Type::Table,
            6 => Type::Function,
            7 => Type::Userdata,
            8 => Type::Thread,
            _ => Type::None,
        }
    }

    /// Pushes a copy of the value at `idx`.
    pub fn push_value(&mut self, idx: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_pushvalue(self.l, idx) }
    }

    /// Moves the top value to `idx`, shifting the ones above up.
    pub fn insert(&mut self, idx: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_insert(self.l, idx) }
    }

    /// Removes the value at `idx`.
    pub fn remove(&mut self, idx: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_remove(self.l, idx) }
    }

    /// Pushes nil.
    pub fn push_nil(&mut self) {
        // SAFETY: a live state.
        unsafe { ffi::lua_pushnil(self.l) }
    }

    /// Pushes a boolean.
    pub fn push_bool(&mut self, b: bool) {
        // SAFETY: a live state.
        unsafe { ffi::lua_pushboolean(self.l, c_int::from(b)) }
    }

    /// Pushes a number.
    pub fn push_number(&mut self, n: f64) {
        // SAFETY: a live state.
        unsafe { ffi::lua_pushnumber(self.l, n) }
    }

    /// Pushes a string (any bytes).
    pub fn push_bytes(&mut self, b: &[u8]) {
        // SAFETY: a live state; Lua copies the bytes.
        unsafe { ffi::lua_pushlstring(self.l, b.as_ptr().cast(), b.len()) }
    }

    /// Pushes the NULL light userdata (what `cjson.null` is in Redis).
    pub fn push_null_userdata(&mut self) {
        // SAFETY: a live state; the pointer is never dereferenced.
        unsafe { ffi::lua_pushlightuserdata(self.l, core::ptr::null_mut()) }
    }

    /// Pushes a host function: a closure calling [`Host::call`] with `id`.
    pub fn push_host_fn(&mut self, id: i32) {
        // SAFETY: a live state.
        unsafe { ffi::kv_push_host_fn(self.l, id) }
    }

    /// The boolean value of the value at `idx` (false only for nil and false).
    pub fn to_bool(&self, idx: i32) -> bool {
        // SAFETY: a live state.
        unsafe { ffi::lua_toboolean(self.l, idx) != 0 }
    }

    /// The value at `idx` as a number (a number, or a string convertible to one).
    pub fn to_number(&self, idx: i32) -> Option<f64> {
        // SAFETY: a live state.
        let ok = unsafe { ffi::lua_isnumber(self.l, idx) } != 0;
        // SAFETY: a live state.
        ok.then(|| unsafe { ffi::lua_tonumber(self.l, idx) })
    }

    /// The value at `idx` as bytes: a string, or a number (converted in place to its string,
    /// `%.14g`, as Lua does). `None` for any other type.
    pub fn to_bytes(&self, idx: i32) -> Option<&[u8]> {
        let mut len = 0usize;
        // SAFETY: a live state; the pointer stays valid while the value is on the stack,
        // which the borrow of `self` stands for.
        let p = unsafe { ffi::lua_tolstring(self.l, idx, &mut len) };
        if p.is_null() {
            return None;
        }
        // SAFETY: Lua gives `len` bytes at `p`.
        Some(unsafe { core::slice::from_raw_parts(p.cast(), len) })
    }

    /// The string at `idx`, copied (a number is converted as [`Lua::to_bytes`]).
    pub fn to_vec(&self, idx: i32) -> Option<Vec<u8>> {
        self.to_bytes(idx).map(<[u8]>::to_vec)
    }

    /// Pushes a new table with room for `narr` array and `nrec` hash entries.
    pub fn new_table(&mut self, narr: i32, nrec: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_createtable(self.l, narr, nrec) }
    }

    /// `t[k] = v` without metamethods: `t` at `idx`, then `k` and `v` popped from the top.
    pub fn raw_set(&mut self, idx: i32) {
        // SAFETY: a live state; the caller names a table.
        unsafe { ffi::lua_rawset(self.l, idx) }
    }

    /// `t[n] = v` without metamethods, `v` popped from the top.
    pub fn raw_seti(&mut self, idx: i32, n: i32) {
        // SAFETY: a live state; the caller names a table.
        unsafe { ffi::lua_rawseti(self.l, idx, n) }
    }

    /// Pushes `t[k]` without metamethods, `k` replaced by the value.
    pub fn raw_get(&mut self, idx: i32) {
        // SAFETY: a live state; the caller names a table.
        unsafe { ffi::lua_rawget(self.l, idx) }
    }

    /// Pushes `t[n]` without metamethods.
    pub fn raw_geti(&mut self, idx: i32, n: i32) {
        // SAFETY: a live state; the caller names a table.
        unsafe { ffi::lua_rawgeti(self.l, idx, n) }
    }

    /// Pushes `t[name]` without metamethods (`t` at `idx`, not a pseudo-index counted from
    /// the top).
    pub fn raw_get_field(&mut self, idx: i32, name: &[u8]) {
        let idx = self.absolute(idx);
        self.push_bytes(name);
        self.raw_get(idx);
    }

    /// `t[name] = v` without metamethods, `v` popped from the top.
    pub fn raw_set_field(&mut self, idx: i32, name: &[u8]) {
        let idx = self.absolute(idx);
        self.push_bytes(name);
        self.insert(-2);
        self.raw_set(idx);
    }

    /// Makes a relative index absolute (pseudo-indices stay).
    pub fn absolute(&self, idx: i32) -> i32 {
        if idx < 0 && idx > REGISTRY {
            self.top() + idx + 1
        } else {
            idx
        }
    }

    /// The raw length of the table or string at `idx` (`#` without metamethods).
    pub fn raw_len(&self, idx: i32) -> usize {
        // SAFETY: a live state.
        unsafe { ffi::lua_objlen(self.l, idx) }
    }

    /// Table traversal: pops a key and pushes the next key and value; false at the end.
    pub fn next(&mut self, idx: i32) -> bool {
        // SAFETY: a live state; the caller names a table and keeps its keys unchanged.
        unsafe { ffi::lua_next(self.l, idx) != 0 }
    }

    /// Pops a table (or nil) and makes it the metatable of the value at `idx`.
    pub fn set_metatable(&mut self, idx: i32) {
        // SAFETY: a live state.
        unsafe { ffi::lua_setmetatable(self.l, idx) };
    }

    /// Pops a table and makes it the environment of the function at `idx`.
    pub fn set_fenv(&mut self, idx: i32) -> bool {
        // SAFETY: a live state.
        unsafe { ffi::lua_setfenv(self.l, idx) != 0 }
    }

    /// Loads `code` as a chunk named `name` (a `@name` chunk reports `name:line:`) and
    /// pushes it as a function, or the error message.
    pub fn load(&mut self, code: &[u8], name: &core::ffi::CStr) -> Result<(), Failure> {
        // SAFETY: a live state; Lua copies what it needs from the buffer.
        let rc = unsafe {
            ffi::luaL_loadbuffer(self.l, code.as_ptr().cast(), code.len(), name.as_ptr())
        };
        Failure::from_code(rc)
    }

    /// Calls the function below the `nargs` arguments on top, in protected mode, with `host`
    /// answering its host functions. On error the value on top is a table `{message=<the
    /// error value>, source=<chunk>, line=<n>}` naming the innermost Lua code on the stack
    /// (the caller of a C function that raised), or for a memory error the message alone.
    pub fn call(&mut self, host: &mut dyn Host, nargs: i32, nresults: i32) -> Result<(), Failure> {
        let host: *mut (dyn Host + '_) = host;
        // SAFETY: the host is used only by host functions during this call; the pointer is
        // cleared before the borrow ends (the lifetime is erased for the slot's type only).
        let host: *mut (dyn Host + 'static) = unsafe { core::mem::transmute(host) };
        // SAFETY: `extra` lives as long as the state.
        let saved = unsafe { (*self.extra).host.replace(host) };
        // SAFETY: a live state; errors stay in the C frames of `kv_pcall`.
        let rc = unsafe { ffi::kv_pcall(self.l, nargs, nresults) };
        // SAFETY: as above.
        unsafe { (*self.extra).host = saved };
        Failure::from_code(rc)
    }

    /// Calls host function `-1` every `count` VM instructions during calls (0: no hook): the
    /// host may raise an error there to stop a script.
    pub fn set_hook(&mut self, count: i32) {
        // SAFETY: a live state.
        unsafe { ffi::kv_set_hook(self.l, 0, count) }
    }

    /// As [`Lua::set_hook`], and also at each new line of Lua code run (a debugger's stops).
    pub fn set_line_hook(&mut self, count: i32) {
        // SAFETY: a live state.
        unsafe { ffi::kv_set_hook(self.l, 1, count) }
    }

    /// Inside the hook (host function `-1`): what called it.
    pub fn hook_event(&self) -> HookEvent {
        let top = self.top();
        let line = self.to_number(top - 1).unwrap_or(0.0) as i32;
        let chunk = self.to_vec(top).unwrap_or_default();
        match self.to_number(top - 2) {
            Some(n) if n as i32 == HOOK_LINE => HookEvent::Line { line, chunk },
            _ => HookEvent::Count { line, chunk },
        }
    }

    /// The address of the table, function, thread or userdata at `idx` (null for others):
    /// an identity to show, never dereferenced.
    pub fn to_pointer(&self, idx: i32) -> *const c_void {
        // SAFETY: a live state.
        unsafe { ffi::lua_topointer(self.l, idx) }
    }

    /// Pushes local variable `n` (from 1) of the function `level` up the stack (0: the one
    /// running) and returns its name; `None` (nothing pushed) past the last one.
    pub fn push_local(&mut self, level: i32, n: i32) -> Option<Vec<u8>> {
        // SAFETY: a live state; the name is a string Lua keeps alive while the frame lives.
        unsafe {
            let name = ffi::kv_local(self.l, level, n);
            (!name.is_null()).then(|| core::ffi::CStr::from_ptr(name).to_bytes().to_vec())
        }
    }

    /// The function `level` up the stack (0: the one running), if any.
    pub fn frame(&self, level: i32) -> Option<Frame> {
        let mut line = 0;
        let mut src = [0 as core::ffi::c_char; 64];
        let mut name: *const core::ffi::c_char = core::ptr::null();
        // SAFETY: a live state; the buffers outlive the call and `src` is terminated by it.
        unsafe {
            if ffi::kv_frame(
                self.l,
                level,
                &mut line,
                src.as_mut_ptr(),
                src.len(),
                &mut name,
            ) == 0
            {
                return None;
            }
            Some(Frame {
                line,
                chunk: core::ffi::CStr::from_ptr(src.as_ptr()).to_bytes().to_vec(),
                name: (!name.is_null())
                    .then(|| core::ffi::CStr::from_ptr(name).to_bytes().to_vec()),
            })
        }
    }

    /// Raises nothing: builds `where: message` as `luaL_where(level)` would (the position of
    /// the function `level` up the stack, empty for C) and pushes it.
    pub fn push_where(&mut self, level: i32) {
        // SAFETY: a live state.
        unsafe { ffi::luaL_where(self.l, level) }
    }

    /// Pushes `where: msg` as `luaL_error` words an error raised by a C function (the
    /// position of the Lua code that called it), for a host function to return `Err(Raise)`.
    pub fn error_here(&mut self, msg: &[u8]) -> Raise {
        self.room_for_error();
        self.push_where(1);
        self.push_bytes(msg);
        self.concat(2);
        Raise
    }

    /// Pushes the message `luaL_argerror` raises for argument `narg` of the running host
    /// function (`where: bad argument #narg to 'name' (msg)`, the name as the caller wrote
    /// it), for the host function to return `Err(Raise)`.
    pub fn arg_error(&mut self, narg: i32, msg: &[u8]) -> Raise {
        self.room_for_error();
        self.push_bytes(msg);
        // SAFETY: a live state, the message on top.
        unsafe { ffi::kv_arg_error(self.l, narg) };
        Raise
    }

    /// The name `luaL_typename` gives the value at `idx` (`no value` for none).
    pub fn type_name(&self, idx: i32) -> &'static str {
        match self.type_of(idx) {
            Type::None => "no value",
            Type::Nil => "nil",
            Type::Boolean => "boolean",
            Type::LightUserdata | Type::Userdata => "userdata",
            Type::Number => "number",
            Type::String => "string",
            Type::Table => "table",
            Type::Function => "function",
            Type::Thread => "thread",
        }
    }

    /// `luaL_typerror`'s message for argument `narg`: `<expected> expected, got <type>`.
    pub fn type_error(&mut self, narg: i32, expected: &str) -> Raise {
        let got = self.type_name(narg);
        let msg = [expected.as_bytes(), b" expected, got ", got.as_bytes()].concat();
        self.arg_error(narg, &msg)
    }

    /// `luaL_checknumber`: argument `narg` as a number (a numeric string converts).
    pub fn check_number(&mut self, narg: i32) -> Result<f64, Raise> {
        match self.to_number(narg) {
            Some(n) => Ok(n),
            None => Err(self.type_error(narg, "number")),
        }
    }

    /// `luaL_checkinteger`: argument `narg` as an integer (truncated toward zero).
    pub fn check_integer(&mut self, narg: i32) -> Result<i64, Raise> {
        self.check_number(narg).map(|n| n as i64)
    }

    /// `luaL_optinteger`: argument `narg` as an integer, `default` when absent or nil.
    pub fn opt_integer(&mut self, narg: i32, default: i64) -> Result<i64, Raise> {
        match self.type_of(narg) {
            Type::None | Type::Nil => Ok(default),
            _ => self.check_integer(narg),
        }
    }

    /// `luaL_checklstring`: argument `narg` as bytes, copied (a number converts).
    pub fn check_vec(&mut self, narg: i32) -> Result<Vec<u8>, Raise> {
        match self.to_vec(narg) {
            Some(v) => Ok(v),
            None => Err(self.type_error(narg, "string")),
        }
    }

    /// Makes room for building an error message: on a stack that cannot grow (a host function
    /// that filled it), its values are dropped, as the error discards them anyway.
    fn room_for_error(&mut self) {
        if !self.check_stack(4) {
            self.set_top(0);
        }
    }

    /// Concatenates the `n` values on top (strings and numbers) into one string.
    pub fn concat(&mut self, n: i32) {
        // SAFETY: a live state; the caller pushes strings or numbers only.
        unsafe { ffi::lua_concat(self.l, n) }
    }
}

impl Default for Lua {
    fn default() -> Self {
        Lua::new()
    }
}

impl Drop for Lua {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: we own the state and its `Extra`; nothing uses them after this.
            unsafe {
                ffi::lua_close(self.l);
                drop(Box::from_raw(self.extra));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    struct Adder;
    impl Host for Adder {
        fn call(&mut self, lua: &mut Lua, id: i32) -> Result<i32, Raise> {
            if id == 2 {
                lua.push_bytes(b"host says no");
                return Err(Raise);
            }
            let a = lua.to_number(1).unwrap_or(0.0);
            let b = lua.to_number(2).unwrap_or(0.0);
            lua.push_number(a + b);
            Ok(1)
        }
    }

    fn run(lua: &mut Lua, code: &str) -> Result<(), Failure> {
        lua.load(code.as_bytes(), c"@test")?;
        lua.call(&mut Adder, 0, 1)
    }

    #[test]
    fn runs_code_and_host_functions() {
        let mut lua = Lua::new();
        lua.push_host_fn(1);
        lua.raw_set_field(GLOBALS, b"add");
        run(
            &mut lua,
            "return tostring(add(2, 3)) .. string.format('%.14g', 0.1)",
        )
        .unwrap();
        assert_eq!(lua.to_bytes(-1), Some(&b"50.1"[..]));
        lua.pop(1);
        assert!(lua.used_bytes() > 0);
    }

    #[test]
    fn errors_carry_their_position() {
        let mut lua = Lua::new();
        lua.push_host_fn(2);
        lua.raw_set_field(GLOBALS, b"fail");
        assert_eq!(run(&mut lua, "\nfail()"), Err(Failure::Runtime));
        lua.raw_get_field(-1, b"message");
        assert_eq!(lua.to_bytes(-1), Some(&b"host says no"[..]));
        lua.pop(1);
        lua.raw_get_field(-1, b"line");
        assert_eq!(lua.to_number(-1), Some(2.0));
        lua.pop(2);
        assert_eq!(
            lua.load(b"x = = 1", c"@test"),
            Err(Failure::Syntax),
            "syntax errors are reported"
        );
        assert_eq!(
            lua.to_bytes(-1),
            Some(&b"test:1: unexpected symbol near '='"[..])
        );
    }

    #[test]
    fn five_one_semantics() {
        let mut lua = Lua::new();
        run(
            &mut lua,
            "return table.getn({1,2,3}) + select('#', unpack({1,2}))",
        )
        .unwrap();
        assert_eq!(lua.to_number(-1), Some(5.0));
        lua.pop(1);
        run(
            &mut lua,
            "return type(io) .. type(os.clock) .. type(os.time)",
        )
        .unwrap();
        assert_eq!(lua.to_bytes(-1), Some(&b"nilfunctionnil"[..]));
    }
}

//! The Lua 5.1 C API this crate calls (`lua.h`, `lauxlib.h`) and the shim's functions
//! (`src/shim.c`), declared by hand: the few entry points used, nothing generated.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

/// An opaque Lua state.
#[repr(C)]
pub struct lua_State {
    _private: [u8; 0],
}

pub const LUA_REGISTRYINDEX: c_int = -10000;
pub const LUA_GLOBALSINDEX: c_int = -10002;
pub const LUA_ERRSYNTAX: c_int = 3;
pub const LUA_ERRMEM: c_int = 4;
pub const LUA_ERRERR: c_int = 5;
pub const LUA_GCCOLLECT: c_int = 2;
pub const LUA_GCSTEP: c_int = 5;

pub type lua_Alloc = unsafe extern "C" fn(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void;

extern "C" {
    pub fn lua_newstate(f: lua_Alloc, ud: *mut c_void) -> *mut lua_State;
    pub fn lua_close(l: *mut lua_State);
    pub fn lua_getallocf(l: *mut lua_State, ud: *mut *mut c_void) -> Option<lua_Alloc>;
    pub fn lua_gc(l: *mut lua_State, what: c_int, data: c_int) -> c_int;
    pub fn lua_gettop(l: *mut lua_State) -> c_int;
    pub fn lua_settop(l: *mut lua_State, idx: c_int);
    pub fn lua_checkstack(l: *mut lua_State, n: c_int) -> c_int;
    pub fn lua_pushvalue(l: *mut lua_State, idx: c_int);
    pub fn lua_insert(l: *mut lua_State, idx: c_int);
    pub fn lua_remove(l: *mut lua_State, idx: c_int);
    pub fn lua_type(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_isnumber(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_tonumber(l: *mut lua_State, idx: c_int) -> f64;
    pub fn lua_toboolean(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_tolstring(l: *mut lua_State, idx: c_int, len: *mut usize) -> *const c_char;
    pub fn lua_topointer(l: *mut lua_State, idx: c_int) -> *const c_void;
    pub fn lua_objlen(l: *mut lua_State, idx: c_int) -> usize;
    pub fn lua_pushnil(l: *mut lua_State);
    pub fn lua_pushnumber(l: *mut lua_State, n: f64);
    pub fn lua_pushlstring(l: *mut lua_State, s: *const c_char, len: usize);
    pub fn lua_pushstring(l: *mut lua_State, s: *const c_char);
    pub fn lua_pushboolean(l: *mut lua_State, b: c_int);
    pub fn lua_pushlightuserdata(l: *mut lua_State, p: *mut c_void);
    pub fn lua_createtable(l: *mut lua_State, narr: c_int, nrec: c_int);
    pub fn lua_rawget(l: *mut lua_State, idx: c_int);
    pub fn lua_rawgeti(l: *mut lua_State, idx: c_int, n: c_int);
    pub fn lua_rawset(l: *mut lua_State, idx: c_int);
    pub fn lua_rawseti(l: *mut lua_State, idx: c_int, n: c_int);
    pub fn lua_setmetatable(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_setfenv(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_next(l: *mut lua_State, idx: c_int) -> c_int;
    pub fn lua_concat(l: *mut lua_State, n: c_int);
    pub fn luaL_loadbuffer(
        l: *mut lua_State,
        buf: *const c_char,
        size: usize,
        name: *const c_char,
    ) -> c_int;
    pub fn luaL_where(l: *mut lua_State, level: c_int);

    pub fn kv_open_libs(l: *mut lua_State) -> c_int;
    pub fn kv_push_host_fn(l: *mut lua_State, id: c_int);
    pub fn kv_pcall(l: *mut lua_State, nargs: c_int, nresults: c_int) -> c_int;
    pub fn kv_set_hook(l: *mut lua_State, lines: c_int, count: c_int);
    pub fn kv_local(l: *mut lua_State, level: c_int, n: c_int) -> *const c_char;
    pub fn kv_frame(
        l: *mut lua_State,
        level: c_int,
        line: *mut c_int,
        src: *mut c_char,
        srclen: usize,
        name: *mut *const c_char,
    ) -> c_int;
    pub fn kv_arg_error(l: *mut lua_State, narg: c_int);
}

/* The C side of kayvee-lua: what must not be written in Rust because it may raise a Lua
 * error (a longjmp must never cross a Rust frame), and the library opening. */
#include <string.h>
#include <time.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

/* Rust: runs host function `id` (the closure's upvalue); returns the number of results, or
 * -1 with the error value on top of the stack. */
extern int kv_lua_host_call(lua_State *L, int id);

static int kv_trampoline(lua_State *L) {
    int n = kv_lua_host_call(L, (int)lua_tointeger(L, lua_upvalueindex(1)));
    if (n < 0) return lua_error(L);
    return n;
}

void kv_push_host_fn(lua_State *L, int id) {
    lua_pushinteger(L, id);
    lua_pushcclosure(L, kv_trampoline, 1);
}

static int kv_os_clock(lua_State *L) {
    lua_pushnumber(L, ((lua_Number)clock()) / (lua_Number)CLOCKS_PER_SEC);
    return 1;
}

static int kv_open_all(lua_State *L) {
    static const luaL_Reg libs[] = {
        {"", luaopen_base},
        {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string},
        {LUA_MATHLIBNAME, luaopen_math},
        {NULL, NULL}
    };
    static const luaL_Reg os[] = {{"clock", kv_os_clock}, {NULL, NULL}};
    const luaL_Reg *lib;
    for (lib = libs; lib->func; lib++) {
        lua_pushcfunction(L, lib->func);
        lua_pushstring(L, lib->name);
        lua_call(L, 1, 0);
    }
    luaL_register(L, "os", os);
    lua_pop(L, 1);
    return 0;
}

/* Opens the libraries in protected mode: 0 on success. */
int kv_open_libs(lua_State *L) {
    return lua_cpcall(L, kv_open_all, NULL);
}

/* The message handler of protected calls: a table {message=<the error value>, source=...,
 * line=...} naming the Lua function that raised it: the innermost on the stack that is
 * neither C (error() itself) nor a host's own chunk (a chunk named "=..."). */
static int kv_error_handler(lua_State *L) {
    lua_Debug ar;
    int level = 1;
    lua_newtable(L);
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, "message");
    while (lua_getstack(L, level, &ar)) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.what[0] != 'C' && ar.source[0] != '=') {
            lua_pushstring(L, ar.source);
            lua_setfield(L, -2, "source");
            lua_pushinteger(L, ar.currentline);
            lua_setfield(L, -2, "line");
            break;
        }
        level++;
    }
    return 1;
}

/* Calls the function below `nargs` arguments with the message handler: 0 or a lua_pcall
 * error code, the handler's table (or the error value for memory errors) on top. */
int kv_pcall(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    int rc;
    lua_pushcfunction(L, kv_error_handler);
    lua_insert(L, base);
    rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return rc;
}

/* The hook: pushes the event (LUA_HOOKLINE, LUA_HOOKCOUNT), the current line and the chunk's
 * short name, calls host function -1, then drops what it pushed (an error is raised). */
static void kv_hook(lua_State *L, lua_Debug *ar) {
    int top = lua_gettop(L);
    lua_getinfo(L, "Sl", ar);
    lua_pushinteger(L, ar->event);
    lua_pushinteger(L, ar->currentline);
    lua_pushstring(L, ar->short_src);
    if (kv_lua_host_call(L, -1) < 0) lua_error(L);
    lua_settop(L, top);
}

/* Installs the hook: every `count` instructions (0: never) and, with `lines`, at each new
 * line; neither removes it. */
void kv_set_hook(lua_State *L, int lines, int count) {
    int mask = (lines ? LUA_MASKLINE : 0) | (count > 0 ? LUA_MASKCOUNT : 0);
    if (mask) lua_sethook(L, kv_hook, mask, count);
    else lua_sethook(L, NULL, 0, 0);
}

/* Pushes local `n` of the function `level` up the stack and returns its name, or NULL with
 * nothing pushed. */
const char *kv_local(lua_State *L, int level, int n) {
    lua_Debug ar;
    if (!lua_getstack(L, level, &ar)) return NULL;
    return lua_getlocal(L, &ar, n);
}

/* The function `level` up the stack: 0 if there is none; else 1, with its current line, its
 * chunk's short name (copied into `src`, `srclen` bytes at most, terminated) and its name
 * (NULL when unknown; valid while the frame lives). */
int kv_frame(lua_State *L, int level, int *line, char *src, size_t srclen, const char **name) {
    lua_Debug ar;
    if (!lua_getstack(L, level, &ar)) return 0;
    lua_getinfo(L, "Snl", &ar);
    *line = ar.currentline;
    *name = ar.name;
    strncpy(src, ar.short_src, srclen - 1);
    src[srclen - 1] = 0;
    return 1;
}

/* Replaces the message on top with luaL_argerror's wording for argument `narg` of the running
 * C function ("bad argument #n to 'name' (message)", positioned as luaL_error positions it),
 * without raising it. */
void kv_arg_error(lua_State *L, int narg) {
    lua_Debug ar;
    int top = lua_gettop(L);
    const char *msg = lua_tostring(L, top);
    if (!lua_getstack(L, 0, &ar)) {
        lua_pushfstring(L, "bad argument #%d (%s)", narg, msg);
    } else {
        lua_getinfo(L, "n", &ar);
        if (strcmp(ar.namewhat, "method") == 0 && --narg == 0) {
            lua_pushfstring(L, "calling '%s' on bad self (%s)", ar.name, msg);
        } else {
            lua_pushfstring(L, "bad argument #%d to '%s' (%s)", narg,
                            ar.name ? ar.name : "?", msg);
        }
    }
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
    lua_remove(L, top);
}

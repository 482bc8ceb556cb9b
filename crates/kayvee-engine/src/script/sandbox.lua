-- The environment scripts run in, as Redis 7.0 gives it: run once per VM, with the host
-- functions in a table (its only argument). It returns the globals table scripts see and the
-- table they read through it (where KEYS and ARGV are set). Scripts see a proxy: reading a
-- missing global is an error, and no global, nor any library table, can be written.
local host = ...
local G = _G
local rawget, rawset, error, setmetatable, getmetatable, type, tostring, next, ipairs =
    rawget, rawset, error, setmetatable, getmetatable, type, tostring, next, ipairs
local readonly = setmetatable({}, {__mode = 'k'})
local function refuse()
    error('Attempt to modify a readonly table', 2)
end
local ro
-- What getmetatable shows of a protected table's metatable: a read-only view whose table
-- fields (the table behind `__index`) are read-only views too, so nothing protected can be
-- reached for writing through it.
local function mt_view(mt)
    local p = setmetatable({}, {
        __index = function(_, k)
            local v = mt[k]
            if type(v) == 'table' then return ro(v) end
            return v
        end,
        __newindex = refuse,
    })
    readonly[p] = mt
    return p
end
ro = function(t)
    local mt = {__index = t, __newindex = refuse}
    local p = setmetatable({}, mt)
    readonly[p] = t
    mt.__metatable = mt_view(mt)
    return p
end
local function rw(t)
    return readonly[t] or t
end

local redis = {
    call = host.call,
    pcall = host.pcall,
    sha1hex = host.sha1hex,
    log = host.log,
    setresp = host.setresp,
    set_repl = host.set_repl,
    replicate_commands = function() return true end,
    breakpoint = host.breakpoint,
    debug = host.debug,
    acl_check_cmd = host.acl_check_cmd,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
    REDIS_VERSION = '7.0.15', REDIS_VERSION_NUM = 458767,
}
local sub, find, gsub, select = string.sub, string.find, string.gsub, select
-- Carriage returns and newlines cut from both ends.
local function trim_crlf(s)
    s = gsub(s, '^[\r\n]+', '')
    return (gsub(s, '[\r\n]+$', ''))
end
-- As Redis 7.0: one string; its leading '-' is dropped; the word before the first space is
-- the error code and the rest the message, cut of CR/LF at both ends; without a space, the
-- whole text is the message and the code is ERR (so '' gives 'ERR ').
function redis.error_reply(...)
    local e = ...
    if select('#', ...) ~= 1 or type(e) ~= 'string' then
        return {err = 'ERR wrong number or type of arguments'}
    end
    if sub(e, 1, 1) == '-' then e = sub(e, 2) end
    local space = find(e, ' ', 1, true)
    if not space then return {err = 'ERR ' .. trim_crlf(e)} end
    return {err = sub(e, 1, space) .. trim_crlf(sub(e, space + 1))}
end
function redis.status_reply(...)
    local s = ...
    if select('#', ...) ~= 1 or type(s) ~= 'string' then
        return {err = 'ERR wrong number or type of arguments'}
    end
    return {ok = s}
end

math.random = host.random
math.randomseed = host.randomseed

-- The strings' shared metatable is seen read-only (getmetatable('') cannot change it, nor
-- reach the string table behind it for writing).
do
    local smt = getmetatable('')
    smt.__metatable = mt_view(smt)
end

local visible = {}
for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable',
        'load', 'loadstring', 'next', 'pcall', 'rawequal', 'rawget', 'select', 'tonumber',
        'tostring', 'type', 'unpack', 'xpcall', '_VERSION'}) do
    visible[name] = G[name]
end
for _, name in ipairs({'coroutine', 'math', 'string', 'table'}) do
    visible[name] = ro(G[name])
end
for name, lib in pairs(host.libs) do
    visible[name] = ro(lib)
end
visible.redis = ro(redis)
-- Lua 5.1.5's unpack overflows its count on extreme ranges (and then asks for a huge stack):
-- such ranges fail as they do in Redis's patched Lua.
-- The arguments pass on as given (no added nils): the stack room `unpack` checks counts them.
local unpack = unpack
function visible.unpack(...)
    local _, i, j = ...
    if type(i) == 'number' and type(j) == 'number' and j - i >= 7999 then
        error('too many results to unpack', 0)
    end
    return unpack(...)
end
-- Binary chunks are never loaded (Redis's Lua parses every chunk as text): they give nil.
local loadstring, load, byte = loadstring, load, string.byte
function visible.loadstring(s, ...)
    if type(s) == 'string' and byte(s, 1) == 27 then
        return nil
    end
    return loadstring(s, ...)
end
function visible.load(chunk, ...)
    if type(chunk) ~= 'function' then
        return load(chunk, ...)
    end
    local first, binary = true, false
    return load(function()
        if binary then
            return nil
        end
        local piece = chunk()
        if first then
            first = false
            -- A lone escape byte, then the end, is a truncated binary chunk: the load fails.
            if type(piece) == 'string' and byte(piece, 1) == 27 then
                binary = true
                return '\27'
            end
        end
        return piece
    end, ...)
end
if host.deprecated_api then
    visible.setfenv, visible.getfenv, visible.newproxy = setfenv, getfenv, newproxy
end
function visible.setmetatable(t, m)
    if readonly[t] then error('Attempt to modify a readonly table', 0) end
    return setmetatable(t, m)
end
function visible.rawset(t, k, v)
    if readonly[t] then error('Attempt to modify a readonly table', 0) end
    return rawset(t, k, v)
end
-- Iterating a protected table walks the table behind it, without handing that table out.
function visible.pairs(t)
    local raw = rw(t)
    if raw == t then return next, t, nil end
    return function(_, k) return next(raw, k) end, t, nil
end
function visible.ipairs(t)
    local raw = rw(t)
    if raw == t then return ipairs(t) end
    local step = ipairs(raw)
    return function(_, i) return step(raw, i) end, t, 0
end

-- Globals: an empty proxy whose `__index` is the table of globals itself, so reading one is
-- a table lookup in the VM (no Lua call per access); only a missing name reaches the function
-- behind that table, which raises Redis's error.
local function missing(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local function strict(t)
    setmetatable(t, {__index = missing})
    local mt = {__index = t, __newindex = refuse}
    local p = setmetatable({}, mt)
    readonly[p] = t
    mt.__metatable = mt_view(mt)
    return p, mt
end
local env, env_mt = strict(visible)
visible._G = env

-- While FUNCTION LOAD runs a library's code, the globals are this table instead (the host
-- points the proxy's `__index` at it): only `redis`, with register_function, log and the
-- constants, as Redis 7.0 shows a library's top level.
local redis_loading = {register_function = host.register_function, log = host.log}
for k, v in pairs(redis) do
    if type(v) ~= 'function' then redis_loading[k] = v end
end
local loading = setmetatable({redis = strict(redis_loading)}, {__index = missing})
return env, visible, loading, env_mt

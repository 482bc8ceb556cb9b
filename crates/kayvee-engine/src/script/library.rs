//! Function libraries (FUNCTION LOAD): the `#!lua name=...` header, running a library's code
//! with `redis.register_function`, and what is kept of a library and its functions, as Redis
//! 7.0 (its error texts included).

use super::{host, Scripts, ENV, ENV_META, FUNCTIONS, LOADING_GLOBALS, PENDING, REGISTRY, VISIBLE};
use crate::config::syntax::split_args;
use crate::script::Flags;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use kayvee_lua::{Host, Lua, Raise, Type};

/// A loaded library.
#[derive(Clone, Debug)]
pub struct Library {
    /// Its name (library names are case-sensitive; function names are not, as in Redis).
    pub name: Vec<u8>,
    /// Its code, header included (FUNCTION LIST WITHCODE, DUMP, the RDB).
    pub code: Vec<u8>,
    /// Its functions' keys (lowercase names), in registration order.
    pub functions: Vec<Vec<u8>>,
}

/// A library's function.
#[derive(Clone, Debug)]
pub struct Function {
    /// Its name as registered.
    pub name: Vec<u8>,
    /// The library's key.
    pub library: Vec<u8>,
    /// Its flags (`no-writes`...).
    pub flags: Flags,
    /// Its description, if given.
    pub description: Option<Vec<u8>>,
}

/// The library name of a `#!lua name=<name>` header (the code's first line), read as Redis
/// 7.0 reads it: split as `sdssplitargs` splits (quotes allowed), the first word the engine
/// after `#!`, then `name=` once; its checks in Redis's order (the metadata, the name, then
/// the engine).
pub fn parse_header(code: &[u8]) -> Result<Vec<u8>, String> {
    let line_end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = &code[..line_end];
    if !line.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let words = split_args(line).map_err(|_| String::from("ERR Invalid library metadata"))?;
    let engine = words.first().map_or(&[][..], |w| &w[2..]);
    let mut name = None;
    for w in words.iter().skip(1) {
        match w.strip_prefix(b"name=") {
            Some(_) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(n) => name = Some(n.to_vec()),
            None => {
                return Err(alloc::format!(
                    "ERR Invalid metadata value given: {}",
                    String::from_utf8_lossy(w)
                ))
            }
        }
    }
    let name = name.ok_or_else(|| String::from("ERR Library name was not given"))?;
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(alloc::format!(
            "ERR Engine '{}' not found",
            String::from_utf8_lossy(engine)
        ));
    }
    Ok(name)
}

/// Letters, digits and underscores, at least one.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// One registered function: its name, flags and description.
type Registered = (Vec<u8>, Flags, Option<Vec<u8>>);

/// What registering functions collects.
struct Loader<'c> {
    registered: Vec<Registered>,
    /// The clock the code is timed by and the load's start, in microseconds.
    clock: Option<Clock<'c>>,
}

/// How long FUNCTION LOAD lets a library's code run, as Redis 7.0 (a fixed bound, not
/// `busy-reply-threshold`): past it the code fails with [`LOAD_TIMEOUT`].
pub const LOAD_TIMEOUT_US: u64 = 500_000;
/// The error a library's code that runs too long fails with.
const LOAD_TIMEOUT: &str = "ERR FUNCTION LOAD timeout";
/// Lua instructions between two looks at the clock while a library's code runs.
const HOOK_EVERY: i32 = 100_000;

/// A load's clock (the current time in microseconds) and its start on that clock.
pub type Clock<'c> = (&'c mut dyn FnMut() -> u64, u64);

fn raise(lua: &mut Lua, text: &str) -> Result<i32, Raise> {
    lua.new_table(0, 1);
    lua.push_bytes(text.as_bytes());
    lua.raw_set_field(-2, b"err");
    Err(Raise)
}

impl Host for Loader<'_> {
    fn call(&mut self, lua: &mut Lua, id: i32) -> Result<i32, Raise> {
        match id {
            -1 => self.hook(lua),
            host::REGISTER_FUNCTION => self.register(lua),
            host::LOG => Ok(0),
            _ => raise(
                lua,
                "ERR this function is not available while loading a library",
            ),
        }
    }
}

impl Loader<'_> {
    /// The count hook: past [`LOAD_TIMEOUT_US`], the code fails (at every hook from then on,
    /// so `pcall` cannot hold it).
    fn hook(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let Some((now, start)) = self.clock.as_mut() else {
            return Ok(0);
        };
        if now().saturating_sub(*start) > LOAD_TIMEOUT_US {
            return raise(lua, LOAD_TIMEOUT);
        }
        Ok(0)
    }

    /// `redis.register_function(name, callback)` or `redis.register_function{function_name=,
    /// callback=, flags=, description=}`.
    fn register(&mut self, lua: &mut Lua) -> Result<i32, Raise> {
        let (name, flags, description) = if lua.top() == 1 && lua.type_of(1) == Type::Table {
            match named_args(lua) {
                Ok(found) => found,
                Err(e) => return raise(lua, e),
            }
        } else if lua.top() == 1 {
            return raise(
                lua,
                "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
            );
        } else if lua.top() == 2 {
            if !matches!(lua.type_of(1), Type::String | Type::Number) {
                return raise(
                    lua,
                    "ERR first argument to redis.register_function must be a string",
                );
            }
            if lua.type_of(2) != Type::Function {
                return raise(
                    lua,
                    "ERR second argument to redis.register_function must be a function",
                );
            }
            (lua.to_vec(1).unwrap_or_default(), Flags::default(), None)
        } else {
            return raise(
                lua,
                "ERR wrong number of arguments to redis.register_function",
            );
        };
        if !valid_name(&name) {
            return raise(lua, "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
        }
        if self
            .registered
            .iter()
            .any(|(n, _, _)| n.eq_ignore_ascii_case(&name))
        {
            return raise(lua, "ERR Function already exists in the library");
        }
        // The callback is on top (named form: pushed by `named_args`; else argument 2).
        lua.raw_get_field(REGISTRY, PENDING);
        lua.push_value(-2);
        lua.raw_set_field(-2, &name.to_ascii_lowercase());
        lua.set_top(0);
        self.registered.push((name, flags, description));
        Ok(0)
    }
}

/// The named form's fields; leaves the callback on top.
fn named_args(lua: &mut Lua) -> Result<Registered, &'static str> {
    let mut name = None;
    let mut flags = Flags::default();
    let mut description = None;
    let mut callback = false;
    lua.push_nil();
    while lua.next(1) {
        let key = if lua.type_of(-2) == Type::String {
            lua.to_vec(-2).unwrap_or_default()
        } else {
            return Err("ERR named argument key given to redis.register_function is not a string");
        };
        match &key[..] {
            b"function_name" => match lua.type_of(-1) {
                Type::String => name = lua.to_vec(-1),
                _ => return Err("ERR function_name argument given to redis.register_function must be a string"),
            },
            b"description" => match lua.type_of(-1) {
                Type::String => description = lua.to_vec(-1),
                _ => return Err("ERR description argument given to redis.register_function must be a string"),
            },
            b"callback" => match lua.type_of(-1) {
                Type::Function => callback = true,
                _ => return Err("ERR callback argument given to redis.register_function must be a function"),
            },
            b"flags" => match lua.type_of(-1) {
                Type::Table => flags = flags_of_table(lua)?,
                _ => return Err("ERR flags argument to redis.register_function must be a table representing function flags"),
            },
            _ => return Err("ERR unknown argument given to redis.register_function"),
        }
        lua.pop(1);
    }
    let name = name.ok_or("ERR redis.register_function must get a function name argument")?;
    if !callback {
        return Err("ERR redis.register_function must get a callback argument");
    }
    lua.raw_get_field(1, b"callback");
    Ok((name, flags, description))
}

/// The flags in the table on top (a list of names).
fn flags_of_table(lua: &mut Lua) -> Result<Flags, &'static str> {
    let t = lua.top();
    let mut flags = Flags::default();
    let mut i = 1;
    loop {
        lua.raw_geti(t, i);
        if lua.type_of(-1) == Type::Nil {
            lua.pop(1);
            return Ok(flags);
        }
        let name = lua.to_vec(-1).unwrap_or_default();
        lua.pop(1);
        if !flags.set(&name) {
            return Err("ERR unknown flag given");
        }
        i += 1;
    }
}

impl Scripts {
    /// FUNCTION LOAD: runs `code` (its header already parsed to `name`) and keeps the
    /// library, replacing one of that name when `replace`; with a `clock`, code that runs
    /// past [`LOAD_TIMEOUT_US`] fails.
    pub fn load_library(
        &mut self,
        name: Vec<u8>,
        code: &[u8],
        replace: bool,
        clock: Option<Clock<'_>>,
    ) -> Result<(), String> {
        let key = name.clone();
        if self.libraries.contains_key(&key) && !replace {
            return Err(alloc::format!(
                "ERR Library '{}' already exists",
                String::from_utf8_lossy(&name)
            ));
        }
        let registered = self.run_library(code, clock)?;
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for (f, _, _) in &registered {
            let f_key = f.to_ascii_lowercase();
            if self.functions.get(&f_key).is_some_and(|o| o.library != key) {
                return Err(alloc::format!(
                    "ERR Function {} already exists",
                    String::from_utf8_lossy(f)
                ));
            }
        }
        self.delete_library(&key);
        self.commit(name, code, registered);
        Ok(())
    }

    /// Runs the library's code with the loading `redis` table; the functions it registered.
    fn run_library(
        &mut self,
        code: &[u8],
        clock: Option<Clock<'_>>,
    ) -> Result<Vec<Registered>, String> {
        let lua = self.vm();
        lua.new_table(0, 0);
        lua.raw_set_field(REGISTRY, PENDING);
        // The header line stays as an empty line, so line numbers count it.
        let body_start = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        if lua.load(&code[body_start..], c"@user_function").is_err() {
            let msg = lua.to_vec(-1).unwrap_or_default();
            lua.set_top(0);
            return Err(alloc::format!(
                "ERR Error compiling function: {}",
                String::from_utf8_lossy(&msg)
            ));
        }
        lua.raw_get_field(REGISTRY, ENV);
        lua.set_fenv(-2);
        set_globals(lua, LOADING_GLOBALS);
        let timed = clock.is_some();
        let mut loader = Loader {
            registered: Vec::new(),
            clock,
        };
        if timed {
            lua.set_hook(HOOK_EVERY);
        }
        let ran = lua.call(&mut loader, 0, 0);
        lua.set_hook(0);
        set_globals(lua, VISIBLE);
        if ran.is_err() {
            let msg = error_message(lua);
            lua.set_top(0);
            return Err(alloc::format!(
                "ERR Error registering functions: {}",
                String::from_utf8_lossy(&msg)
            ));
        }
        Ok(loader.registered)
    }

    /// Keeps the library and moves its registered callbacks to the function table.
    fn commit(&mut self, name: Vec<u8>, code: &[u8], registered: Vec<Registered>) {
        let key = name.clone();
        let lua = self.vm();
        lua.raw_get_field(REGISTRY, FUNCTIONS);
        lua.raw_get_field(REGISTRY, PENDING);
        for (f, _, _) in &registered {
            let f_key = f.to_ascii_lowercase();
            lua.raw_get_field(-1, &f_key);
            lua.raw_set_field(-3, &f_key);
        }
        lua.pop(2);
        let mut keys = Vec::new();
        for (f, flags, description) in registered {
            let f_key = f.to_ascii_lowercase();
            keys.push(f_key.clone());
            let function = Function {
                name: f,
                library: key.clone(),
                flags,
                description,
            };
            self.functions.insert(f_key, function);
        }
        let library = Library {
            name,
            code: code.to_vec(),
            functions: keys,
        };
        self.libraries.insert(key, library);
    }
}

/// Makes the globals scripts read the table kept under registry key `which`.
fn set_globals(lua: &mut Lua, which: &[u8]) {
    lua.raw_get_field(REGISTRY, ENV_META);
    lua.raw_get_field(REGISTRY, which);
    lua.raw_set_field(-2, b"__index");
    lua.pop(1);
}

/// The message of a failed call's handler table: the raised `{err=}` or `ERR <value>`.
pub fn error_message(lua: &mut Lua) -> Vec<u8> {
    let t = lua.top();
    if lua.type_of(t) != Type::Table {
        return [&b"ERR "[..], lua.to_bytes(t).unwrap_or_default()].concat();
    }
    lua.raw_get_field(t, b"message");
    let msg = match lua.type_of(-1) {
        Type::Table => {
            lua.raw_get_field(-1, b"err");
            let m = lua
                .to_vec(-1)
                .unwrap_or_else(|| b"ERR unknown error".to_vec());
            lua.pop(1);
            m
        }
        Type::String | Type::Number => {
            [&b"ERR "[..], lua.to_bytes(-1).unwrap_or_default()].concat()
        }
        _ => b"ERR unknown error".to_vec(),
    };
    lua.pop(1);
    msg
}

/// How restored libraries meet the loaded ones (FUNCTION RESTORE's policy, an RDB load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restore {
    /// Drop the loaded libraries first.
    Flush,
    /// A library of a loaded name is an error.
    Append,
    /// A library of a loaded name replaces it.
    Replace,
}

impl Scripts {
    /// Every library's code, by library name.
    pub fn library_codes(&self) -> Vec<Vec<u8>> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// Loads the libraries `codes` (FUNCTION RESTORE, an RDB's function records) with
    /// `policy`, all or none: on an error the libraries are as they were. The errors are
    /// Redis 7.0's: a library's own load error, `Library <name> already exists` (APPEND),
    /// `Function <name> already exists`.
    pub fn restore_libraries(&mut self, codes: &[Vec<u8>], policy: Restore) -> Result<(), String> {
        let mut names = Vec::with_capacity(codes.len());
        for code in codes {
            let name = parse_header(code)?;
            if names.contains(&name) {
                return Err(alloc::format!(
                    "ERR Library '{}' already exists",
                    String::from_utf8_lossy(&name)
                ));
            }
            names.push(name);
        }
        if policy == Restore::Append {
            if let Some(name) = names.iter().find(|n| self.libraries.contains_key(*n)) {
                return Err(alloc::format!(
                    "ERR Library {} already exists",
                    String::from_utf8_lossy(name)
                ));
            }
        }
        let saved: Vec<(Vec<u8>, Vec<u8>)> = self
            .libraries
            .values()
            .map(|l| (l.name.clone(), l.code.clone()))
            .collect();
        match policy {
            Restore::Flush => self.flush_functions(),
            _ => {
                for name in &names {
                    self.delete_library(name);
                }
            }
        }
        for (name, code) in names.into_iter().zip(codes) {
            if let Err(e) = self.load_library(name, code, false, None) {
                self.flush_functions();
                for (name, code) in saved {
                    // They loaded before, so they load again.
                    let _ = self.load_library(name, &code, false, None);
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

/// FUNCTION LIST's view: the libraries by name.
pub type Libraries = BTreeMap<Vec<u8>, Library>;

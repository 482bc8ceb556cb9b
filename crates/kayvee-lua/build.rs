//! Compiles Lua 5.1.5 (the sources `lua-src` ships) and this crate's C shim.
//!
//! Only the libraries Redis loads are ever opened (base, table, string, math; the shim adds
//! an `os` table with `clock` alone): the static library holds every Lua object file, but
//! the linker takes only those reached (`luaL_openlibs`, io, os, loadlib and debug are never
//! referenced, so they are not linked).
//!
//! With the feature `freestanding` (the unikernel, which has no C library), the same sources
//! are compiled by this script instead of `lua-src`'s build: `-ffreestanding -nostdinc` against
//! the headers in `libc/include/` (whose functions `src/libc/` defines), no PIC, no stack
//! protector, no red zone, and only the files the VM and those libraries need, plus the
//! `printf` front end `libc/printf.c`.

use std::path::{Path, PathBuf};

/// The `lua-src` release whose `lua-5.1.5/` folder the freestanding build compiles (its
/// version is pinned in Cargo.toml).
const LUA_SRC: &str = "lua-src-550.1.1";

/// The Lua files of the VM and of the libraries opened (no io, os, loadlib, debug, linit).
const LUA_FILES: [&str; 24] = [
    "lapi.c",
    "lcode.c",
    "ldebug.c",
    "ldo.c",
    "ldump.c",
    "lfunc.c",
    "lgc.c",
    "llex.c",
    "lmem.c",
    "lobject.c",
    "lopcodes.c",
    "lparser.c",
    "lstate.c",
    "lstring.c",
    "ltable.c",
    "ltm.c",
    "lundump.c",
    "lvm.c",
    "lzio.c",
    "lauxlib.c",
    "lbaselib.c",
    "ltablib.c",
    "lstrlib.c",
    "lmathlib.c",
];

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    if std::env::var_os("CARGO_FEATURE_FREESTANDING").is_some() {
        freestanding();
        return;
    }
    let artifacts = lua_src::Build::new().build(lua_src::Lua51);
    artifacts.print_cargo_metadata();
    cc::Build::new()
        .include(artifacts.include_dir())
        .file("src/shim.c")
        .warnings(true)
        .compile("kayvee_lua_shim");
}

fn freestanding() {
    println!("cargo:rerun-if-changed=libc");
    println!("cargo:rerun-if-env-changed=KAYVEE_LUA_SRC");
    let src = lua_sources();
    let mut b = cc::Build::new();
    b.pic(false)
        .warnings(false)
        .include("libc/include")
        .include(&src)
        .flag("-ffreestanding")
        .flag("-nostdinc")
        .flag("-fno-stack-protector")
        .flag("-fno-pie")
        .flag("-mno-red-zone")
        .flag("-mcmodel=small")
        .flag("-fno-asynchronous-unwind-tables")
        .flag("-U_FORTIFY_SOURCE");
    for f in LUA_FILES {
        b.file(src.join(f));
    }
    b.file("src/shim.c").file("libc/printf.c");
    b.compile("kayvee_lua");
}

/// The `lua-5.1.5/` folder of the `lua-src` crate: `$KAYVEE_LUA_SRC`, or cargo's registry.
fn lua_sources() -> PathBuf {
    if let Some(dir) = std::env::var_os("KAYVEE_LUA_SRC") {
        return PathBuf::from(dir);
    }
    let mut homes = Vec::new();
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        homes.push(PathBuf::from(h));
    }
    if let Some(h) = std::env::var_os("HOME") {
        homes.push(Path::new(&h).join(".cargo"));
    }
    for home in &homes {
        let Ok(registries) = std::fs::read_dir(home.join("registry/src")) else {
            continue;
        };
        for r in registries.flatten() {
            let dir = r.path().join(LUA_SRC).join("lua-5.1.5");
            if dir.join("lua.h").exists() {
                return dir;
            }
        }
    }
    panic!(
        "{LUA_SRC}/lua-5.1.5 not found in cargo's registry ({homes:?}); set KAYVEE_LUA_SRC to it"
    );
}

//! Compiles Lua 5.1.5 (the sources `lua-src` ships) and this crate's C shim.
//!
//! Only the libraries Redis loads are ever opened (base, table, string, math; the shim adds
//! an `os` table with `clock` alone): the static library holds every Lua object file, but
//! the linker takes only those reached (`luaL_openlibs`, io, os, loadlib and debug are never
//! referenced, so they are not linked).

fn main() {
    let artifacts = lua_src::Build::new().build(lua_src::Lua51);
    artifacts.print_cargo_metadata();
    cc::Build::new()
        .include(artifacts.include_dir())
        .file("src/shim.c")
        .warnings(true)
        .compile("kayvee_lua_shim");
    println!("cargo:rerun-if-changed=src/shim.c");
}

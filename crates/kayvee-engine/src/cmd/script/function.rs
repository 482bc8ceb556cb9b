//! FUNCTION's subcommands: LOAD, DELETE, FLUSH, LIST, DUMP, RESTORE, STATS, KILL, HELP, as Redis 7.0
//! answers them. FCALL runs in dispatch (`dispatch::script`); the libraries are [`crate::script`]'s.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::script::library;
use crate::util::glob_match;
use crate::Cx;

/// FUNCTION LOAD [REPLACE] code: the library's name.
pub fn function_load(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i + 1 < args.len() {
        if !args.get(i).eq_ignore_ascii_case(b"replace") {
            return Err(Error::Bytes(
                [&b"ERR Unknown option given: "[..], args.get(i)].concat(),
            ));
        }
        replace = true;
        i += 1;
    }
    let Some(code) = args.try_get(i) else {
        return Err(Error::msg("ERR Function code was not given"));
    };
    let name = library::parse_header(code).map_err(Error::msg)?;
    // The library's code is timed by the shell's clock, when it lent one.
    let mut read = cx.wait.as_deref_mut().map(|w| move || w.now().unix_us);
    let clock = read
        .as_mut()
        .map(|f| (f as &mut dyn FnMut() -> u64, cx.now.unix_us));
    cx.core
        .scripts
        .load_library(name.clone(), code, replace, clock)
        .map_err(|e| Error::Bytes(one_line(e.into_bytes())))?;
    cx.propagate_verbatim();
    out.bulk(&name);
    Ok(())
}

/// Newlines become spaces (an error line must be one line).
fn one_line(mut text: alloc::vec::Vec<u8>) -> alloc::vec::Vec<u8> {
    for b in &mut text {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    text
}

/// FUNCTION DELETE name.
pub fn function_delete(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !cx.core.scripts.delete_library(args.get(2)) {
        return Err(Error::msg("ERR Library not found"));
    }
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}

/// FUNCTION FLUSH [ASYNC|SYNC].
pub fn function_flush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        return Err(Error::Bytes(
            [
                &b"ERR unknown subcommand or wrong number of arguments for '"[..],
                args.get(1),
                b"'. Try FUNCTION HELP.",
            ]
            .concat(),
        ));
    }
    if !super::flush_mode_ok(args) {
        return Err(Error::msg(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    cx.core.scripts.flush_functions();
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
pub fn function_list(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let mut pattern = None;
    let mut with_code = false;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if a.eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if a.eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            pattern = Some(
                args.try_get(i + 1)
                    .ok_or(Error::msg("ERR library name argument was not given"))?,
            );
            i += 1;
        } else {
            return Err(Error::Bytes([&b"ERR Unknown argument "[..], a].concat()));
        }
        i += 1;
    }
    let scripts = &cx.core.scripts;
    let libs: alloc::vec::Vec<_> = scripts
        .libraries
        .iter()
        .filter(|(_, lib)| pattern.is_none_or(|p| glob_match(p, &lib.name, true)))
        .collect();
    out.array(libs.len());
    for (_, lib) in libs {
        out.map(3 + usize::from(with_code));
        out.bulk_str("library_name");
        out.bulk(&lib.name);
        out.bulk_str("engine");
        out.bulk_str("LUA");
        out.bulk_str("functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            let Some(function) = scripts.functions.get(f) else {
                out.null();
                continue;
            };
            out.map(3);
            out.bulk_str("name");
            out.bulk(&function.name);
            out.bulk_str("description");
            match &function.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk_str("flags");
            let flags = function.flags.names();
            out.set(flags.len());
            flags.iter().for_each(|f| out.simple(f));
        }
        if with_code {
            out.bulk_str("library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION STATS: no function is ever running when a command is; the engine's counts.
pub fn function_stats(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.map(2);
    out.bulk_str("running_script");
    out.null();
    out.bulk_str("engines");
    out.map(1);
    out.bulk_str("LUA");
    out.map(2);
    out.bulk_str("libraries_count");
    out.int(cx.core.scripts.libraries.len() as i64);
    out.bulk_str("functions_count");
    out.int(cx.core.scripts.functions.len() as i64);
    Ok(())
}

/// FUNCTION KILL: nothing runs while a command does.
pub fn function_kill(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg("NOTBUSY No scripts in execution right now."))
}

/// FUNCTION DUMP: the libraries as Redis 7.0 serialises them (RDB function records, the RDB
/// version, the CRC-64), through the shell's RDB codec.
pub fn function_dump(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let codec = cx.core.persist.codec.ok_or_else(|| Error::msg("ERR"))?;
    let codes = cx.core.scripts.library_codes();
    out.bulk(&codec.dump_functions(&codes, cx.core.config.rdbcompression));
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE] (APPEND by default): all the payload's
/// libraries or none.
pub fn function_restore(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 4 {
        return Err(Error::msg(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
        ));
    }
    let policy =
        match args.try_get(3).map(<[u8]>::to_ascii_lowercase).as_deref() {
            None | Some(b"append") => library::Restore::Append,
            Some(b"replace") => library::Restore::Replace,
            Some(b"flush") => library::Restore::Flush,
            Some(_) => return Err(Error::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let codec = cx.core.persist.codec.ok_or_else(|| Error::msg("ERR"))?;
    let codes = codec
        .restore_functions(args.get(2))
        .map_err(|e| Error::Bytes([&b"ERR "[..], e.as_bytes()].concat()))?;
    cx.core
        .scripts
        .restore_libraries(&codes, policy)
        .map_err(|e| Error::Bytes(one_line(e.into_bytes())))?;
    cx.propagate_verbatim();
    out.ok();
    Ok(())
}

const HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

/// FUNCTION HELP.
pub fn function_help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "FUNCTION", HELP);
    Ok(())
}

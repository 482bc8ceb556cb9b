//! The scripting commands' rows (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT) and SCRIPT's
//! subcommands (LOAD, EXISTS, FLUSH, KILL, HELP), as Redis 7.0. The EVAL commands run other
//! commands, so dispatch runs them itself (`dispatch::script`); their handlers here are never
//! called. The VM and the cache are [`crate::script`].

mod function;

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, FoundKey, InvalidKeyArgs, KeySpec};
use crate::reply::{help_reply, ReplySink};
use crate::script::sha1;
use crate::util::parse_i64;
use crate::Cx;
use alloc::vec::Vec;

const EVAL_FLAGS: u32 = flags::NOSCRIPT
    | flags::STALE
    | flags::SKIP_MONITOR
    | flags::NO_MANDATORY_KEYS
    | flags::MOVABLEKEYS;
const EVAL_KEYS: &[KeySpec] = &[KeySpec {
    notes: "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
    ..KeySpec::keynum(kf::RW_ACCESS_UPDATE, 2)
}];
// Redis gives the EVALSHA forms no notes.
const EVALSHA_KEYS: &[KeySpec] = &[KeySpec::keynum(kf::RW_ACCESS_UPDATE, 2)];
const EVAL_RO_KEYS: &[KeySpec] = &[KeySpec {
    notes: "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
    ..KeySpec::keynum(kf::RO_ACCESS, 2)
}];
const EVALSHA_RO_KEYS: &[KeySpec] = &[KeySpec::keynum(kf::RO_ACCESS, 2)];

/// An EVAL-family row.
const fn eval_row(
    name: &'static str,
    flags: u32,
    keys: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags,
        acl: acl::SLOW | acl::SCRIPTING,
        summary,
        since,
        group: "scripting",
        complexity: "Depends on the script that is executed.",
        handler: run_by_dispatch,
        key_specs: keys,
        // The read-only forms' keys are read-only for ACL key permissions, as their spec says.
        get_keys: Some(if flags & flags::READONLY != 0 {
            eval_ro_keys
        } else {
            eval_keys
        }),
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    eval_row(
        "eval",
        EVAL_FLAGS,
        EVAL_KEYS,
        "Execute a Lua script server side",
        "2.6.0",
    ),
    eval_row(
        "evalsha",
        EVAL_FLAGS,
        EVALSHA_KEYS,
        "Execute a Lua script server side",
        "2.6.0",
    ),
    eval_row(
        "eval_ro",
        EVAL_FLAGS | flags::READONLY,
        EVAL_RO_KEYS,
        "Execute a read-only Lua script server side",
        "7.0.0",
    ),
    eval_row(
        "evalsha_ro",
        EVAL_FLAGS | flags::READONLY,
        EVALSHA_RO_KEYS,
        "Execute a read-only Lua script server side",
        "7.0.0",
    ),
    eval_row("fcall", EVAL_FLAGS, EVAL_KEYS, "Invoke a function", "7.0.0"),
    eval_row(
        "fcall_ro",
        EVAL_FLAGS | flags::READONLY,
        EVAL_RO_KEYS,
        "Invoke a read-only function",
        "7.0.0",
    ),
    CommandSpec {
        name: "function",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for function commands",
        since: "7.0.0",
        group: "scripting",
        complexity: "Depends on subcommand.",
        subcommands: FUNCTION_SUBCOMMANDS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "script",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for Lua scripts management commands",
        since: "2.6.0",
        group: "scripting",
        complexity: "Depends on subcommand.",
        subcommands: SUBCOMMANDS,
        ..CommandSpec::DEFAULT
    },
];

const SUB_FLAGS: u32 = flags::NOSCRIPT;
const SUB_ACL: u32 = acl::SLOW | acl::SCRIPTING;

/// SCRIPT's subcommands, in the order Redis 7.0 lists them.
const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        acl: SUB_ACL,
        ..CommandSpec::help_sub("5.0.0", "scripting", script_help)
    },
    CommandSpec {
        name: "flush",
        arity: -2,
        flags: SUB_FLAGS,
        acl: SUB_ACL,
        summary: "Remove all the scripts from the script cache.",
        since: "2.6.0",
        group: "scripting",
        complexity: "O(N) with N being the number of scripts in cache",
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: script_flush,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "load",
        arity: 3,
        flags: SUB_FLAGS | flags::STALE,
        acl: SUB_ACL,
        summary: "Load the specified Lua script into the script cache.",
        since: "2.6.0",
        group: "scripting",
        complexity: "O(N) with N being the length in bytes of the script body.",
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        handler: script_load,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        arity: -3,
        flags: SUB_FLAGS,
        acl: SUB_ACL,
        summary: "Check existence of scripts in the script cache.",
        since: "2.6.0",
        group: "scripting",
        complexity: "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
        tips: &["request_policy:all_shards", "response_policy:agg_logical_and"],
        handler: script_exists,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "debug",
        arity: 3,
        flags: SUB_FLAGS,
        acl: SUB_ACL,
        summary: "Set the debug mode for executed scripts.",
        since: "3.2.0",
        group: "scripting",
        complexity: "O(1)",
        handler: script_debug,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "kill",
        arity: 2,
        flags: SUB_FLAGS | flags::ALLOW_BUSY,
        acl: SUB_ACL,
        summary: "Kill the script currently in execution.",
        since: "2.6.0",
        group: "scripting",
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        handler: script_kill,
        ..CommandSpec::DEFAULT
    },
];

/// A FUNCTION subcommand's row.
const fn function_sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    complexity: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: flags | flags::NOSCRIPT,
        acl: acl | SUB_ACL,
        summary,
        since: "7.0.0",
        group: "scripting",
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..function_sub(
            "load",
            -3,
            flags::WRITE | flags::DENYOOM,
            acl::WRITE,
            "Create a function with the given arguments (name, code, description)",
            "O(1) (considering compilation time is redundant)",
            function::function_load,
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..function_sub(
            "delete",
            3,
            flags::WRITE,
            acl::WRITE,
            "Delete a function by name",
            "O(1)",
            function::function_delete,
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..function_sub(
            "flush",
            -2,
            flags::WRITE,
            acl::WRITE,
            "Deleting all functions",
            "O(N) where N is the number of functions deleted",
            function::function_flush,
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output_order"],
        ..function_sub(
            "list",
            -2,
            0,
            0,
            "List information about all the functions",
            "O(N) where N is the number of functions",
            function::function_list,
        )
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..function_sub(
            "stats",
            2,
            flags::ALLOW_BUSY,
            0,
            "Return information about the function currently running (name, description, duration)",
            "O(1)",
            function::function_stats,
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        ..function_sub(
            "kill",
            2,
            flags::ALLOW_BUSY,
            0,
            "Kill the function currently in execution.",
            "O(1)",
            function::function_kill,
        )
    },
    function_sub(
        "dump",
        2,
        0,
        0,
        "Dump all functions into a serialized binary payload",
        "O(N) where N is the number of functions",
        function::function_dump,
    ),
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..function_sub(
            "restore",
            -3,
            flags::WRITE | flags::DENYOOM,
            acl::WRITE,
            "Restore all the functions on the given payload",
            "O(N) where N is the number of functions on the payload",
            function::function_restore,
        )
    },
    CommandSpec {
        acl: SUB_ACL,
        ..CommandSpec::help_sub("7.0.0", "scripting", function::function_help)
    },
];

/// EVAL's keys: `numkeys` (argument 2) of them from argument 3.
fn eval_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    numkeys(args, kf::RW_ACCESS_UPDATE)
}

/// EVAL_RO's keys (and EVALSHA_RO's, FCALL_RO's): read-only access.
fn eval_ro_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    numkeys(args, kf::RO_ACCESS)
}

/// `numkeys` (argument 2) keys from argument 3, with `flags`.
fn numkeys(
    args: &Argv<'_>,
    flags: crate::keyspec::KeyFlags,
) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let n = args
        .try_get(2)
        .and_then(parse_i64)
        .filter(|&n| n >= 0 && (n as usize) <= args.len().saturating_sub(3))
        .ok_or(InvalidKeyArgs)?;
    Ok((3..3 + n as usize)
        .map(|index| FoundKey { index, flags })
        .collect())
}

/// The EVAL commands' handler: dispatch runs them (they run other commands) and never calls it.
fn run_by_dispatch(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg("ERR scripting is run by the dispatcher"))
}

/// SCRIPT LOAD body: compiles and caches it, answers its SHA-1.
fn script_load(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let body = args.get(2);
    let sha = sha1::hex(body);
    cx.core.scripts.compile(&sha, body).map_err(|mut text| {
        for b in &mut text {
            if *b == b'\n' || *b == b'\r' {
                *b = b' ';
            }
        }
        Error::Bytes(text)
    })?;
    out.bulk(&sha);
    Ok(())
}

/// SCRIPT EXISTS sha...: 1 or 0 for each.
fn script_exists(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.array(args.len() - 2);
    for sha in args.iter().skip(2) {
        let known = <[u8; 40]>::try_from(sha.to_ascii_lowercase())
            .is_ok_and(|sha| cx.core.scripts.bodies.contains_key(&sha));
        out.int(i64::from(known));
    }
    Ok(())
}

/// Whether SCRIPT FLUSH / FUNCTION FLUSH have at most one argument, `ASYNC` or `SYNC` (any
/// case).
fn flush_mode_ok(args: &Argv<'_>) -> bool {
    match args.len() {
        2 => true,
        3 => {
            let mode = args.get(2);
            mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async")
        }
        _ => false,
    }
}

/// SCRIPT FLUSH [ASYNC|SYNC]: drops the cache and the VM.
fn script_flush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if !flush_mode_ok(args) {
        return Err(Error::msg(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    cx.core.scripts.flush();
    out.ok();
    Ok(())
}

/// SCRIPT DEBUG YES|SYNC|NO: the mode of the client's next EVALs (the debugger itself runs
/// in `dispatch/script/ldb.rs`).
fn script_debug(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    use crate::client::LuaDebug;
    // Inside EXEC Redis has the transaction's replies pending, so its pipeline check answers.
    if cx.core.txn.in_multi(cx.me) {
        return Err(Error::msg(
            "ERR SCRIPT DEBUG must be called outside a pipeline",
        ));
    }
    let mode = args.get(2);
    let mode = if mode.eq_ignore_ascii_case(b"no") {
        LuaDebug::Off
    } else if mode.eq_ignore_ascii_case(b"yes") {
        LuaDebug::Rollback
    } else if mode.eq_ignore_ascii_case(b"sync") {
        LuaDebug::Sync
    } else {
        return Err(Error::msg("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    };
    cx.client().lua_debug = mode;
    out.ok();
    Ok(())
}

/// SCRIPT KILL: no script is ever running when a command is (a script runs to its end
/// within one command).
fn script_kill(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg("NOTBUSY No scripts in execution right now."))
}

const HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

/// SCRIPT HELP.
fn script_help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(out, "SCRIPT", HELP);
    Ok(())
}

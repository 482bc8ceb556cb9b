//! DEBUG's subcommands, once `enable-debug-command` let the client in (the check and the
//! command's table entry are in [`super::server`]). Split by concept: `digest` (DIGEST,
//! DIGEST-VALUE), `object` (OBJECT, LISTPACK, QUICKLIST), `protocol` (PROTOCOL), `reload`
//! (RELOAD), `populate` (POPULATE), `htstats` (HTSTATS, HTSTATS-KEY), `switches` (SLEEP, SET-ACTIVE-EXPIRE, PAUSE-CRON and the
//! switches that only affect Redis's internals). Subcommands Redis 7.0 has and Kayvee does
//! not answer as an unknown subcommand, as Redis does for a wrong name.

mod digest;
mod htstats;
pub use htstats::table_size;
mod object;
mod populate;
mod protocol;
mod reload;
mod switches;

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::{help_reply, ReplySink};
use crate::Cx;

/// DEBUG HELP's lines (Redis 7.0's, for the subcommands Kayvee has).
const HELP: &[&str] = &[
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
];

/// Runs a DEBUG subcommand (`args[1]`), the client being allowed to.
pub fn run(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let sub = args.get(1).to_ascii_lowercase();
    match (sub.as_slice(), args.len()) {
        (b"help", 2) => {
            help_reply(out, "DEBUG", HELP);
            Ok(())
        }
        (b"sleep", 3) => switches::sleep(cx, args, out),
        (b"loadaof", 2) => {
            cx.outcome = crate::Outcome::LoadAof;
            Ok(())
        }
        (b"segfault", 2) => {
            cx.outcome = crate::Outcome::Crash;
            Ok(())
        }
        (b"set-active-expire", 3) => switches::set_active_expire(cx, args, out),
        (b"pause-cron", 3) => switches::pause_cron(cx, args, out),
        (b"quicklist-packed-threshold", 3) => switches::packed_threshold(cx, args, out),
        (b"set-skip-checksum-validation", 3) => switches::skip_checksum(cx, args, out),
        (b"set-disable-deny-scripts", 3) => switches::disable_deny_scripts(cx, args, out),
        (b"change-repl-id", 2) | (b"log", 3) => switches::accepted(out),
        (b"replybuffer", 4) => switches::replybuffer(cx, args, out),
        (b"digest", 2) => digest::digest(cx, out),
        (b"digest-value", _) => digest::digest_value(cx, args, out),
        (b"object", 3) => object::object(cx, args, out),
        (b"listpack", 3) => object::listpack(cx, args, out),
        (b"quicklist", 3 | 4) => object::quicklist(cx, args, out),
        (b"protocol", 3) => protocol::protocol(args, out),
        (b"reload", _) => reload::reload(cx, args, out),
        (b"populate", 3..=5) => populate::populate(cx, args, out),
        (b"htstats", 3) => htstats::htstats(cx, args, out),
        (b"aof-flush-sleep", 3) => switches::aof_flush_sleep(cx, args, out),
        (b"config-rewrite-force-all", 2) => {
            if cx.core.config.config_file.is_none() {
                return Err(crate::cmd::config_cmd::no_config_file());
            }
            cx.core.debug.rewrite_force_all = true;
            cx.outcome = crate::Outcome::RewriteConfig;
            Ok(())
        }
        (b"htstats-key", 3) => htstats::htstats_key(cx, args, out),
        (b"replicate", n) if n >= 3 => {
            replicate(cx, args);
            out.ok();
            Ok(())
        }
        _ => Err(unknown(args.get(1))),
    }
}

/// DEBUG REPLICATE command [arg ...]: the command goes into the replication stream only (not
/// run here, nor written to the AOF), in whatever database the stream has selected: the test
/// suite's way of making a replica diverge.
fn replicate(cx: &mut Cx<'_>, args: &Argv<'_>) {
    let command: alloc::vec::Vec<&[u8]> = (2..args.len()).map(|i| args.get(i)).collect();
    let mut bytes = alloc::vec::Vec::new();
    crate::aof::encode(&mut bytes, &command);
    cx.core.aof.feed_repl_raw(&bytes);
}

/// Redis's answer to a subcommand it does not know or called with the wrong arity.
fn unknown(sub: &[u8]) -> Error {
    let name = crate::util::sanitize(sub, 128);
    Error::msg(alloc::format!(
        "ERR unknown subcommand or wrong number of arguments for '{name}'. Try DEBUG HELP."
    ))
}

/// `ERR no such key`, as DEBUG OBJECT and its kind answer for a missing key.
fn no_such_key() -> Error {
    Error::msg("ERR no such key")
}

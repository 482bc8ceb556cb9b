//! The ACL command and its subcommands (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT,
//! LOG, GENPASS, DRYRUN, LOAD, SAVE, HELP) with redis-server 7.0.15's replies and errors. The
//! model is in [`crate::acl`]; LOAD and SAVE hand the file work to the shell
//! ([`crate::Outcome::AclFile`]).

use crate::acl::rules::{self, describe_channels, describe_commands, describe_keys};
use crate::acl::{log, DenyKind, User, DEFAULT_USER};
use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags, CommandId};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::{Cx, Outcome};
use alloc::string::String;
use alloc::vec::Vec;

/// Flags of the administrative subcommands.
const ADMIN: u32 = flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE;
/// Flags of the others (CAT, GENPASS, WHOAMI).
const PLAIN: u32 = flags::NOSCRIPT | flags::LOADING | flags::STALE;
/// Categories of the administrative subcommands.
const ADMIN_ACL: u32 = acl::ADMIN | acl::SLOW | acl::DANGEROUS;

/// One subcommand's table entry.
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl,
        summary,
        since: "6.0.0",
        group: "server",
        complexity: "O(N). Where N is the number of configured users.",
        handler,
        ..CommandSpec::DEFAULT
    }
}

const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "cat",
        -2,
        PLAIN,
        acl::SLOW,
        "List the ACL categories or the commands inside a category",
        cat,
    ),
    sub(
        "deluser",
        -3,
        ADMIN,
        ADMIN_ACL,
        "Remove the specified ACL users and the associated rules",
        deluser,
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "dryrun",
            -4,
            ADMIN,
            ADMIN_ACL,
            "Returns whether the user can execute the given command without executing the command.",
            dryrun,
        )
    },
    sub(
        "genpass",
        -2,
        PLAIN,
        acl::SLOW,
        "Generate a pseudorandom secure password to use for ACL users",
        genpass,
    ),
    sub(
        "getuser",
        3,
        ADMIN,
        ADMIN_ACL,
        "Get the rules for a specific ACL user",
        getuser,
    ),
    sub(
        "help",
        2,
        flags::LOADING | flags::STALE,
        acl::SLOW,
        "Show helpful text about the different subcommands",
        help,
    ),
    sub(
        "list",
        2,
        ADMIN,
        ADMIN_ACL,
        "List the current ACL rules in ACL config file format",
        list,
    ),
    sub(
        "load",
        2,
        ADMIN,
        ADMIN_ACL,
        "Reload the ACLs from the configured ACL file",
        load,
    ),
    sub(
        "log",
        -2,
        ADMIN,
        ADMIN_ACL,
        "List latest events denied because of ACLs in place",
        log_cmd,
    ),
    sub(
        "save",
        2,
        ADMIN,
        ADMIN_ACL,
        "Save the current ACL rules in the configured ACL file",
        save,
    ),
    sub(
        "setuser",
        -3,
        ADMIN,
        ADMIN_ACL,
        "Modify or create the rules for a specific ACL user",
        setuser,
    ),
    sub(
        "users",
        2,
        ADMIN,
        ADMIN_ACL,
        "List the username of all the configured ACL rules",
        users,
    ),
    sub(
        "whoami",
        2,
        PLAIN,
        acl::SLOW,
        "Return the name of the user associated to the current connection",
        whoami,
    ),
];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    acl: acl::SLOW,
    summary: "A container for Access List Control commands ",
    since: "6.0.0",
    group: "server",
    complexity: "Depends on subcommand.",
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// ACL LOAD / SAVE without `aclfile`.
const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You \
     may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
     (assuming you have a Redis configuration file set) in order to store users in the Redis \
     configuration.";

/// ACL SETUSER username [rule ...]: applied to a copy, so a bad rule changes nothing.
fn setuser(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let name = args.get(2);
    if name.iter().any(|&b| b == b' ' || b == 0) {
        return Err(Error::msg(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let ops: Vec<&[u8]> = args.iter().skip(3).collect();
    let ops = rules::merge_selectors(&ops).map_err(|start| {
        Error::msg(alloc::format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(&start)
        ))
    })?;
    let table = cx.commands;
    let all_channels = crate::config::extra::acl_pubsub_all(&cx.core.config);
    let mut user = match cx.core.acl.users.get(name) {
        Some(u) => u.clone(),
        None => {
            let mut u = User::new(name, table.all().len());
            u.root.all_channels = all_channels;
            u
        }
    };
    for op in &ops {
        rules::apply_user_with(&mut user, op, table, all_channels).map_err(|e| {
            Error::msg(alloc::format!(
                "ERR Error in ACL SETUSER modifier '{}': {e}",
                String::from_utf8_lossy(op)
            ))
        })?;
    }
    cx.core.acl.users.insert(name.to_vec(), user);
    cx.core.acl.refresh();
    if kill_disallowed_subscribers(cx, name) {
        cx.outcome = Outcome::KillClients;
    }
    out.ok();
    Ok(())
}

/// After a user's channels changed, disconnects its clients subscribed to a channel or
/// pattern it may no longer use, as Redis 7.0 does. True when one was marked.
fn kill_disallowed_subscribers(cx: &mut Cx<'_>, name: &[u8]) -> bool {
    let Some(u) = cx.core.acl.users.get(name) else {
        return false;
    };
    if u.root.all_channels {
        return false;
    }
    let root = &u.root;
    let allowed = |c: &[u8], pattern: bool| {
        root.channels.iter().any(|p| {
            if pattern {
                p.as_slice() == c
            } else {
                crate::util::glob_match(p, c, false)
            }
        })
    };
    let mut killed = false;
    for (h, c) in cx.clients.iter_mut() {
        let Some(subs) = cx.core.pubsub.of(h).filter(|s| s.active()) else {
            continue;
        };
        if c.user.as_bytes() != name {
            continue;
        }
        let bad = subs.channels.iter().any(|ch| !allowed(ch, false))
            || subs.shard.iter().any(|ch| !allowed(ch, false))
            || subs.patterns.iter().any(|p| !allowed(p, true));
        if bad {
            c.killed = true;
            killed = true;
        }
    }
    killed
}

/// ACL GETUSER username: a map of flags, passwords, commands, keys, channels, selectors.
fn getuser(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let Some(u) = cx.core.acl.users.get(args.get(2)) else {
        out.null();
        return Ok(());
    };
    let table = cx.commands;
    out.map(6);
    out.bulk(b"flags");
    let flags = rules::user_flags(u);
    out.set(flags.len());
    flags.iter().for_each(|f| out.bulk(f.as_bytes()));
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    u.passwords
        .iter()
        .for_each(|p| out.bulk(crate::acl::hex(p).as_bytes()));
    out.bulk(b"commands");
    out.bulk(describe_commands(&u.root, table).as_bytes());
    out.bulk(b"keys");
    out.bulk(describe_keys(&u.root).as_bytes());
    out.bulk(b"channels");
    out.bulk(describe_channels(&u.root).as_bytes());
    out.bulk(b"selectors");
    out.array(u.selectors.len());
    for s in &u.selectors {
        out.map(3);
        out.bulk(b"commands");
        out.bulk(describe_commands(s, table).as_bytes());
        out.bulk(b"keys");
        out.bulk(describe_keys(s).as_bytes());
        out.bulk(b"channels");
        out.bulk(describe_channels(s).as_bytes());
    }
    Ok(())
}

/// ACL DELUSER username [username ...]: the number deleted; their clients are disconnected.
fn deluser(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.iter().skip(2).any(|n| n == DEFAULT_USER) {
        return Err(Error::msg("ERR The 'default' user cannot be removed"));
    }
    let mut deleted = 0;
    for name in args.iter().skip(2) {
        if cx.core.acl.users.remove(name).is_some() {
            deleted += 1;
            if kill_clients_of(cx, |u| u == name) {
                cx.outcome = Outcome::KillClients;
            }
        }
    }
    out.int(deleted);
    Ok(())
}

/// Marks the clients authenticated as a user `which` selects; true when one was marked.
pub(crate) fn kill_clients_of(cx: &mut Cx<'_>, which: impl Fn(&[u8]) -> bool) -> bool {
    let mut killed = false;
    for (_, c) in cx.clients.iter_mut() {
        if which(c.user.as_bytes()) {
            c.killed = true;
            killed = true;
        }
    }
    killed
}

/// ACL LIST: one `user <name> <rules>` line per user.
fn list(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let acl = &cx.core.acl;
    out.array(acl.users.len());
    for (name, u) in &acl.users {
        let line = alloc::format!(
            "user {} {}",
            String::from_utf8_lossy(name),
            rules::describe_user(u, cx.commands)
        );
        out.bulk(line.as_bytes());
    }
    Ok(())
}

/// ACL USERS: the user names, sorted.
fn users(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.array(cx.core.acl.users.len());
    cx.core.acl.users.keys().for_each(|n| out.bulk(n));
    Ok(())
}

/// ACL WHOAMI: the connection's user.
fn whoami(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let user = cx.client().user.clone();
    out.bulk(&user);
    Ok(())
}

/// ACL CAT [category]: the categories, or the commands (and subcommands) in one.
fn cat(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax(args.get(1)));
    }
    if args.len() == 2 {
        out.array(acl::NAMES.len());
        acl::NAMES.iter().for_each(|(_, n)| out.bulk(n.as_bytes()));
        return Ok(());
    }
    let flag = rules::category_flag(args.get(2)).ok_or_else(|| {
        Error::msg(alloc::format!(
            "ERR Unknown category '{}'",
            crate::util::sanitize(args.get(2), 128)
        ))
    })?;
    let names: Vec<&str> = cx
        .commands
        .all()
        .iter()
        .filter(|r| r.spec.acl & flag != 0)
        .map(|r| r.full_name.as_str())
        .collect();
    out.array(names.len());
    names.iter().for_each(|n| out.bulk(n.as_bytes()));
    Ok(())
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try ACL HELP.`, with
/// the subcommand as the client spelled it.
fn subcommand_syntax(sub: &[u8]) -> Error {
    let sub = crate::util::sanitize(sub, 128);
    Error::msg(alloc::format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try ACL HELP."
    ))
}

/// ACL LOG [count | RESET]
fn log_cmd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax(args.get(1)));
    }
    let mut count = 10;
    if args.len() == 3 {
        let arg = args.get(2);
        if arg.eq_ignore_ascii_case(b"reset") {
            cx.core.acl.log.reset();
            out.ok();
            return Ok(());
        }
        let n = crate::util::parse_i64(arg).ok_or(Error::NotInteger)?;
        count = usize::try_from(n).unwrap_or(0);
    }
    cx.core.acl.log.reply(count, cx.now_ms(), out);
    Ok(())
}

/// ACL GENPASS [bits]: `bits` random bits (default 256) as hex, rounded up to a digit.
fn genpass(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax(args.get(1)));
    }
    let bits = match args.try_get(2) {
        None => 256,
        Some(a) => crate::util::parse_i64(a).ok_or(Error::NotInteger)?,
    };
    if bits <= 0 || bits > 4096 {
        return Err(Error::msg(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to 4096",
        ));
    }
    let digits = (bits as usize).div_ceil(4);
    let pass: String = (0..digits)
        .map(|_| char::from(b"0123456789abcdef"[(cx.core.rng.next_u64() % 16) as usize]))
        .collect();
    out.bulk(pass.as_bytes());
    Ok(())
}

/// ACL DRYRUN username command [arg ...]: `+OK`, or why the user would be refused.
fn dryrun(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let name = args.get(2);
    if !cx.core.acl.users.contains_key(name) {
        return Err(Error::msg(alloc::format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(name)
        )));
    }
    let argv = args.slice_from(3);
    let id = resolve_for_dryrun(cx, &argv)?;
    let table = cx.commands;
    let u = &cx.core.acl.users[name];
    match crate::acl::check_user(u, table, id, &argv) {
        None => out.ok(),
        Some(d) => {
            let text = match d.kind {
                DenyKind::Command => alloc::format!(
                    "This user has no permissions to run the '{}' command",
                    table.get(id).full_name
                ),
                DenyKind::Key => alloc::format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(argv.get(d.index))
                ),
                DenyKind::Channel => alloc::format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(argv.get(d.index))
                ),
            };
            out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

/// The command DRYRUN asks about, with Redis's errors for unknown ones and bad arity.
fn resolve_for_dryrun(cx: &Cx<'_>, argv: &Argv<'_>) -> Result<CommandId, Error> {
    let table = cx.commands;
    let not_found = || {
        Error::msg(alloc::format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(argv.get(0))
        ))
    };
    let mut id = table.lookup(argv.get(0)).ok_or_else(not_found)?;
    if table.get(id).spec.subcommands != 0 && argv.len() > 1 {
        id = table.lookup_sub(id, argv.get(1)).ok_or_else(not_found)?;
    }
    let reg = table.get(id);
    if !reg.spec.arity_ok(argv.len()) {
        return Err(Error::WrongArity(reg.full_name.clone()));
    }
    Ok(id)
}

/// ACL LOAD: the shell reads the file and calls [`crate::Engine::acl_load`].
fn load(cx: &mut Cx<'_>, _args: &Argv<'_>, _out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.config.aclfile.is_empty() {
        return Err(Error::msg(NO_ACL_FILE));
    }
    cx.outcome = Outcome::AclFile { save: false };
    Ok(())
}

/// ACL SAVE: the shell writes [`crate::Engine::acl_save_text`] to the file.
fn save(cx: &mut Cx<'_>, _args: &Argv<'_>, _out: &mut dyn ReplySink) -> CmdResult {
    if cx.core.config.aclfile.is_empty() {
        return Err(Error::msg(NO_ACL_FILE));
    }
    cx.outcome = Outcome::AclFile { save: true };
    Ok(())
}

/// Redis 7.0.15's ACL HELP text.
const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

/// ACL HELP
fn help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    crate::reply::help_reply(out, "ACL", HELP);
    Ok(())
}

/// Records a denial in the ACL log with the client's `CLIENT INFO` line.
pub(crate) fn log_denial(cx: &mut Cx<'_>, reason: &'static str, object: &[u8], username: &[u8]) {
    let Some(c) = cx.clients.get(cx.me) else {
        return;
    };
    let mut info = String::new();
    super::client::client_line(cx, cx.me, c, 0, &mut info);
    info.pop();
    let context = if cx.core.script_running {
        "lua"
    } else if cx.core.txn.in_multi(cx.me) {
        "multi"
    } else {
        "toplevel"
    };
    let entry = log::Entry {
        count: 1,
        reason,
        context,
        object: object.to_vec(),
        username: username.to_vec(),
        ctime_ms: cx.now_ms(),
        client_info: info,
    };
    let len_max = crate::config::extra::acllog_max_len(&cx.core.config);
    cx.core.acl.log.add(entry, len_max);
}

#[cfg(test)]
mod tests {
    use crate::{Config, Engine, Now};

    fn engine_with(conf: &str) -> Engine {
        let mut config = Config::default();
        config.apply_file(conf).unwrap();
        Engine::new(config, 1, Now::from_ms(0))
    }

    #[test]
    fn config_file_user_lines_define_users() {
        let mut e = engine_with("user alice on >pw ~a* +get\nuser default on nopass ~* +@all\n");
        e.acl_apply_config_users().unwrap();
        assert!(e.core.acl.authenticate(b"alice", b"pw"));
        assert!(!e.core.acl.authenticate(b"alice", b"px"));
        assert!(!e.core.acl.users[&b"default"[..]].root.all_channels);
        let mut e = engine_with("user bob on +nosuch\n");
        let err = e.acl_apply_config_users().unwrap_err();
        assert_eq!(
            err,
            "Error in user declaration 'bob': Error in applying operation '+nosuch': Unknown \
             command or category name in ACL"
        );
        let mut e = engine_with("user bob on\naclfile /tmp/x.acl\n");
        assert_eq!(
            e.acl_apply_config_users().unwrap_err(),
            crate::acl::file::BOTH_CONFIGURED
        );
    }
}

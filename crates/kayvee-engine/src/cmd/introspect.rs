//! COMMAND and its subcommands (COUNT, DOCS, GETKEYS, GETKEYSANDFLAGS, INFO, LIST, HELP), all
//! generated from the one command table, shaped as Redis 7.0 shapes them: per command a
//! 10-element array (name, arity, flags, first key, last key, step, ACL categories, tips, key
//! specs, subcommands). Key specs come from the table (or are derived from first/last/step);
//! `COMMAND DOCS` has no `arguments` or `history` since the table does not describe them.

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{
    acl, flags, BeginSearch, CommandId, CommandInfo, CommandTable, FindKeys, FoundKey,
};
use crate::error::{CmdResult, Error};
use crate::reply::help_reply;
use crate::reply::ReplySink;
use crate::util::glob_match;
use crate::Cx;
use alloc::vec::Vec;

/// Flags and ACL categories every COMMAND subcommand has.
const FLAGS: u32 = flags::LOADING | flags::STALE;
const ACL: u32 = acl::SLOW | acl::CONNECTION;
const ORDER_TIP: &[&str] = &["nondeterministic_output_order"];
const PER_ARG: &str = "O(N) where N is the number of arguments to the command";
const PER_LOOKUP: &str = "O(N) where N is the number of commands to look up";
const PER_COMMAND: &str = "O(N) where N is the total number of Redis commands";

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "command",
    arity: -1,
    flags: FLAGS,
    acl: ACL,
    summary: "Get array of Redis command details",
    since: "2.8.13",
    group: "server",
    complexity: PER_COMMAND,
    tips: ORDER_TIP,
    handler: command_all,
    subcommands: SUBCOMMANDS,
    ..CommandSpec::DEFAULT
}];

/// A COMMAND subcommand (they differ only in these fields).
const fn sub(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    tips: &'static [&'static str],
    handler: crate::cmd::spec::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: FLAGS,
        acl: ACL,
        summary,
        since,
        group: "server",
        complexity,
        tips,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "count",
        2,
        "Get total number of Redis commands",
        "2.8.13",
        "O(1)",
        &[],
        count,
    ),
    sub(
        "getkeys",
        -4,
        "Extract keys given a full Redis command",
        "2.8.13",
        PER_ARG,
        &[],
        getkeys,
    ),
    sub(
        "list",
        -2,
        "Get an array of Redis command names",
        "7.0.0",
        PER_COMMAND,
        ORDER_TIP,
        list,
    ),
    sub(
        "help",
        2,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
        &[],
        help,
    ),
    sub(
        "docs",
        -2,
        "Get array of specific Redis command documentation",
        "7.0.0",
        PER_LOOKUP,
        ORDER_TIP,
        docs,
    ),
    sub(
        "getkeysandflags",
        -4,
        "Extract keys and access flags given a full Redis command",
        "7.0.0",
        PER_ARG,
        &[],
        getkeysandflags,
    ),
    sub(
        "info",
        -2,
        "Get array of specific Redis command details, or all when no argument is given.",
        "2.8.13",
        PER_LOOKUP,
        ORDER_TIP,
        info,
    ),
];

/// COMMAND: every top-level command's details.
fn command_all(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let table = cx.commands;
    out.array(table.count());
    for id in table.top_level() {
        write_info(table, id, out);
    }
    Ok(())
}

/// COMMAND COUNT.
fn count(cx: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.commands.count() as i64);
    Ok(())
}

/// COMMAND INFO [name ...]: details per name (null for unknown); all commands without names.
fn info(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() == 2 {
        return command_all(cx, args, out);
    }
    let table = cx.commands;
    out.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match lookup_full(table, name) {
            Some(id) => write_info(table, id, out),
            None => out.null(),
        }
    }
    Ok(())
}

/// Finds a command by its full name (`get`, `config|get`), case-insensitively.
pub fn lookup_full(table: &CommandTable, name: &[u8]) -> Option<CommandId> {
    match name.iter().position(|&c| c == b'|') {
        None => table.lookup(name),
        Some(bar) => {
            let parent = table.lookup(&name[..bar])?;
            table.lookup_sub(parent, &name[bar + 1..])
        }
    }
}

/// One command's 10-element details array.
fn write_info(table: &CommandTable, id: CommandId, out: &mut dyn ReplySink) {
    let reg = table.get(id);
    let spec = &reg.spec;
    out.array(10);
    out.bulk_str(&reg.full_name);
    out.int(spec.arity.into());
    let names: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(bit, _)| spec.has(*bit))
        .map(|(_, n)| *n)
        .collect();
    out.set(names.len());
    names.iter().for_each(|n| out.simple(n));
    out.int(spec.first_key.into());
    out.int(spec.last_key.into());
    out.int(spec.key_step.into());
    let cats: Vec<&str> = acl::NAMES
        .iter()
        .filter(|(bit, _)| spec.acl & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    out.set(cats.len());
    cats.iter()
        .for_each(|c| out.simple(&alloc::format!("@{c}")));
    out.set(spec.tips.len());
    spec.tips.iter().for_each(|t| out.bulk_str(t));
    write_key_specs(spec, out);
    if spec.subcommands == 0 {
        out.set(0);
    } else {
        out.array(spec.subcommands);
        for i in 0..spec.subcommands {
            write_info(table, CommandId(id.0 + 1 + i as u16), out);
        }
    }
}

/// The key specs, each a map as Redis 7.0 shows it: `notes` (when any), `flags`,
/// `begin_search` and `find_keys`, each of the last two a `type` and its `spec` map.
fn write_key_specs(spec: &CommandInfo, out: &mut dyn ReplySink) {
    let specs = spec.specs();
    out.set(specs.len());
    for ks in &specs {
        let notes = !ks.notes.is_empty();
        out.map(if notes { 4 } else { 3 });
        if notes {
            out.bulk_str("notes");
            out.bulk_str(ks.notes);
        }
        out.bulk_str("flags");
        out.set(ks.flags.len());
        ks.flags.iter().for_each(|f| out.simple(f));
        out.bulk_str("begin_search");
        write_begin_search(&ks.begin_search, out);
        out.bulk_str("find_keys");
        write_find_keys(&ks.find_keys, out);
    }
}

/// A `{type, spec}` map whose spec holds integer fields.
fn write_typed(kind: &str, fields: &[(&str, i32)], out: &mut dyn ReplySink) {
    out.map(2);
    out.bulk_str("type");
    out.bulk_str(kind);
    out.bulk_str("spec");
    out.map(fields.len());
    for (k, v) in fields {
        out.bulk_str(k);
        out.int((*v).into());
    }
}

/// A key spec's `begin_search` map.
fn write_begin_search(b: &BeginSearch, out: &mut dyn ReplySink) {
    match *b {
        BeginSearch::Index(i) => write_typed("index", &[("index", i)], out),
        BeginSearch::Keyword { keyword, startfrom } => {
            out.map(2);
            out.bulk_str("type");
            out.bulk_str("keyword");
            out.bulk_str("spec");
            out.map(2);
            out.bulk_str("keyword");
            out.bulk_str(keyword);
            out.bulk_str("startfrom");
            out.int(startfrom.into());
        }
        BeginSearch::Unknown => write_typed("unknown", &[], out),
    }
}

/// A key spec's `find_keys` map.
fn write_find_keys(f: &FindKeys, out: &mut dyn ReplySink) {
    match *f {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => write_typed(
            "range",
            &[("lastkey", lastkey), ("keystep", keystep), ("limit", limit)],
            out,
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => write_typed(
            "keynum",
            &[
                ("keynumidx", keynumidx),
                ("firstkey", firstkey),
                ("keystep", keystep),
            ],
            out,
        ),
        FindKeys::Unknown => write_typed("unknown", &[], out),
    }
}

/// COMMAND DOCS [name ...]: a map from name to its docs; unknown names are left out.
fn docs(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let table = cx.commands;
    let ids: Vec<CommandId> = if args.len() == 2 {
        table.top_level().collect()
    } else {
        args.iter()
            .skip(2)
            .filter_map(|n| lookup_full(table, n))
            .collect()
    };
    out.map(ids.len());
    for id in ids {
        out.bulk_str(&table.get(id).full_name);
        write_doc(table, id, out);
    }
    Ok(())
}

/// One command's docs map: Redis 7.0's fields for it (the command table's summary, since, group
/// and complexity for a command Redis does not have), and subcommands for containers.
fn write_doc(table: &CommandTable, id: CommandId, out: &mut dyn ReplySink) {
    let spec = &table.get(id).spec;
    let subs = spec.subcommands;
    let fields = crate::command_docs::doc_fields(&table.get(id).full_name);
    if fields.is_empty() {
        out.map(4 + usize::from(subs > 0));
        for (k, v) in [
            ("summary", spec.summary),
            ("since", spec.since),
            ("group", spec.group),
            ("complexity", spec.complexity),
        ] {
            out.bulk_str(k);
            out.bulk_str(v);
        }
    } else {
        out.map(fields.len() + usize::from(subs > 0));
        for (k, v) in fields {
            out.bulk_str(k);
            v.write(out);
        }
    }
    if subs > 0 {
        out.bulk_str("subcommands");
        out.map(subs);
        for i in 0..subs {
            let sub = CommandId(id.0 + 1 + i as u16);
            out.bulk_str(&table.get(sub).full_name);
            write_doc(table, sub, out);
        }
    }
}

/// Resolves the command that COMMAND GETKEYS[ANDFLAGS] is asked about and finds its keys. As
/// in Redis: a command without keys is reported before a wrong argument count, and arguments
/// that hold no key (or fewer than a `numkeys` announces) are invalid unless the command may
/// run without keys.
fn target_keys(table: &CommandTable, target: &Argv<'_>) -> Result<Vec<FoundKey>, Error> {
    let invalid = || Error::msg("ERR Invalid command specified");
    let mut id = table.lookup(target.get(0)).ok_or_else(invalid)?;
    if table.get(id).spec.subcommands != 0 && target.len() >= 2 {
        id = table.lookup_sub(id, target.get(1)).ok_or_else(invalid)?;
    }
    let spec = &table.get(id).spec;
    if spec.get_keys.is_none() && spec.specs().is_empty() {
        return Err(Error::msg("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(target.len()) {
        return Err(Error::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    match spec.find_keys(target) {
        Ok(keys) if !keys.is_empty() || spec.has(flags::NO_MANDATORY_KEYS) => Ok(keys),
        _ => Err(Error::msg("ERR Invalid arguments specified for command")),
    }
}

/// COMMAND GETKEYS cmd arg...: the key arguments.
fn getkeys(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let target = args.slice_from(2);
    let keys = target_keys(cx.commands, &target)?;
    out.array(keys.len());
    keys.iter().for_each(|k| out.bulk(target.get(k.index)));
    Ok(())
}

/// COMMAND GETKEYSANDFLAGS cmd arg...: each key with its key-spec flags.
fn getkeysandflags(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let target = args.slice_from(2);
    let keys = target_keys(cx.commands, &target)?;
    out.array(keys.len());
    for k in &keys {
        out.array(2);
        out.bulk(target.get(k.index));
        out.set(k.flags.len());
        k.flags.iter().for_each(|f| out.simple(f));
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: command and
/// subcommand names.
fn list(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let filter = match args.len() {
        2 => None,
        5 if args.get(2).eq_ignore_ascii_case(b"filterby") => {
            let kind = args.get(3).to_ascii_lowercase();
            if !matches!(kind.as_slice(), b"module" | b"aclcat" | b"pattern") {
                return Err(Error::Syntax);
            }
            Some((kind, args.get(4)))
        }
        _ => return Err(Error::Syntax),
    };
    let table = cx.commands;
    let names: Vec<&str> = table
        .all()
        .iter()
        .filter(|reg| match &filter {
            None => true,
            Some((kind, arg)) => list_filter(reg, kind, arg),
        })
        .map(|reg| reg.full_name.as_str())
        .collect();
    out.array(names.len());
    names.iter().for_each(|n| out.bulk_str(n));
    Ok(())
}

/// Whether a command passes a COMMAND LIST filter (`kind` lower case; modules: none).
fn list_filter(reg: &crate::command::Registered, kind: &[u8], arg: &[u8]) -> bool {
    match kind {
        b"aclcat" => acl::NAMES
            .iter()
            .any(|(bit, n)| reg.spec.acl & bit != 0 && n.as_bytes().eq_ignore_ascii_case(arg)),
        b"pattern" => glob_match(arg, reg.full_name.as_bytes(), true),
        _ => false,
    }
}

/// COMMAND HELP.
fn help(_: &mut Cx<'_>, _: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    help_reply(
        out,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{Protocol, Reply, ReplyTree};
    use alloc::string::String;

    const TEST_GROUP: &[CommandSpec] = &[
        CommandSpec {
            name: "get",
            arity: 2,
            flags: flags::READONLY | flags::FAST,
            first_key: 1,
            last_key: 1,
            key_step: 1,
            acl: acl::READ | acl::STRING | acl::FAST,
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "mset",
            arity: -3,
            flags: flags::WRITE | flags::DENYOOM,
            first_key: 1,
            last_key: -1,
            key_step: 2,
            acl: acl::WRITE | acl::STRING | acl::SLOW,
            tips: &[
                "request_policy:multi_shard",
                "response_policy:all_succeeded",
            ],
            key_flags: &["OW", "update"],
            ..CommandSpec::DEFAULT
        },
        CommandSpec {
            name: "del",
            arity: -2,
            flags: flags::WRITE,
            first_key: 1,
            last_key: -1,
            key_step: 1,
            acl: acl::KEYSPACE | acl::WRITE | acl::SLOW,
            tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
            key_flags: &["RM", "delete"],
            ..CommandSpec::DEFAULT
        },
    ];

    /// Renders as the RESP2 wire shows it, one line per element.
    fn lines(r: &Reply, out: &mut Vec<String>) {
        match r {
            Reply::Simple(s) => out.push(alloc::format!("+{s}")),
            Reply::Int(v) => out.push(alloc::format!(":{v}")),
            Reply::Bulk(b) => out.push(alloc::format!("${}", String::from_utf8_lossy(b))),
            Reply::Array(items) | Reply::Set(items) => {
                out.push(alloc::format!("*{}", items.len()));
                items.iter().for_each(|i| lines(i, out));
            }
            Reply::Map(pairs) => {
                out.push(alloc::format!("*{}", pairs.len() * 2));
                for (k, v) in pairs {
                    lines(k, out);
                    lines(v, out);
                }
            }
            other => out.push(alloc::format!("{other:?}")),
        }
    }

    fn info_lines(name: &str) -> String {
        let table = crate::cmd::spec::Commands::new(&[TEST_GROUP]).table;
        let mut tree = ReplyTree::new(Protocol::Resp2);
        write_info(&table, table.lookup(name.as_bytes()).unwrap(), &mut tree);
        let mut out = Vec::new();
        lines(&tree.take()[0], &mut out);
        out.join(" ")
    }

    /// The key-spec part common to range specs, as redis-server 7.0.15 sends it.
    fn spec(flags: &str, lastkey: i32, keystep: i32) -> String {
        alloc::format!(
            "*1 *6 $flags {flags} $begin_search *4 $type $index $spec *2 $index :1 $find_keys *4 \
             $type $range $spec *6 $lastkey :{lastkey} $keystep :{keystep} $limit :0 *0"
        )
    }

    #[test]
    fn command_info_matches_redis_for_get_mset_del() {
        let get = alloc::format!(
            "*10 $get :2 *2 +readonly +fast :1 :1 :1 *3 +@read +@string +@fast *0 {}",
            spec("*2 +RO +access", 0, 1)
        );
        assert_eq!(info_lines("get"), get);
        let mset = alloc::format!(
            "*10 $mset :-3 *2 +write +denyoom :1 :-1 :2 *3 +@write +@string +@slow *2 \
             $request_policy:multi_shard $response_policy:all_succeeded {}",
            spec("*2 +OW +update", -1, 2)
        );
        assert_eq!(info_lines("mset"), mset);
        let del = alloc::format!(
            "*10 $del :-2 *1 +write :1 :-1 :1 *3 +@keyspace +@write +@slow *2 \
             $request_policy:multi_shard $response_policy:agg_sum {}",
            spec("*2 +RM +delete", -1, 1)
        );
        assert_eq!(info_lines("del"), del);
    }

    #[test]
    fn getkeys_uses_key_specs() {
        let table = crate::cmd::spec::Commands::new(&[TEST_GROUP]).table;
        let keys = |line: &str| {
            let a = crate::ArgvBuf::from_line(line);
            target_keys(&table, &a.argv()).map(|k| k.iter().map(|k| k.index).collect::<Vec<_>>())
        };
        assert_eq!(keys("mset a b c d"), Ok(alloc::vec![1, 3]));
        assert_eq!(keys("mset a b c"), Ok(alloc::vec![1, 3]));
        assert_eq!(keys("DEL a b c"), Ok(alloc::vec![1, 2, 3]));
        assert_eq!(keys("get a"), Ok(alloc::vec![1]));
        let e = keys("get a b").unwrap_err();
        assert_eq!(
            alloc::format!("{e}"),
            "ERR Invalid number of arguments specified for command"
        );
        let e = keys("nosuch a").unwrap_err();
        assert_eq!(alloc::format!("{e}"), "ERR Invalid command specified");
    }

    /// Redis's invariants between key specs, the legacy key fields and `movablekeys`, for every
    /// command of the real table: movable iff some spec is not an index+range; a command with
    /// movable keys only (numkeys) has 0,0,0; otherwise the first key is the first spec's.
    #[test]
    fn legacy_key_fields_agree_with_the_key_specs() {
        let table = crate::cmd::spec::Commands::new(crate::cmd::GROUPS).table;
        for reg in table.all() {
            let spec = &reg.spec;
            let specs = spec.specs();
            let movable = specs.iter().any(|s| s.is_movable());
            let name = &reg.full_name;
            assert_eq!(spec.has(flags::MOVABLEKEYS), movable, "{name}");
            match specs.first().map(|s| s.begin_search) {
                Some(BeginSearch::Index(i)) if !specs[0].is_movable() => {
                    assert_eq!(spec.first_key, i, "{name}")
                }
                Some(_) => assert_eq!(
                    (spec.first_key, spec.last_key, spec.key_step),
                    (0, 0, 0),
                    "{name}"
                ),
                None => assert_eq!(spec.first_key, 0, "{name}"),
            }
        }
    }
}

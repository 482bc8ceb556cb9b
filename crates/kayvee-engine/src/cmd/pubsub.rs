//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE,
//! PUBLISH, SPUBLISH and PUBSUB's subcommands, with Redis 7.0.15's replies (checked against the
//! real server). Subscriptions and delivery live in [`crate::pubsub`].

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::pubsub::Kind;
use crate::reply::ReplySink;
use crate::Cx;

/// Flags of the (un)subscribe commands.
const SUB_FLAGS: u32 = flags::PUBSUB | flags::NOSCRIPT | flags::LOADING | flags::STALE;
/// Flags of PUBSUB's introspection subcommands.
const INTRO_FLAGS: u32 = flags::PUBSUB | flags::LOADING | flags::STALE;

/// A (un)subscribe command's spec.
const fn sub_spec(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: SUB_FLAGS,
        acl: acl::PUBSUB | acl::SLOW,
        summary,
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N) where N is the number of channels to (un)subscribe.",
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        handler: subscribe,
        ..sub_spec("subscribe", -2, "Listen for messages published to the given channels")
    },
    CommandSpec {
        handler: unsubscribe,
        ..sub_spec("unsubscribe", -1, "Stop listening for messages posted to the given channels")
    },
    CommandSpec {
        handler: psubscribe,
        ..sub_spec("psubscribe", -2, "Listen for messages published to channels matching the given patterns")
    },
    CommandSpec {
        handler: punsubscribe,
        ..sub_spec("punsubscribe", -1, "Stop listening for messages posted to channels matching the given patterns")
    },
    CommandSpec {
        handler: ssubscribe,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        since: "7.0.0",
        key_flags: &["not_key"],
        ..sub_spec("ssubscribe", -2, "Listen for messages published to the given shard channels")
    },
    CommandSpec {
        handler: sunsubscribe,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        since: "7.0.0",
        key_flags: &["not_key"],
        ..sub_spec("sunsubscribe", -1, "Stop listening for messages posted to the given shard channels")
    },
    CommandSpec {
        name: "publish",
        arity: 3,
        flags: flags::PUBSUB | flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::PUBSUB | acl::FAST,
        summary: "Post a message to a channel",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        handler: publish,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "spublish",
        arity: 3,
        flags: flags::PUBSUB | flags::LOADING | flags::STALE | flags::FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::PUBSUB | acl::FAST,
        summary: "Post a message to a shard channel",
        since: "7.0.0",
        group: "pubsub",
        complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        handler: spublish,
        key_flags: &["not_key"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pubsub",
        arity: -2,
        acl: acl::SLOW,
        summary: "A container for Pub/Sub commands",
        since: "2.8.0",
        group: "pubsub",
        complexity: "Depends on subcommand.",
        subcommands: SUBCOMMANDS,
        ..CommandSpec::DEFAULT
    },
];

/// A PUBSUB subcommand's spec.
const fn intro_spec(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: INTRO_FLAGS,
        acl: acl::PUBSUB | acl::SLOW,
        summary,
        since: "2.8.0",
        group: "pubsub",
        ..CommandSpec::DEFAULT
    }
}

const SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        handler: channels,
        complexity: "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
        ..intro_spec("channels", -2, "List active channels")
    },
    CommandSpec {
        handler: numsub,
        complexity: "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
        ..intro_spec("numsub", -2, "Get the count of subscribers for channels")
    },
    CommandSpec {
        handler: numpat,
        ..intro_spec("numpat", 2, "Get the count of unique patterns pattern subscriptions")
    },
    CommandSpec {
        handler: shardchannels,
        since: "7.0.0",
        complexity: "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
        ..intro_spec("shardchannels", -2, "List active shard channels")
    },
    CommandSpec {
        handler: shardnumsub,
        since: "7.0.0",
        complexity: "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
        ..intro_spec("shardnumsub", -2, "Get the count of subscribers for shard channels")
    },
    CommandSpec::help_sub("6.2.0", "pubsub", help),
];

/// The reply name of each kind's (un)subscribe confirmation.
fn head(kind: Kind, sub: bool) -> &'static str {
    match (kind, sub) {
        (Kind::Channel, true) => "subscribe",
        (Kind::Channel, false) => "unsubscribe",
        (Kind::Pattern, true) => "psubscribe",
        (Kind::Pattern, false) => "punsubscribe",
        (Kind::Shard, true) => "ssubscribe",
        (Kind::Shard, false) => "sunsubscribe",
    }
}

/// One confirmation: `[head, name, count]` (a push in RESP3, an array in RESP2).
fn confirm(cx: &mut Cx<'_>, kind: Kind, sub: bool, name: Option<&[u8]>, out: &mut dyn ReplySink) {
    let count = cx.core.pubsub.count(cx.me, kind);
    out.push(3);
    out.bulk_str(head(kind, sub));
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: one confirmation per argument, repeats included.
fn subscribe_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    kind: Kind,
    out: &mut dyn ReplySink,
) -> CmdResult {
    for name in args.iter().skip(1) {
        cx.core.pubsub.subscribe(cx.me, kind, name);
        confirm(cx, kind, true, Some(name), out);
    }
    Ok(())
}

/// UNSUBSCRIBE-likes: the named subscriptions, or all of this kind; a lone confirmation with a
/// null name when there is none to drop.
fn unsubscribe_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    kind: Kind,
    out: &mut dyn ReplySink,
) -> CmdResult {
    if args.len() > 1 {
        for name in args.iter().skip(1) {
            cx.core.pubsub.unsubscribe(cx.me, kind, name);
            confirm(cx, kind, false, Some(name), out);
        }
        return Ok(());
    }
    let all = cx.core.pubsub.subscriptions(cx.me, kind);
    if all.is_empty() {
        confirm(cx, kind, false, None, out);
    }
    for name in all {
        cx.core.pubsub.unsubscribe(cx.me, kind, &name);
        confirm(cx, kind, false, Some(&name), out);
    }
    Ok(())
}

/// SUBSCRIBE channel [channel ...]
fn subscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    subscribe_generic(cx, args, Kind::Channel, out)
}

/// UNSUBSCRIBE [channel ...]
fn unsubscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    unsubscribe_generic(cx, args, Kind::Channel, out)
}

/// PSUBSCRIBE pattern [pattern ...]
fn psubscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    subscribe_generic(cx, args, Kind::Pattern, out)
}

/// PUNSUBSCRIBE [pattern ...]
fn punsubscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    unsubscribe_generic(cx, args, Kind::Pattern, out)
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
fn ssubscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    subscribe_generic(cx, args, Kind::Shard, out)
}

/// SUNSUBSCRIBE [shardchannel ...]
fn sunsubscribe(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    unsubscribe_generic(cx, args, Kind::Shard, out)
}

/// PUBLISH channel message: the number of receivers (pattern matches included).
fn publish(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = cx
        .core
        .pubsub
        .publish(cx.me, Kind::Channel, args.get(1), args.get(2), out);
    out.int(n as i64);
    cx.propagate_to_replicas();
    Ok(())
}

/// SPUBLISH shardchannel message
fn spublish(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = cx
        .core
        .pubsub
        .publish(cx.me, Kind::Shard, args.get(1), args.get(2), out);
    out.int(n as i64);
    cx.propagate_to_replicas();
    Ok(())
}

/// CHANNELS / SHARDCHANNELS [pattern]: the active names (any order, as Redis's dict).
fn list_names(cx: &mut Cx<'_>, args: &Argv<'_>, kind: Kind, out: &mut dyn ReplySink) -> CmdResult {
    if args.len() > 3 {
        let sub = crate::util::sanitize(args.get(1), 128);
        return Err(Error::msg(alloc::format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try PUBSUB HELP."
        )));
    }
    let names = cx.core.pubsub.names(kind, args.try_get(2));
    out.array(names.len());
    names.iter().for_each(|n| out.bulk(n));
    Ok(())
}

/// NUMSUB / SHARDNUMSUB [name ...]: name, count pairs in a flat array (in RESP3 too).
fn counts(cx: &mut Cx<'_>, args: &Argv<'_>, kind: Kind, out: &mut dyn ReplySink) -> CmdResult {
    out.array((args.len() - 2) * 2);
    for name in args.iter().skip(2) {
        out.bulk(name);
        out.int(cx.core.pubsub.subscribers(kind, name) as i64);
    }
    Ok(())
}

/// PUBSUB CHANNELS [pattern]
fn channels(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    list_names(cx, args, Kind::Channel, out)
}

/// PUBSUB SHARDCHANNELS [pattern]
fn shardchannels(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    list_names(cx, args, Kind::Shard, out)
}

/// PUBSUB NUMSUB [channel ...]
fn numsub(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    counts(cx, args, Kind::Channel, out)
}

/// PUBSUB SHARDNUMSUB [shardchannel ...]
fn shardnumsub(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    counts(cx, args, Kind::Shard, out)
}

/// PUBSUB NUMPAT
fn numpat(cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    out.int(cx.core.pubsub.pattern_count() as i64);
    Ok(())
}

/// PUBSUB HELP, worded as Redis 7.0.15.
fn help(_cx: &mut Cx<'_>, _args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    const LINES: &[&str] = &[
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
    ];
    crate::reply::help_reply(out, "PUBSUB", LINES);
    Ok(())
}

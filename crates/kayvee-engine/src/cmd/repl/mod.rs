//! Replication commands (Redis "server" and "generic" groups): PSYNC and SYNC (`psync`),
//! REPLCONF (`replconf`), ROLE (`role`), WAIT (`wait`), REPLICAOF and SLAVEOF (`replicaof`).
//! The state is [`crate::repl`]; the bytes of a sync (RDB, backlog, stream) are the
//! connection layer's, asked for with [`crate::Outcome::Replicate`]. Replies and error texts
//! are Redis 7.0.15's.

mod psync;
mod replconf;
mod replicaof;
mod role;
mod wait;

use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};

/// A replication command row of the `server` group, with Redis 7.0's admin ACL categories.
const fn admin(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
        summary,
        since,
        group: "server",
        handler,
        ..CommandSpec::DEFAULT
    }
}

const SYNC_FLAGS: u32 = flags::ADMIN | flags::NOSCRIPT | flags::NO_ASYNC_LOADING | flags::NO_MULTI;
const REPLICAOF_FLAGS: u32 =
    flags::ADMIN | flags::NOSCRIPT | flags::STALE | flags::NO_ASYNC_LOADING;

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    admin(
        "psync",
        -3,
        SYNC_FLAGS,
        "Internal command used for replication",
        "2.8.0",
        psync::psync,
    ),
    admin(
        "sync",
        1,
        SYNC_FLAGS,
        "Internal command used for replication",
        "1.0.0",
        psync::sync,
    ),
    admin(
        "replconf",
        -1,
        flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::ALLOW_BUSY,
        "An internal command for configuring the replication stream",
        "3.0.0",
        replconf::replconf,
    ),
    CommandSpec {
        name: "role",
        arity: 1,
        flags: flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::FAST,
        acl: acl::ADMIN | acl::FAST | acl::DANGEROUS,
        summary: "Return the role of the instance in the context of replication",
        since: "2.8.12",
        group: "server",
        handler: role::role,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "wait",
        arity: 3,
        flags: flags::NOSCRIPT,
        acl: acl::SLOW | acl::CONNECTION,
        summary: "Wait for the synchronous replication of all the write commands sent in the \
                  context of the current connection",
        since: "3.0.0",
        group: "generic",
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        handler: wait::wait,
        ..CommandSpec::DEFAULT
    },
    admin(
        "replicaof",
        3,
        REPLICAOF_FLAGS,
        "Make the server a replica of another instance, or promote it as master.",
        "5.0.0",
        replicaof::replicaof,
    ),
    admin(
        "slaveof",
        3,
        REPLICAOF_FLAGS,
        "Make the server a replica of another instance, or promote it as master. Deprecated \
         starting with Redis 5. Use REPLICAOF instead.",
        "1.0.0",
        replicaof::replicaof,
    ),
];

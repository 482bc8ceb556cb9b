//! Replication commands (Redis "server" and "generic" groups): PSYNC and SYNC (`psync`),
//! REPLCONF (`replconf`), ROLE (`role`), WAIT (`wait`), REPLICAOF and SLAVEOF (`replicaof`),
//! FAILOVER (`failover`); here, the role changes they share.
//! The state is [`crate::repl`]; the bytes of a sync (RDB, backlog, stream) are the
//! connection layer's, asked for with [`crate::Outcome::Replicate`]. Replies and error texts
//! are Redis 7.0.15's.

pub mod failover;
mod psync;
mod replconf;
mod replicaof;
mod role;
mod wait;

use crate::client::ClientTable;
use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::cx::Core;
use crate::repl::Primary;
use alloc::string::String;

/// Makes this server a primary (REPLICAOF NO ONE, a FAILOVER's target, an aborted FAILOVER):
/// the link to its primary closes, the ID it followed becomes its secondary ID, its own
/// replicas are disconnected to learn the new one, and the stream is its own from now on.
/// Returns whether clients were marked killed (the caller has them closed).
pub fn become_primary(core: &mut Core, clients: &mut ClientTable) -> bool {
    // CONFIG REWRITE writes the role as it is now.
    core.config.replicaof = None;
    if core.repl.primary.is_none() {
        return false;
    }
    let mut killed = drop_link(core, clients);
    core.repl.promote(&mut core.rng);
    // A primary's active expiry covers every key now.
    core.repl.own_ttls.clear();
    killed |= kill_replicas(core, clients);
    if core.repl.backlog.is_some() {
        core.aof.set_replicating(true);
        core.aof.reset_repl_db();
        crate::drain::sync(core);
    }
    killed
}

/// Makes this server a replica of `host`:`port` (the connection layer connects). Returns
/// whether clients were marked killed (the link to a previous primary).
pub fn follow(core: &mut Core, clients: &mut ClientTable, host: String, port: u16) -> bool {
    // The stream's database outlives the change of primary, as Redis's cached master does: a
    // replica that comes back to the primary it left (or to one that shares its history)
    // continues with no SELECT, in the database the stream had selected.
    let stream_db = core.repl.primary.as_ref().map_or(0, |p| {
        let master = core.repl.link().filter(|&h| core.repl.is_master_client(h));
        master
            .and_then(|h| clients.get(h))
            .map_or(p.stream_db, |c| c.db)
    });
    let killed = drop_link(core, clients);
    crate::blocking::unblock_all_for_replica(&mut core.blocking, clients, &mut core.stats);
    core.config.replicaof = Some((host.clone(), port));
    let mut primary = Primary::new(host, port);
    primary.stream_db = stream_db;
    core.repl.primary = Some(primary);
    // A replica's stream to its own replicas is its primary's, passed on as it arrives.
    core.aof.set_replicating(false);
    crate::drain::sync(core);
    killed
}

/// Closes the connection to the current primary, if any; whether there was one.
fn drop_link(core: &mut Core, clients: &mut ClientTable) -> bool {
    let Some(h) = core.repl.link() else {
        return false;
    };
    if let Some(p) = core.repl.primary.as_mut() {
        p.link = None;
    }
    match clients.get_mut(h) {
        Some(c) => {
            c.killed = true;
            true
        }
        None => false,
    }
}

/// Marks this server's replicas for closing; whether there were any.
pub fn kill_replicas(core: &mut Core, clients: &mut ClientTable) -> bool {
    let mut any = false;
    for r in &core.repl.replicas {
        if let Some(c) = clients.get_mut(r.handle) {
            c.killed = true;
            any = true;
        }
    }
    any
}

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
    admin(
        "failover",
        -1,
        flags::ADMIN | flags::NOSCRIPT | flags::STALE,
        "Start a coordinated failover between this server and one of its replicas.",
        "6.2.0",
        failover::failover,
    ),
];

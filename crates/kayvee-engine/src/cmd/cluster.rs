//! The cluster group without cluster mode, as Redis 7.0 answers it when `cluster-enabled` is
//! off: READONLY, READWRITE and ASKING exist (so ACL rules and COMMAND list them) and answer
//! that cluster support is disabled, as does every CLUSTER subcommand. Rows as redis-server
//! 7.0.15's COMMAND INFO and COMMAND DOCS give them.

use crate::argv::Argv;
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::Cx;

/// Redis's answer to a cluster command on a server without cluster mode.
const DISABLED: &str = "ERR This instance has cluster support disabled";

/// Every cluster command's handler here.
fn disabled(_: &mut Cx<'_>, _: &Argv<'_>, _: &mut dyn ReplySink) -> CmdResult {
    Err(Error::msg(DISABLED))
}

/// CLUSTER with no known subcommand (dispatch answers an unknown one itself).
fn container(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    disabled(cx, args, out)
}

/// A connection command of the cluster group (READONLY, READWRITE, ASKING).
const fn connection(name: &'static str, flags: u32, summary: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        arity: 1,
        flags,
        acl: acl::FAST | acl::CONNECTION,
        summary,
        since: "3.0.0",
        group: "cluster",
        handler: disabled,
        ..CommandSpec::DEFAULT
    }
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    connection(
        "readonly",
        flags::LOADING | flags::STALE | flags::FAST,
        "Enables read queries for a connection to a cluster replica node",
    ),
    connection(
        "readwrite",
        flags::LOADING | flags::STALE | flags::FAST,
        "Disables read queries for a connection to a cluster replica node",
    ),
    connection(
        "asking",
        flags::FAST,
        "Sent by cluster clients after an -ASK redirect",
    ),
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: 0,
        acl: acl::SLOW,
        summary: "A container for cluster commands",
        since: "3.0.0",
        group: "cluster",
        complexity: "Depends on subcommand.",
        handler: container,
        subcommands: &[
            CommandSpec {
                name: "addslots",
                arity: -3,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Assign new hash slots to receiving node",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of hash slot arguments",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "addslotsrange",
                arity: -4,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Assign new hash slots to receiving node",
                since: "7.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "bumpepoch",
                arity: 2,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Advance the cluster config epoch",
                since: "3.0.0",
                group: "cluster",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "count-failure-reports",
                arity: 3,
                flags: flags::ADMIN | flags::STALE,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Return the number of failure reports active for a given node",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the number of failure reports",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "countkeysinslot",
                arity: 3,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Return the number of local keys in the specified hash slot",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "delslots",
                arity: -3,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Set hash slots as unbound in receiving node",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of hash slot arguments",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "delslotsrange",
                arity: -4,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Set hash slots as unbound in receiving node",
                since: "7.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "failover",
                arity: -2,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Forces a replica to perform a manual failover of its master.",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "flushslots",
                arity: 2,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Delete a node's own slots information",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "forget",
                arity: 3,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Remove a node from the nodes table",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "getkeysinslot",
                arity: 4,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Return local key names in the specified hash slot",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(log(N)) where N is the number of requested keys",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "help",
                arity: 2,
                flags: flags::LOADING | flags::STALE,
                acl: acl::SLOW,
                summary: "Show helpful text about the different subcommands",
                since: "5.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "info",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Provides info about Redis Cluster node state",
                since: "3.0.0",
                group: "cluster",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "keyslot",
                arity: 3,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Returns the hash slot of the specified key",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the number of bytes in the key",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "links",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Returns a list of all TCP links to and from peer nodes in cluster",
                since: "7.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of Cluster nodes",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "meet",
                arity: -4,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Force a node cluster to handshake with another node",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "myid",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Return the node id",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "nodes",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Get Cluster config for the node",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of Cluster nodes",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "replicas",
                arity: 3,
                flags: flags::ADMIN | flags::STALE,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "List replica nodes of the specified master node",
                since: "5.0.0",
                group: "cluster",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "replicate",
                arity: 3,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Reconfigure a node as a replica of the specified master node",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "reset",
                arity: -2,
                flags: flags::ADMIN | flags::NOSCRIPT | flags::STALE,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Reset a Redis Cluster node",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "saveconfig",
                arity: 2,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Forces the node to save cluster state on disk",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "set-config-epoch",
                arity: 3,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Set the configuration epoch in a new node",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "setslot",
                arity: -4,
                flags: flags::ADMIN | flags::STALE | flags::NO_ASYNC_LOADING,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "Bind a hash slot to a specific node",
                since: "3.0.0",
                group: "cluster",
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "shards",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Get array of cluster slots to node mappings",
                since: "7.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of cluster nodes",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "slaves",
                arity: 3,
                flags: flags::ADMIN | flags::STALE,
                acl: acl::ADMIN | acl::SLOW | acl::DANGEROUS,
                summary: "List replica nodes of the specified master node",
                since: "3.0.0",
                group: "cluster",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "slots",
                arity: 2,
                flags: flags::STALE,
                acl: acl::SLOW,
                summary: "Get array of Cluster slot to node mappings",
                since: "3.0.0",
                group: "cluster",
                complexity: "O(N) where N is the total number of Cluster nodes",
                tips: &["nondeterministic_output"],
                handler: disabled,
                ..CommandSpec::DEFAULT
            },
        ],
        ..CommandSpec::DEFAULT
    },
];

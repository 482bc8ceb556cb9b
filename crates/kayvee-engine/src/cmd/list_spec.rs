//! The list group's command table: arity, flags, key positions, ACL categories and docs as
//! Redis 7.0.15's `COMMAND INFO` / `COMMAND DOCS` show them.

use super::{list as l, list_block as b};
use crate::command::{acl, flags, CommandSpec, Handler};
use crate::keyspec::{kf, KeySpec};

/// A list command spec with one key at position 1.
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: u32,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl,
        summary,
        since,
        group: "list",
        complexity,
        handler,
        ..CommandSpec::DEFAULT
    }
}

const W_OOM_FAST: u32 = flags::WRITE | flags::DENYOOM | flags::FAST;
const W_OOM: u32 = flags::WRITE | flags::DENYOOM;
const W_BLOCK: u32 = flags::WRITE | flags::NOSCRIPT | flags::BLOCKING;
const ACL_W_FAST: u32 = acl::WRITE | acl::LIST | acl::FAST;
const ACL_W_SLOW: u32 = acl::WRITE | acl::LIST | acl::SLOW;
const ACL_R_SLOW: u32 = acl::READ | acl::LIST | acl::SLOW;
const ACL_W_BLOCK: u32 = acl::WRITE | acl::LIST | acl::SLOW | acl::BLOCKING;
const PUSH_CX: &str = "O(1) for each element added, so O(N) to add N elements when the command \
is called with multiple arguments.";
const POP_CX: &str = "O(N) where N is the number of elements returned";
const MPOP_CX: &str = "O(N+M) where N is the number of provided keys and M is the number of \
elements returned.";
const BPOP_CX: &str = "O(N) where N is the number of provided keys.";
const INSERT: &[&str] = &["RW", "insert"];
const POP_KEY: &[&str] = &["RW", "access", "delete"];
const DELETE: &[&str] = &["RW", "delete"];

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_flags: INSERT,
        ..spec("lpush", -3, W_OOM_FAST, ACL_W_FAST, "Prepend one or multiple elements to a list", "1.0.0", PUSH_CX, l::lpush)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("rpush", -3, W_OOM_FAST, ACL_W_FAST, "Append one or multiple elements to a list", "1.0.0", PUSH_CX, l::rpush)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("lpushx", -3, W_OOM_FAST, ACL_W_FAST, "Prepend an element to a list, only if the list exists", "2.2.0", PUSH_CX, l::lpushx)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("rpushx", -3, W_OOM_FAST, ACL_W_FAST, "Append an element to a list, only if the list exists", "2.2.0", PUSH_CX, l::rpushx)
    },
    CommandSpec {
        key_flags: POP_KEY,
        ..spec("lpop", -2, flags::WRITE | flags::FAST, ACL_W_FAST, "Remove and get the first elements in a list", "1.0.0", POP_CX, l::lpop)
    },
    CommandSpec {
        key_flags: POP_KEY,
        ..spec("rpop", -2, flags::WRITE | flags::FAST, ACL_W_FAST, "Remove and get the last elements in a list", "1.0.0", POP_CX, l::rpop)
    },
    spec("lrange", 4, flags::READONLY, ACL_R_SLOW, "Get a range of elements from a list", "1.0.0",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        l::lrange),
    spec("lindex", 3, flags::READONLY, ACL_R_SLOW, "Get an element from a list by its index", "1.0.0",
        "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        l::lindex),
    spec("lset", 4, W_OOM, ACL_W_SLOW, "Set the value of an element in a list by its index", "1.0.0",
        "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        l::lset),
    CommandSpec {
        key_flags: &["RO"],
        ..spec("llen", 2, flags::READONLY | flags::FAST, acl::READ | acl::LIST | acl::FAST, "Get the length of a list", "1.0.0", "O(1)", l::llen)
    },
    CommandSpec {
        key_flags: DELETE,
        ..spec("lrem", 4, flags::WRITE, ACL_W_SLOW, "Remove elements from a list", "1.0.0",
            "O(N+M) where N is the length of the list and M is the number of elements removed.", l::lrem)
    },
    CommandSpec {
        key_flags: DELETE,
        ..spec("ltrim", 4, flags::WRITE, ACL_W_SLOW, "Trim a list to the specified range", "1.0.0",
            "O(N) where N is the number of elements to be removed by the operation.", l::ltrim)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("linsert", 5, W_OOM, ACL_W_SLOW, "Insert an element before or after another element in a list", "2.2.0",
            "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
            l::linsert)
    },
    spec("lpos", -3, flags::READONLY, ACL_R_SLOW, "Return the index of matching elements on a list", "6.0.6",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        l::lpos),
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("lmove", 5, W_OOM, ACL_W_SLOW, "Pop an element from a list, push it to another list and return it", "6.2.0", "O(1)", l::lmove)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("rpoplpush", 3, W_OOM, ACL_W_SLOW, "Remove the last element in a list, prepend it to another list and return it", "1.2.0", "O(1)", l::rpoplpush)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 1)],
        ..spec("lmpop", -4, flags::WRITE | flags::MOVABLEKEYS, ACL_W_SLOW, "Pop elements from a list", "7.0.0", MPOP_CX, l::lmpop)
    },
    CommandSpec {
        last_key: -2,
        key_flags: POP_KEY,
        ..spec("blpop", -3, W_BLOCK, ACL_W_BLOCK, "Remove and get the first element in a list, or block until one is available", "2.0.0", BPOP_CX, b::blpop)
    },
    CommandSpec {
        last_key: -2,
        key_flags: POP_KEY,
        ..spec("brpop", -3, W_BLOCK, ACL_W_BLOCK, "Remove and get the last element in a list, or block until one is available", "2.0.0", BPOP_CX, b::brpop)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("blmove", 6, W_BLOCK | flags::DENYOOM, ACL_W_BLOCK, "Pop an element from a list, push it to another list and return it; or block until one is available", "6.2.0", "O(1)", b::bmove)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("brpoplpush", 4, W_BLOCK | flags::DENYOOM, ACL_W_BLOCK, "Pop an element from a list, push it to another list and return it; or block until one is available", "2.2.0", "O(1)", b::bmove)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 2)],
        ..spec("blmpop", -5, flags::WRITE | flags::BLOCKING | flags::MOVABLEKEYS, ACL_W_BLOCK, "Pop elements from a list, or block until one is available", "7.0.0", MPOP_CX, b::blmpop)
    },
];

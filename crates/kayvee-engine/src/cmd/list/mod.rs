//! List commands (Redis "list" group): the command table (arity, flags, key positions, ACL
//! categories and docs as Redis 7.0.15's `COMMAND INFO` / `COMMAND DOCS` show them) and the
//! helpers the group's files share (typed access, pushing, emptied keys, events, propagation of
//! pops). LPUSH, RPUSH, LPUSHX and RPUSHX are in `push`; LPOP, RPOP, LMPOP and the blocking
//! pops in `pop`; LLEN, LRANGE, LINDEX, LSET, LREM, LTRIM, LINSERT and LPOS in `index`; LMOVE,
//! RPOPLPUSH and their blocking forms in `moves`.
//!
//! Lists are `Value::List` ([`crate::value::List`]: packed while it fits one listpack node
//! under `list-max-listpack-size`, a persistent deque after); a list that becomes empty
//! deletes its key. Every command that creates or grows a list signals the key ready for
//! blocked clients ([`crate::blocking`]). Semantics, argument-check order and error texts follow
//! Redis 7.0.15 (checked against the real server; `tests/transcripts/list*.txt` were recorded
//! from it).

mod index;
mod moves;
mod pop;
mod push;

use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::{CommandSpec, Handler};
use crate::command::{acl, flags};
use crate::db::Db;
use crate::error::Error;
use crate::keyspec::{kf, KeySpec};
use crate::util::parse_i64;
use crate::value::{Entry, List, Value, ValueMut, ValueRef};
use crate::Cx;
use index::{lindex, linsert, llen, lpos, lrange, lrem, lset, ltrim};
use kayvee_pds::SmallBytes;
use moves::{bmove, lmove, rpoplpush, serve_bmove};
use pop::{blmpop, blpop, brpop, lmpop, lpop, rpop, serve_blmpop, serve_blpop, serve_brpop};
use push::{lpush, lpushx, rpush, rpushx};

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
    CommandSpec::first_key(
        "list", name, arity, flags, acl, summary, since, complexity, handler,
    )
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
        ..spec("lpush", -3, W_OOM_FAST, ACL_W_FAST, "Prepend one or multiple elements to a list", "1.0.0", PUSH_CX, lpush)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("rpush", -3, W_OOM_FAST, ACL_W_FAST, "Append one or multiple elements to a list", "1.0.0", PUSH_CX, rpush)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("lpushx", -3, W_OOM_FAST, ACL_W_FAST, "Prepend an element to a list, only if the list exists", "2.2.0", PUSH_CX, lpushx)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("rpushx", -3, W_OOM_FAST, ACL_W_FAST, "Append an element to a list, only if the list exists", "2.2.0", PUSH_CX, rpushx)
    },
    CommandSpec {
        key_flags: POP_KEY,
        ..spec("lpop", -2, flags::WRITE | flags::FAST, ACL_W_FAST, "Remove and get the first elements in a list", "1.0.0", POP_CX, lpop)
    },
    CommandSpec {
        key_flags: POP_KEY,
        ..spec("rpop", -2, flags::WRITE | flags::FAST, ACL_W_FAST, "Remove and get the last elements in a list", "1.0.0", POP_CX, rpop)
    },
    spec("lrange", 4, flags::READONLY, ACL_R_SLOW, "Get a range of elements from a list", "1.0.0",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        lrange),
    spec("lindex", 3, flags::READONLY, ACL_R_SLOW, "Get an element from a list by its index", "1.0.0",
        "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        lindex),
    spec("lset", 4, W_OOM, ACL_W_SLOW, "Set the value of an element in a list by its index", "1.0.0",
        "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        lset),
    CommandSpec {
        key_flags: &["RO"],
        ..spec("llen", 2, flags::READONLY | flags::FAST, acl::READ | acl::LIST | acl::FAST, "Get the length of a list", "1.0.0", "O(1)", llen)
    },
    CommandSpec {
        key_flags: DELETE,
        ..spec("lrem", 4, flags::WRITE, ACL_W_SLOW, "Remove elements from a list", "1.0.0",
            "O(N+M) where N is the length of the list and M is the number of elements removed.", lrem)
    },
    CommandSpec {
        key_flags: DELETE,
        ..spec("ltrim", 4, flags::WRITE, ACL_W_SLOW, "Trim a list to the specified range", "1.0.0",
            "O(N) where N is the number of elements to be removed by the operation.", ltrim)
    },
    CommandSpec {
        key_flags: INSERT,
        ..spec("linsert", 5, W_OOM, ACL_W_SLOW, "Insert an element before or after another element in a list", "2.2.0",
            "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
            linsert)
    },
    spec("lpos", -3, flags::READONLY, ACL_R_SLOW, "Return the index of matching elements on a list", "6.0.6",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        lpos),
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("lmove", 5, W_OOM, ACL_W_SLOW, "Pop an element from a list, push it to another list and return it", "6.2.0", "O(1)", lmove)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        ..spec("rpoplpush", 3, W_OOM, ACL_W_SLOW, "Remove the last element in a list, prepend it to another list and return it", "1.2.0", "O(1)", rpoplpush)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 1)],
        ..spec("lmpop", -4, flags::WRITE | flags::MOVABLEKEYS, ACL_W_SLOW, "Pop elements from a list", "7.0.0", MPOP_CX, lmpop)
    },
    CommandSpec {
        last_key: -2,
        key_flags: POP_KEY,
        serve: Some(serve_blpop),
        ..spec("blpop", -3, W_BLOCK, ACL_W_BLOCK, "Remove and get the first element in a list, or block until one is available", "2.0.0", BPOP_CX, blpop)
    },
    CommandSpec {
        last_key: -2,
        key_flags: POP_KEY,
        serve: Some(serve_brpop),
        ..spec("brpop", -3, W_BLOCK, ACL_W_BLOCK, "Remove and get the last element in a list, or block until one is available", "2.0.0", BPOP_CX, brpop)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        serve: Some(serve_bmove),
        ..spec("blmove", 6, W_BLOCK | flags::DENYOOM, ACL_W_BLOCK, "Pop an element from a list, push it to another list and return it; or block until one is available", "6.2.0", "O(1)", bmove)
    },
    CommandSpec {
        last_key: 2,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::range(kf::RW_ACCESS_DELETE, 1, 0, 1), KeySpec::range(kf::RW_INSERT, 2, 0, 1)],
        serve: Some(serve_bmove),
        ..spec("brpoplpush", 4, W_BLOCK | flags::DENYOOM, ACL_W_BLOCK, "Pop an element from a list, push it to another list and return it; or block until one is available", "2.2.0", "O(1)", bmove)
    },
    CommandSpec {
        first_key: 0,
        last_key: 0,
        key_step: 0,
        key_flags: POP_KEY,
        key_specs: &[KeySpec::keynum(kf::RW_ACCESS_DELETE, 2)],
        serve: Some(serve_blmpop),
        ..spec("blmpop", -5, flags::WRITE | flags::BLOCKING | flags::MOVABLEKEYS, ACL_W_BLOCK, "Pop elements from a list, or block until one is available", "7.0.0", MPOP_CX, blmpop)
    },
];

/// The list of an entry, or WRONGTYPE.
pub(crate) fn as_list(entry: &Entry) -> Result<&List, Error> {
    match entry.value() {
        ValueRef::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

/// The list of an entry, mutable, or WRONGTYPE.
pub(crate) fn as_list_mut(entry: &mut Entry) -> Result<&mut List, Error> {
    match entry.value_mut() {
        ValueMut::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

/// Pushes at the head (`front`) or the tail; `fill` is `list-max-listpack-size`.
pub(super) fn push_end(l: &mut List, v: &[u8], front: bool, fill: i64) {
    if front {
        l.push_front(v, fill)
    } else {
        l.push_back(v, fill)
    }
}

/// Pops from the head (`front`) or the tail.
pub(super) fn pop_end(l: &mut List, front: bool) -> Option<SmallBytes> {
    if front {
        l.pop_front()
    } else {
        l.pop_back()
    }
}

/// Deletes `key` when its list is empty (Redis never keeps an empty collection); returns
/// whether it did (the caller then sends the `del` event).
pub(super) fn delete_if_empty(db: &mut Db, key: &[u8], now_ms: u64) -> bool {
    let empty =
        matches!(db.lookup_write(key, now_ms), Some(e) if as_list(e).is_ok_and(List::is_empty));
    if empty {
        db.remove(key, now_ms);
    }
    empty
}

/// The event of a push to (`front`) or a pop from one end.
pub(super) fn end_event(push: bool, front: bool) -> &'static str {
    match (push, front) {
        (true, true) => "lpush",
        (true, false) => "rpush",
        (false, true) => "lpop",
        (false, false) => "rpop",
    }
}

/// Parses an integer that must be >= `min`, any failure giving `msg` (Redis's
/// `getRangeLongFromObjectOrReply` with a custom message).
pub(crate) fn parse_at_least(arg: &[u8], min: i64, msg: &'static str) -> Result<i64, Error> {
    parse_i64(arg).filter(|&v| v >= min).ok_or(Error::msg(msg))
}

/// Parses a signed integer argument (`ERR value is not an integer or out of range`).
pub(super) fn parse_int(arg: &[u8]) -> Result<i64, Error> {
    parse_i64(arg).ok_or(Error::NotInteger)
}

/// `LPOP` or `RPOP`: the plain form of a list pop from the head (`front`) or the tail.
pub(crate) fn end_pop(front: bool) -> &'static [u8] {
    if front {
        b"LPOP"
    } else {
        b"RPOP"
    }
}

/// Propagates a pop by a blocking or multi-key command as its plain form: `cmd key` (BLPOP,
/// BZPOPMIN...) or `cmd key count` (LMPOP, ZMPOP and their blocking forms), as Redis 7.0.
pub(crate) fn propagate_pop(cx: &mut Cx<'_>, cmd: &[u8], key: &[u8], count: Option<usize>) {
    match count {
        None => cx.propagate(&[cmd, key]),
        Some(n) if cx.propagating() => {
            let n = crate::aof::itoa(n as u64);
            cx.propagate(&[cmd, key, n.as_bytes()]);
        }
        Some(_) => {}
    }
}

/// Whether `key` holds a list now (a waiter is only served from a list; a key of another type
/// leaves it waiting, as in Redis).
pub(super) fn holds_list(cx: &mut Cx<'_>, key: &[u8]) -> bool {
    let now = cx.now_ms();
    matches!(cx.db().peek(key, now), Some(e) if matches!(e.value(), ValueRef::List(_)))
}

/// Pushes `items` onto `key`'s list, creating it unless `only_existing`; returns the new
/// length (0 when the key was absent and `only_existing`). Signals the key ready.
pub(crate) fn push_items<'a>(
    cx: &mut Cx<'_>,
    key: &[u8],
    items: impl Iterator<Item = &'a [u8]>,
    front: bool,
    only_existing: bool,
) -> Result<usize, Error> {
    let (now, fill) = (cx.now_ms(), cx.core.config.list_max_listpack_size);
    let db = cx.db();
    let len = match db.lookup_write(key, now) {
        Some(e) => {
            let l = as_list_mut(e)?;
            items.for_each(|v| push_end(l, v, front, fill));
            l.len()
        }
        None if only_existing => return Ok(0),
        None => {
            let mut l = List::new();
            items.for_each(|v| push_end(&mut l, v, front, fill));
            let n = l.len();
            db.insert_entry(key, db.new_entry(Value::List(l), now), None);
            n
        }
    };
    emit(cx, nc::LIST, end_event(true, front), key);
    let dbi = cx.db_index;
    crate::cmd::block::signal_key_ready(cx, dbi, key);
    Ok(len)
}

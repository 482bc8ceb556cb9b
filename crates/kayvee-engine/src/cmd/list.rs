//! List commands (Redis "list" group): LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE,
//! LINDEX, LSET, LREM, LTRIM, LINSERT, LPOS, LMOVE, RPOPLPUSH, LMPOP. The blocking variants
//! live in `list_block`, the command table in `list_spec`.
//!
//! Lists are `Value::List` ([`crate::value::List`], a persistent deque); a list that becomes
//! empty deletes its key. Every command that creates or grows a list signals the key ready for
//! blocked clients ([`crate::blocking`]). Semantics, argument-check order and error texts follow
//! Redis 7.0.15 (checked against the real server; `tests/transcripts/list*.txt` were recorded
//! from it).

use crate::argv::Argv;
use crate::db::Db;
use crate::error::{CmdResult, Error};
use crate::notify::{class as nc, emit, emptied};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Entry, List, Value};
use crate::Cx;
use alloc::boxed::Box;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// The list of an entry, or WRONGTYPE.
pub(crate) fn as_list(entry: &Entry) -> Result<&List, Error> {
    match &entry.value {
        Value::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

/// The list of an entry, mutable, or WRONGTYPE.
pub(crate) fn as_list_mut(entry: &mut Entry) -> Result<&mut List, Error> {
    match &mut entry.value {
        Value::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

/// Pushes at the head (`front`) or the tail.
fn push(l: &mut List, v: SmallBytes, front: bool) {
    if front {
        l.push_front(v)
    } else {
        l.push_back(v)
    }
}

/// Pops from the head (`front`) or the tail.
fn pop(l: &mut List, front: bool) -> Option<SmallBytes> {
    if front {
        l.pop_front()
    } else {
        l.pop_back()
    }
}

/// Deletes `key` when its list is empty (Redis never keeps an empty collection); returns
/// whether it did (the caller then sends the `del` event).
fn delete_if_empty(db: &mut Db, key: &[u8], now_ms: u64) -> bool {
    let empty =
        matches!(db.lookup_write(key, now_ms), Some(e) if as_list(e).is_ok_and(List::is_empty));
    if empty {
        db.remove(key, now_ms);
    }
    empty
}

/// The event of a push to (`front`) or a pop from one end.
fn end_event(push: bool, front: bool) -> &'static str {
    match (push, front) {
        (true, true) => "lpush",
        (true, false) => "rpush",
        (false, true) => "lpop",
        (false, false) => "rpop",
    }
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
    let now = cx.now_ms();
    let db = cx.db();
    let len = match db.lookup_write(key, now) {
        Some(e) => {
            let l = as_list_mut(e)?;
            items.for_each(|v| push(l, SmallBytes::from_slice(v), front));
            l.len()
        }
        None if only_existing => return Ok(0),
        None => {
            let mut l = List::new();
            items.for_each(|v| push(&mut l, SmallBytes::from_slice(v), front));
            let n = l.len();
            db.insert_entry(key, Entry::new(Value::List(Box::new(l)), now), None);
            n
        }
    };
    emit(cx, nc::LIST, end_event(true, front), key);
    let dbi = cx.db_index;
    crate::blocking::signal_key_ready(cx, dbi, key);
    Ok(len)
}

/// LPUSH key element [element ...]
pub(crate) fn lpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), true, false)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// RPUSH key element [element ...]
pub(crate) fn rpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), false, false)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// LPUSHX key element [element ...]: only onto an existing list.
pub(crate) fn lpushx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), true, true)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// RPUSHX key element [element ...]: only onto an existing list.
pub(crate) fn rpushx(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = push_items(cx, args.get(1), args.iter().skip(2), false, true)?;
    if n > 0 {
        cx.propagate_verbatim();
    }
    out.int(n as i64);
    Ok(())
}

/// Parses an integer that must be >= `min`, any failure giving `msg` (Redis's
/// `getRangeLongFromObjectOrReply` with a custom message).
pub(crate) fn parse_at_least(arg: &[u8], min: i64, msg: &'static str) -> Result<i64, Error> {
    parse_i64(arg).filter(|&v| v >= min).ok_or(Error::msg(msg))
}

/// Parses a signed integer argument (`ERR value is not an integer or out of range`).
fn parse_int(arg: &[u8]) -> Result<i64, Error> {
    parse_i64(arg).ok_or(Error::NotInteger)
}

/// Pops up to `count` elements from `key` (which must exist as a list), deleting it when
/// emptied. `Ok(None)` when the key is absent.
pub(crate) fn pop_items(
    cx: &mut Cx<'_>,
    key: &[u8],
    count: usize,
    front: bool,
) -> Result<Option<Vec<SmallBytes>>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    let Some(e) = db.lookup_write(key, now) else {
        return Ok(None);
    };
    let l = as_list_mut(e)?;
    let n = count.min(l.len());
    let items: Vec<SmallBytes> = (0..n).filter_map(|_| pop(l, front)).collect();
    let deleted = delete_if_empty(db, key, now);
    if !items.is_empty() {
        emit(cx, nc::LIST, end_event(false, front), key);
    }
    if deleted {
        emptied(cx, key);
    }
    Ok(Some(items))
}

/// LPOP/RPOP key [count]: one element as a bulk string, or with a count an array (empty for
/// count 0); a missing key is the null (the null array with a count).
fn pop_cmd(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink, front: bool) -> CmdResult {
    if args.len() > 3 {
        let name = cx.core.commands.get(cx.cmd).full_name.clone();
        return Err(Error::WrongArity(name));
    }
    let count = match args.try_get(2) {
        Some(a) => Some(parse_at_least(
            a,
            0,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    let n = count.map_or(1, |c| c as usize);
    let popped = pop_items(cx, args.get(1), n, front)?;
    if popped.as_ref().is_some_and(|items| !items.is_empty()) {
        cx.propagate_verbatim();
    }
    match (popped, count) {
        (None, None) => out.null(),
        (None, Some(_)) => out.null_array(),
        (Some(items), None) => out.bulk(&items[0]),
        (Some(items), Some(_)) => bulk_array(out, &items),
    }
    Ok(())
}

/// An array of bulk strings.
pub(crate) fn bulk_array(out: &mut dyn ReplySink, items: &[SmallBytes]) {
    out.array(items.len());
    items.iter().for_each(|v| out.bulk(v));
}

/// LPOP key [count]
pub(crate) fn lpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    pop_cmd(cx, args, out, true)
}

/// RPOP key [count]
pub(crate) fn rpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    pop_cmd(cx, args, out, false)
}

/// LLEN key: 0 for a missing key.
pub(crate) fn llen(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let n = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => as_list(e)?.len(),
        None => 0,
    };
    out.int(n as i64);
    Ok(())
}

/// The `start..end` slice of a list of `len` for Redis's inclusive, possibly negative
/// `start`/`stop` (LRANGE, LTRIM); `None` when it is empty.
pub(crate) fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i128;
    let norm = |i: i64| if i < 0 { i as i128 + len } else { i as i128 };
    let (s, e) = (norm(start).max(0), norm(stop).min(len - 1));
    (s <= e && s < len).then(|| (s as usize, e as usize + 1))
}

/// A possibly negative index into a list of `len`, if in range (LINDEX, LSET).
fn index(i: i64, len: usize) -> Option<usize> {
    let j = if i < 0 {
        i as i128 + len as i128
    } else {
        i as i128
    };
    (0..len as i128).contains(&j).then_some(j as usize)
}

/// LRANGE key start stop: the indexes are checked before the key.
pub(crate) fn lrange(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (start, stop) = (parse_int(args.get(2))?, parse_int(args.get(3))?);
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.array(0);
        return Ok(());
    };
    let l = as_list(e)?;
    match index_range(start, stop, l.len()) {
        Some((s, e)) => {
            out.array(e - s);
            l.range(s, e).for_each(|v| out.bulk(v));
        }
        None => out.array(0),
    }
    Ok(())
}

/// LINDEX key index: the key is checked before the index; out of range is the null.
pub(crate) fn lindex(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(args.get(1), now) else {
        out.null();
        return Ok(());
    };
    let l = as_list(e)?;
    let i = parse_int(args.get(2))?;
    match index(i, l.len()).and_then(|i| l.get(i)) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

/// LSET key index element: `ERR no such key` for a missing key, then the type, the index, and
/// `ERR index out of range`.
pub(crate) fn lset(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let now = cx.now_ms();
    let e = cx
        .db()
        .lookup_write(args.get(1), now)
        .ok_or(Error::NoSuchKey)?;
    let l = as_list_mut(e)?;
    let i = parse_int(args.get(2))?;
    let i = index(i, l.len()).ok_or(Error::IndexOutOfRange)?;
    l.set(i, SmallBytes::from_slice(args.get(3)));
    // A modification for WATCH even when the element is the same, as in Redis.
    cx.db().modified(args.get(1));
    cx.propagate_verbatim();
    emit(cx, nc::LIST, "lset", args.get(1));
    out.ok();
    Ok(())
}

/// LREM key count element: removes up to |count| matches from the head (count > 0), the tail
/// (count < 0), or all (0); replies how many.
pub(crate) fn lrem(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let count = parse_int(args.get(2))?;
    let (key, ele, now) = (args.get(1), args.get(3), cx.now_ms());
    let db = cx.db();
    let Some(e) = db.lookup_write(key, now) else {
        out.int(0);
        return Ok(());
    };
    let l = as_list_mut(e)?;
    let limit = match count {
        0 => usize::MAX,
        c => usize::try_from(c.unsigned_abs()).unwrap_or(usize::MAX),
    };
    let removed = l.remove_matching(|v| &v[..] == ele, limit, count < 0);
    let deleted = delete_if_empty(db, key, now);
    if removed > 0 {
        cx.propagate_verbatim();
        emit(cx, nc::LIST, "lrem", key);
    }
    if deleted {
        emptied(cx, key);
    }
    out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop: keeps the range; an empty range deletes the key.
pub(crate) fn ltrim(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (start, stop) = (parse_int(args.get(2))?, parse_int(args.get(3))?);
    let (key, now) = (args.get(1), cx.now_ms());
    let db = cx.db();
    if let Some(e) = db.lookup_write(key, now) {
        let l = as_list_mut(e)?;
        let len_before = l.len();
        match index_range(start, stop, l.len()) {
            Some((s, e)) => l.retain_range(s, e),
            None => l.retain_range(0, 0),
        }
        let trimmed = l.len() != len_before;
        let deleted = delete_if_empty(db, key, now);
        // A modification for WATCH (and an event) even when nothing was trimmed, as in Redis;
        // but then nothing changed, so nothing is propagated.
        db.modified(key);
        if trimmed || deleted {
            cx.propagate_verbatim();
        }
        emit(cx, nc::LIST, "ltrim", key);
        if deleted {
            emptied(cx, key);
        }
    }
    out.ok();
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 when the pivot is absent, 0 when
/// the key is. The position word is checked first.
pub(crate) fn linsert(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let w = args.get(2);
    let after = if w.eq_ignore_ascii_case(b"AFTER") {
        true
    } else if w.eq_ignore_ascii_case(b"BEFORE") {
        false
    } else {
        return Err(Error::Syntax);
    };
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_write(args.get(1), now) else {
        out.int(0);
        return Ok(());
    };
    let l = as_list_mut(e)?;
    let pivot = args.get(3);
    let Some(pos) = l.iter().position(|v| &v[..] == pivot) else {
        out.int(-1);
        return Ok(());
    };
    l.insert(
        pos + usize::from(after),
        SmallBytes::from_slice(args.get(4)),
    );
    let len = l.len();
    cx.propagate_verbatim();
    emit(cx, nc::LIST, "linsert", args.get(1));
    out.int(len as i64);
    Ok(())
}

/// LPOS's options.
struct LposOpts {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

/// Parses `[RANK r] [COUNT c] [MAXLEN m]` in order (repeats allowed, the last wins), each
/// checked as it is read, as Redis does.
fn lpos_opts(args: &Argv<'_>) -> Result<LposOpts, Error> {
    let mut o = LposOpts {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    while i < args.len() {
        let (opt, val) = (args.get(i), args.try_get(i + 1).ok_or(Error::Syntax)?);
        if opt.eq_ignore_ascii_case(b"RANK") {
            o.rank = parse_int(val)?;
            if o.rank == 0 {
                return Err(Error::msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
        } else if opt.eq_ignore_ascii_case(b"COUNT") {
            let c = parse_at_least(val, 0, "ERR COUNT can't be negative")?;
            o.count = Some(c as usize);
        } else if opt.eq_ignore_ascii_case(b"MAXLEN") {
            o.maxlen = parse_at_least(val, 0, "ERR MAXLEN can't be negative")? as usize;
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// The indexes of `ele` in `l` per LPOS's options: scanning from the head (positive rank) or
/// the tail, skipping `|rank| - 1` matches, looking at no more than `maxlen` elements (0: all),
/// collecting up to `count` (0: all; absent: 1).
fn lpos_search(l: &List, ele: &[u8], o: &LposOpts) -> Vec<usize> {
    let len = l.len();
    let limit = if o.maxlen == 0 {
        len
    } else {
        o.maxlen.min(len)
    };
    // RANK LONG_MIN is taken as -1 by Redis 7.0 (its negation overflows).
    let skip = usize::try_from(o.rank.unsigned_abs().saturating_sub(1)).unwrap_or(usize::MAX);
    let skip = if o.rank == i64::MIN { 0 } else { skip };
    let want = match o.count {
        None => 1,
        Some(0) => usize::MAX,
        Some(c) => c,
    };
    let hits = |(_, v): &(usize, &SmallBytes)| &v[..] == ele;
    let found: Vec<usize> = if o.rank > 0 {
        let it = l.iter().enumerate().take(limit).filter(hits);
        it.skip(skip).take(want).map(|(i, _)| i).collect()
    } else {
        let it = l.iter().enumerate().rev().take(limit).filter(hits);
        it.skip(skip).take(want).map(|(i, _)| i).collect()
    };
    found
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]: options are checked before
/// the key. Without COUNT an index or the null; with COUNT an array.
pub(crate) fn lpos(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let o = lpos_opts(args)?;
    let now = cx.now_ms();
    let found = match cx.db().lookup_read(args.get(1), now) {
        Some(e) => lpos_search(as_list(e)?, args.get(2), &o),
        None => Vec::new(),
    };
    match (o.count, found.first()) {
        (None, Some(&i)) => out.int(i as i64),
        (None, None) => out.null(),
        (Some(_), _) => {
            out.array(found.len());
            found.iter().for_each(|&i| out.int(i as i64));
        }
    }
    Ok(())
}

/// LEFT (true) or RIGHT (false), else a syntax error.
pub(crate) fn parse_side(arg: &[u8]) -> Result<bool, Error> {
    if arg.eq_ignore_ascii_case(b"LEFT") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"RIGHT") {
        Ok(false)
    } else {
        Err(Error::Syntax)
    }
}

/// Moves one element from `src` (its head when `from_front`) to `dst` (its head when
/// `to_front`), creating `dst` and deleting an emptied `src`. `Ok(None)` when `src` is absent
/// (`dst` is not looked at then); WRONGTYPE for either, before anything moves. Signals `dst`.
pub(crate) fn move_one(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    from_front: bool,
    to_front: bool,
) -> Result<Option<SmallBytes>, Error> {
    let now = cx.now_ms();
    let db = cx.db();
    match db.lookup_write(src, now) {
        None => return Ok(None),
        Some(e) => as_list(e)?,
    };
    if let Some(e) = db.lookup_write(dst, now) {
        as_list(e)?;
    }
    let l = as_list_mut(db.lookup_write(src, now).expect("checked"))?;
    let v = pop(l, from_front).expect("stored lists are never empty");
    // Events as Redis sends them: the push, then the pop, then `del` of an emptied source.
    let mut deleted = false;
    if src == dst {
        // A rotation: the key, its TTL and metadata stay.
        push(l, v.clone(), to_front);
        emit(cx, nc::LIST, end_event(true, to_front), dst);
    } else {
        deleted = delete_if_empty(db, src, now);
        push_items(cx, dst, core::iter::once(&v[..]), to_front, false)?;
    }
    emit(cx, nc::LIST, end_event(false, from_front), src);
    if deleted {
        emptied(cx, src);
    }
    let dbi = cx.db_index;
    crate::blocking::signal_key_ready(cx, dbi, dst);
    Ok(Some(v))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub(crate) fn lmove(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (from, to) = (parse_side(args.get(3))?, parse_side(args.get(4))?);
    match move_one(cx, args.get(1), args.get(2), from, to)? {
        Some(v) => {
            cx.propagate_verbatim();
            out.bulk(&v);
        }
        None => out.null(),
    }
    Ok(())
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub(crate) fn rpoplpush(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    match move_one(cx, args.get(1), args.get(2), false, true)? {
        Some(v) => {
            cx.propagate_verbatim();
            out.bulk(&v);
        }
        None => out.null(),
    }
    Ok(())
}

/// LMPOP/BLMPOP arguments after the numkeys position.
pub(crate) struct Mpop {
    /// Index of the first key.
    pub first: usize,
    /// Number of keys.
    pub numkeys: usize,
    /// LEFT (true) or RIGHT.
    pub front: bool,
    /// COUNT (1 by default).
    pub count: usize,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT count]` starting at `at`, checked in Redis's order.
pub(crate) fn parse_mpop(args: &Argv<'_>, at: usize) -> Result<Mpop, Error> {
    let m = super::coll::parse_mpop(args, at, ["LEFT", "RIGHT"])?;
    Ok(Mpop {
        first: m.first,
        numkeys: m.numkeys,
        front: m.first_end,
        count: m.count,
    })
}

/// Pops from the first non-empty list among the keys: (key index, elements). WRONGTYPE for a
/// key of another type met before any list.
pub(crate) fn mpop_try(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    m: &Mpop,
) -> Result<Option<(usize, Vec<SmallBytes>)>, Error> {
    for i in m.first..m.first + m.numkeys {
        if let Some(items) = pop_items(cx, args.get(i), m.count, m.front)? {
            return Ok(Some((i, items)));
        }
    }
    Ok(None)
}

/// The `[key, [element...]]` reply of LMPOP and BLMPOP.
pub(crate) fn mpop_reply(out: &mut dyn ReplySink, key: &[u8], items: &[SmallBytes]) {
    out.array(2);
    out.bulk(key);
    bulk_array(out, items);
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: the null array when all are empty.
pub(crate) fn lmpop(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    match mpop_try(cx, args, &m)? {
        Some((i, items)) => {
            propagate_pop(cx, end_pop(m.front), args.get(i), Some(items.len()));
            mpop_reply(out, args.get(i), &items);
        }
        None => out.null_array(),
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_as_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 3)));
        assert_eq!(index_range(-100, 100, 3), Some((0, 3)));
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(-1, -2, 3), None);
        assert_eq!(index_range(5, 10, 3), None);
        assert_eq!(index_range(0, 0, 0), None);
        assert_eq!(index_range(i64::MIN, i64::MAX, 2), Some((0, 2)));
        assert_eq!(index(-1, 3), Some(2));
        assert_eq!(index(3, 3), None);
        assert_eq!(index(i64::MIN, 3), None);
    }

    #[test]
    fn lpos_search_ranks_counts_and_maxlen() {
        let l: List = ["a", "b", "a", "c", "a"]
            .iter()
            .map(|s| SmallBytes::from(*s))
            .collect();
        let o = |rank, count, maxlen| LposOpts {
            rank,
            count,
            maxlen,
        };
        assert_eq!(lpos_search(&l, b"a", &o(1, Some(0), 0)), [0, 2, 4]);
        assert_eq!(lpos_search(&l, b"a", &o(-1, Some(2), 0)), [4, 2]);
        assert_eq!(lpos_search(&l, b"a", &o(2, None, 3)), [2]);
        assert_eq!(lpos_search(&l, b"a", &o(i64::MIN, None, 0)), [4]);
        assert!(lpos_search(&l, b"a", &o(i64::MAX, None, 0)).is_empty());
        assert!(lpos_search(&l, b"c", &o(-1, None, 1)).is_empty());
    }
}

//! SORT and SORT_RO (Redis "generic" group) on lists, sets and sorted sets: numeric or ALPHA
//! order, ASC/DESC, LIMIT, BY pattern (`nosort` or any pattern without `*` skips sorting),
//! GET patterns (`#` = the element, `key_*->field` = a hash field) and STORE (SORT only).
//!
//! Order follows Redis 7.0.15: numeric ties are broken by the elements' bytes (so the result is
//! deterministic); ALPHA compares as C `strcoll` in the C locale (bytes up to a NUL) unless
//! storing, where whole byte strings compare. Like Redis, SORT converts a sorted set it
//! reads to the skiplist encoding. With `nosort`, lists and sorted sets keep their
//! order (reversed by DESC), sets their iteration order; a set sorted into STORE is sorted
//! ALPHA instead, as Redis does to keep replication deterministic.

use super::double::parse_sort_weight;
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::cmd::spec::CommandSpec;
use crate::command::{acl, flags};
use crate::error::{CmdResult, Error};
use crate::keyspec::{kf, FoundKey, InvalidKeyArgs, KeySpec};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::{Entry, List, Meta, Value, ValueRef};
use crate::Cx;
use alloc::vec::Vec;
use core::cmp::Ordering;
use kayvee_pds::SmallBytes;

const SORT_COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

/// SORT's key specs: the sorted key, then the BY/GET and STORE keys only [`sort_keys`] finds.
const SORT_KEYS: &[KeySpec] = &[
    KeySpec::range(kf::RO_ACCESS, 1, 0, 1),
    KeySpec::unknown(
        kf::RO_ACCESS,
        "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive \
         from the content of the key we sort",
    ),
    KeySpec::unknown(
        kf::OW_UPDATE,
        "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear \
         anywhere in the argument array",
    ),
];

/// SORT's keys for COMMAND GETKEYS, as Redis finds them: the sorted key, then the argument of
/// the last STORE that has one. The walk skips LIMIT's two arguments and GET's and BY's one,
/// so a STORE in those places is not a keyword.
fn sort_keys(args: &Argv<'_>) -> Result<Vec<FoundKey>, InvalidKeyArgs> {
    let mut keys = alloc::vec![FoundKey {
        index: 1,
        flags: kf::RO_ACCESS,
    }];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if a.eq_ignore_ascii_case(b"LIMIT") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"GET") || a.eq_ignore_ascii_case(b"BY") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"STORE") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    if let Some(index) = store {
        keys.push(FoundKey {
            index,
            flags: kf::OW_UPDATE,
        });
    }
    Ok(keys)
}

/// This group's commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sort",
        key_specs: SORT_KEYS,
        get_keys: Some(sort_keys),
        arity: -2,
        flags: flags::WRITE | flags::DENYOOM | flags::MOVABLEKEYS,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::WRITE | acl::SET | acl::SORTEDSET | acl::LIST | acl::SLOW | acl::DANGEROUS,
        summary: "Sort the elements in a list, set or sorted set",
        complexity: SORT_COMPLEXITY,
        handler: sort,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sort_ro",
        key_specs: &[SORT_KEYS[0], SORT_KEYS[1]],
        arity: -2,
        flags: flags::READONLY | flags::MOVABLEKEYS,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl: acl::READ | acl::SET | acl::SORTEDSET | acl::LIST | acl::SLOW | acl::DANGEROUS,
        summary: "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        since: "7.0.0",
        complexity: SORT_COMPLEXITY,
        handler: sort_ro,
        ..CommandSpec::DEFAULT
    },
];

/// SORT's options.
#[derive(Default)]
struct Opts<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    dontsort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// Parses the options after the key; STORE only when not read-only. BY with a pattern and GET
/// read keys no key spec names: they need a user who may read every key (`full_access`).
fn parse_opts<'a>(args: &Argv<'a>, readonly: bool, full_access: bool) -> Result<Opts<'a>, Error> {
    let denied = |option: &str| {
        Error::msg(alloc::format!(
            "ERR {option} option of SORT denied due to insufficient ACL permissions."
        ))
    };
    let mut o = Opts::default();
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        match args.get(j).to_ascii_uppercase().as_slice() {
            b"ASC" => o.desc = false,
            b"DESC" => o.desc = true,
            b"ALPHA" => o.alpha = true,
            b"LIMIT" if left >= 2 => {
                let start = parse_i64(args.get(j + 1)).ok_or(Error::NotInteger)?;
                let count = parse_i64(args.get(j + 2)).ok_or(Error::NotInteger)?;
                o.limit = Some((start, count));
                j += 2;
            }
            b"STORE" if left >= 1 && !readonly => {
                o.store = Some(args.get(j + 1));
                j += 1;
            }
            b"BY" if left >= 1 => {
                let p = args.get(j + 1);
                o.dontsort = !p.contains(&b'*');
                if !o.dontsort && !full_access {
                    return Err(denied("BY"));
                }
                o.by = Some(p);
                j += 1;
            }
            b"GET" if left >= 1 => {
                if !full_access {
                    return Err(denied("GET"));
                }
                o.gets.push(args.get(j + 1));
                j += 1;
            }
            _ => return Err(Error::Syntax),
        }
        j += 1;
    }
    Ok(o)
}

/// The kind of collection sorted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// The elements of the value at `key` in their natural order, or WRONGTYPE.
fn elements(cx: &mut Cx<'_>, key: &[u8]) -> Result<(Kind, Vec<SmallBytes>), Error> {
    let now = cx.now_ms();
    let Some(e) = cx.db().lookup_read(key, now) else {
        return Ok((Kind::List, Vec::new()));
    };
    let found = match e.value() {
        ValueRef::List(l) => (Kind::List, l.iter().map(SmallBytes::from_slice).collect()),
        ValueRef::Set(s) => (
            Kind::Set,
            s.iter().map(|m| SmallBytes::from_slice(&m)).collect(),
        ),
        ValueRef::ZSet(z) => (Kind::ZSet, z.iter().map(|e| e.1.to_small_bytes()).collect()),
        _ => return Err(Error::WrongType),
    };
    // Redis converts a sorted set to a skiplist before sorting it, for good.
    if found.0 == Kind::ZSet {
        if let Some(e) = cx.db().lookup_write(key, now) {
            e.meta_mut().set_flag(Meta::BIG, true);
        }
    }
    Ok(found)
}

/// Resolves a BY/GET pattern for one element, as Redis's `lookupKeyByPattern`: `#` is the
/// element; the first `*` is replaced by it; `->field` (non-empty) reads a hash field. A
/// pattern without `*`, a missing key or a key of the wrong type gives `None`.
fn lookup_pattern(cx: &mut Cx<'_>, pattern: &[u8], elem: &[u8]) -> Option<SmallBytes> {
    if pattern == b"#" {
        return Some(SmallBytes::from_slice(elem));
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after.windows(2).position(|w| w == b"->");
    let (tail, field) = match arrow {
        Some(a) if a + 2 < after.len() => (&after[..a], Some(&after[a + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(tail);
    let now = cx.now_ms();
    let entry: &Entry = cx.db().lookup_read(&key, now)?;
    match (entry.value(), field) {
        (ValueRef::Hash(h), Some(f)) => h.get(f).map(|v| v.with_contiguous(SmallBytes::from_slice)),
        (ValueRef::Str(s), None) => Some(SmallBytes::from_slice(s)),
        _ => None,
    }
}

/// One element with what it sorts by.
struct Item {
    elem: SmallBytes,
    score: f64,
    by: Option<SmallBytes>,
}

/// Bytes as C's `strcmp` sees them (up to the first NUL).
fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Redis's SORT comparison (before DESC is applied).
fn compare(a: &Item, b: &Item, o: &Opts<'_>) -> Ordering {
    let text = |x: &[u8], y: &[u8]| {
        if o.store.is_some() {
            x.cmp(y)
        } else {
            c_str(x).cmp(c_str(y))
        }
    };
    if !o.alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.elem.cmp(&b.elem));
    }
    if o.by.is_some() {
        match (&a.by, &b.by) {
            (None, None) => Ordering::Equal,
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            (Some(x), Some(y)) => text(x, y),
        }
    } else {
        text(&a.elem, &b.elem)
    }
}

/// Computes weights and sorts `elems` (stable, so equal items keep their order).
fn sort_items(
    cx: &mut Cx<'_>,
    elems: Vec<SmallBytes>,
    o: &Opts<'_>,
) -> Result<Vec<SmallBytes>, Error> {
    let mut items = Vec::with_capacity(elems.len());
    let mut bad = false;
    for elem in elems {
        let by = match o.by {
            Some(p) => lookup_pattern(cx, p, &elem),
            None => Some(elem.clone()),
        };
        let mut score = 0.0;
        if !o.alpha {
            if let Some(v) = &by {
                match parse_sort_weight(v) {
                    Some(s) => score = s,
                    None => bad = true,
                }
            }
        }
        items.push(Item { elem, score, by });
    }
    if bad {
        return Err(Error::msg(
            "ERR One or more scores can't be converted into double",
        ));
    }
    items.sort_by(|a, b| {
        let c = compare(a, b, o);
        if o.desc {
            c.reverse()
        } else {
            c
        }
    });
    Ok(items.into_iter().map(|i| i.elem).collect())
}

/// The `start..end` window LIMIT selects from `len` elements, as Redis clamps it.
fn limit_window(len: usize, limit: Option<(i64, i64)>) -> (usize, usize) {
    let len = len as i64;
    let (start, count) = limit.unwrap_or((0, -1));
    let mut start = start.max(0);
    let mut end = if count < 0 {
        len - 1
    } else {
        start.saturating_add(count) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    if end < start || start < 0 {
        return (0, 0);
    }
    (start as usize, end as usize + 1)
}

/// SORT / SORT_RO.
fn sort_generic(
    cx: &mut Cx<'_>,
    args: &Argv<'_>,
    out: &mut dyn ReplySink,
    readonly: bool,
) -> CmdResult {
    let user = &cx.clients.get(cx.me).expect("running client").user;
    let full_access = cx.core.acl.reads_all_keys(user);
    let mut o = parse_opts(args, readonly, full_access)?;
    let (kind, elems) = elements(cx, args.get(1))?;
    // A set's order is its table's: what is stored or handed to a script (and so to the
    // AOF and replicas) is sorted instead, as Redis does.
    if kind == Kind::Set && (o.store.is_some() || cx.core.script_running) && o.dontsort {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let ordered = if o.dontsort {
        let mut e = elems;
        if o.desc && kind != Kind::Set {
            e.reverse();
        }
        e
    } else {
        sort_items(cx, elems, &o)?
    };
    let (start, end) = limit_window(ordered.len(), o.limit);
    let window = &ordered[start..end];
    let mut results: Vec<Option<SmallBytes>> = Vec::new();
    for elem in window {
        if o.gets.is_empty() {
            results.push(Some(elem.clone()));
        }
        for g in &o.gets {
            results.push(lookup_pattern(cx, g, elem));
        }
    }
    match o.store {
        Some(dst) => store_list(cx, dst, results, out),
        None => {
            out.array(results.len());
            for r in &results {
                match r {
                    Some(b) => out.bulk(b),
                    None => out.null(),
                }
            }
        }
    }
    Ok(())
}

/// Stores the results as a list (missing GET values as empty strings); an empty result
/// deletes `dst`. Replies the stored length.
fn store_list(
    cx: &mut Cx<'_>,
    dst: &[u8],
    results: Vec<Option<SmallBytes>>,
    out: &mut dyn ReplySink,
) {
    let now = cx.now_ms();
    let n = results.len();
    if n == 0 {
        if cx.db().delete(dst) {
            cx.propagate_verbatim();
            emit(cx, nc::GENERIC, "del", dst);
        }
    } else {
        let fill = cx.core.config.list_max_listpack_size;
        let mut list = List::new();
        for r in results {
            list.push_back(&r.unwrap_or_default(), fill);
        }
        let entry = cx.db().new_entry(Value::List(list), now);
        cx.db().store_result(dst, entry, now);
        cx.propagate_verbatim();
        emit(cx, nc::LIST, "sortstore", dst);
        // A client blocked on `dst` (BLPOP...) is served from the stored list.
        let db = cx.db_index;
        crate::cmd::block::signal_key_ready(cx, db, dst);
    }
    out.int(n as i64);
}

fn sort(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    sort_generic(cx, args, out, false)
}

fn sort_ro(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    sort_generic(cx, args, out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_windows_clamp_like_redis() {
        assert_eq!(limit_window(4, None), (0, 4));
        assert_eq!(limit_window(4, Some((1, 2))), (1, 3));
        assert_eq!(limit_window(4, Some((-1, 2))), (0, 2));
        assert_eq!(limit_window(4, Some((10, 2))), (0, 0));
        assert_eq!(limit_window(4, Some((1, 0))), (0, 0));
        assert_eq!(limit_window(0, None), (0, 0));
    }

    #[test]
    fn numeric_ties_break_on_bytes_and_alpha_stops_at_nul() {
        let item = |e: &str, s: f64| Item {
            elem: SmallBytes::from(e),
            score: s,
            by: None,
        };
        let o = Opts::default();
        assert_eq!(
            compare(&item("10", 0.0), &item("2", 0.0), &o),
            Ordering::Less
        );
        let alpha = Opts {
            alpha: true,
            ..Opts::default()
        };
        assert_eq!(
            compare(&item("a\0x", 0.0), &item("a\0y", 0.0), &alpha),
            Ordering::Equal
        );
    }
}

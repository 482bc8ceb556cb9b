//! DEBUG HTSTATS <dbid> and DEBUG HTSTATS-KEY <key>: Redis 7.0's report on its hash tables
//! (`dictGetStats`), in its exact text.
//!
//! Kayvee has no chained hash tables: a database and a big set, hash or sorted set are hash
//! tries, which never rehash and hold each element in a slot of its own. The report says so in
//! Redis's terms: one table, never a "rehashing target", as many slots in use as elements,
//! chains of length 1, and as table size the power of two (at least 4) a Redis table holding
//! that many elements would have after its growth (docs/compatibility.md).

use super::no_such_key;
use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::ValueRef;
use crate::Cx;
use alloc::string::String;
use core::fmt::Write;

/// Redis's smallest table (`DICT_HT_INITIAL_SIZE`).
const TABLE_MIN: u64 = 4;

/// The size of a Redis table holding `elements` after its growth.
pub fn table_size(elements: u64) -> u64 {
    elements.next_power_of_two().max(TABLE_MIN)
}

/// One table's stats as Redis words them: `Hash table 0 stats (main hash table):` and its
/// lines, or the note for an empty one. `held`: the table's size when a background save or
/// rewrite started, while it runs: Redis does not grow a table then, unless it holds more than
/// five entries a slot (`dict_force_resize_ratio`).
fn table_stats(s: &mut String, elements: u64, held: Option<u64>) {
    s.push_str("Hash table 0 stats (main hash table):\n");
    if elements == 0 {
        s.push_str("No stats available for empty dictionaries\n");
        return;
    }
    let size = match held {
        Some(held) if elements / held.max(1) <= 5 => held.max(TABLE_MIN),
        _ => table_size(elements),
    };
    let _ = write!(
        s,
        " table size: {size}\n number of elements: {elements}\n different slots: {elements}\n \
         max chain length: 1\n avg chain length (counted): 1.00\n \
         avg chain length (computed): 1.00\n Chain length distribution:\n"
    );
    let pct = |n: u64| n as f64 * 100.0 / size as f64;
    if size > elements {
        let _ = writeln!(
            s,
            "   0: {} ({:.2}%)",
            size - elements,
            pct(size - elements)
        );
    }
    let _ = writeln!(s, "   1: {elements} ({:.2}%)", pct(elements));
}

/// DEBUG HTSTATS <dbid>: the keyspace's table and the expires' table.
pub fn htstats(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let db = crate::util::parse_i64(args.get(2)).ok_or(Error::NotInteger)?;
    let Some((i, db)) = usize::try_from(db)
        .ok()
        .and_then(|i| Some((i, cx.core.dbs.get(i)?)))
    else {
        return Err(Error::msg("ERR Out of range database"));
    };
    let p = &cx.core.persist;
    let child = p.bgsave_in_progress() || cx.core.aof.status.rewrite_started_ms.is_some();
    let held = p.child_tables.get(i).filter(|_| child);
    let mut s = String::from("[Dictionary HT]\n");
    table_stats(&mut s, db.keys.len() as u64, held.map(|h| h[0]));
    s.push_str("[Expires HT]\n");
    table_stats(&mut s, db.expires.len() as u64, held.map(|h| h[1]));
    out.verbatim("txt", s.as_bytes());
    Ok(())
}

/// DEBUG HTSTATS-KEY <key>: the table of a set, hash or sorted set held as one (encodings
/// `hashtable` and `skiplist`).
pub fn htstats_key(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let entry = cx.core.dbs[cx.db_index]
        .keys
        .get(args.get(2))
        .ok_or_else(no_such_key)?;
    let elements = match (entry.value(), entry.encoding()) {
        (ValueRef::Set(s), "hashtable") => s.len(),
        (ValueRef::Hash(h), "hashtable") => h.len(),
        (ValueRef::ZSet(z), "skiplist") => z.len(),
        _ => {
            return Err(Error::msg(
                "ERR The value stored at the specified key is not represented using an hash \
                 table",
            ))
        }
    };
    let mut s = String::new();
    table_stats(&mut s, elements as u64, None);
    out.verbatim("txt", s.as_bytes());
    Ok(())
}

//! DEBUG OBJECT, LISTPACK and QUICKLIST: a key's low-level description in Redis 7.0's shape,
//! `Value at:0x... refcount:N encoding:E serializedlength:N lru:N lru_seconds_idle:N` (and, for
//! lists, the `ql_*` fields of the quicklist Redis would have built). The address is a stable
//! stand-in derived from the database and key (Kayvee's values move), so it stays the same
//! while a value is changed in place, as Redis's does. The key is found without expiring it,
//! as Redis's dictionary lookup does.

use super::no_such_key;
use crate::argv::Argv;
use crate::config::Config;
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::value::{Entry, ValueRef};
use crate::Cx;

/// Redis's refcount of a shared object (small integers).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers 0..10000 (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;
/// Bytes of a DUMP payload around the value: type byte, RDB version (2), CRC-64 (8).
const DUMP_OVERHEAD: usize = 11;

/// The entry of `key` in the client's database, expired or not.
fn find<'a>(cx: &'a Cx<'_>, key: &[u8]) -> Option<&'a Entry> {
    cx.core.dbs[cx.db_index].keys.get(key)
}

/// The refcount Redis would report: shared small integers unless an LRU/LFU `maxmemory`
/// policy needs per-key objects.
fn refcount(entry: &Entry, config: &Config) -> i64 {
    let policy = config.maxmemory_policy.as_str();
    let sharing = config.maxmemory == 0 || !(policy.contains("lru") || policy.contains("lfu"));
    let small_int = entry.encoding() == "int"
        && matches!(entry.value(), ValueRef::Str(s)
            if crate::util::parse_i64(s).is_some_and(|v| (0..SHARED_INTEGERS).contains(&v)));
    if sharing && small_int {
        SHARED_REFCOUNT
    } else {
        1
    }
}

/// A stable stand-in address for (database, key): FNV-1a, shaped like a heap pointer.
fn address(db: usize, key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ db as u64;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    0x7f00_0000_0000 | (h & 0x00ff_ffff_fff0)
}

/// The quicklist Redis would build for a list: (nodes, listpack bytes in all).
fn quicklist_shape(list: &crate::value::List, config: &Config, plain_over: u64) -> (usize, usize) {
    let fill = config.list_max_listpack_size;
    let size_limit = match fill {
        f if f < 0 => 4096usize << ((-f - 1).min(4) as u32),
        _ => usize::MAX,
    };
    let count_limit = if fill > 0 { fill as usize } else { usize::MAX };
    let (mut nodes, mut total) = (0usize, 0usize);
    let (mut in_node, mut node_bytes) = (0usize, 0usize);
    for e in list.iter() {
        let len = e.len();
        if len as u64 >= plain_over {
            // A plain node of its own.
            if in_node > 0 {
                total += node_bytes;
                (in_node, node_bytes) = (0, 0);
            }
            nodes += 1;
            total += len;
            continue;
        }
        // A listpack entry: encoding header, data, back-length.
        let entry = len + if len < 64 { 2 } else { 4 } + 1;
        if in_node > 0 && (in_node + 1 > count_limit || node_bytes + entry > size_limit) {
            total += node_bytes;
            (in_node, node_bytes) = (0, 0);
        }
        if in_node == 0 {
            nodes += 1;
            // The listpack's header and end byte.
            node_bytes = 7;
        }
        in_node += 1;
        node_bytes += entry;
    }
    (nodes, total + node_bytes)
}

/// DEBUG OBJECT key.
pub(super) fn object(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let key = args.get(2);
    let entry = find(cx, key).ok_or_else(no_such_key)?;
    let config = &cx.core.config;
    let serialized = cx.core.persist.codec.map_or(0, |c| {
        c.dump(entry.value(), config.rdbcompression)
            .len()
            .saturating_sub(DUMP_OVERHEAD)
    });
    // The raw clock and the idle time read from it, whatever the policy (as Redis prints
    // them; under an LFU policy both are that clock misread).
    let lru = entry.meta().clock();
    let idle = entry.meta().idle_s(cx.now.ms());
    let mut text = alloc::format!(
        "Value at:{:#x} refcount:{} encoding:{} serializedlength:{serialized} lru:{lru} \
         lru_seconds_idle:{idle}",
        address(cx.db_index, key),
        refcount(entry, config),
        entry.encoding(),
    );
    if let ValueRef::List(list) = entry.value() {
        let threshold = cx.core.debug.quicklist_packed_threshold;
        let (nodes, bytes) = quicklist_shape(list, config, threshold);
        let avg = if nodes == 0 {
            0.0
        } else {
            list.len() as f64 / nodes as f64
        };
        text.push_str(&alloc::format!(
            " ql_nodes:{nodes} ql_avg_node:{avg:.2} ql_listpack_max:{} ql_compressed:{} \
             ql_uncompressed_size:{bytes}",
            config.list_max_listpack_size,
            u8::from(config.list_compress_depth != 0),
        ));
    }
    out.simple(&text);
    Ok(())
}

/// DEBUG LISTPACK key: Redis prints the listpack on its standard output; Kayvee has nothing
/// to print and answers as Redis does.
pub(super) fn listpack(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let entry = find(cx, args.get(2)).ok_or_else(no_such_key)?;
    if entry.encoding() != "listpack" {
        return Err(Error::msg("ERR Not a listpack encoded object."));
    }
    out.simple("Listpack structure printed on stdout");
    Ok(())
}

/// DEBUG QUICKLIST key [0|1]: as [`listpack`], for lists.
pub(super) fn quicklist(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let entry = find(cx, args.get(2)).ok_or_else(no_such_key)?;
    if !matches!(entry.value(), ValueRef::List(_)) {
        return Err(Error::msg("ERR Not a quicklist encoded object."));
    }
    out.simple("Quicklist structure printed on stdout");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quicklist_nodes_follow_the_fill_rules() {
        let mut list = crate::value::List::new();
        for _ in 0..3 {
            list.push_back(b"abc", crate::value::LIST_DEFAULT_FILL);
        }
        let mut c = Config::default();
        assert_eq!(quicklist_shape(&list, &c, 1 << 30).0, 1);
        c.list_max_listpack_size = 1;
        assert_eq!(quicklist_shape(&list, &c, 1 << 30).0, 3);
        c.list_max_listpack_size = -2;
        assert_eq!(quicklist_shape(&list, &c, 1).0, 3);
        assert_eq!(address(0, b"k"), address(0, b"k"));
        assert_ne!(address(0, b"k"), address(1, b"k"));
    }
}

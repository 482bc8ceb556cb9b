//! The ACL denial log (`ACL LOG`): newest first, similar denials within 60 seconds merged into
//! one entry with a count, at most `acllog-max-len` entries ([`LOG_LEN_MAX`] by default).

use crate::reply::ReplySink;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;

/// Entries kept.
pub const LOG_LEN_MAX: usize = 128;

/// Denials of the same kind closer than this merge into one entry (Redis's grouping window).
const GROUPING_MS: u64 = 60_000;
/// How many of the newest entries a new denial may merge into (Redis looks no further).
const MERGE_SCAN_MAX: usize = 10;

/// One entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// How many denials it stands for.
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    /// The command's full name, the key, the channel, or `AUTH`.
    pub object: Vec<u8>,
    /// The user.
    pub username: Vec<u8>,
    /// When it last happened (unix ms).
    pub ctime_ms: u64,
    /// The client's `CLIENT INFO` line at that time.
    pub client_info: String,
}

/// The log.
#[derive(Clone, Debug, Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    /// Records a denial, merging it into a similar one among the 10 newest entries (moved to
    /// the front), as Redis does; keeps the `len_max` newest (`acllog-max-len`).
    pub fn add(&mut self, e: Entry, len_max: usize) {
        let similar = self.entries.iter().take(MERGE_SCAN_MAX).position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && e.ctime_ms.saturating_sub(o.ctime_ms) < GROUPING_MS
        });
        let e = match similar.and_then(|i| self.entries.remove(i)) {
            Some(old) => Entry {
                count: old.count + 1,
                ..e
            },
            None => e,
        };
        self.entries.push_front(e);
        self.entries.truncate(len_max);
    }

    /// `ACL LOG RESET`.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `ACL LOG [count]`: the newest `count` entries as maps of seven fields.
    pub fn reply(&self, count: usize, now_ms: u64, out: &mut dyn ReplySink) {
        let shown = count.min(self.entries.len());
        out.array(shown);
        for e in self.entries.iter().take(shown) {
            out.map(7);
            out.bulk(b"count");
            out.int(e.count as i64);
            out.bulk(b"reason");
            out.bulk(e.reason.as_bytes());
            out.bulk(b"context");
            out.bulk(e.context.as_bytes());
            out.bulk(b"object");
            out.bulk(&e.object);
            out.bulk(b"username");
            out.bulk(&e.username);
            out.bulk(b"age-seconds");
            out.double(now_ms.saturating_sub(e.ctime_ms) as f64 / 1000.0);
            out.bulk(b"client-info");
            out.bulk(e.client_info.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &[u8], at: u64) -> Entry {
        Entry {
            count: 1,
            reason: "key",
            context: "toplevel",
            object: object.to_vec(),
            username: b"u".to_vec(),
            ctime_ms: at,
            client_info: String::new(),
        }
    }

    #[test]
    fn similar_entries_merge_within_a_minute() {
        let mut log = AclLog::default();
        log.add(entry(b"a", 0), LOG_LEN_MAX);
        log.add(entry(b"b", 1), LOG_LEN_MAX);
        log.add(entry(b"a", 2), LOG_LEN_MAX);
        assert_eq!(log.len(), 2);
        assert_eq!(log.entries[0].object, b"a");
        assert_eq!(log.entries[0].count, 2);
        log.add(entry(b"a", 70_000), LOG_LEN_MAX);
        assert_eq!(log.len(), 3);
        // Only the 10 newest entries are candidates for merging.
        for i in 0..10 {
            log.add(
                entry(alloc::format!("f{i}").as_bytes(), 70_000),
                LOG_LEN_MAX,
            );
        }
        log.add(entry(b"a", 70_001), LOG_LEN_MAX);
        assert_eq!(log.len(), 14);
        for i in 0..200 {
            log.add(entry(alloc::format!("k{i}").as_bytes(), 0), LOG_LEN_MAX);
        }
        assert_eq!(log.len(), LOG_LEN_MAX);
    }
}

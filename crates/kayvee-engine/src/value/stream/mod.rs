//! Streams (Redis 7.0's stream type): entries in listpack nodes kept in a persistent ordered
//! set by master ID (the role of Redis's radix tree), plus the counters 7.0 reports and the
//! consumer groups with their pending entries lists.
//!
//! Cloning a [`Stream`] is O(groups): the node set and every PEL are persistent structures and
//! the node bytes are shared until written, so a snapshot never copies entries.

pub mod listpack;
mod node;

pub use listpack::Val;
pub use node::{Node, RawEntry};

use alloc::vec::Vec;
use core::fmt;
use kayvee_pds::{POrdSet, SmallBytes};

/// A stream ID: milliseconds and sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Unix milliseconds (or anything the client chose).
    pub ms: u64,
    /// Sequence within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// The smallest ID.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// A new ID.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// Whether this is `0-0`.
    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The next ID, `None` after the largest.
    pub fn incr(&self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, `None` before the smallest.
    pub fn decr(&self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// The 16 bytes Redis files a node under: ms then seq, big-endian.
    pub fn to_be_bytes(&self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The ID from its 16 big-endian bytes.
    pub fn from_be_bytes(b: &[u8; 16]) -> Self {
        let mut ms = [0; 8];
        let mut seq = [0; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
    }
}

impl StreamId {
    /// The ID as text (`ms-seq`), written into `buf` without allocating.
    pub fn write_text<'b>(&self, buf: &'b mut [u8; 41]) -> &'b [u8] {
        /// Writes `n` in decimal ending just before `end`; returns where it starts.
        fn put(mut n: u64, buf: &mut [u8; 41], mut end: usize) -> usize {
            loop {
                end -= 1;
                buf[end] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    return end;
                }
            }
        }
        let i = put(self.seq, buf, buf.len()) - 1;
        buf[i] = b'-';
        let i = put(self.ms, buf, i);
        &buf[i..]
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An entry owned: ID and field, value, field, value...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedEntry {
    /// Its ID.
    pub id: StreamId,
    /// Field, value, ...
    pub fields: Vec<Vec<u8>>,
}

impl From<&RawEntry<'_>> for OwnedEntry {
    fn from(e: &RawEntry<'_>) -> Self {
        OwnedEntry {
            id: e.id,
            fields: e.fields.iter().map(|v| v.to_vec()).collect(),
        }
    }
}

/// The "entries read" value that means "not known" (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A pending entry: delivered to `consumer` and not yet acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The entry's ID.
    pub id: StreamId,
    /// Who owns it.
    pub consumer: SmallBytes,
    /// When it was last delivered (unix ms).
    pub delivery_ms: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.id.cmp(&other.id)
    }
}

impl Pending {
    /// A probe for lookups by ID.
    pub fn probe(id: StreamId) -> Self {
        Pending {
            id,
            consumer: SmallBytes::default(),
            delivery_ms: 0,
            delivery_count: 0,
        }
    }
}

/// A consumer of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    /// Its name.
    pub name: SmallBytes,
    /// When it was last seen (unix ms).
    pub seen_ms: u64,
    /// The IDs pending for it.
    pub pel: POrdSet<StreamId>,
}

impl Consumer {
    /// A new consumer seen at `now_ms`.
    pub fn new(name: &[u8], now_ms: u64) -> Self {
        Consumer {
            name: SmallBytes::from_slice(name),
            seen_ms: now_ms,
            pel: POrdSet::new(),
        }
    }
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Its name.
    pub name: SmallBytes,
    /// The last ID delivered to one of its consumers.
    pub last_id: StreamId,
    /// The logical read counter (7.0), [`ENTRIES_READ_INVALID`] when not known.
    pub entries_read: i64,
    /// Every pending entry of the group.
    pub pel: POrdSet<Pending>,
    /// Its consumers, by name.
    pub consumers: Vec<Consumer>,
}

impl Group {
    /// A new group.
    pub fn new(name: &[u8], last_id: StreamId, entries_read: i64) -> Self {
        Group {
            name: SmallBytes::from_slice(name),
            last_id,
            entries_read,
            pel: POrdSet::new(),
            consumers: Vec::new(),
        }
    }

    /// The position of consumer `name`.
    pub fn consumer_pos(&self, name: &[u8]) -> Result<usize, usize> {
        self.consumers
            .binary_search_by(|c| c.name.as_ref().cmp(name))
    }

    /// Consumer `name`.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumer_pos(name).ok().map(|i| &self.consumers[i])
    }

    /// Consumer `name`, mutable.
    pub fn consumer_mut(&mut self, name: &[u8]) -> Option<&mut Consumer> {
        self.consumer_pos(name).ok().map(|i| &mut self.consumers[i])
    }

    /// Consumer `name`, created (seen at `now_ms`) when missing; the flag says it was created.
    pub fn consumer_or_create(&mut self, name: &[u8], now_ms: u64) -> (&mut Consumer, bool) {
        match self.consumer_pos(name) {
            Ok(i) => (&mut self.consumers[i], false),
            Err(i) => {
                self.consumers.insert(i, Consumer::new(name, now_ms));
                (&mut self.consumers[i], true)
            }
        }
    }

    /// Records the delivery of `id` to `consumer` (which exists): a new pending entry, or the
    /// entry taken from its previous owner with its counter restarted. Returns the entry.
    pub fn deliver(&mut self, consumer: &[u8], id: StreamId, now_ms: u64) -> Pending {
        self.ack(id);
        let p = Pending {
            id,
            consumer: SmallBytes::from_slice(consumer),
            delivery_ms: now_ms,
            delivery_count: 1,
        };
        self.pel.insert(p.clone());
        if let Some(c) = self.consumer_mut(consumer) {
            c.pel.insert(id);
        }
        p
    }

    /// Updates pending entry `id` in place with `f`; returns the entry after.
    pub fn update_pending(
        &mut self,
        id: StreamId,
        f: impl FnOnce(&mut Pending),
    ) -> Option<Pending> {
        let mut p = self.pel.take(&Pending::probe(id))?;
        f(&mut p);
        self.pel.insert(p.clone());
        Some(p)
    }

    /// Removes `id` from the group's PEL and its consumer's; returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.take(&Pending::probe(id)) else {
            return false;
        };
        if let Some(c) = self.consumer_mut(&p.consumer) {
            c.pel.remove(&id);
        }
        true
    }
}

/// How a trim decides what goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop the entries below this ID.
    MinId(StreamId),
}

/// A stream.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Stream {
    nodes: POrdSet<Node>,
    /// Live entries.
    pub length: u64,
    /// The greatest ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID (`0-0` when there is none; 7.0's recorded-first-entry-id).
    pub first_id: StreamId,
    /// The greatest ID ever deleted (7.0).
    pub max_deleted: StreamId,
    /// How many entries were ever added (7.0).
    pub entries_added: u64,
    /// Consumer groups, by name.
    pub groups: Vec<Group>,
    /// Whether some node's listpack is not a well-formed stream node: a DUMP payload restored
    /// without deep sanitization (`sanitize-dump-payload no`), whose nodes passed only the
    /// header checks Redis makes then. The node methods index the bytes unchecked, so such a
    /// stream's entries are never read: its commands answer [`super::CORRUPT_VALUE`], and only what
    /// does not look inside the nodes (DUMP, saving, deleting, renaming) works on it.
    pub corrupt: bool,
}

impl Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Stream::default()
    }

    /// Number of nodes (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes Redis's radix tree would have for these master IDs (XINFO's
    /// radix-tree-nodes): in a compressed trie of equal-length keys, the root, every branching
    /// prefix, the prefix after each branch and each key.
    pub fn rax_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self.nodes.iter().map(|n| n.master.to_be_bytes()).collect();
        let mut prefixes: alloc::collections::BTreeSet<&[u8]> = alloc::collections::BTreeSet::new();
        prefixes.insert(&[]);
        for k in &keys {
            prefixes.insert(&k[..]);
        }
        for w in keys.windows(2) {
            let l = w[0].iter().zip(&w[1]).take_while(|(a, b)| a == b).count();
            prefixes.insert(&w[0][..l]);
            prefixes.insert(&w[0][..l + 1]);
            prefixes.insert(&w[1][..l + 1]);
        }
        prefixes.len()
    }

    /// The nodes, by master ID.
    pub fn nodes(&self) -> impl DoubleEndedIterator<Item = &Node> + '_ {
        self.nodes.iter()
    }

    /// Adds a node as loaded (RDB, RESTORE); counters are the caller's.
    pub fn push_node(&mut self, node: Node) {
        self.nodes.insert(node);
    }

    /// Appends entry `id` (greater than `last_id`), starting a new node when the last one has
    /// `max_entries` entries (deleted ones included; 0: no limit) or would reach `max_bytes`.
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]], max_bytes: u64, max_entries: u64) {
        let payload: u64 = fields.iter().map(|f| f.len() as u64).sum();
        let max_bytes = if max_bytes == 0 || max_bytes > 1 << 30 {
            1 << 30
        } else {
            max_bytes
        };
        let full = match self.nodes.last() {
            None => true,
            Some(n) => {
                n.bytes() as u64 + payload >= max_bytes
                    || (max_entries != 0 && n.count() + n.deleted() >= max_entries)
            }
        };
        if full {
            // The last node is closed: give back its listpack's spare room (it grew by doubling).
            if let Some(mut last) = self.nodes.pop_last() {
                last.seal();
                self.nodes.insert(last);
            }
            self.nodes.insert(Node::new(id, fields));
        } else {
            let mut n = self.nodes.pop_last().expect("a last node");
            n.append(id, fields);
            self.nodes.insert(n);
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// Rank of the node that may hold `id` (the last whose master is not above it).
    fn node_rank(&self, id: StreamId) -> usize {
        self.nodes
            .partition_point(|n| n.master <= id)
            .saturating_sub(1)
    }

    /// Calls `f` on the live entries with IDs in `start..=end`, ascending (or descending when
    /// `rev`), until it returns false.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(&RawEntry<'_>) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            for node in self.nodes.iter_from(self.node_rank(start)) {
                if node.master > end {
                    return;
                }
                let mut entries = node.iter();
                entries.seek(start);
                for e in entries {
                    // As Redis's iterator: deleted entries (and any out of order) are passed.
                    if e.deleted || e.id < start {
                        continue;
                    }
                    if e.id > end || !f(&e) {
                        return;
                    }
                }
            }
        } else {
            let upto = self.nodes.partition_point(|n| n.master <= end);
            for node in self.nodes.range_by_rank(0, upto).rev() {
                for (id, deleted, at) in node.heads().into_iter().rev() {
                    if deleted || id > end {
                        continue;
                    }
                    if id < start || !f(&node.entry_at(at)) {
                        return;
                    }
                }
            }
        }
    }

    /// Up to `count` live entries in `start..=end` (0: all), owned.
    pub fn collect(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Vec<OwnedEntry> {
        let mut out = Vec::new();
        self.range(start, end, rev, |e| {
            out.push(OwnedEntry::from(e));
            count == 0 || out.len() < count
        });
        out
    }

    /// The live entry `id`.
    pub fn get(&self, id: StreamId) -> Option<OwnedEntry> {
        self.collect(id, id, false, 1).pop()
    }

    /// The first live entry.
    pub fn first_entry(&self) -> Option<OwnedEntry> {
        self.collect(StreamId::MIN, StreamId::MAX, false, 1).pop()
    }

    /// The ID of the last live entry, without reading its fields.
    pub fn last_live_id(&self) -> Option<StreamId> {
        self.nodes.last()?.last_live_id()
    }

    /// The last live entry.
    pub fn last_entry(&self) -> Option<OwnedEntry> {
        self.collect(StreamId::MIN, StreamId::MAX, true, 1).pop()
    }

    /// Recomputes `first_id` after entries went away.
    fn refresh_first_id(&mut self) {
        self.first_id = self.first_entry().map_or(StreamId::MIN, |e| e.id);
    }

    /// Deletes live entry `id`; returns whether it existed. Updates `max_deleted` but not
    /// `first_id` (see [`Stream::deleted_done`]).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let rank = self.node_rank(id);
        let Some(node) = self.nodes.nth(rank) else {
            return false;
        };
        let mut entries = node.iter();
        entries.seek(id);
        let Some(at) = entries
            .next()
            .filter(|e| e.id == id && !e.deleted)
            .map(|e| e.flags_at)
        else {
            return false;
        };
        let mut node = self.nodes.remove_nth(rank).expect("node of rank");
        if node.count() > 1 {
            node.mark_deleted(at);
            self.nodes.insert(node);
        }
        self.length -= 1;
        if id > self.max_deleted {
            self.max_deleted = id;
        }
        true
    }

    /// After deletions: recomputes the first entry's ID.
    pub fn deleted_done(&mut self) {
        self.refresh_first_id();
    }

    /// Trims as XTRIM/XADD do: whole nodes first; with `approx`, stops at the first node it
    /// cannot drop whole (or when dropping it would pass `limit` entries, 0 = no limit);
    /// otherwise marks the remaining entries deleted one by one. Returns how many went.
    pub fn trim(&mut self, strategy: TrimStrategy, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        while let Some(node) = self.nodes.first() {
            let entries = node.count();
            let whole = match strategy {
                TrimStrategy::MaxLen(max) => self.length - entries >= max,
                TrimStrategy::MinId(min) => node.last_id() < min,
            };
            if whole {
                if limit != 0 && removed + entries > limit {
                    break;
                }
                self.nodes.pop_first();
                self.length -= entries;
                removed += entries;
                continue;
            }
            if approx {
                break;
            }
            removed += self.trim_inside_first(strategy);
            break;
        }
        if removed > 0 {
            self.refresh_first_id();
        }
        removed
    }

    /// Exact trimming inside the first node: marks entries deleted while the strategy wants.
    fn trim_inside_first(&mut self, strategy: TrimStrategy) -> u64 {
        let mut node = self.nodes.pop_first().expect("a first node");
        // As Redis, every entry in order, deleted ones included: MINID stops at the first
        // entry not below it even if deleted (after XSETID, a deleted entry may precede
        // smaller live ones).
        let targets: Vec<(StreamId, bool)> =
            node.entries().iter().map(|e| (e.id, e.deleted)).collect();
        let mut removed = 0;
        for (id, deleted) in &targets {
            let go = match strategy {
                TrimStrategy::MaxLen(max) => self.length > max,
                TrimStrategy::MinId(min) => *id < min,
            };
            if !go {
                break;
            }
            if *deleted {
                continue;
            }
            // Offsets move as counters change size: find the entry again.
            let at = node
                .entries()
                .iter()
                .find(|e| e.id == *id && !e.deleted)
                .map(|e| e.flags_at)
                .expect("entry present");
            node.mark_deleted(at);
            self.length -= 1;
            removed += 1;
        }
        if node.count() > 0 {
            self.nodes.insert(node);
        }
        removed
    }

    /// The position of group `name`.
    pub fn group_pos(&self, name: &[u8]) -> Result<usize, usize> {
        self.groups.binary_search_by(|g| g.name.as_ref().cmp(name))
    }

    /// Group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.group_pos(name).ok().map(|i| &self.groups[i])
    }

    /// Group `name`, mutable.
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.group_pos(name).ok().map(|i| &mut self.groups[i])
    }

    /// Moves group `gi` past `id` (when above its last ID), keeping its read counter as 7.0
    /// does: one more while it is valid and no tombstone lies ahead, else estimated.
    pub fn advance_group(&mut self, gi: usize, id: StreamId) -> bool {
        let g = &self.groups[gi];
        if id <= g.last_id {
            return false;
        }
        let read = if g.entries_read != ENTRIES_READ_INVALID
            && !self.range_has_tombstones(id, StreamId::MAX)
        {
            g.entries_read + 1
        } else if self.entries_added > 0 {
            self.estimate_distance(id)
        } else {
            g.entries_read
        };
        let g = &mut self.groups[gi];
        g.entries_read = read;
        g.last_id = id;
        true
    }

    /// Whether any live entry has an ID in `start..=end` that was deleted: 7.0's test for
    /// "tombstones" (the greatest deleted ID lies in the range and not before the first entry:
    /// deletions that the stream has since trimmed past leave no gap).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted.is_zero() || self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// 7.0's estimate of how many entries precede and include `id` since the first ever,
    /// [`ENTRIES_READ_INVALID`] when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        match id.cmp(&self.last_id) {
            core::cmp::Ordering::Equal => return self.entries_added as i64,
            core::cmp::Ordering::Greater => return ENTRIES_READ_INVALID,
            core::cmp::Ordering::Less => {}
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            let base = (self.entries_added - self.length) as i64;
            match id.cmp(&self.first_id) {
                core::cmp::Ordering::Less => return base,
                core::cmp::Ordering::Equal => return base + 1,
                core::cmp::Ordering::Greater => {}
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag (7.0's XINFO field), `None` when it cannot be known.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }

    /// Heap bytes used (MEMORY USAGE): nodes, tree and groups.
    pub fn heap_size(&self) -> usize {
        let nodes: usize = self.nodes.iter().map(|n| n.lp.capacity() + 16).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|g| {
                g.pel.heap_size()
                    + g.pel.len() * 8
                    + g.consumers
                        .iter()
                        .map(|c| c.pel.heap_size() + c.name.len() + 48)
                        .sum::<usize>()
                    + g.name.len()
                    + 64
            })
            .sum();
        nodes + self.nodes.heap_size() + groups + core::mem::size_of::<Stream>()
    }

    /// Panics when a node or a counter is inconsistent.
    pub fn check_invariants(&self) {
        self.nodes.check_invariants();
        let mut live = 0;
        let mut prev: Option<StreamId> = None;
        for n in self.nodes.iter() {
            n.check_invariants();
            live += n.count();
            let entries = n.entries();
            if let Some(p) = prev {
                assert!(entries[0].id > p, "nodes overlap");
            }
            prev = entries.last().map(|e| e.id);
        }
        assert_eq!(live, self.length, "length");
        assert_eq!(
            self.last_live_id(),
            self.last_entry().map(|e| e.id),
            "last live id"
        );
        if let Some(p) = prev {
            assert!(p <= self.last_id, "an entry above last_id");
        }
        for g in &self.groups {
            let owned: usize = g.consumers.iter().map(|c| c.pel.len()).sum();
            assert_eq!(owned, g.pel.len(), "consumer PELs cover the group's");
            for p in g.pel.iter() {
                let c = g.consumer(&p.consumer).expect("owner exists");
                assert!(c.pel.contains(&p.id), "owner holds the id");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StreamId;
    use alloc::string::ToString;

    #[test]
    fn id_text_matches_display() {
        for (ms, seq) in [
            (0, 0),
            (1, 0),
            (0, 1),
            (10, 99),
            (u64::MAX, u64::MAX),
            (1_700_000_000_123, 7),
        ] {
            let id = StreamId { ms, seq };
            assert_eq!(id.write_text(&mut [0; 41]), id.to_string().as_bytes());
        }
    }
}

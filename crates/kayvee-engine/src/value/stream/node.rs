//! One stream node: a listpack of entries sharing a master entry, laid out as Redis 7.0 lays
//! out its stream listpacks (so RDB files and DUMP payloads carry the bytes unchanged).
//!
//! Elements: the master entry `count deleted num-fields field... 0`, then per entry `flags
//! ms-diff seq-diff` followed by `num-fields field value ...` (or, when its fields are the
//! master's in order, flag SAMEFIELDS and the values only), then `lp-count`, the number of
//! elements of the entry before it. IDs are stored as differences from the node's master ID.

use super::listpack::{self as lp, Val};
use super::StreamId;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// The entry was deleted (XDEL, exact trimming) but its node still holds it.
pub const FLAG_DELETED: i64 = 1;
/// The entry's fields are the master entry's.
pub const FLAG_SAMEFIELDS: i64 = 2;

/// A node: its master ID (the key Redis files it under in its radix tree) and its listpack,
/// shared with snapshots until written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The ID of the first entry ever added to the node.
    pub master: StreamId,
    /// The listpack bytes.
    pub lp: Arc<Vec<u8>>,
}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Node {
    fn cmp(&self, other: &Self) -> Ordering {
        self.master.cmp(&other.master)
    }
}

/// One entry as read from a node.
#[derive(Debug)]
pub struct RawEntry<'a> {
    /// Its ID.
    pub id: StreamId,
    /// Whether it is marked deleted.
    pub deleted: bool,
    /// Byte offset of its flags element.
    pub flags_at: usize,
    /// Field, value, field, value...
    pub fields: Vec<Val<'a>>,
}

/// The entries of a node, decoded as they are read ([`Node::iter`]).
pub struct Entries<'a> {
    node: &'a Node,
    /// The master entry's fields (empty when only heads are read).
    master: Vec<Val<'a>>,
    /// How many fields the master entry has.
    master_len: usize,
    /// Offset of the next entry's flags.
    at: usize,
}

impl<'a> Entries<'a> {
    /// Reads the next entry's flags and ID (leaving `at` at its fields), or `None` at the end.
    fn head(&mut self) -> Option<(i64, StreamId, usize)> {
        let b: &'a [u8] = &self.node.lp;
        if lp::at_end(b, self.at) {
            return None;
        }
        let flags_at = self.at;
        let flags = lp::next(b, &mut self.at).int();
        let ms = lp::next(b, &mut self.at).int() as u64;
        let seq = lp::next(b, &mut self.at).int() as u64;
        let id = StreamId {
            ms: self.node.master.ms.wrapping_add(ms),
            seq: self.node.master.seq.wrapping_add(seq),
        };
        Some((flags, id, flags_at))
    }

    /// Moves past the fields of the entry whose head was just read.
    fn skip_fields(&mut self, flags: i64) {
        let b: &'a [u8] = &self.node.lp;
        let n = if flags & FLAG_SAMEFIELDS != 0 {
            self.master_len
        } else {
            2 * lp::next(b, &mut self.at).int() as usize
        };
        for _ in 0..=n {
            lp::next(b, &mut self.at); // the values (or fields and values), then lp-count
        }
    }

    /// Skips the entries with IDs below `id`, and deleted ones, without decoding their fields.
    /// Live entries are in ID order but deleted ones need not be: after XSETID lowers the last
    /// ID below a deleted entry's, later entries follow it with smaller IDs (a reader must not
    /// stop at it).
    pub fn seek(&mut self, id: StreamId) {
        loop {
            let before = self.at;
            match self.head() {
                Some((flags, eid, _)) if eid < id || flags & FLAG_DELETED != 0 => {
                    self.skip_fields(flags)
                }
                Some(_) => {
                    self.at = before;
                    return;
                }
                None => return,
            }
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = RawEntry<'a>;

    fn next(&mut self) -> Option<RawEntry<'a>> {
        let (flags, id, flags_at) = self.head()?;
        let b: &'a [u8] = &self.node.lp;
        let mut fields = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            fields.reserve_exact(2 * self.master.len());
            for f in &self.master {
                fields.push(*f);
                fields.push(lp::next(b, &mut self.at));
            }
        } else {
            let nf = lp::next(b, &mut self.at).int() as usize;
            fields.reserve_exact(2 * nf);
            for _ in 0..2 * nf {
                fields.push(lp::next(b, &mut self.at));
            }
        }
        lp::next(b, &mut self.at); // lp-count
        Some(RawEntry {
            id,
            deleted: flags & FLAG_DELETED != 0,
            flags_at,
            fields,
        })
    }
}

impl Node {
    /// A node whose first entry is `id` with `fields` (field, value, ...).
    pub fn new(id: StreamId, fields: &[&[u8]]) -> Node {
        let mut bytes = lp::new();
        let nf = fields.len() / 2;
        let mut master: Vec<Val<'_>> = alloc::vec![Val::Int(0), Val::Int(0), Val::Int(nf as i64)];
        master.extend(fields.iter().step_by(2).map(|f| Val::Str(f)));
        master.push(Val::Int(0));
        lp::append(&mut bytes, &master);
        let mut node = Node {
            master: id,
            lp: Arc::new(bytes),
        };
        node.append(id, fields);
        node
    }

    /// A node from listpack bytes (RDB, RESTORE).
    pub fn from_bytes(master: StreamId, bytes: Vec<u8>) -> Node {
        Node {
            master,
            lp: Arc::new(bytes),
        }
    }

    /// Gives back the listpack's spare capacity when no snapshot shares it (a node no longer
    /// appended to).
    pub fn seal(&mut self) {
        if let Some(bytes) = Arc::get_mut(&mut self.lp) {
            bytes.shrink_to_fit();
        }
    }

    /// Live entries.
    pub fn count(&self) -> u64 {
        let mut at = lp::HEADER;
        lp::next(&self.lp, &mut at).int() as u64
    }

    /// Entries marked deleted.
    pub fn deleted(&self) -> u64 {
        let mut at = lp::HEADER;
        lp::next(&self.lp, &mut at);
        lp::next(&self.lp, &mut at).int() as u64
    }

    /// Listpack size in bytes.
    pub fn bytes(&self) -> usize {
        self.lp.len()
    }

    /// The master fields and the offset of the first entry.
    fn master_fields(&self) -> (Vec<Val<'_>>, usize) {
        let b: &[u8] = &self.lp;
        let mut at = lp::HEADER;
        lp::next(b, &mut at);
        lp::next(b, &mut at);
        let nf = lp::next(b, &mut at).int() as usize;
        let fields = (0..nf).map(|_| lp::next(b, &mut at)).collect();
        lp::next(b, &mut at); // the master terminator
        (fields, at)
    }

    /// Appends entry `id` (greater than every ID in the node).
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]]) {
        let (master, _) = self.master_fields();
        let nf = fields.len() / 2;
        let same = master.len() == nf
            && master
                .iter()
                .zip(fields.iter().step_by(2))
                .all(|(m, f)| m.eq_bytes(f));
        let ms = id.ms.wrapping_sub(self.master.ms) as i64;
        let seq = id.seq.wrapping_sub(self.master.seq) as i64;
        let mut vals: Vec<Val<'_>> = Vec::with_capacity(fields.len() + 5);
        let flags = if same { FLAG_SAMEFIELDS } else { 0 };
        vals.extend([Val::Int(flags), Val::Int(ms), Val::Int(seq)]);
        if same {
            vals.extend(fields.iter().skip(1).step_by(2).map(|v| Val::Str(v)));
            vals.push(Val::Int(nf as i64 + 3));
        } else {
            vals.push(Val::Int(nf as i64));
            vals.extend(fields.iter().map(|v| Val::Str(v)));
            vals.push(Val::Int(2 * nf as i64 + 4));
        }
        let count = self.count() as i64;
        let bytes = Arc::make_mut(&mut self.lp);
        lp::append(bytes, &vals);
        lp::replace(bytes, lp::HEADER, Val::Int(count + 1));
    }

    /// Every entry, deleted ones included, in ID order.
    pub fn entries(&self) -> Vec<RawEntry<'_>> {
        self.iter().collect()
    }

    /// The entries, deleted ones included, in ID order, read one at a time.
    pub fn iter(&self) -> Entries<'_> {
        let (master, at) = self.master_fields();
        Entries {
            node: self,
            master_len: master.len(),
            master,
            at,
        }
    }

    /// The entry whose flags are at `flags_at` (an offset [`Node::heads`] gave).
    pub fn entry_at(&self, flags_at: usize) -> RawEntry<'_> {
        let (master, _) = self.master_fields();
        let mut it = Entries {
            node: self,
            master_len: master.len(),
            master,
            at: flags_at,
        };
        it.next().expect("an entry at the offset")
    }

    /// Every entry's (ID, deleted, flags offset) in ID order, without decoding fields.
    pub fn heads(&self) -> Vec<(StreamId, bool, usize)> {
        let mut it = Entries {
            node: self,
            master: Vec::new(),
            master_len: 0,
            at: 0,
        };
        let b: &[u8] = &self.lp;
        let mut at = lp::HEADER;
        lp::next(b, &mut at);
        lp::next(b, &mut at);
        let nf = lp::next(b, &mut at).int() as usize;
        for _ in 0..=nf {
            lp::next(b, &mut at); // the master fields and terminator
        }
        it.at = at;
        it.master_len = nf;
        let mut out = Vec::with_capacity(self.count() as usize + self.deleted() as usize);
        while let Some((flags, id, flags_at)) = it.head() {
            it.skip_fields(flags);
            out.push((id, flags & FLAG_DELETED != 0, flags_at));
        }
        out
    }

    /// The ID of the last live entry (a kept node always has one).
    pub fn last_live_id(&self) -> Option<StreamId> {
        let heads = self.heads();
        heads.iter().rev().find(|h| !h.1).map(|h| h.0)
    }

    /// The ID of the last entry (deleted or not).
    pub fn last_id(&self) -> StreamId {
        self.entries().last().map_or(self.master, |e| e.id)
    }

    /// Marks the entry whose flags are at `flags_at` deleted and updates the counters.
    pub fn mark_deleted(&mut self, flags_at: usize) {
        let (count, deleted) = (self.count() as i64, self.deleted() as i64);
        let bytes = Arc::make_mut(&mut self.lp);
        let mut at = flags_at;
        let flags = lp::next(bytes, &mut at).int();
        lp::replace(bytes, flags_at, Val::Int(flags | FLAG_DELETED));
        // The deleted counter first: the count's new size would move it.
        let mut at = lp::HEADER;
        lp::next(bytes, &mut at);
        lp::replace(bytes, at, Val::Int(deleted + 1));
        lp::replace(bytes, lp::HEADER, Val::Int(count - 1));
    }

    /// Whether the bytes (from an RDB file or a DUMP payload) are a well-formed node: a valid
    /// listpack holding a master entry and whole entries, with counters that agree with the
    /// flags, IDs ascending from the master, at least one live entry. Only a well-formed node
    /// may be read by the other methods (they index the bytes unchecked).
    pub fn is_well_formed(&self) -> bool {
        self.check_shape().is_some()
    }

    fn check_shape(&self) -> Option<()> {
        let b: &[u8] = &self.lp;
        let mut left = lp::validate(b)?;
        let mut at = lp::HEADER;
        // Each element with whether it is an integer: the counters, flags and ID deltas must
        // be (field names and values need not).
        let mut take = || -> Option<(i64, bool)> {
            left = left.checked_sub(1)?;
            let v = lp::next(b, &mut at);
            let is_int = match v {
                lp::Val::Int(_) => true,
                lp::Val::Str(s) => crate::util::parse_i64(s).is_some(),
            };
            Some((v.int(), is_int))
        };
        let int = |(v, is_int): (i64, bool)| is_int.then_some(v);
        let (count, deleted, nf) = (int(take()?)?, int(take()?)?, int(take()?)?);
        if nf < 0 || count <= 0 || deleted < 0 {
            return None;
        }
        for _ in 0..nf {
            take()?;
        }
        if int(take()?)? != 0 {
            return None;
        }
        let (mut live, mut dead, mut prev) = (0, 0, None::<StreamId>);
        while let Some(flags) = take() {
            let flags = int(flags)?;
            let ms = int(take()?)? as u64;
            let seq = int(take()?)? as u64;
            let id = StreamId::new(
                self.master.ms.wrapping_add(ms),
                self.master.seq.wrapping_add(seq),
            );
            let n = if flags & FLAG_SAMEFIELDS != 0 {
                nf
            } else {
                let n = int(take()?)?;
                if n < 0 {
                    return None;
                }
                for _ in 0..n {
                    take()?;
                }
                n
            };
            for _ in 0..n {
                take()?;
            }
            let want = if flags & FLAG_SAMEFIELDS != 0 {
                n + 3
            } else {
                2 * n + 4
            };
            if int(take()?)? != want
                || prev.is_some_and(|p| p >= id)
                || (prev.is_none() && id != self.master)
            {
                return None;
            }
            prev = Some(id);
            if flags & FLAG_DELETED != 0 {
                dead += 1;
            } else {
                live += 1;
            }
        }
        (live == count && dead == deleted).then_some(())
    }

    /// Checks the node's structure: counters agree with the flags, IDs ascend from the master.
    pub fn check_invariants(&self) {
        assert!(lp::validate(&self.lp).is_some(), "malformed listpack");
        let entries = self.entries();
        let live = entries.iter().filter(|e| !e.deleted).count() as u64;
        assert_eq!(live, self.count(), "live counter");
        assert_eq!(
            entries.len() as u64 - live,
            self.deleted(),
            "deleted counter"
        );
        assert!(live > 0, "empty node kept");
        assert_eq!(
            entries.first().map(|e| e.id),
            Some(self.master),
            "master id"
        );
        assert!(entries.windows(2).all(|w| w[0].id < w[1].id), "ids ascend");
        let heads = self.heads();
        assert_eq!(heads.len(), entries.len(), "heads");
        for (h, e) in heads.iter().zip(&entries) {
            assert_eq!(
                (h.0, h.1, h.2),
                (e.id, e.deleted, e.flags_at),
                "head of {:?}",
                e.id
            );
            assert_eq!(self.entry_at(h.2).fields, e.fields, "entry at {}", h.2);
        }
        let target = entries[entries.len() / 2].id;
        let mut it = self.iter();
        it.seek(target);
        assert_eq!(
            it.next().map(|e| e.id),
            entries
                .iter()
                .find(|e| !e.deleted && e.id >= target)
                .map(|e| e.id),
            "seek"
        );
    }
}

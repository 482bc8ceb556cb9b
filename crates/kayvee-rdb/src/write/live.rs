//! The undo log of a writer that walks the live databases (see the parent's module doc and
//! `kayvee_engine::save_hook`): the values, as they were when the save started, of the keys
//! changed since ahead of the walk.
//!
//! Written here rather than taken from a map crate, because the hook runs on every write
//! during a save and under TCG every instruction and every page touched shows in the write
//! rate (a B-tree keyed by hash, tried first, cost about 900 instructions a kept key):
//! - The kept keys sit in an array of fixed-size chunks (growing copies nothing), found
//!   through an open-addressing table (linear probing) by the keyspace's own hash, which the
//!   hook and the walk both hold already: a slot is 8 bytes, the key's index and half its
//!   hash.
//! - The walk takes a key's old value out as it passes it, leaving a tombstone in the table
//!   and a free place in the array, which the next kept key takes: the array holds the most
//!   keys kept at once (about half of those kept over a save, whose walk passes them as it
//!   goes), not all those kept since the start. Once the tombstones outnumber the kept keys
//!   (or the table fills), the table is rebuilt without them.
//! - A bit per range of hashes (2^20 of them, by high bits) tells the walk, which goes in
//!   hash order and so reads the bits in order, where a key may be kept: it probes the table
//!   (a miss of the emulated TLB more often than not) only there.
//! - Keys deleted since the start are written when the walk ends their database (an RDB
//!   file's keys may come in any order).

use alloc::vec::Vec;
use kayvee_engine::db::Key;
use kayvee_engine::save_hook::DbView;
use kayvee_engine::value::Entry;
use kayvee_pds::PMap;

/// A key's entry and TTL when the save started; `None`: the key did not exist then.
pub(super) type Old = Option<(Entry, Option<u64>)>;

/// One kept key.
struct Kept {
    key: Key,
    old: Option<Entry>,
    /// The old value's TTL, [`NO_TTL`] without one.
    ttl: u64,
    /// Its database, [`TAKEN`] once the walk took it.
    db: u32,
}

/// A kept key's TTL when it had none.
const NO_TTL: u64 = u64::MAX;
/// A taken key's database.
const TAKEN: u32 = u32::MAX;

/// A slot of the table: a kept key's index and the high half of its hash (the low bits chose
/// the slot), or [`EMPTY`], or [`GONE`] (a tombstone: taken by the walk).
#[derive(Clone, Copy)]
struct Slot {
    check: u32,
    at: u32,
}

const EMPTY: u32 = u32::MAX;
const GONE: u32 = u32::MAX - 1;
const FREE: Slot = Slot {
    check: 0,
    at: EMPTY,
};

/// Kept keys per chunk of the array.
const CHUNK: usize = 2048;

/// The hash ranges of [`Live::ranges`]: 2^20 (128 KiB of bits).
const RANGE_BITS: u32 = 20;

/// The high half of a hash, which a slot holds.
#[inline]
fn check(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// A hash's bit in [`Live::ranges`]: its word and mask.
#[inline]
fn range(hash: u64) -> (usize, u64) {
    let r = (hash >> (64 - RANGE_BITS)) as usize;
    (r / 64, 1 << (r % 64))
}

/// The undo log.
pub(super) struct Live {
    /// The table, indexed by the hash's low bits.
    slots: Vec<Slot>,
    /// The kept keys, and the places of taken ones (listed in `free`).
    chunks: Vec<Vec<Kept>>,
    /// Places in `chunks` whose key was taken, for the next kept keys.
    free: Vec<u32>,
    /// Slots not empty (kept keys and tombstones).
    used: usize,
    /// Kept keys per database.
    count: Vec<usize>,
    /// See the module doc.
    ranges: Vec<u64>,
    /// Databases emptied or replaced whole while the save ran: the writer walks the version
    /// handed over then (in its snapshot's slot), and keeps nothing more for them.
    frozen: Vec<bool>,
    /// Keys kept over the save's life, and kept now.
    pub kept_keys: u64,
    pub kept_now: usize,
    /// The most bytes the table and the array held at once.
    pub peak_bytes: usize,
}

impl Live {
    /// The log of a save of `dbs` databases.
    pub fn new(dbs: usize) -> Self {
        Live {
            slots: Vec::new(),
            chunks: Vec::new(),
            free: Vec::new(),
            used: 0,
            count: alloc::vec![0; dbs],
            ranges: alloc::vec![0; 1 << (RANGE_BITS - 6)],
            frozen: alloc::vec![false; dbs],
            kept_keys: 0,
            kept_now: 0,
            peak_bytes: 0,
        }
    }

    /// Whether database `index` is walked in the version handed over by [`Live::freeze`].
    pub fn frozen(&self, index: usize) -> bool {
        self.frozen[index]
    }

    /// Whether old values are kept for database `index`.
    pub fn has_kept(&self, index: usize) -> bool {
        self.count[index] > 0
    }

    /// Marks database `index` as walked in a version of its own from now on; false when it
    /// was already (that version is the one to keep).
    pub fn freeze(&mut self, index: usize) -> bool {
        !core::mem::replace(&mut self.frozen[index], true)
    }

    /// The kept key at `at`.
    #[inline]
    fn kept(&mut self, at: u32) -> &mut Kept {
        let at = at as usize;
        &mut self.chunks[at / CHUNK][at % CHUNK]
    }

    /// The slot holding `key` (of keyspace hash `hash`) of database `index`, or the empty slot
    /// ending its probe run.
    #[inline]
    fn find(&mut self, index: usize, hash: u64, key: &[u8]) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let s = self.slots[i];
            if s.at == EMPTY {
                return Err(i);
            }
            if s.check == check(hash) && s.at != GONE {
                let k = self.kept(s.at);
                if k.db as usize == index && &k.key[..] == key {
                    return Ok(i);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the walk, from `from_hash` in database `index`, still has to write `key` and
    /// no old value is kept for it: the place to keep it (see [`Live::keep`]).
    #[inline]
    pub fn wants(
        &mut self,
        index: usize,
        key: &[u8],
        db: DbView<'_>,
        from_hash: u64,
    ) -> Option<(u64, usize)> {
        if self.frozen[index] {
            return None;
        }
        let keys = db.keys;
        let hash = keys.hash_of(key);
        if hash < from_hash {
            return None;
        }
        // At most 5/8 of the slots used (linear probing's runs stay short), and no more
        // tombstones than kept keys.
        let dead = self.used - self.kept_now;
        if (self.used + 1) * 8 > self.slots.len() * 5 || dead > self.kept_now.max(256) {
            self.rebuild(keys);
        }
        self.find(index, hash, key).err().map(|at| (hash, at))
    }

    /// Keeps `old` for `key` of database `index` in the place [`Live::wants`] gave.
    pub fn keep(&mut self, index: usize, key: &[u8], (hash, at): (u64, usize), old: Old) {
        let (old, ttl) = match old {
            Some((e, ttl)) => (Some(e), ttl.unwrap_or(NO_TTL)),
            None => (None, NO_TTL),
        };
        let n = self.push(Kept {
            key: Key::from_slice(key),
            old,
            ttl,
            db: index as u32,
        });
        self.slots[at] = Slot {
            check: check(hash),
            at: n,
        };
        let (w, bit) = range(hash);
        self.ranges[w] |= bit;
        self.used += 1;
        self.count[index] += 1;
        self.kept_keys += 1;
        self.kept_now += 1;
    }

    /// Appends `k` to the array; its index.
    fn push(&mut self, k: Kept) -> u32 {
        if let Some(at) = self.free.pop() {
            *self.kept(at) = k;
            return at;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
            self.note_bytes();
        }
        let last = self.chunks.len() - 1;
        self.chunks[last].push(k);
        (last * CHUNK + self.chunks[last].len() - 1) as u32
    }

    /// The table for two to four times the kept keys, without tombstones (`keys` hashes
    /// the kept keys again; they stay where they are in the array).
    fn rebuild(&mut self, keys: &PMap<Key, Entry>) {
        let cap = (self.kept_now * 2).next_power_of_two().max(64);
        self.slots = Vec::new();
        self.slots = alloc::vec![FREE; cap];
        self.used = 0;
        let mask = cap - 1;
        for (c, chunk) in self.chunks.iter().enumerate() {
            for (i, k) in chunk.iter().enumerate().filter(|(_, k)| k.db != TAKEN) {
                let hash = keys.hash_of(&k.key[..]);
                let mut s = hash as usize & mask;
                while self.slots[s].at != EMPTY {
                    s = (s + 1) & mask;
                }
                self.slots[s] = Slot {
                    check: check(hash),
                    at: (c * CHUNK + i) as u32,
                };
                self.used += 1;
            }
        }
        self.note_bytes();
    }

    /// The bytes the table and the array (and its free list) hold now.
    pub fn bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<Slot>()
            + self.chunks.len() * CHUNK * core::mem::size_of::<Kept>()
            + self.free.capacity() * core::mem::size_of::<u32>()
    }

    /// Counts what the log holds now towards its peak.
    fn note_bytes(&mut self) {
        self.peak_bytes = self.peak_bytes.max(self.bytes());
    }

    /// Marks the kept key at `at` taken and its place free; its old entry and TTL.
    fn release(&mut self, at: u32) -> (Option<Entry>, Option<u64>) {
        let k = self.kept(at);
        k.db = TAKEN;
        k.key = Key::new();
        let ttl = (k.ttl != NO_TTL).then_some(k.ttl);
        let old = k.old.take();
        self.free.push(at);
        (old, ttl)
    }

    /// Takes out the value kept for `key` (of keyspace hash `hash`) in database `index`, if
    /// one is: the walk writes it instead of the live one.
    #[inline]
    pub fn take(&mut self, index: usize, hash: u64, key: &[u8]) -> Option<Old> {
        let (w, bit) = range(hash);
        if self.ranges[w] & bit == 0 {
            return None;
        }
        let at = self.find(index, hash, key).ok()?;
        let (old, ttl) = self.release(self.slots[at].at);
        self.slots[at].at = GONE;
        self.count[index] -= 1;
        self.kept_now -= 1;
        Some(old.map(|e| (e, ttl)))
    }

    /// Takes out every value kept for database `index` (the keys the walk did not meet:
    /// deleted since), each handed to `f` when the key existed at the start.
    pub fn take_rest(&mut self, index: usize, mut f: impl FnMut(&Key, &Entry, Option<u64>)) {
        if self.count[index] == 0 {
            return;
        }
        for i in 0..self.slots.len() {
            let at = self.slots[i].at;
            if at == EMPTY || at == GONE || self.kept(at).db as usize != index {
                continue;
            }
            let k = self.kept(at);
            if let Some(e) = &k.old {
                f(&k.key, e, (k.ttl != NO_TTL).then_some(k.ttl));
            }
            self.release(at);
            self.slots[i].at = GONE;
            self.count[index] -= 1;
            self.kept_now -= 1;
        }
    }
}

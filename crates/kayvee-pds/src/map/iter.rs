//! In-order (ascending hash) traversal of a `PMap` trie with an explicit, fixed-size stack:
//! no allocation, O(depth) to start at any hash (`seek`), O(1) amortised per entry.

use super::node::{frag, index, Inner, Node, COLLISION_LEVEL, DEPTH_MAX};

/// Iterator over a map's entries in ascending order of their 64-bit hash.
pub struct Iter<'a, K, V> {
    /// `stack[l]` = (node at level `l`, where to go on). At branching levels a [`Frame`]
    /// state: the next bit position, the entries of that position already visited, and the
    /// slots and children the positions before it hold (kept as the walk passes them, so a
    /// step needs no population count: without the `popcnt` instruction, which the baseline
    /// x86-64 target and QEMU's default CPU lack, each is a dozen instructions). At the
    /// collision level a slot index.
    stack: [(&'a Inner<K, V>, u32); DEPTH_MAX],
    /// Frames in use; 0 once exhausted.
    depth: usize,
}

impl<K, V> Clone for Iter<'_, K, V> {
    fn clone(&self) -> Self {
        Iter {
            stack: self.stack,
            depth: self.depth,
        }
    }
}

/// Bits of a bitmap at positions >= `pos`.
#[inline]
fn from_pos(pos: u32) -> u32 {
    if pos >= 32 {
        0
    } else {
        !0u32 << pos
    }
}

/// A branching level's place, packed in a `u32`: bits 0-1 the entries of position `pos`
/// already visited, 2-7 `pos` (0..=32), 8-15 the slots of the positions before `pos`, 16-23
/// their children.
#[derive(Clone, Copy)]
struct Frame {
    pos: u32,
    seen: u32,
    slot: u32,
    child: u32,
}

impl Frame {
    #[inline(always)]
    fn unpack(v: u32) -> Frame {
        Frame {
            seen: v & 3,
            pos: (v >> 2) & 0x3f,
            slot: (v >> 8) & 0xff,
            child: v >> 16,
        }
    }

    #[inline(always)]
    fn pack(self) -> u32 {
        self.seen | (self.pos << 2) | (self.slot << 8) | (self.child << 16)
    }

    /// Position `pos` of `node` with `seen` of its entries visited (population counts: for
    /// a seek).
    fn at<K, V>(node: &Inner<K, V>, pos: u32, seen: u32) -> u32 {
        let h = &node.header;
        let below = !from_pos(pos);
        let slot = if pos >= 32 {
            h.slots(1 << 31).end
        } else {
            h.slots(1 << pos).start
        };
        Frame {
            pos,
            seen,
            slot: slot as u32,
            child: (h.nodemap & below).count_ones(),
        }
        .pack()
    }
}

impl<'a, K, V> Iter<'a, K, V> {
    /// Iterates the whole trie under `root`.
    pub(super) fn new(root: &'a Node<K, V>) -> Self {
        Iter {
            stack: [(&**root, 0); DEPTH_MAX],
            depth: 1,
        }
    }

    /// Iterates the entries whose hash is >= `cursor`; `hash` computes an entry's hash (needed
    /// for the inline entries at the position on the cursor's path). O(depth).
    pub(super) fn seek(root: &'a Node<K, V>, cursor: u64, hash: impl Fn(&K) -> u64) -> Self {
        let mut it = Iter::new(root);
        for level in 0..COLLISION_LEVEL {
            let node = it.stack[level].0;
            let pos = frag(cursor, level);
            let bit = 1u32 << pos;
            if node.header.nodemap & bit != 0 {
                it.stack[level].1 = Frame::at(node, pos + 1, 0);
                let child = &node.header.children[index(node.header.nodemap, bit)];
                it.stack[level + 1] = (&**child, 0);
                it.depth = level + 2;
                continue;
            }
            let mut start = Frame::at(node, pos, 0);
            if node.header.datamap() & bit != 0 {
                let slots = &node.slice[node.header.slots(bit)];
                let below = slots
                    .iter()
                    .take_while(|s| s.as_ref().is_some_and(|(k, _)| hash(k) < cursor))
                    .count();
                start = if below == slots.len() {
                    Frame::at(node, pos + 1, 0)
                } else {
                    Frame::at(node, pos, below as u32)
                };
            }
            it.stack[level].1 = start;
            return it;
        }
        // A collision node on the cursor's full path: all its entries hash to `cursor`.
        it
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.depth > 0 {
            let level = self.depth - 1;
            let (node, state) = self.stack[level];
            if level == COLLISION_LEVEL {
                if let Some(Some((k, v))) = node.slice.get(state as usize) {
                    self.stack[level].1 += 1;
                    return Some((k, v));
                }
                self.depth -= 1;
                continue;
            }
            let h = &node.header;
            let mut f = Frame::unpack(state);
            let live = (h.datamap() | h.nodemap) & from_pos(f.pos);
            if live == 0 {
                self.depth -= 1;
                continue;
            }
            let b = live.trailing_zeros();
            let bit = 1u32 << b;
            if h.datamap() & bit != 0 {
                // The positions between `pos` and `b` hold nothing: `slot` is `b`'s first.
                let seen = if b == f.pos { f.seen } else { 0 };
                let count = u32::from(h.lo & bit != 0) + 2 * u32::from(h.hi & bit != 0);
                let at = (f.slot + seen) as usize;
                if seen + 1 < count {
                    f.pos = b;
                    f.seen = seen + 1;
                } else {
                    f.pos = b + 1;
                    f.seen = 0;
                    f.slot += count;
                }
                self.stack[level].1 = f.pack();
                return node.slice[at].as_ref().map(|(k, v)| (k, v));
            }
            let child = &h.children[f.child as usize];
            f.pos = b + 1;
            f.seen = 0;
            f.child += 1;
            self.stack[level].1 = f.pack();
            self.stack[self.depth] = (&**child, 0);
            self.depth += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_pos_masks() {
        assert_eq!(from_pos(0), u32::MAX);
        assert_eq!(from_pos(31), 1 << 31);
        assert_eq!(from_pos(32), 0);
    }
}

//! In-order (ascending hash) traversal of a `PMap` trie with an explicit, fixed-size stack:
//! no allocation, O(depth) to start at any hash (`seek`), O(1) amortised per entry.

use super::node::{frag, index, Inner, Node, COLLISION_LEVEL, DEPTH_MAX};

/// Iterator over a map's entries in ascending order of their 64-bit hash.
pub struct Iter<'a, K, V> {
    /// `stack[l]` = (node at level `l`, where to go on: at branching levels the next bit
    /// position times 4 plus the entries of that position already visited, at the collision
    /// level a slot index).
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
                it.stack[level].1 = (pos + 1) << 2;
                let child = &node.header.children[index(node.header.nodemap, bit)];
                it.stack[level + 1] = (&**child, 0);
                it.depth = level + 2;
                continue;
            }
            let mut start = pos << 2;
            if node.header.datamap() & bit != 0 {
                let slots = &node.slice[node.header.slots(bit)];
                let below = slots
                    .iter()
                    .take_while(|s| s.as_ref().is_some_and(|(k, _)| hash(k) < cursor))
                    .count();
                start = if below == slots.len() {
                    (pos + 1) << 2
                } else {
                    start | below as u32
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

    fn next(&mut self) -> Option<Self::Item> {
        while self.depth > 0 {
            let level = self.depth - 1;
            let (node, pos) = self.stack[level];
            if level == COLLISION_LEVEL {
                if let Some(Some((k, v))) = node.slice.get(pos as usize) {
                    self.stack[level].1 += 1;
                    return Some((k, v));
                }
                self.depth -= 1;
                continue;
            }
            let h = &node.header;
            let (pos, seen) = (pos >> 2, pos & 3);
            let live = (h.datamap() | h.nodemap) & from_pos(pos);
            if live == 0 {
                self.depth -= 1;
                continue;
            }
            let b = live.trailing_zeros();
            let bit = 1u32 << b;
            if h.datamap() & bit != 0 {
                let seen = if b == pos { seen as usize } else { 0 };
                let slots = h.slots(bit);
                self.stack[level].1 = if seen + 1 < slots.len() {
                    (b << 2) | (seen as u32 + 1)
                } else {
                    (b + 1) << 2
                };
                return node.slice[slots.start + seen].as_ref().map(|(k, v)| (k, v));
            }
            self.stack[level].1 = (b + 1) << 2;
            self.stack[self.depth] = (&*h.children[index(h.nodemap, bit)], 0);
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

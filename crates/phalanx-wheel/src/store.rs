//! The entry store both wheels share: a slab of timer entries with a free list, and intrusive
//! doubly linked lists that thread the entries into wheel slots. (The public methods the
//! wheels share on top of it are in `shared.rs`.)
//!
//! Everything is addressed by `u32` indices so a handle stays small and `Copy`. A slot's list is
//! always kept in *start sequence* order (entries are only ever appended at the tail, and a
//! wheel only moves a whole list into an empty one), which is what makes the firing order
//! deterministic without any sorting at fire time. Each list also has one bit in an occupancy
//! bitmap so a wheel can jump over empty slots with `trailing_zeros`.

use crate::{Expired, TimerHandle};

/// The "no entry" link. It is never a valid slab index: the slab refuses to grow to it.
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a store can hold: every index below [`NIL`].
pub(crate) const ENTRIES_MAX: usize = NIL as usize;

/// A live timer.
pub(crate) struct Node<T> {
    pub(crate) deadline: u64,
    pub(crate) seq: u64,
    prev: u32,
    next: u32,
    /// The list this node is linked into, or [`NIL`] while detached.
    list: u32,
    pub(crate) value: T,
}

enum Slot<T> {
    Vacant { next_free: u32 },
    Occupied(Node<T>),
}

struct Entry<T> {
    /// Bumped every time the entry is freed, so handles to the old occupant go stale.
    generation: u32,
    slot: Slot<T>,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };
}

/// Slab + lists + occupancy bitmap. Lists `0..list_count` are wheel slots and have a bit in
/// the bitmap; a wheel may keep extra lists (such as a ready list) above them, without a bit.
pub(crate) struct Store<T> {
    entries: Vec<Entry<T>>,
    free_head: u32,
    len: usize,
    lists: Vec<List>,
    bitmap_lists: usize,
    occupied: Vec<u64>,
    next_seq: u64,
}

impl<T> Store<T> {
    /// A store with `bitmap_lists` slot lists (tracked in the bitmap) and `extra_lists` more.
    pub(crate) fn new(bitmap_lists: usize, extra_lists: usize) -> Self {
        Store {
            entries: Vec::new(),
            free_head: NIL,
            len: 0,
            lists: vec![List::EMPTY; bitmap_lists + extra_lists],
            bitmap_lists,
            occupied: vec![0; bitmap_lists.div_ceil(64)],
            next_seq: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        let vacant = self.entries.len() - self.len;
        if additional > vacant {
            self.entries.reserve(additional - vacant);
        }
    }

    #[cfg(feature = "serde")]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Stores a detached node and returns its index, or `None` when the slab is full.
    pub(crate) fn alloc(&mut self, deadline: u64, value: T) -> Option<u32> {
        let node = Node { deadline, seq: self.take_seq(), prev: NIL, next: NIL, list: NIL, value };
        let index = if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            match entry.slot {
                Slot::Vacant { next_free } => self.free_head = next_free,
                Slot::Occupied(_) => unreachable!("free list points at an occupied entry"),
            }
            entry.slot = Slot::Occupied(node);
            index
        } else {
            if self.entries.len() >= ENTRIES_MAX {
                return None;
            }
            self.entries.push(Entry { generation: 0, slot: Slot::Occupied(node) });
            (self.entries.len() - 1) as u32
        };
        self.len += 1;
        Some(index)
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        // 2^64 starts would take centuries at a billion per second; saturate rather than wrap
        // so the order can never invert.
        self.next_seq = self.next_seq.saturating_add(1);
        seq
    }

    /// Gives a node a fresh start sequence (used by `reset`: a re-armed timer counts as new).
    pub(crate) fn renew_seq(&mut self, index: u32) {
        let seq = self.take_seq();
        self.node_mut(index).seq = seq;
    }

    pub(crate) fn handle(&self, index: u32) -> TimerHandle {
        TimerHandle { index, generation: self.entries[index as usize].generation }
    }

    /// The index behind a handle, if the handle still names a live timer.
    pub(crate) fn resolve(&self, handle: TimerHandle) -> Option<u32> {
        let entry = self.entries.get(handle.index as usize)?;
        match entry.slot {
            Slot::Occupied(_) if entry.generation == handle.generation => Some(handle.index),
            _ => None,
        }
    }

    pub(crate) fn node(&self, index: u32) -> &Node<T> {
        match &self.entries[index as usize].slot {
            Slot::Occupied(node) => node,
            Slot::Vacant { .. } => unreachable!("index {index} is vacant"),
        }
    }

    pub(crate) fn node_mut(&mut self, index: u32) -> &mut Node<T> {
        match &mut self.entries[index as usize].slot {
            Slot::Occupied(node) => node,
            Slot::Vacant { .. } => unreachable!("index {index} is vacant"),
        }
    }

    /// Appends a detached node at the tail of `list`.
    pub(crate) fn push_back(&mut self, list: u32, index: u32) {
        let tail = self.lists[list as usize].tail;
        {
            let node = self.node_mut(index);
            debug_assert_eq!(node.list, NIL, "node is already linked");
            node.list = list;
            node.prev = tail;
            node.next = NIL;
        }
        if tail == NIL {
            self.lists[list as usize].head = index;
            if (list as usize) < self.bitmap_lists {
                self.occupied[list as usize / 64] |= 1 << (list % 64);
            }
        } else {
            self.node_mut(tail).next = index;
        }
        self.lists[list as usize].tail = index;
    }

    /// Detaches a node from whatever list holds it.
    pub(crate) fn unlink(&mut self, index: u32) {
        let (list, prev, next) = {
            let node = self.node_mut(index);
            let links = (node.list, node.prev, node.next);
            node.list = NIL;
            node.prev = NIL;
            node.next = NIL;
            links
        };
        if list == NIL {
            return;
        }
        if prev == NIL {
            self.lists[list as usize].head = next;
        } else {
            self.node_mut(prev).next = next;
        }
        if next == NIL {
            self.lists[list as usize].tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
        if self.lists[list as usize].head == NIL && (list as usize) < self.bitmap_lists {
            self.occupied[list as usize / 64] &= !(1 << (list % 64));
        }
    }

    #[inline]
    pub(crate) fn head(&self, list: u32) -> u32 {
        self.lists[list as usize].head
    }

    pub(crate) fn next_in_list(&self, index: u32) -> u32 {
        self.node(index).next
    }

    /// Detaches a whole list at once and returns its first node; walk it with
    /// [`Store::next_in_list`] *before* relinking each node.
    pub(crate) fn detach_all(&mut self, list: u32) -> u32 {
        let head = self.lists[list as usize].head;
        self.lists[list as usize] = List::EMPTY;
        if (list as usize) < self.bitmap_lists {
            self.occupied[list as usize / 64] &= !(1 << (list % 64));
        }
        let mut cursor = head;
        while cursor != NIL {
            let node = self.node_mut(cursor);
            node.list = NIL;
            cursor = node.next;
        }
        head
    }

    /// Removes a node from its list and the slab, making every handle to it stale.
    pub(crate) fn release(&mut self, index: u32) -> Expired<T> {
        self.unlink(index);
        let handle = self.handle(index);
        let entry = &mut self.entries[index as usize];
        entry.generation = entry.generation.wrapping_add(1);
        let slot = std::mem::replace(&mut entry.slot, Slot::Vacant { next_free: self.free_head });
        self.free_head = index;
        self.len -= 1;
        match slot {
            Slot::Occupied(node) => Expired { handle, deadline: node.deadline, value: node.value },
            Slot::Vacant { .. } => unreachable!("released a vacant entry"),
        }
    }

    /// Pops the first node of `list`, releasing it.
    #[inline]
    pub(crate) fn pop_front(&mut self, list: u32) -> Option<Expired<T>> {
        let head = self.lists[list as usize].head;
        (head != NIL).then(|| self.release(head))
    }

    /// One 64-bit word of the occupancy bitmap.
    pub(crate) fn occupied_word(&self, word: usize) -> u64 {
        self.occupied[word]
    }

    /// The first occupied slot list in `from..limit`, if any.
    pub(crate) fn next_occupied(&self, from: usize, limit: usize) -> Option<usize> {
        if from >= limit {
            return None;
        }
        let mut word = from / 64;
        let mut bits = self.occupied[word] & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                let found = word * 64 + bits.trailing_zeros() as usize;
                return (found < limit).then_some(found);
            }
            word += 1;
            if word * 64 >= limit {
                return None;
            }
            bits = self.occupied[word];
        }
    }

    /// Every live entry as `(deadline, seq, index)`, sorted: the canonical (firing) order.
    pub(crate) fn sorted_live(&self) -> Vec<(u64, u64, u32)> {
        let mut live: Vec<(u64, u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| match &entry.slot {
                Slot::Occupied(node) => Some((node.deadline, node.seq, index as u32)),
                Slot::Vacant { .. } => None,
            })
            .collect();
        live.sort_unstable();
        live
    }

    /// The smallest deadline of any node, by walking every slot list (O(n)).
    pub(crate) fn min_deadline(&self) -> Option<u64> {
        let mut best: Option<u64> = None;
        let mut slot = 0;
        while let Some(found) = self.next_occupied(slot, self.bitmap_lists) {
            let mut cursor = self.head(found as u32);
            while cursor != NIL {
                let node = self.node(cursor);
                best = Some(best.map_or(node.deadline, |b| b.min(node.deadline)));
                cursor = node.next;
            }
            slot = found + 1;
        }
        best
    }
}

#[cfg(feature = "serde")]
mod snapshot {
    //! The slab layout as data, so a restored wheel hands out the same handles as the original.

    use super::{Entry, List, Slot, Store, NIL};

    impl<T> Store<T> {
        /// Per-entry generations and the free list in chain order.
        pub(crate) fn layout(&self) -> (Vec<u32>, Vec<u32>) {
            let generations = self.entries.iter().map(|entry| entry.generation).collect();
            let mut free = Vec::with_capacity(self.entries.len() - self.len);
            let mut cursor = self.free_head;
            while cursor != NIL {
                free.push(cursor);
                cursor = match self.entries[cursor as usize].slot {
                    Slot::Vacant { next_free } => next_free,
                    Slot::Occupied(_) => NIL,
                };
            }
            (generations, free)
        }

        /// A store laid out as `generations` / `free` describe, with nothing live yet.
        /// The caller has checked that the indices are in range and distinct.
        pub(crate) fn from_layout(
            bitmap_lists: usize,
            extra_lists: usize,
            generations: &[u32],
            free: &[u32],
            next_seq: u64,
        ) -> Self {
            let mut store = Store::new(bitmap_lists, extra_lists);
            store.entries = generations
                .iter()
                .map(|&generation| Entry { generation, slot: Slot::Vacant { next_free: NIL } })
                .collect();
            store.len = generations.len();
            for (position, &index) in free.iter().enumerate() {
                let next_free = free.get(position + 1).copied().unwrap_or(NIL);
                store.entries[index as usize].slot = Slot::Vacant { next_free };
                store.len -= 1;
            }
            store.free_head = free.first().copied().unwrap_or(NIL);
            store.next_seq = next_seq;
            debug_assert!(store.lists.iter().all(|list| list.head == List::EMPTY.head));
            store
        }

        /// Puts a detached node at a chosen (vacant, off-free-list) index.
        pub(crate) fn occupy(&mut self, index: u32, deadline: u64, seq: u64, value: T) {
            let node = super::Node { deadline, seq, prev: NIL, next: NIL, list: NIL, value };
            self.entries[index as usize].slot = Slot::Occupied(node);
        }
    }
}

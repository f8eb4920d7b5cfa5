//! The slot lists and the ready queue: singly linked lists of [`Ref`]s whose links all live in
//! one pool with a free list, so no list allocates on its own (a table of 2^16 slots costs two
//! `u32`s a slot, not a vector each), and once the pool is warm nothing allocates at all.
//!
//! Every list keeps its references in the order they were appended, and each slot list has
//! one bit in an occupancy bitmap, set while it holds any reference, so a wheel can jump over
//! empty slots with `trailing_zeros`. The ready queue is one more list, without a bit.

use crate::store::{Ref, NIL};

/// A [`Ref`] and the next link of its list, flat so it packs into 24 bytes.
#[derive(Clone, Copy)]
struct Link {
    deadline: u64,
    seq: u64,
    index: u32,
    next: u32,
}

impl Link {
    #[inline]
    fn new(r: Ref) -> Link {
        Link { deadline: r.deadline, seq: r.seq, index: r.index, next: NIL }
    }

    #[inline]
    fn r(&self) -> Ref {
        Ref { deadline: self.deadline, seq: self.seq, index: self.index }
    }
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };
}

pub(crate) struct Lists {
    pool: Vec<Link>,
    free: u32,
    lists: Vec<List>,
    occupied: Vec<u64>,
    ready: List,
}

impl Lists {
    pub(crate) fn new(list_count: usize) -> Self {
        Lists {
            pool: Vec::new(),
            free: NIL,
            lists: vec![List::EMPTY; list_count],
            occupied: vec![0; list_count.div_ceil(64)],
            ready: List::EMPTY,
        }
    }

    pub(crate) fn list_count(&self) -> usize {
        self.lists.len()
    }

    /// Words in the occupancy bitmap.
    pub(crate) fn words(&self) -> usize {
        self.occupied.len()
    }

    /// Makes room for `total` links in all without allocating.
    pub(crate) fn reserve_total(&mut self, total: usize) {
        self.pool.reserve(total.saturating_sub(self.pool.len()));
    }

    #[inline(always)]
    fn alloc(&mut self, r: Ref) -> u32 {
        if self.free != NIL {
            let index = self.free;
            let link = &mut self.pool[index as usize];
            self.free = link.next;
            *link = Link::new(r);
            index
        } else {
            // A link per live reference plus tombstones, which stay fewer than a few times the
            // slab: the pool cannot outgrow `u32` before the slab does.
            self.pool.push(Link::new(r));
            (self.pool.len() - 1) as u32
        }
    }

    #[inline]
    fn free_link(&mut self, index: u32) {
        self.pool[index as usize].next = self.free;
        self.free = index;
    }

    #[inline]
    fn set_bit(&mut self, list: u32) {
        self.occupied[list as usize / 64] |= 1 << (list % 64);
    }

    #[inline]
    fn clear_bit(&mut self, list: u32) {
        self.occupied[list as usize / 64] &= !(1 << (list % 64));
    }

    /// Appends `link` (with `next == NIL`) to `list`; whether the list was empty.
    #[inline(always)]
    fn append(pool: &mut [Link], list: &mut List, link: u32) -> bool {
        let was_empty = list.tail == NIL;
        if was_empty {
            list.head = link;
        } else {
            pool[list.tail as usize].next = link;
        }
        list.tail = link;
        was_empty
    }

    /// Appends a reference to slot list `list`.
    #[inline(always)]
    pub(crate) fn push(&mut self, list: u32, r: Ref) {
        let link = self.alloc(r);
        if Self::append(&mut self.pool, &mut self.lists[list as usize], link) {
            self.set_bit(list);
        }
    }

    /// Appends a reference to the ready queue.
    #[inline(always)]
    pub(crate) fn push_ready(&mut self, r: Ref) {
        let link = self.alloc(r);
        Self::append(&mut self.pool, &mut self.ready, link);
    }

    /// Whether the ready queue is empty.
    #[inline]
    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.head == NIL
    }

    /// Takes the first reference of the ready queue.
    #[inline]
    pub(crate) fn pop_ready(&mut self) -> Option<Ref> {
        let head = self.ready.head;
        if head == NIL {
            return None;
        }
        let link = self.pool[head as usize];
        let (r, next) = (link.r(), link.next);
        self.ready.head = next;
        if next == NIL {
            self.ready.tail = NIL;
        }
        self.free_link(head);
        Some(r)
    }

    /// The references of the ready queue, in order.
    pub(crate) fn ready_refs(&self) -> impl Iterator<Item = Ref> + '_ {
        self.chain(self.ready.head)
    }

    /// The references of slot list `list`, in order.
    pub(crate) fn refs(&self, list: u32) -> impl Iterator<Item = Ref> + '_ {
        self.chain(self.lists[list as usize].head)
    }

    fn chain(&self, mut cursor: u32) -> impl Iterator<Item = Ref> + '_ {
        std::iter::from_fn(move || {
            (cursor != NIL).then(|| {
                let link = &self.pool[cursor as usize];
                cursor = link.next;
                link.r()
            })
        })
    }

    /// Makes slot list `list` the ready queue, which must be empty.
    #[inline]
    pub(crate) fn list_to_ready(&mut self, list: u32) {
        debug_assert!(self.ready_is_empty());
        self.ready = std::mem::replace(&mut self.lists[list as usize], List::EMPTY);
        self.clear_bit(list);
    }

    /// Detaches slot list `list` and returns a cursor for [`Lists::take_next`].
    #[inline]
    pub(crate) fn detach(&mut self, list: u32) -> u32 {
        let head = std::mem::replace(&mut self.lists[list as usize], List::EMPTY).head;
        self.clear_bit(list);
        head
    }

    /// The reference at `cursor` of a detached chain, freeing its link and advancing.
    #[inline]
    pub(crate) fn take_next(&mut self, cursor: &mut u32) -> Option<Ref> {
        if *cursor == NIL {
            return None;
        }
        let link = self.pool[*cursor as usize];
        let (r, next) = (link.r(), link.next);
        self.free_link(*cursor);
        *cursor = next;
        Some(r)
    }

    /// Moves the references with `deadline == tick` from slot list `list` to the end of the
    /// ready queue and drops those with `deadline < tick`, keeping the order of both; returns
    /// how many were dropped.
    pub(crate) fn collect_due(&mut self, list: u32, tick: u64) -> usize {
        let mut cursor = self.lists[list as usize].head;
        let mut kept = List::EMPTY;
        let mut dropped = 0;
        while cursor != NIL {
            let link = self.pool[cursor as usize];
            let next = link.next;
            self.pool[cursor as usize].next = NIL;
            if link.deadline == tick {
                Self::append(&mut self.pool, &mut self.ready, cursor);
            } else if link.deadline < tick {
                self.free_link(cursor);
                dropped += 1;
            } else {
                Self::append(&mut self.pool, &mut kept, cursor);
            }
            cursor = next;
        }
        self.lists[list as usize] = kept;
        if kept.head == NIL {
            self.clear_bit(list);
        }
        dropped
    }

    /// Keeps only the references of every list (the ready queue too) for which `keep` holds,
    /// in order; returns how many were dropped.
    pub(crate) fn retain_all(&mut self, mut keep: impl FnMut(Ref) -> bool) -> usize {
        let mut dropped = 0;
        for word in 0..self.occupied.len() {
            let mut bits = self.occupied[word];
            while bits != 0 {
                let list = (word * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let mut kept = self.lists[list as usize];
                dropped += self.retain(&mut kept, &mut keep);
                self.lists[list as usize] = kept;
                if kept.head == NIL {
                    self.clear_bit(list);
                }
            }
        }
        let mut ready = self.ready;
        dropped += self.retain(&mut ready, &mut keep);
        self.ready = ready;
        dropped
    }

    fn retain(&mut self, list: &mut List, keep: &mut impl FnMut(Ref) -> bool) -> usize {
        let mut cursor = list.head;
        *list = List::EMPTY;
        let mut dropped = 0;
        while cursor != NIL {
            let link = self.pool[cursor as usize];
            let next = link.next;
            self.pool[cursor as usize].next = NIL;
            if keep(link.r()) {
                Self::append(&mut self.pool, list, cursor);
            } else {
                self.free_link(cursor);
                dropped += 1;
            }
            cursor = next;
        }
        dropped
    }

    /// One 64-bit word of the occupancy bitmap.
    #[inline]
    pub(crate) fn occupied_word(&self, word: usize) -> u64 {
        self.occupied[word]
    }

    /// The first occupied slot list in `from..limit`, if any.
    #[inline]
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
}

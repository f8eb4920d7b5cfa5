//! The slot lists and the ready queue: singly linked lists of *links* that all live in one
//! pool with a free list, so no list allocates on its own (a table of 2^16 slots costs a `u32`
//! a slot for stacks, two for queues, not a vector each), and once the pool is warm nothing
//! allocates at all.
//!
//! A link is 16 bytes: a timer's deadline, its slab index and the next link. A link keeps its
//! pool index from the moment a timer is filed until it fires or is swept as a tombstone —
//! cascades, collection into the ready queue and sweeps relink it in place — so the slab can
//! name the one link that is a timer's live one (see `store.rs`).
//!
//! Slot lists come in two kinds, chosen per wheel by measurement:
//! - *queues* (the hierarchical wheel): a new link goes at the tail; taking a list out in
//!   order is free, which suits cascades of long lists;
//! - *stacks* (the hashed wheel): a new link goes in front, so filing a timer writes its own
//!   link and the slot's head and reads no other link (the tail link is a cache miss in a big
//!   table: start at 1e6 went from 24 to 14 ns); the list holds its links newest first, and
//!   taking it out in order (into the ready queue, or collecting the due ones) reverses the
//!   chain first. Its slots hold few links each, so that pass is short.
//!
//! Since the hashed wheel keeps its timers in nodes of its own (`nodes.rs`), only the
//! hierarchical wheel uses these lists, as queues: the stack mode is unused and untested.
//! It stays for now: taking it out (the flag and its branches) was measured to slow the
//! hierarchical wheel's burst by about 8 % (7.6 -> 8.4 ns a timer at 1e5, in three
//! same-process runs; its hot loops compiled to the same instructions, so most likely code
//! layout). Remove it with the next change to this file, measured again.
//!
//! Each slot list has one bit in an occupancy bitmap, set while it holds any link, so a wheel
//! can jump over empty slots with `trailing_zeros`. The ready queue is a queue, without a bit.

use crate::store::NIL;
use crate::sweep::{SweptLists, Walk};

/// A timer's place in a list.
#[derive(Clone, Copy)]
struct Link {
    deadline: u64,
    /// The timer's slab index.
    index: u32,
    next: u32,
}

/// A link as the store and wheels see it: its pool index and what it says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ref {
    /// The link's pool index.
    pub(crate) link: u32,
    pub(crate) deadline: u64,
    /// The slab index of the timer it names (live or not).
    pub(crate) index: u32,
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
    /// Each slot list's first link.
    heads: Vec<u32>,
    /// Each slot list's last link, for queues; empty for stacks, which never read their tail
    /// (so a hashed wheel's table is 4 bytes a slot).
    tails: Vec<u32>,
    /// Whether slot lists are stacks (else queues).
    stacks: bool,
    occupied: Vec<u64>,
    ready: List,
}

impl Lists {
    /// `list_count` slot lists, stacks if `stacks`, else queues.
    pub(crate) fn new(list_count: usize, stacks: bool) -> Self {
        Lists {
            pool: Vec::new(),
            free: NIL,
            heads: vec![NIL; list_count],
            tails: if stacks { Vec::new() } else { vec![NIL; list_count] },
            stacks,
            occupied: vec![0; list_count.div_ceil(64)],
            ready: List::EMPTY,
        }
    }

    /// Words in the occupancy bitmap.
    pub(crate) fn words(&self) -> usize {
        self.occupied.len()
    }

    /// Makes room for `total` links in all without allocating.
    pub(crate) fn reserve_total(&mut self, total: usize) {
        self.pool.reserve(total.saturating_sub(self.pool.len()));
    }

    /// Whether every link of the pool is in use (the next `alloc` grows it).
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.free == NIL
    }

    /// Links in the pool, in use or free.
    #[inline]
    pub(crate) fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// A new, unlinked link.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, deadline: u64, index: u32) -> Ref {
        let link = if self.free != NIL {
            let link = self.free;
            let slot = &mut self.pool[link as usize];
            self.free = slot.next;
            *slot = Link { deadline, index, next: NIL };
            link
        } else {
            // A link per live timer plus tombstones, which stay fewer than a few times the
            // slab: the pool outgrows `u32` only after memory runs out.
            assert!(self.pool.len() < NIL as usize, "timer lists are full");
            self.pool.push(Link { deadline, index, next: NIL });
            (self.pool.len() - 1) as u32
        };
        Ref { link, deadline, index }
    }

    /// Slot list `list`'s ends (a stack's tail reads as `NIL`).
    #[inline(always)]
    fn get(&self, list: u32) -> List {
        let tail = self.tails.get(list as usize).copied().unwrap_or(NIL);
        List { head: self.heads[list as usize], tail }
    }

    /// Sets slot list `list`'s ends (a stack keeps only its head).
    #[inline(always)]
    fn set(&mut self, list: u32, ends: List) {
        self.heads[list as usize] = ends.head;
        if !self.stacks {
            self.tails[list as usize] = ends.tail;
        }
    }

    #[inline]
    fn free_link(&mut self, link: u32) {
        self.pool[link as usize].next = self.free;
        self.free = link;
    }

    #[inline]
    fn clear_bit(&mut self, list: u32) {
        self.occupied[list as usize / 64] &= !(1 << (list % 64));
    }

    /// Appends `link` (whose `next` is `NIL`) to `list`; whether the list was empty.
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

    /// Adds an unlinked link to slot list `list`: in front of a stack, at the tail of a queue.
    #[inline(always)]
    pub(crate) fn push(&mut self, list: u32, link: u32) {
        if self.stacks {
            self.push_front(list, link);
            return;
        }
        let head = &mut self.heads[list as usize];
        let was_empty = *head == NIL;
        {
            let tail = &mut self.tails[list as usize];
            if was_empty {
                *head = link;
            } else {
                self.pool[*tail as usize].next = link;
            }
            *tail = link;
        }
        if was_empty {
            self.occupied[list as usize / 64] |= 1 << (list % 64);
        }
    }

    /// Adds an unlinked link in front of slot list `list`, a stack: reads no other link and
    /// sets the list's bit unconditionally (no branch on whether it was empty).
    #[inline(always)]
    pub(crate) fn push_front(&mut self, list: u32, link: u32) {
        debug_assert!(self.stacks);
        let head = &mut self.heads[list as usize];
        self.pool[link as usize].next = *head;
        *head = link;
        self.occupied[list as usize / 64] |= 1 << (list % 64);
    }

    /// Takes slot list `list` out (its bit cleared) as a chain in the order its links were
    /// pushed, oldest first: `(first, last)`, or `NIL`s when empty.
    #[inline]
    fn take_in_order(&mut self, list: u32) -> (u32, u32) {
        let taken = self.get(list);
        self.set(list, List::EMPTY);
        self.clear_bit(list);
        if !self.stacks {
            return (taken.head, taken.tail);
        }
        let newest = taken.head;
        let (mut cursor, mut reversed) = (newest, NIL);
        while cursor != NIL {
            let next = self.pool[cursor as usize].next;
            self.pool[cursor as usize].next = reversed;
            reversed = cursor;
            cursor = next;
        }
        (reversed, newest)
    }

    /// Appends an unlinked link to the ready queue.
    #[inline(always)]
    pub(crate) fn push_ready(&mut self, link: u32) {
        Self::append(&mut self.pool, &mut self.ready, link);
    }

    /// Whether the ready queue is empty.
    #[inline]
    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.head == NIL
    }

    /// Takes the first link of the ready queue and frees it.
    #[inline]
    pub(crate) fn pop_ready(&mut self) -> Option<Ref> {
        let link = self.ready.head;
        if link == NIL {
            return None;
        }
        let Link { deadline, index, next } = self.pool[link as usize];
        self.ready.head = next;
        if next == NIL {
            self.ready.tail = NIL;
        }
        self.free_link(link);
        Some(Ref { link, deadline, index })
    }

    /// The links of the ready queue, in order.
    pub(crate) fn ready_refs(&self) -> impl Iterator<Item = Ref> + '_ {
        self.chain(self.ready.head)
    }

    /// The links of slot list `list` (newest first in a stack).
    pub(crate) fn refs(&self, list: u32) -> impl Iterator<Item = Ref> + '_ {
        self.chain(self.heads[list as usize])
    }

    fn chain(&self, mut cursor: u32) -> impl Iterator<Item = Ref> + '_ {
        std::iter::from_fn(move || {
            (cursor != NIL).then(|| {
                let link = cursor;
                let Link { deadline, index, next } = self.pool[link as usize];
                cursor = next;
                Ref { link, deadline, index }
            })
        })
    }

    /// The deadline a link holds.
    #[inline]
    pub(crate) fn deadline(&self, link: u32) -> u64 {
        self.pool[link as usize].deadline
    }

    /// Makes slot list `list` the ready queue, which must be empty.
    #[inline]
    pub(crate) fn list_to_ready(&mut self, list: u32) {
        debug_assert!(self.ready_is_empty());
        let (head, tail) = self.take_in_order(list);
        self.ready = List { head, tail };
    }

    /// Detaches slot list `list` and returns a cursor for [`Lists::unlink_next`], which hands
    /// out its links oldest first.
    #[inline]
    pub(crate) fn detach(&mut self, list: u32) -> u32 {
        self.take_in_order(list).0
    }

    /// The link at `cursor` of a detached chain, unlinked (ready to be pushed again), and the
    /// cursor advanced.
    #[inline]
    pub(crate) fn unlink_next(&mut self, cursor: &mut u32) -> Option<Ref> {
        if *cursor == NIL {
            return None;
        }
        let link = *cursor;
        let slot = &mut self.pool[link as usize];
        let Link { deadline, index, next } = *slot;
        slot.next = NIL;
        *cursor = next;
        Some(Ref { link, deadline, index })
    }

    /// Keeps only the links of every list (the ready queue too) for which `keep` holds, in
    /// order, freeing the others; returns how many were freed.
    ///
    /// The slot lists are walked many at once (`sweep.rs`), and the links they drop join the
    /// free list in pool order, so the starts after a sweep take their links in order rather
    /// than each waiting on a cache miss for the next free one.
    pub(crate) fn retain_all(&mut self, keep: impl FnMut(Ref) -> bool) -> usize {
        self.retain_all_by(keep, Walk::for_size(self.pool.len()))
    }

    /// [`Lists::retain_all`], the slot lists walked as `walk` says.
    fn retain_all_by(&mut self, mut keep: impl FnMut(Ref) -> bool, walk: Walk) -> usize {
        let mut dropped = crate::sweep::sweep(&mut Retain { lists: self, keep: &mut keep }, walk);
        self.chain_dropped();
        let mut ready = self.ready;
        dropped += self.retain(&mut ready, &mut keep);
        self.ready = ready;
        dropped
    }

    /// Puts the links a sweep dropped (marked with a `NIL` index) in front of the free list,
    /// in pool order.
    fn chain_dropped(&mut self) {
        let mut free = self.free;
        for link in (0..self.pool.len()).rev() {
            let slot = &mut self.pool[link];
            if slot.index == NIL {
                slot.index = 0;
                slot.next = free;
                free = link as u32;
            }
        }
        self.free = free;
    }

    fn retain(&mut self, list: &mut List, keep: &mut impl FnMut(Ref) -> bool) -> usize {
        let mut cursor = list.head;
        *list = List::EMPTY;
        let mut dropped = 0;
        while cursor != NIL {
            let link = cursor;
            let slot = &mut self.pool[link as usize];
            let Link { deadline, index, next } = *slot;
            slot.next = NIL;
            if keep(Ref { link, deadline, index }) {
                Self::append(&mut self.pool, list, link);
            } else {
                self.free_link(link);
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
}

/// A sweep's view of the slot lists: the links `keep` rejects are unlinked, marked with a
/// `NIL` index for [`Lists::chain_dropped`].
struct Retain<'a, F> {
    lists: &'a mut Lists,
    keep: &'a mut F,
}

impl<F: FnMut(Ref) -> bool> SweptLists for Retain<'_, F> {
    fn occupied(&self) -> &[u64] {
        &self.lists.occupied
    }

    #[inline(always)]
    fn head(&self, list: u32) -> u32 {
        self.lists.heads[list as usize]
    }

    #[inline(always)]
    fn visit(&mut self, link: u32) -> (u32, bool) {
        let Link { deadline, index, next } = self.lists.pool[link as usize];
        (next, (self.keep)(Ref { link, deadline, index }))
    }

    #[inline(always)]
    fn unlink(&mut self, list: u32, before: u32, link: u32, next: u32) {
        if before == NIL {
            self.lists.heads[list as usize] = next;
        } else {
            self.lists.pool[before as usize].next = next;
        }
        self.lists.pool[link as usize].index = NIL;
    }

    #[inline(always)]
    fn finish(&mut self, list: u32, last: u32) {
        if !self.lists.stacks {
            self.lists.tails[list as usize] = last;
        }
        if last == NIL {
            self.lists.clear_bit(list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of many queues of every length (more than it walks at once; some emptied, some
    /// losing their head or tail, some untouched) keeps exactly the links `keep` accepts, in
    /// order, with each queue's tail right (a link pushed afterwards comes last) and its bit
    /// cleared only when it empties; the dropped links are allocated again in pool order.
    #[test]
    fn a_sweep_of_many_queues_keeps_their_order_and_frees_in_pool_order() {
        for walk in [Walk::InTurn, Walk::InLanes] {
            sweep_many_queues(walk);
        }
    }

    fn sweep_many_queues(walk: Walk) {
        let lists = 96_u32;
        let mut pool = Lists::new(lists as usize, false);
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1d_u64);
        let mut filed: Vec<Vec<u32>> = vec![Vec::new(); lists as usize];
        for index in 0..2_000_u32 {
            // Lists 0..8 stay empty; the others get from a few links to a few dozen.
            let list = 8 + (next() % u64::from(lists - 8)) as u32 / (1 + (next() % 3) as u32);
            let r = pool.alloc(u64::from(index), index);
            pool.push(list, r.link);
            filed[list as usize].push(r.link);
        }
        // Every link of lists 8..12 goes, and the last of list 12, about 60 % of the rest.
        let dropped: Vec<bool> = (0..2_000).map(|_| next() % 10 < 6).collect();
        let drops = |r: Ref| {
            let list = filed.iter().position(|links| links.contains(&r.link)).expect("filed");
            (8..12).contains(&list)
                || filed[12].last() == Some(&r.link)
                || dropped[r.index as usize]
        };
        let expected_drops =
            (0..2_000_u32).filter(|&link| drops(Ref { link, deadline: 0, index: link })).count();
        let freed = pool.retain_all_by(|r| !drops(r), walk);
        assert_eq!(freed, expected_drops, "{walk:?}");
        let mut probes = Vec::new();
        for list in 0..lists {
            let kept: Vec<u32> = filed[list as usize]
                .iter()
                .copied()
                .filter(|&link| !drops(Ref { link, deadline: 0, index: link }))
                .collect();
            let chain: Vec<u32> = pool.refs(list).map(|r| r.link).collect();
            assert_eq!(chain, kept, "list {list}");
            let bit = pool.occupied_word(list as usize / 64) & (1 << (list % 64)) != 0;
            assert_eq!(bit, !kept.is_empty(), "list {list}'s bit");
            probes.push((list, kept));
        }
        // The freed links come back in pool order.
        let mut freed_links: Vec<u32> =
            (0..2_000_u32).filter(|&link| drops(Ref { link, deadline: 0, index: link })).collect();
        freed_links.truncate(lists as usize);
        for (list, mut kept) in probes {
            let r = pool.alloc(9_999, 9_999);
            if let Some(expected) = freed_links.get(list as usize) {
                assert_eq!(r.link, *expected, "free links in pool order");
            }
            pool.push(list, r.link);
            kept.push(r.link);
            let chain: Vec<u32> = pool.refs(list).map(|r| r.link).collect();
            assert_eq!(chain, kept, "list {list} after a push: its tail was right");
        }
    }
}

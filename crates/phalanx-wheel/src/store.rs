//! The hierarchical wheel's entry store: a slab of timer entries with a free list, and the
//! slot lists of links to entries (`lists.rs`). The hashed wheel has its own store, whose slab
//! entries are themselves the list nodes (`nodes.rs`). The public methods the wheels share on
//! top of either store are in `shared.rs`.
//!
//! Everything is addressed by `u32` indices so a handle stays small and `Copy`.
//!
//! # Lazy cancellation
//!
//! A timer is filed in a slot list as a *link* (its deadline and slab index), and its slab
//! entry names that one link as its live one. Cancelling a timer frees its slab entry at once
//! (so `len`, handles, the free list and snapshots are exactly what they would be with eager
//! removal) but leaves its link in the list as a *tombstone*. A link is live only while its
//! entry is occupied *and* names it; a link keeps its pool index until it is freed, and it is
//! freed only when it fires or is dropped as a tombstone, so no other link can be mistaken for
//! it. A tombstone is dropped when its slot is visited (fired or swept) and never fires.
//! `reset` leaves the old link as a tombstone too and files a new one. So a cancel touches one
//! 16-byte entry (for a 4-byte value: generation, live link, value or next free entry), where
//! unlinking from a doubly linked list touched three scattered nodes. The start sequence lives
//! in an array of its own, kept only by the hierarchical wheel (for `pending` and snapshots):
//! nothing else reads it, the lists alone keep the firing order.
//!
//! Tombstones are not counted as they are made (a cancel touches nothing else): they are the
//! links in use beyond one per live timer. Before a start or reset takes a link, if every link
//! of the pool is in use and tombstones outnumber three times the slab's entries (the most
//! timers ever held at once, plus a constant and the table's size in words), every list is
//! swept instead of growing the pool. That keeps the lists within a constant factor of the
//! slab and costs O(1) amortized per start.
//!
//! # Order
//!
//! A slot list is always in start-sequence order *among its live links*: links are only
//! appended (a new start has the largest sequence so far), and a wheel only moves a list's
//! links, in order, into lists that hold no live link. So firing order is deterministic
//! without any sorting. Due entries wait in a separate *ready* queue until `poll` hands them
//! out.

use crate::lists::Lists;
pub(crate) use crate::lists::Ref;
use crate::{Expired, TimerHandle};

/// The most entries a slab may have held for [`Store::small_min`] to scan it.
const SMALL_SLAB: usize = 16;

/// How many tombstones per slab entry are allowed before a sweep (when the pool is full).
const SWEEP_RATIO: usize = 3;

/// Tombstones allowed beyond `SWEEP_RATIO` per slab entry (and the bitmap's words) before a
/// sweep. Small in debug builds so that the tests sweep often, mid-drain included.
const SWEEP_SLACK: usize = if cfg!(debug_assertions) { 2 } else { 64 };

/// The "no entry" link. It is never a valid slab index: the slab refuses to grow to it.
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a store can hold: every index below [`NIL`].
pub(crate) const ENTRIES_MAX: usize = NIL as usize;

/// A slab entry's payload: a live timer's value, or the next free entry.
enum Slot<T> {
    Vacant { next_free: u32 },
    Occupied(T),
}

/// A slab entry: all a handle check, a cancel and a liveness check touch, in 16 bytes for a
/// 4-byte value (the start sequence, which only the hierarchical wheel reads, is kept apart).
struct Entry<T> {
    /// Bumped every time the entry is freed, so handles to the old occupant go stale.
    generation: u32,
    /// The timer's live link; `NIL` while the entry is vacant.
    link: u32,
    slot: Slot<T>,
}

/// Whether `r` is its timer's live link (else it is a tombstone). A live link is never
/// `NIL`, so this also says the entry is occupied.
#[inline]
fn is_live<T>(entries: &[Entry<T>], r: Ref) -> bool {
    entries[r.index as usize].link == r.link
}

/// Slab + slot lists (with their occupancy bitmap and the ready queue).
pub(crate) struct Store<T> {
    entries: Vec<Entry<T>>,
    /// Per slab entry: the timer's start sequence (meaningless while vacant). Kept only when
    /// `keep_seqs` (the hierarchical wheel lists and snapshots them; the hashed wheel never
    /// reads one, its lists alone keep the order).
    seqs: Vec<u64>,
    keep_seqs: bool,
    free_head: u32,
    len: usize,
    lists: Lists,
    next_seq: u64,
    /// While the slab is small: the earliest deadline of any live timer (`u64::MAX` when
    /// there is none), kept up to date so a small wheel answers `next_deadline` at once.
    earliest: u64,
}

impl<T> Store<T> {
    /// A store with `list_count` slot lists, stacks if `stacks`, else queues (see `lists.rs`);
    /// it keeps start sequences if `keep_seqs`.
    pub(crate) fn new(list_count: usize, stacks: bool, keep_seqs: bool) -> Self {
        Store {
            entries: Vec::new(),
            seqs: Vec::new(),
            keep_seqs,
            free_head: NIL,
            len: 0,
            lists: Lists::new(list_count, stacks),
            next_seq: 0,
            earliest: u64::MAX,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        let vacant = self.entries.len() - self.len;
        if additional > vacant {
            self.entries.reserve(additional - vacant);
            if self.keep_seqs {
                self.seqs.reserve(additional - vacant);
            }
        }
        // Lists hold a link per live timer and per tombstone (see `make_room`).
        let entries = self.entries.len().max(self.len + additional);
        self.lists.reserve_total(entries * (1 + SWEEP_RATIO) + self.sweep_slack() + 1);
    }

    #[cfg(feature = "serde")]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Stores a new timer and files it in no list yet: returns its link and handle, or
    /// `None` when the slab is full.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, deadline: u64, value: T) -> Option<(Ref, TimerHandle)> {
        let seq = self.take_seq();
        self.make_room();
        let (index, reuse) = if self.free_head != NIL {
            (self.free_head, true)
        } else if self.entries.len() < ENTRIES_MAX {
            (self.entries.len() as u32, false)
        } else {
            return None;
        };
        let r = self.lists.alloc(deadline, index);
        let generation = if reuse {
            let entry = &mut self.entries[index as usize];
            let Slot::Vacant { next_free } = entry.slot else {
                unreachable!("free list points at an occupied entry")
            };
            self.free_head = next_free;
            entry.slot = Slot::Occupied(value);
            entry.link = r.link;
            let generation = entry.generation;
            if self.keep_seqs {
                self.seqs[index as usize] = seq;
            }
            generation
        } else {
            self.entries.push(Entry { generation: 0, link: r.link, slot: Slot::Occupied(value) });
            if self.keep_seqs {
                self.seqs.push(seq);
            }
            0
        };
        self.len += 1;
        self.earliest = self.earliest.min(deadline);
        Some((r, TimerHandle { index, generation }))
    }

    #[inline]
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        // 2^64 starts would take centuries at a billion per second; saturate rather than wrap
        // so the order can never invert.
        self.next_seq = self.next_seq.saturating_add(1);
        seq
    }

    #[inline]
    pub(crate) fn handle(&self, index: u32) -> TimerHandle {
        TimerHandle { index, generation: self.entries[index as usize].generation }
    }

    /// The index behind a handle, if the handle still names a live timer.
    #[inline]
    pub(crate) fn resolve(&self, handle: TimerHandle) -> Option<u32> {
        let entry = self.entries.get(handle.index as usize)?;
        (entry.generation == handle.generation && entry.link != NIL).then_some(handle.index)
    }

    pub(crate) fn deadline(&self, index: u32) -> u64 {
        self.lists.deadline(self.entries[index as usize].link)
    }

    pub(crate) fn value(&self, index: u32) -> &T {
        match &self.entries[index as usize].slot {
            Slot::Occupied(value) => value,
            Slot::Vacant { .. } => unreachable!("a resolved entry is occupied"),
        }
    }

    pub(crate) fn value_mut(&mut self, index: u32) -> &mut T {
        match &mut self.entries[index as usize].slot {
            Slot::Occupied(value) => value,
            Slot::Vacant { .. } => unreachable!("a resolved entry is occupied"),
        }
    }

    /// Cancels a live timer, dropping its value (the entry holds it, so nothing is left to
    /// drop later).
    #[inline(always)]
    pub(crate) fn discard(&mut self, index: u32) {
        drop(self.cancel(index));
    }

    /// Cancels a live timer: frees its entry and leaves its link as a tombstone.
    #[inline(always)]
    pub(crate) fn cancel(&mut self, index: u32) -> T {
        if self.is_small() {
            return self.cancel_small(index);
        }
        self.release(index).1
    }

    /// [`Store::cancel`] while the slab is small: keeps `earliest` up to date. Out of line,
    /// so that a large wheel's cancel stays small enough to inline into its caller's loop.
    #[inline(never)]
    fn cancel_small(&mut self, index: u32) -> T {
        let deadline = self.deadline(index);
        let (_, value) = self.release(index);
        if deadline == self.earliest {
            self.refresh_earliest();
        }
        value
    }

    /// Whether the slab is small enough to keep `earliest` and scan it.
    #[inline]
    fn is_small(&self) -> bool {
        self.entries.len() <= SMALL_SLAB
    }

    /// Recomputes `earliest` from the slab (small slabs only).
    #[cold]
    #[inline(never)]
    fn refresh_earliest(&mut self) {
        let earliest = self.live_entries().map(|(_, link)| self.lists.deadline(link)).min();
        self.earliest = earliest.unwrap_or(u64::MAX);
    }

    /// Re-arms a live timer to `deadline` with a fresh start sequence, leaving its old link
    /// as a tombstone; returns the new link (not yet in any list).
    pub(crate) fn renew(&mut self, index: u32, deadline: u64) -> Ref {
        let seq = self.take_seq();
        let old = self.is_small().then(|| self.deadline(index));
        self.make_room();
        let r = self.lists.alloc(deadline, index);
        self.entries[index as usize].link = r.link;
        if self.keep_seqs {
            self.seqs[index as usize] = seq;
        }
        if old == Some(self.earliest) {
            self.refresh_earliest();
        } else {
            self.earliest = self.earliest.min(deadline);
        }
        r
    }

    /// Makes sure the next link needs no new pool space unless tombstones are few: when every
    /// link of the pool is in use and tombstones (the links in use beyond one per live timer)
    /// outnumber `SWEEP_RATIO` per slab entry plus the slack, every list is swept instead of
    /// growing the pool. So the pool never outgrows `(1 + SWEEP_RATIO) × slab + slack + 1`
    /// links, and a cancel counts nothing. Called before a link is taken, while every live
    /// timer has exactly one.
    #[inline(always)]
    fn make_room(&mut self) {
        // Tombstones are fewer than the links in the pool: a cheap test first.
        if self.lists.is_full() && self.lists.pool_len() > SWEEP_RATIO * self.entries.len() {
            self.sweep_if_stale();
        }
    }

    /// The rest of [`Store::make_room`]'s test, out of the way of `insert`.
    #[cold]
    #[inline(never)]
    fn sweep_if_stale(&mut self) {
        let tombstones = self.lists.pool_len() - self.len;
        if tombstones > SWEEP_RATIO * self.entries.len() + self.sweep_slack() {
            self.sweep(tombstones);
        }
    }

    /// Tombstones allowed beyond `SWEEP_RATIO` per slab entry before a sweep.
    fn sweep_slack(&self) -> usize {
        SWEEP_SLACK + self.lists.words()
    }

    /// Removes every tombstone from every list and the ready queue, keeping the order of the
    /// live links.
    #[cold]
    #[inline(never)]
    fn sweep(&mut self, tombstones: usize) {
        let entries = &self.entries;
        let dropped = self.lists.retain_all(|r| is_live(entries, r));
        debug_assert_eq!(dropped, tombstones);
    }

    /// Frees a live entry, making every handle to it stale: its handle and value.
    #[inline]
    fn release(&mut self, index: u32) -> (TimerHandle, T) {
        let entry = &mut self.entries[index as usize];
        let handle = TimerHandle { index, generation: entry.generation };
        entry.generation = entry.generation.wrapping_add(1);
        entry.link = NIL;
        let slot = std::mem::replace(&mut entry.slot, Slot::Vacant { next_free: self.free_head });
        self.free_head = index;
        self.len -= 1;
        match slot {
            Slot::Occupied(value) => (handle, value),
            Slot::Vacant { .. } => unreachable!("released a vacant entry"),
        }
    }

    /// Appends a link to slot list `list`.
    #[inline(always)]
    pub(crate) fn push(&mut self, list: u32, r: Ref) {
        self.lists.push(list, r.link);
    }

    /// Appends a link to the ready queue.
    #[inline(always)]
    pub(crate) fn push_ready(&mut self, r: Ref) {
        self.lists.push_ready(r.link);
    }

    /// Hands out the next live entry of the ready queue, dropping tombstones on the way.
    #[inline]
    pub(crate) fn pop_ready(&mut self) -> Option<Expired<T>> {
        while let Some(r) = self.lists.pop_ready() {
            if is_live(&self.entries, r) {
                let (handle, value) = self.release(r.index);
                if r.deadline == self.earliest && self.is_small() {
                    self.refresh_earliest();
                }
                return Some(Expired { handle, deadline: r.deadline, value });
            }
        }
        None
    }

    /// Whether the ready queue is empty (of live links and tombstones alike).
    #[inline(always)]
    pub(crate) fn ready_is_empty(&self) -> bool {
        self.lists.ready_is_empty()
    }

    /// Whether the ready queue holds a live entry.
    pub(crate) fn ready_has_live(&self) -> bool {
        self.lists.ready_refs().any(|r| is_live(&self.entries, r))
    }

    /// Makes slot list `list` the ready queue (which must be empty).
    #[inline]
    pub(crate) fn list_to_ready(&mut self, list: u32) {
        self.lists.list_to_ready(list);
    }

    /// Detaches slot list `list`; take its links with [`Store::unlink_next`].
    #[inline]
    pub(crate) fn detach(&mut self, list: u32) -> u32 {
        self.lists.detach(list)
    }

    /// The next link of a detached list, unlinked, to be filed again.
    #[inline]
    pub(crate) fn unlink_next(&mut self, cursor: &mut u32) -> Option<Ref> {
        self.lists.unlink_next(cursor)
    }

    /// The live links of slot list `list`.
    pub(crate) fn live_refs(&self, list: u32) -> impl Iterator<Item = Ref> + '_ {
        self.lists.refs(list).filter(|&r| is_live(&self.entries, r))
    }

    /// One 64-bit word of the occupancy bitmap.
    #[inline]
    pub(crate) fn occupied_word(&self, word: usize) -> u64 {
        self.lists.occupied_word(word)
    }

    /// The live entries as `(index, live link)`.
    fn live_entries(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let entries = self.entries.iter().enumerate();
        entries.filter(|(_, e)| e.link != NIL).map(|(index, e)| (index as u32, e.link))
    }

    /// When the slab is small (it never held more than a connection's handful of timers),
    /// the earliest deadline of any live timer, kept up to date as timers start, stop and
    /// fire (a scan of the small slab when the earliest one goes): `Some(None)` when there
    /// is none. `None` when the slab is too large for that to be cheap.
    #[inline]
    pub(crate) fn small_min(&self) -> Option<Option<u64>> {
        self.is_small().then(|| (self.len > 0).then_some(self.earliest))
    }

    /// Every live entry as `(deadline, seq, index)`, sorted: the canonical (firing) order.
    pub(crate) fn sorted_live(&self) -> Vec<(u64, u64, u32)> {
        let mut live: Vec<(u64, u64, u32)> = self
            .live_entries()
            .map(|(index, link)| (self.lists.deadline(link), self.seqs[index as usize], index))
            .collect();
        live.sort_unstable();
        live
    }
}

#[cfg(feature = "serde")]
mod snapshot {
    //! The slab layout as data, so a restored wheel hands out the same handles as the original.

    use super::{Entry, Ref, Slot, Store, NIL};

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

        /// A store (for a hierarchical wheel: queues) laid out as `generations` / `free`
        /// describe, with nothing live yet.
        /// The caller has checked that the indices are in range and distinct.
        pub(crate) fn from_layout(
            list_count: usize,
            generations: &[u32],
            free: &[u32],
            next_seq: u64,
        ) -> Self {
            let mut store = Store::new(list_count, false, true);
            let vacant = |&generation| Entry {
                generation,
                link: NIL,
                slot: Slot::Vacant { next_free: NIL },
            };
            store.entries = generations.iter().map(vacant).collect();
            store.seqs = vec![0; generations.len()];
            store.len = generations.len();
            for (position, &index) in free.iter().enumerate() {
                let next_free = free.get(position + 1).copied().unwrap_or(NIL);
                store.entries[index as usize].slot = Slot::Vacant { next_free };
                store.len -= 1;
            }
            store.free_head = free.first().copied().unwrap_or(NIL);
            store.next_seq = next_seq;
            store
        }

        /// Puts a timer at a chosen (vacant, off-free-list) index and returns its link, to be
        /// filed.
        pub(crate) fn occupy(&mut self, index: u32, deadline: u64, seq: u64, value: T) -> Ref {
            let r = self.lists.alloc(deadline, index);
            self.entries[index as usize].link = r.link;
            self.seqs[index as usize] = seq;
            self.entries[index as usize].slot = Slot::Occupied(value);
            self.earliest = self.earliest.min(deadline);
            r
        }
    }
}

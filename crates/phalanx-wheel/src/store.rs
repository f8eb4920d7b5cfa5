//! The entry store both wheels share: a slab of timer entries with a free list, and the slot
//! lists of links to entries (`lists.rs`). (The public methods the wheels share on top of it
//! are in `shared.rs`.)
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
//! Tombstones are counted; when they outnumber three times the slab's entries (the most
//! timers ever held at once, plus a constant and the table's size in words) every list is
//! swept. That keeps the lists within a constant factor of the slab and costs O(1) amortized
//! per cancel.
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

/// How many tombstones per slab entry are allowed before a sweep.
const SWEEP_RATIO: usize = 3;

/// Tombstones allowed beyond `SWEEP_RATIO` per slab entry (and the bitmap's words) before a
/// sweep. Small in debug builds so that the tests sweep often, mid-drain included.
const SWEEP_SLACK: usize = if cfg!(debug_assertions) { 2 } else { 64 };

/// The "no entry" link. It is never a valid slab index: the slab refuses to grow to it.
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a store can hold: every index below [`NIL`].
pub(crate) const ENTRIES_MAX: usize = NIL as usize;

/// Whether `r` is its timer's live link (else it is a tombstone): its entry is occupied and
/// names it.
#[inline(always)]
fn is_live<T>(slab: &Slab<T>, r: Ref) -> bool {
    slab.is_occupied(r.index) && slab.entries[r.index as usize].link == r.link
}

/// What a handle check, a stop and a liveness check read, kept apart from the values so that
/// it is dense: a stop reads and writes one 8-byte state (plus the value, for
/// [`Store::cancel`]).
struct Slab<T> {
    /// Per entry: its generation (low 32 bits), bumped every time the entry is freed so that
    /// handles to the old occupant go stale, and [`OCCUPIED`] while it holds a timer. A handle
    /// is live when its generation and `OCCUPIED` match the state: one comparison.
    states: Vec<u64>,
    /// Per entry: the timer's live link and value.
    entries: Vec<Entry<T>>,
    /// The vacant entries, the next one to reuse last (a stack: the same order the old
    /// intrusive free list had).
    free: Vec<u32>,
}

/// A slab entry's timer: what firing it reads besides its state.
struct Entry<T> {
    /// The timer's live link (meaningless while vacant).
    link: u32,
    /// Its value, `None` while vacant (for a `T` without drop glue a stopped timer's value is
    /// left in place, unread, until the entry is reused).
    value: Option<T>,
}

/// The bit of a [`Slab`] state that says the entry holds a timer.
const OCCUPIED: u64 = 1 << 32;

impl<T> Slab<T> {
    #[inline(always)]
    fn is_occupied(&self, index: u32) -> bool {
        self.states[index as usize] & OCCUPIED != 0
    }

    #[inline(always)]
    fn generation(&self, index: u32) -> u32 {
        self.states[index as usize] as u32
    }

    #[inline(always)]
    fn set_occupied(&mut self, index: u32) {
        self.states[index as usize] |= OCCUPIED;
    }

    /// Entries, vacant or not.
    #[inline(always)]
    fn len(&self) -> usize {
        self.states.len()
    }

    /// A new vacant entry at the end (not on the free list); its index.
    #[inline]
    fn grow(&mut self) -> u32 {
        self.states.push(0);
        self.entries.push(Entry { link: NIL, value: None });
        (self.states.len() - 1) as u32
    }

    fn reserve(&mut self, additional: usize) {
        self.states.reserve(additional);
        self.entries.reserve(additional);
        self.free.reserve(additional);
    }
}

/// Slab (generations, occupancy, live links and values, each an array of its own) + slot
/// lists (with their occupancy bitmap and the ready queue).
pub(crate) struct Store<T> {
    slab: Slab<T>,
    /// Per slab entry: the timer's start sequence (meaningless while vacant). Kept only when
    /// `keep_seqs` (the hierarchical wheel lists and snapshots them; the hashed wheel never
    /// reads one, its lists alone keep the order).
    seqs: Vec<u64>,
    keep_seqs: bool,
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
        let slab = Slab { states: Vec::new(), entries: Vec::new(), free: Vec::new() };
        Store {
            slab,
            seqs: Vec::new(),
            keep_seqs,
            lists: Lists::new(list_count, stacks),
            next_seq: 0,
            earliest: u64::MAX,
        }
    }

    /// Live timers: every slab entry not on the free list.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.slab.len() - self.slab.free.len()
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        let vacant = self.slab.free.len();
        if additional > vacant {
            self.slab.reserve(additional - vacant);
            if self.keep_seqs {
                self.seqs.reserve(additional - vacant);
            }
        }
        // Lists hold a link per live timer and per tombstone (see `make_room`).
        let entries = self.slab.len().max(self.len() + additional);
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
        let index = match self.slab.free.pop() {
            Some(index) => index,
            None if self.slab.len() < ENTRIES_MAX => {
                if self.keep_seqs {
                    self.seqs.push(0);
                }
                self.slab.grow()
            }
            None => return None,
        };
        let r = self.lists.alloc(deadline, index);
        let i = index as usize;
        self.slab.entries[i].link = r.link;
        self.slab.set_occupied(index);
        self.slab.entries[i].value = Some(value);
        if self.keep_seqs {
            self.seqs[i] = seq;
        }
        self.earliest = self.earliest.min(deadline);
        Some((r, TimerHandle { index, generation: self.slab.generation(index) }))
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
        TimerHandle { index, generation: self.slab.generation(index) }
    }

    /// The index behind a handle, if the handle still names a live timer.
    #[inline(always)]
    pub(crate) fn resolve(&self, handle: TimerHandle) -> Option<u32> {
        let state = *self.slab.states.get(handle.index as usize)?;
        (state == OCCUPIED | u64::from(handle.generation)).then_some(handle.index)
    }

    pub(crate) fn deadline(&self, index: u32) -> u64 {
        self.lists.deadline(self.slab.entries[index as usize].link)
    }

    pub(crate) fn value(&self, index: u32) -> &T {
        self.slab.entries[index as usize].value.as_ref().expect("a resolved entry is occupied")
    }

    pub(crate) fn value_mut(&mut self, index: u32) -> &mut T {
        self.slab.entries[index as usize].value.as_mut().expect("a resolved entry is occupied")
    }

    /// Cancels a live timer: frees its entry, leaves its link as a tombstone and returns its
    /// value.
    #[inline(always)]
    pub(crate) fn cancel(&mut self, index: u32) -> T {
        let value =
            self.slab.entries[index as usize].value.take().expect("a resolved entry is occupied");
        self.stop(index);
        value
    }

    /// Cancels a live timer without taking its value: frees its entry and leaves its link as
    /// a tombstone. A value without drop glue is left in place, unread (overwritten when the
    /// entry is reused); any other is dropped now.
    #[inline(always)]
    pub(crate) fn stop(&mut self, index: u32) {
        if std::mem::needs_drop::<T>() {
            self.slab.entries[index as usize].value = None;
        }
        let deadline = self.is_small().then(|| self.deadline(index));
        self.release(index);
        if deadline == Some(self.earliest) {
            self.refresh_earliest();
        }
    }

    /// Whether the slab is small enough to keep `earliest` and scan it.
    #[inline]
    fn is_small(&self) -> bool {
        self.slab.len() <= SMALL_SLAB
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
        self.slab.entries[index as usize].link = r.link;
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

    /// Makes sure the next link needs no new pool space unless the tombstones are few: when
    /// every link of the pool is in use and tombstones (the links in use beyond one per live
    /// timer) outnumber `SWEEP_RATIO` per slab entry plus the slack, every list is swept
    /// instead of growing the pool. So the pool never outgrows
    /// `(1 + SWEEP_RATIO) × slab + slack + 1` links, and a cancel need not count anything.
    /// Called before a new link is taken, while every live timer has exactly one.
    #[inline(always)]
    fn make_room(&mut self) {
        if self.lists.is_full() {
            let tombstones = self.lists.pool_len() - self.len();
            if tombstones > SWEEP_RATIO * self.slab.len() + self.sweep_slack() {
                self.sweep(tombstones);
            }
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
        let slab = &self.slab;
        let dropped = self.lists.retain_all(|r| is_live(slab, r));
        debug_assert_eq!(dropped, tombstones);
    }

    /// Frees a live entry (but not its value), making every handle to it stale: its handle.
    #[inline(always)]
    fn release(&mut self, index: u32) -> TimerHandle {
        let state = &mut self.slab.states[index as usize];
        let generation = *state as u32;
        let handle = TimerHandle { index, generation };
        *state = u64::from(generation.wrapping_add(1));
        self.slab.free.push(index);
        handle
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
            if is_live(&self.slab, r) {
                let value = self.slab.entries[r.index as usize].value.take();
                let handle = self.release(r.index);
                let value = value.expect("a live entry is occupied");
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
        self.lists.ready_refs().any(|r| is_live(&self.slab, r))
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

    /// Moves the live links due at `tick` from slot list `list` to the (empty) ready queue, in
    /// order, and drops the tombstones due at `tick` and every link due before it (tombstones
    /// too: a live entry is never left behind its tick). Keeps the rest. Whether any live
    /// link was moved.
    #[inline]
    pub(crate) fn collect_due(&mut self, list: u32, tick: u64) -> bool {
        debug_assert!(self.lists.ready_is_empty());
        let slab = &self.slab;
        self.lists.collect_due(list, tick, |r| is_live(slab, r));
        !self.lists.ready_is_empty()
    }

    /// The live links of slot list `list`.
    pub(crate) fn live_refs(&self, list: u32) -> impl Iterator<Item = Ref> + '_ {
        self.lists.refs(list).filter(|&r| is_live(&self.slab, r))
    }

    /// One 64-bit word of the occupancy bitmap.
    #[inline]
    pub(crate) fn occupied_word(&self, word: usize) -> u64 {
        self.lists.occupied_word(word)
    }

    /// The first occupied slot list in `from..limit`, if any.
    #[inline]
    pub(crate) fn next_occupied(&self, from: usize, limit: usize) -> Option<usize> {
        self.lists.next_occupied(from, limit)
    }

    /// The live entries as `(index, live link)`.
    fn live_entries(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let slab = &self.slab;
        (0..slab.len() as u32)
            .filter(|&index| slab.is_occupied(index))
            .map(|index| (index, slab.entries[index as usize].link))
    }

    /// When the slab is small (it never held more than a connection's handful of timers),
    /// the earliest deadline of any live timer, kept up to date as timers start, stop and
    /// fire (a scan of the small slab when the earliest one goes): `Some(None)` when there
    /// is none. `None` when the slab is too large for that to be cheap.
    #[inline]
    pub(crate) fn small_min(&self) -> Option<Option<u64>> {
        self.is_small().then(|| (self.len() > 0).then_some(self.earliest))
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

    /// The smallest deadline of any live timer not in the ready queue, by walking every slot
    /// list (O(n)).
    pub(crate) fn min_deadline(&self) -> Option<u64> {
        let mut best: Option<u64> = None;
        let mut slot = 0;
        while let Some(found) = self.next_occupied(slot, self.lists.list_count()) {
            for r in self.live_refs(found as u32) {
                best = Some(best.map_or(r.deadline, |b| b.min(r.deadline)));
            }
            slot = found + 1;
        }
        best
    }
}

#[cfg(feature = "serde")]
mod snapshot {
    //! The slab layout as data, so a restored wheel hands out the same handles as the original.

    use super::{Ref, Store};

    impl<T> Store<T> {
        /// Per-entry generations and the free list in the order entries will be reused.
        pub(crate) fn layout(&self) -> (Vec<u32>, Vec<u32>) {
            let free = self.slab.free.iter().rev().copied().collect();
            (self.slab.states.iter().map(|&state| state as u32).collect(), free)
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
            store.slab.reserve(generations.len());
            for &generation in generations {
                store.slab.grow();
                *store.slab.states.last_mut().expect("just grown") = u64::from(generation);
            }
            store.slab.free = free.iter().rev().copied().collect();
            store.seqs = vec![0; generations.len()];
            store.next_seq = next_seq;
            store
        }

        /// Puts a timer at a chosen (vacant, off-free-list) index and returns its link, to be
        /// filed.
        pub(crate) fn occupy(&mut self, index: u32, deadline: u64, seq: u64, value: T) -> Ref {
            let r = self.lists.alloc(deadline, index);
            self.slab.entries[index as usize].link = r.link;
            self.slab.set_occupied(index);
            self.seqs[index as usize] = seq;
            self.slab.entries[index as usize].value = Some(value);
            self.earliest = self.earliest.min(deadline);
            r
        }
    }
}

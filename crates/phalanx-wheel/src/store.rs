//! The entry store both wheels share: a slab of timer entries with a free list, and slot
//! lists of *references* to entries. (The public methods the wheels share on top of it are in
//! `shared.rs`.)
//!
//! Everything is addressed by `u32` indices so a handle stays small and `Copy`.
//!
//! # Lazy cancellation
//!
//! A slot list is a list of [`Ref`]s: `(deadline, start sequence, slab index)`. Cancelling a
//! timer frees its slab entry at once (so `len`, handles, the free list and snapshots are
//! exactly what they would be with eager removal) but leaves its `Ref` in the slot list as a
//! *tombstone*: a reference whose sequence no longer matches the entry's. A tombstone is
//! dropped when its slot is visited (fired, cascaded or swept) and never fires: a `Ref` is live
//! only while its entry is occupied *and* carries the same start sequence, and a start
//! sequence is never issued twice. `reset` does the same to the old `Ref` and files a new one.
//! So a cancel touches one entry, where unlinking from a doubly linked list touched three
//! scattered ones.
//!
//! Tombstones are counted; when they outnumber the slab's entries (the most timers ever
//! held at once, plus a constant and the table's size in words) every list is swept. That
//! keeps the lists within a constant factor of the slab, which is the memory the wheel
//! already holds, and costs O(1) amortized per cancel.
//!
//! # Order
//!
//! A slot list is always in start-sequence order *among its live references*: references
//! are only appended (a new start has the largest sequence so far), and a wheel only moves a
//! list's references, in order, into lists that hold no live reference. So firing order is
//! deterministic without any sorting. Each list has one bit in an occupancy bitmap, set while
//! the list holds any reference, so a wheel can jump over empty slots with `trailing_zeros`.
//!
//! Due entries wait in a separate *ready* queue until `poll` hands them out. The lists
//! themselves are in `lists.rs`.

use crate::lists::Lists;
use crate::{Expired, TimerHandle};

/// The most entries a slab may have held for [`Store::small_min`] to scan it.
const SMALL_SLAB: usize = 16;

/// Tombstones allowed beyond twice the live timers (and the bitmap's words) before a sweep.
/// Small in debug builds so that the tests sweep often, mid-drain included.
const SWEEP_SLACK: usize = if cfg!(debug_assertions) { 2 } else { 64 };

/// The "no entry" link. It is never a valid slab index: the slab refuses to grow to it.
pub(crate) const NIL: u32 = u32::MAX;

/// The most entries a store can hold: every index below [`NIL`].
pub(crate) const ENTRIES_MAX: usize = NIL as usize;

/// A slab entry: a live timer while `value` is `Some`, else a link of the free list.
struct Entry<T> {
    deadline: u64,
    seq: u64,
    /// Bumped every time the entry is freed, so handles to the old occupant go stale.
    generation: u32,
    /// The next free entry while vacant.
    next_free: u32,
    value: Option<T>,
}

/// A slot list's reference to a timer: live while the entry at `index` is occupied with
/// start sequence `seq` (then its deadline is `deadline`), a tombstone otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ref {
    pub(crate) deadline: u64,
    pub(crate) seq: u64,
    pub(crate) index: u32,
}

/// Whether `r` still names a live timer (else it is a tombstone).
#[inline]
fn is_live<T>(entries: &[Entry<T>], r: Ref) -> bool {
    let entry = &entries[r.index as usize];
    entry.seq == r.seq && entry.value.is_some()
}

/// Slab + slot lists (with their occupancy bitmap and the ready queue).
pub(crate) struct Store<T> {
    entries: Vec<Entry<T>>,
    free_head: u32,
    len: usize,
    lists: Lists,
    /// Tombstones in the lists and the ready queue.
    stale: usize,
    next_seq: u64,
}

impl<T> Store<T> {
    /// A store with `list_count` slot lists.
    pub(crate) fn new(list_count: usize) -> Self {
        Store {
            entries: Vec::new(),
            free_head: NIL,
            len: 0,
            lists: Lists::new(list_count),
            stale: 0,
            next_seq: 0,
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
        }
        // Lists hold a link per live timer and per tombstone, and tombstones stay fewer than
        // the slab's entries plus a constant (see `add_tombstone`).
        let entries = self.entries.len().max(self.len + additional);
        self.lists.reserve_total(self.len + additional + entries + self.sweep_slack());
    }

    #[cfg(feature = "serde")]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Stores a new timer and returns its reference (not yet in any list), or `None` when the
    /// slab is full.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, deadline: u64, value: T) -> Option<Ref> {
        let seq = self.take_seq();
        let index = if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            self.free_head = entry.next_free;
            entry.deadline = deadline;
            entry.seq = seq;
            entry.next_free = NIL;
            entry.value = Some(value);
            index
        } else {
            if self.entries.len() >= ENTRIES_MAX {
                return None;
            }
            let entry = Entry { deadline, seq, generation: 0, next_free: NIL, value: Some(value) };
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        };
        self.len += 1;
        Some(Ref { deadline, seq, index })
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
        (entry.generation == handle.generation && entry.value.is_some()).then_some(handle.index)
    }

    pub(crate) fn deadline(&self, index: u32) -> u64 {
        self.entries[index as usize].deadline
    }

    pub(crate) fn value(&self, index: u32) -> &T {
        self.entries[index as usize].value.as_ref().expect("a resolved entry is occupied")
    }

    pub(crate) fn value_mut(&mut self, index: u32) -> &mut T {
        self.entries[index as usize].value.as_mut().expect("a resolved entry is occupied")
    }

    /// Cancels a live timer: frees its entry and leaves its reference as a tombstone.
    #[inline]
    pub(crate) fn cancel(&mut self, index: u32) -> T {
        let expired = self.release(index);
        self.add_tombstone();
        expired.value
    }

    /// Re-arms a live timer to `deadline` with a fresh start sequence, leaving its old
    /// reference as a tombstone; returns the new reference (not yet in any list).
    pub(crate) fn renew(&mut self, index: u32, deadline: u64) -> Ref {
        let seq = self.take_seq();
        let entry = &mut self.entries[index as usize];
        entry.deadline = deadline;
        entry.seq = seq;
        self.add_tombstone();
        Ref { deadline, seq, index }
    }

    #[inline]
    fn add_tombstone(&mut self) {
        self.stale += 1;
        if self.stale > 3 * self.entries.len() + self.sweep_slack() {
            self.sweep();
        }
    }

    /// Tombstones allowed beyond the slab's entries before a sweep.
    fn sweep_slack(&self) -> usize {
        SWEEP_SLACK + self.lists.words()
    }

    /// Removes every tombstone from every list and the ready queue, keeping the order of the
    /// live references.
    fn sweep(&mut self) {
        let entries = &self.entries;
        let dropped = self.lists.retain_all(|r| is_live(entries, r));
        debug_assert_eq!(dropped, self.stale);
        self.stale = 0;
    }

    /// Frees a live entry, making every handle to it stale.
    #[inline]
    fn release(&mut self, index: u32) -> Expired<T> {
        let entry = &mut self.entries[index as usize];
        let handle = TimerHandle { index, generation: entry.generation };
        entry.generation = entry.generation.wrapping_add(1);
        entry.next_free = self.free_head;
        let value = entry.value.take().expect("released a vacant entry");
        self.free_head = index;
        self.len -= 1;
        Expired { handle, deadline: entry.deadline, value }
    }

    /// Appends a reference to slot list `list`.
    #[inline(always)]
    pub(crate) fn push(&mut self, list: u32, r: Ref) {
        self.lists.push(list, r);
    }

    /// Appends a reference to the ready queue.
    #[inline(always)]
    pub(crate) fn push_ready(&mut self, r: Ref) {
        self.lists.push_ready(r);
    }

    /// Hands out the next live entry of the ready queue, dropping tombstones on the way.
    #[inline]
    pub(crate) fn pop_ready(&mut self) -> Option<Expired<T>> {
        while let Some(r) = self.lists.pop_ready() {
            if is_live(&self.entries, r) {
                return Some(self.release(r.index));
            }
            self.stale -= 1;
        }
        None
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

    /// Detaches slot list `list`; walk its references with [`Store::take_next`].
    #[inline]
    pub(crate) fn detach(&mut self, list: u32) -> u32 {
        self.lists.detach(list)
    }

    /// The next reference of a detached list (see [`Lists::take_next`]).
    #[inline]
    pub(crate) fn take_next(&mut self, cursor: &mut u32) -> Option<Ref> {
        self.lists.take_next(cursor)
    }

    /// Moves the references due at `tick` from slot list `list` to the (empty) ready queue,
    /// in order, and drops those due before it (tombstones: a live entry is never left
    /// behind its tick). Keeps the rest. Whether any reference was moved.
    #[inline]
    pub(crate) fn collect_due(&mut self, list: u32, tick: u64) -> bool {
        debug_assert!(self.lists.ready_is_empty());
        self.stale -= self.lists.collect_due(list, tick);
        !self.lists.ready_is_empty()
    }

    /// The live references of slot list `list`.
    pub(crate) fn live_refs(&self, list: u32) -> impl Iterator<Item = Ref> + '_ {
        self.lists.refs(list).filter(|&r| is_live(&self.entries, r))
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

    /// When the slab is small (a connection's handful of timers), the earliest deadline of
    /// any live timer, found by scanning the slab: `Some(None)` when there is none. `None`
    /// when the slab is too large for that to be cheap.
    #[inline]
    pub(crate) fn small_min(&self) -> Option<Option<u64>> {
        (self.entries.len() <= SMALL_SLAB).then(|| {
            self.entries.iter().filter(|entry| entry.value.is_some()).map(|e| e.deadline).min()
        })
    }

    /// Every live entry as `(deadline, seq, index)`, sorted: the canonical (firing) order.
    pub(crate) fn sorted_live(&self) -> Vec<(u64, u64, u32)> {
        let mut live: Vec<(u64, u64, u32)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.value.is_some())
            .map(|(index, entry)| (entry.deadline, entry.seq, index as u32))
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

    use super::{Entry, Store, NIL};

    impl<T> Store<T> {
        /// Per-entry generations and the free list in chain order.
        pub(crate) fn layout(&self) -> (Vec<u32>, Vec<u32>) {
            let generations = self.entries.iter().map(|entry| entry.generation).collect();
            let mut free = Vec::with_capacity(self.entries.len() - self.len);
            let mut cursor = self.free_head;
            while cursor != NIL {
                free.push(cursor);
                cursor = self.entries[cursor as usize].next_free;
            }
            (generations, free)
        }

        /// A store laid out as `generations` / `free` describe, with nothing live yet.
        /// The caller has checked that the indices are in range and distinct.
        pub(crate) fn from_layout(
            list_count: usize,
            generations: &[u32],
            free: &[u32],
            next_seq: u64,
        ) -> Self {
            let mut store = Store::new(list_count);
            store.entries = generations
                .iter()
                .map(|&generation| Entry {
                    deadline: 0,
                    seq: 0,
                    generation,
                    next_free: NIL,
                    value: None,
                })
                .collect();
            store.len = generations.len();
            for (position, &index) in free.iter().enumerate() {
                store.entries[index as usize].next_free =
                    free.get(position + 1).copied().unwrap_or(NIL);
                store.len -= 1;
            }
            store.free_head = free.first().copied().unwrap_or(NIL);
            store.next_seq = next_seq;
            store
        }

        /// Puts a timer at a chosen (vacant, off-free-list) index and returns its reference.
        pub(crate) fn occupy(
            &mut self,
            index: u32,
            deadline: u64,
            seq: u64,
            value: T,
        ) -> super::Ref {
            let entry = &mut self.entries[index as usize];
            entry.deadline = deadline;
            entry.seq = seq;
            entry.value = Some(value);
            super::Ref { deadline, seq, index }
        }
    }
}

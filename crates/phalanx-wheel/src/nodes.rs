//! The hashed wheel's store: slab entries that are themselves the list nodes.
//!
//! A timer is one *node*, 20 bytes for a `u32` value (its deadline, the next node of the list
//! it is in, and its value), and one 4-byte *generation* in an array beside the nodes. Walking
//! a slot's stack reads each timer's deadline, link and value in one cache line, where a
//! separate link and slab entry cost two dependent misses a timer; the generation is an
//! independent load from an array a fifth the size, so its miss overlaps the node's. A handle
//! check and a discard touch the generation alone: 4 bytes a timer, as a binary heap's lazy
//! cancel does. A node's index is its handle's index, so a node never moves between indices
//! while its timer is pending.
//!
//! Each node is in exactly one list: a slot's stack (newest first), the ready queue, or the
//! free list. A node is *live* while its generation is odd: the generation is bumped when a
//! timer starts in the node and when it fires or is cancelled, so a handle goes stale at once
//! (after 2^31 timers in the same node a kept handle would alias: don't keep one that long).
//!
//! # Lazy cancellation
//!
//! Cancelling a timer bumps its generation at once (so `len` and handles are exact) and takes
//! its value; discarding one only bumps the generation, and the value stays in the node until
//! the node is freed. Either way the node stays in its slot's stack as a *tombstone*. A
//! tombstone is freed (dropping a discarded value) when its slot is next visited (every
//! tombstone of the visited slot, whatever its deadline) or when the ready queue reaches it,
//! or in a sweep, and only then can its index be reused. In a small store (one that never held
//! more than `SMALL` timers: a connection's handful) a cancel or discard unlinks the node at
//! once instead, so a small store never holds a tombstone.
//!
//! `reset` must keep the node (the handle names it), so it unlinks the node from its list,
//! walking the stack from the slot's head to find the node before it: O(1) plus the newer
//! nodes of its slot (tombstones included), or of the ready queue for a timer already due.
//!
//! Tombstones are not counted as they are made: they are the nodes in use beyond the live
//! ones. Before a start takes a new node, if the free list is empty and tombstones outnumber
//! `SWEEP_RATIO` times the most timers ever held plus a slack, every list is swept instead of
//! growing the slab. So the slab stays within `(1 + SWEEP_RATIO)` times that peak plus the
//! slack, and a start costs O(1) amortized.
//!
//! A sweep of a slab of up to `REBUILD_MAX` nodes (at its first sweep) rebuilds the stacks
//! in one pass over the slab in index order, reading memory in order; a larger one walks its
//! stacks, 16 at a time (`sweep.rs`). See [`Sweeps`] and `NodeStore::sweep`.
//!
//! # Order
//!
//! A slot's stack holds its live nodes newest first (a start or reset pushes its node in
//! front), so taking the due ones out, prepending each, puts them oldest first: start order.
//! A rebuild files the live nodes in index order instead, so a store that rebuilds keeps each
//! node's start sequence (a `u64` in an array beside the nodes, written by a start or reset)
//! and, when two or more timers of a slot come due together, checks them against it and
//! sorts them back into start order if need be. A store that walks keeps no sequences.

use crate::store::{ENTRIES_MAX, NIL};
use crate::sweep::{SweptLists, Walk};
use crate::{Expired, TimerHandle};

/// The most timers a store may have held for it to keep its earliest deadline exactly and
/// unlink a cancelled node at once.
const SMALL: usize = 16;

/// The most nodes a slab may hold to count as fitting in a core's cache (640 KiB for a `u32`
/// value): the hashed wheel then loads nothing ahead of its walk.
pub(crate) const CACHED_NODES: usize = 1 << 15;

/// How many tombstones per timer of the peak are allowed before a sweep (when no node is
/// free).
const SWEEP_RATIO: usize = 3;

/// [`NodeStore::reserve`] makes room for one tombstone per this many timers.
const RESERVED_TOMBSTONES: usize = 4;

/// Tombstones allowed beyond `SWEEP_RATIO` per timer before a sweep. Small in debug builds
/// so that the tests sweep often, mid-drain included.
const SWEEP_SLACK: usize = if cfg!(debug_assertions) { 2 } else { 64 };

/// The most nodes a slab may hold for a sweep to rebuild the stacks; a larger one walks them.
const REBUILD_MAX: usize = 1 << 20;

/// How a store sweeps: by rebuilding its stacks in one pass over the slab (which needs every
/// node's start sequence, to put timers due together back in start order), or by walking its
/// stacks (which keeps their order). A store rebuilds if its slab holds at most
/// `REBUILD_MAX` nodes at its first sweep, and walks if it outgrows that first: keeping a
/// sequence costs a start a write to one more array, a cache miss of its own in a slab far
/// larger than a core's cache (a steady state at 1e6 timers: 1.3–1.5x the time).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sweeps {
    /// No sweep yet, and the slab is small enough to rebuild: starts keep their sequences.
    Undecided,
    /// Sweeps rebuild the stacks; starts keep their sequences; a slot's due timers are put
    /// back in start order when a rebuild left them out of it.
    Rebuild,
    /// Sweeps walk the stacks; no sequences are kept.
    Walk,
}

/// A timer's node: all of it in one place.
struct Node<T> {
    /// The deadline as two halves, so that the node is 4-byte aligned: 16 bytes for a value
    /// whose `Option` fits in 4 (a small enum), 20 for a `u32`, where a `u64` field would
    /// round the node up to 24.
    deadline: [u32; 2],
    /// The next node of the list this one is in (slot stack, ready queue or free list).
    next: u32,
    /// The timer's value while it is pending; after a discard, until the node is freed.
    /// `None` once the timer fired or was cancelled, and in a free node.
    value: Option<T>,
}

impl<T> Node<T> {
    #[inline(always)]
    fn deadline(&self) -> u64 {
        u64::from(self.deadline[0]) | u64::from(self.deadline[1]) << 32
    }
}

#[inline(always)]
fn split(deadline: u64) -> [u32; 2] {
    [deadline as u32, (deadline >> 32) as u32]
}

/// A filed-to-be timer as a wheel sees it: its node and deadline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ref {
    pub(crate) index: u32,
    pub(crate) deadline: u64,
}

#[derive(Clone, Copy)]
struct Queue {
    head: u32,
    tail: u32,
}

impl Queue {
    const EMPTY: Queue = Queue { head: NIL, tail: NIL };

    /// Appends node `index` (whose `next` is already `NIL`) to the queue.
    #[inline(always)]
    fn append<T>(&mut self, nodes: &mut [Node<T>], index: u32) {
        if self.head == NIL {
            self.head = index;
        } else {
            nodes[self.tail as usize].next = index;
        }
        self.tail = index;
    }
}

pub(crate) struct NodeStore<T> {
    nodes: Vec<Node<T>>,
    /// Each node's generation, odd while its timer is pending: bumped when a timer starts in
    /// the node and when it fires or is cancelled, so handles to it go stale. Apart from the
    /// nodes, so that a handle check and a discard touch 4 bytes a timer.
    gens: Vec<u32>,
    /// The free list's first node.
    free: u32,
    /// Live timers.
    len: usize,
    /// The most live timers ever held at once.
    peak: usize,
    /// Each slot's stack: its newest node.
    heads: Vec<u32>,
    /// One bit a slot, set while its stack holds any node.
    occupied: Vec<u64>,
    ready: Queue,
    /// While the store is small: the earliest deadline of any live timer (`u64::MAX` when
    /// there is none).
    earliest: u64,
    /// While the store is small: one past the highest node index a timer has used, so that
    /// [`NodeStore::refresh_earliest`] scans those nodes, not the free ones `reserve` made.
    small_used: usize,
    /// A sink for [`NodeStore::touch`]'s loads.
    touched: u32,
    /// Each node's start sequence: the `next_seq` of its timer's start (or last reset). Read
    /// only to put the due timers of a slot in start order after a sweep (see `sweep`).
    seqs: Vec<u64>,
    /// The next start's sequence.
    next_seq: u64,
    /// How this store's sweeps go, decided once: see [`Sweeps`].
    sweeps: Sweeps,
    /// [`NodeStore::order_due`]'s scratch: the due nodes of a slot.
    due_scratch: Vec<u32>,
}

impl<T> NodeStore<T> {
    /// A store with `slot_count` (a power of two) slot stacks.
    pub(crate) fn new(slot_count: usize) -> Self {
        NodeStore {
            nodes: Vec::new(),
            gens: Vec::new(),
            free: NIL,
            len: 0,
            peak: 0,
            heads: vec![NIL; slot_count],
            occupied: vec![0; slot_count.div_ceil(64)],
            ready: Queue::EMPTY,
            earliest: u64::MAX,
            small_used: 0,
            touched: 0,
            seqs: Vec::new(),
            next_seq: 0,
            sweeps: Sweeps::Undecided,
            due_scratch: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The nodes in the slab: live, tombstones and free.
    #[inline]
    pub(crate) fn slab_len(&self) -> usize {
        self.nodes.len()
    }

    /// Makes room for `additional` more timers, and tombstones for a quarter of the most
    /// timers held, as free nodes: written now, so that a start neither allocates nor faults
    /// in a fresh page. More tombstones than that grow the slab, up to its bound of
    /// `SWEEP_RATIO` a timer: reserving that bound up front would take four times the memory
    /// the timers need, most of it never used.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let peak = self.peak.max(self.len.saturating_add(additional));
        let total = peak.saturating_add(peak / RESERVED_TOMBSTONES + self.sweep_slack() + 1);
        // (Where `usize` is 32 bits, as on wasm32, `ENTRIES_MAX` is its maximum.)
        #[allow(clippy::unnecessary_min_or_max)]
        let (first, total) = (self.nodes.len(), total.min(ENTRIES_MAX));
        if total <= first {
            return;
        }
        self.nodes.reserve_exact(total - first);
        self.gens.reserve_exact(total - first);
        // Chained in index order in front of the free list, so that starts take them in order.
        let last_next = self.free;
        self.nodes.extend((first..total).map(|index| Node {
            deadline: [0; 2],
            next: if index + 1 < total { index as u32 + 1 } else { last_next },
            value: None,
        }));
        self.gens.resize(total, 0);
        self.seqs.resize(total, 0);
        self.free = first as u32;
        self.outgrow_rebuilds();
    }

    fn sweep_slack(&self) -> usize {
        SWEEP_SLACK + self.occupied.len()
    }

    /// The slot a deadline hashes to.
    #[inline(always)]
    fn slot_of(&self, deadline: u64) -> u32 {
        (deadline & (self.heads.len() as u64 - 1)) as u32
    }

    /// Stores a new timer, in no list yet: its reference and handle, or `None` when the slab
    /// is full.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, deadline: u64, value: T) -> Option<(Ref, TimerHandle)> {
        #[allow(clippy::absurd_extreme_comparisons)] // `usize::MAX` on 32-bit targets
        let full = self.nodes.len() >= ENTRIES_MAX;
        if self.free == NIL && (full || self.nodes.len() - self.len > SWEEP_RATIO * self.peak) {
            self.make_room()?;
        }
        let (index, generation) = if self.free != NIL {
            let index = self.free;
            let node = &mut self.nodes[index as usize];
            self.free = node.next;
            node.deadline = split(deadline);
            node.next = NIL;
            node.value = Some(value);
            let generation = &mut self.gens[index as usize];
            *generation = generation.wrapping_add(1);
            if self.sweeps != Sweeps::Walk {
                self.seqs[index as usize] = self.next_seq;
                self.next_seq += 1;
            }
            (index, *generation)
        } else {
            self.push_node(deadline, value)
        };
        self.len += 1;
        self.peak = self.peak.max(self.len);
        if self.is_small() {
            // Kept only while small; once the store has outgrown that, nothing reads them.
            self.earliest = self.earliest.min(deadline);
            self.small_used = self.small_used.max(index as usize + 1);
        }
        Some((Ref { index, deadline }, TimerHandle { index, generation }))
    }

    /// Appends a node to the slab for a new timer: its index and generation.
    #[cold]
    fn push_node(&mut self, deadline: u64, value: T) -> (u32, u32) {
        self.nodes.push(Node { deadline: split(deadline), next: NIL, value: Some(value) });
        self.gens.push(1);
        self.seqs.push(self.next_seq);
        self.next_seq += 1;
        self.outgrow_rebuilds();
        ((self.nodes.len() - 1) as u32, 1)
    }

    /// Decides that sweeps walk the stacks if the slab has outgrown rebuilds before its first
    /// sweep.
    fn outgrow_rebuilds(&mut self) {
        if self.sweeps == Sweeps::Undecided && self.nodes.len() > REBUILD_MAX {
            self.sweeps = Sweeps::Walk;
        }
    }

    /// Called with no free node and many tombstones, or a slab that cannot grow: sweeps if
    /// tombstones are too many, and checks that the slab may grow (else `None`).
    #[cold]
    #[inline(never)]
    fn make_room(&mut self) -> Option<()> {
        let tombstones = self.nodes.len() - self.len;
        #[allow(clippy::absurd_extreme_comparisons)] // `usize::MAX` on 32-bit targets
        let full = self.nodes.len() >= ENTRIES_MAX;
        if (full && tombstones > 0) || tombstones > SWEEP_RATIO * self.peak + self.sweep_slack() {
            let dropped = self.sweep();
            debug_assert_eq!(dropped, tombstones);
        }
        (self.free != NIL || self.nodes.len() < ENTRIES_MAX).then_some(())
    }

    /// The index behind a handle, if the handle still names a live timer.
    #[inline]
    pub(crate) fn resolve(&self, handle: TimerHandle) -> Option<u32> {
        let generation = *self.gens.get(handle.index as usize)?;
        (generation == handle.generation && generation & 1 == 1).then_some(handle.index)
    }

    pub(crate) fn deadline(&self, index: u32) -> u64 {
        self.nodes[index as usize].deadline()
    }

    pub(crate) fn value(&self, index: u32) -> &T {
        self.nodes[index as usize].value.as_ref().expect("a resolved node is live")
    }

    pub(crate) fn value_mut(&mut self, index: u32) -> &mut T {
        self.nodes[index as usize].value.as_mut().expect("a resolved node is live")
    }

    /// Whether the store is small enough to keep `earliest` and unlink at once.
    #[inline(always)]
    pub(crate) fn is_small(&self) -> bool {
        self.peak <= SMALL
    }

    /// Whether node `index` holds a pending timer.
    #[inline(always)]
    fn is_live(&self, index: u32) -> bool {
        self.gens[index as usize] & 1 == 1
    }

    /// Ends a live node's timer: bumps its generation, touching nothing else of the node,
    /// which stays where it is (with its value, if the caller leaves it). Its handle.
    #[inline(always)]
    fn end(&mut self, index: u32) -> TimerHandle {
        let generation = &mut self.gens[index as usize];
        let handle = TimerHandle { index, generation: *generation };
        *generation = generation.wrapping_add(1);
        self.len -= 1;
        handle
    }

    /// Ends a live node's timer and takes its value.
    #[inline(always)]
    fn kill(&mut self, index: u32) -> (TimerHandle, T) {
        let handle = self.end(index);
        (handle, self.nodes[index as usize].value.take().expect("killed a dead node"))
    }

    /// Puts a dead node on the free list, dropping a discarded timer's value.
    #[inline(always)]
    fn free_node(&mut self, index: u32) {
        let node = &mut self.nodes[index as usize];
        node.value = None;
        node.next = self.free;
        self.free = index;
    }

    /// Cancels a live timer: leaves its node as a tombstone (in a small store, unlinks and
    /// frees it).
    #[inline(always)]
    pub(crate) fn cancel(&mut self, index: u32) -> T {
        if self.is_small() {
            return self.cancel_small(index);
        }
        self.kill(index).1
    }

    /// Ends a live timer, dropping its value later, when its node is freed: a large store
    /// touches only the timer's generation.
    #[inline(always)]
    pub(crate) fn discard(&mut self, index: u32) {
        if self.is_small() {
            self.cancel_small(index);
        } else {
            self.end(index);
        }
    }

    /// [`NodeStore::cancel`] in a small store: unlinks and frees the node at once and keeps
    /// `earliest` up to date. Out of line, so that a large store's cancel inlines.
    #[inline(never)]
    fn cancel_small(&mut self, index: u32) -> T {
        let deadline = self.nodes[index as usize].deadline();
        let (_, value) = self.kill(index);
        self.unlink(index);
        self.free_node(index);
        if deadline == self.earliest {
            self.refresh_earliest();
        }
        value
    }

    /// Recomputes `earliest` (small stores only: a scan of the nodes timers have used).
    #[cold]
    #[inline(never)]
    fn refresh_earliest(&mut self) {
        if !self.is_small() {
            return;
        }
        let live = (0..self.small_used as u32).filter(|&index| self.is_live(index));
        self.earliest = live.map(|index| self.deadline(index)).min().unwrap_or(u64::MAX);
    }

    /// Re-arms a live timer to `deadline`: unlinks its node from its list and returns it, to
    /// be filed again (it counts as newly started).
    pub(crate) fn renew(&mut self, index: u32, deadline: u64) -> Ref {
        let old = self.nodes[index as usize].deadline();
        self.unlink(index);
        self.nodes[index as usize].deadline = split(deadline);
        if self.sweeps != Sweeps::Walk {
            self.seqs[index as usize] = self.next_seq;
            self.next_seq += 1;
        }
        if self.is_small() {
            if old == self.earliest {
                self.refresh_earliest();
            } else {
                self.earliest = self.earliest.min(deadline);
            }
        }
        Ref { index, deadline }
    }

    /// Unlinks a node from the list it is in: its deadline's slot stack, or else the ready
    /// queue.
    fn unlink(&mut self, index: u32) {
        let slot = self.slot_of(self.nodes[index as usize].deadline());
        let mut before = NIL;
        let mut cursor = self.heads[slot as usize];
        while cursor != NIL && cursor != index {
            before = cursor;
            cursor = self.nodes[cursor as usize].next;
        }
        let next = self.nodes[index as usize].next;
        if cursor == index {
            if before == NIL {
                self.heads[slot as usize] = next;
                if next == NIL {
                    self.clear_bit(slot);
                }
            } else {
                self.nodes[before as usize].next = next;
            }
        } else {
            self.unlink_ready(index);
        }
        self.nodes[index as usize].next = NIL;
    }

    /// Unlinks a node from the ready queue.
    #[cold]
    fn unlink_ready(&mut self, index: u32) {
        let mut before = NIL;
        let mut cursor = self.ready.head;
        while cursor != index {
            assert!(cursor != NIL, "a live node is in its slot's stack or the ready queue");
            before = cursor;
            cursor = self.nodes[cursor as usize].next;
        }
        let next = self.nodes[index as usize].next;
        if before == NIL {
            self.ready.head = next;
        } else {
            self.nodes[before as usize].next = next;
        }
        if self.ready.tail == index {
            self.ready.tail = before;
        }
    }

    #[inline(always)]
    fn clear_bit(&mut self, slot: u32) {
        self.occupied[slot as usize / 64] &= !(1 << (slot % 64));
    }

    #[inline(always)]
    fn set_bit(&mut self, slot: u32) {
        self.occupied[slot as usize / 64] |= 1 << (slot % 64);
    }

    #[inline(always)]
    fn is_occupied(&self, slot: u32) -> bool {
        self.occupied[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    /// Pushes an unlinked node in front of slot `slot`'s stack.
    #[inline(always)]
    pub(crate) fn push_front(&mut self, slot: u32, r: Ref) {
        let head = &mut self.heads[slot as usize];
        self.nodes[r.index as usize].next = *head;
        *head = r.index;
        self.set_bit(slot);
    }

    /// Appends an unlinked node to the ready queue.
    #[inline(always)]
    pub(crate) fn push_ready(&mut self, r: Ref) {
        self.ready.append(&mut self.nodes, r.index);
    }

    /// Hands out the next live timer of the ready queue, freeing tombstones on the way.
    #[inline]
    pub(crate) fn pop_ready(&mut self) -> Option<Expired<T>> {
        while self.ready.head != NIL {
            let index = self.ready.head;
            let node = &mut self.nodes[index as usize];
            let (deadline, next) = (node.deadline(), node.next);
            self.ready.head = next;
            let expired = self.is_live(index).then(|| self.kill(index));
            self.free_node(index);
            if let Some((handle, value)) = expired {
                if deadline == self.earliest {
                    // (A large store keeps no `earliest`: the call returns at once.)
                    self.refresh_earliest();
                }
                return Some(Expired { handle, deadline, value });
            }
        }
        None
    }

    /// Whether the ready queue is empty (of live nodes and tombstones alike).
    #[inline(always)]
    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.head == NIL
    }

    /// Whether the ready queue holds a live node.
    pub(crate) fn ready_has_live(&self) -> bool {
        self.chain(self.ready.head).any(|r| self.is_live(r.index))
    }

    /// The nodes of a chain from `cursor`, in order.
    fn chain(&self, mut cursor: u32) -> impl Iterator<Item = Ref> + '_ {
        std::iter::from_fn(move || {
            (cursor != NIL).then(|| {
                let index = cursor;
                let node = &self.nodes[index as usize];
                cursor = node.next;
                Ref { index, deadline: node.deadline() }
            })
        })
    }

    /// Moves the live nodes due at `tick` from slot `slot`'s stack to the (empty) ready queue,
    /// oldest first, frees every tombstone of the stack and keeps the rest, newest first.
    /// Whether any live node was moved.
    #[inline]
    pub(crate) fn collect_due(&mut self, slot: u32, tick: u64) -> bool {
        self.collect_due_inline(slot, tick)
    }

    /// [`NodeStore::collect_due`], inlined.
    #[inline(always)]
    fn collect_due_inline(&mut self, slot: u32, tick: u64) -> bool {
        debug_assert!(self.ready_is_empty());
        let mut cursor = std::mem::replace(&mut self.heads[slot as usize], NIL);
        self.clear_bit(slot);
        // The stack holds its nodes newest first: prepending the due ones puts them oldest
        // first, appending the kept ones keeps them newest first.
        let (mut due, mut kept) = (Queue::EMPTY, Queue::EMPTY);
        while cursor != NIL {
            let index = cursor;
            let live = self.is_live(index);
            let node = &mut self.nodes[index as usize];
            cursor = node.next;
            if !live {
                self.free_node(index);
            } else if node.deadline() == tick {
                node.next = due.head;
                if due.head == NIL {
                    due.tail = index;
                }
                due.head = index;
            } else {
                debug_assert!(node.deadline() > tick, "a live timer was left behind its tick");
                node.next = NIL;
                kept.append(&mut self.nodes, index);
            }
        }
        if self.sweeps == Sweeps::Rebuild && due.head != due.tail {
            self.order_due(&mut due);
        }
        self.ready = due;
        if kept.head != NIL {
            self.heads[slot as usize] = kept.head;
            self.set_bit(slot);
        }
        due.head != NIL
    }

    /// Loads the first two nodes of the stacks of the `count` slots from `first` on (wrapping
    /// round the table), and their generations, so that they are in cache when those slots
    /// are visited a few ticks later. The loads of different slots are independent of each
    /// other, so their cache misses overlap. They feed `touched`, which nothing reads, only so
    /// that they happen; no branch depends on them (a missing node loads node 0). (With 1.5
    /// timers a slot, about half the timers are not first in their stack: loading the second
    /// node too took fire at 1e5 from 20.3 to 19.6 ns.)
    #[inline]
    pub(crate) fn touch(&mut self, first: usize, count: usize) {
        let Some(node_zero) = self.nodes.first() else {
            return;
        };
        let mask = self.heads.len() - 1;
        let mut sum = node_zero.next;
        for slot in first..first + count {
            let head = self.heads[slot & mask];
            let head = if head == NIL { 0 } else { head as usize };
            let second = self.nodes[head].next;
            let second = if second == NIL { 0 } else { second as usize };
            sum = sum.wrapping_add(self.gens[head]).wrapping_add(self.nodes[second].next);
            sum = sum.wrapping_add(self.gens[second]);
        }
        self.touched = self.touched.wrapping_add(sum);
    }

    /// Puts the due nodes of a slot (a queue of two or more) in start order, if a sweep left
    /// them out of it: a sweep rebuilds the stacks in index order, not start order.
    #[cold]
    #[inline(never)]
    fn order_due(&mut self, due: &mut Queue) {
        let mut scratch = std::mem::take(&mut self.due_scratch);
        scratch.clear();
        scratch.extend(self.chain(due.head).map(|r| r.index));
        let seqs = &self.seqs;
        if !scratch.is_sorted_by_key(|&index| seqs[index as usize]) {
            scratch.sort_unstable_by_key(|&index| seqs[index as usize]);
            *due = Queue::EMPTY;
            for &index in &scratch {
                self.nodes[index as usize].next = NIL;
                due.append(&mut self.nodes, index);
            }
        }
        self.due_scratch = scratch;
    }

    /// Frees every tombstone of every stack and the ready queue; how many nodes are free
    /// after it (called with none free, that is how many it freed).
    ///
    /// The ready queue keeps its live nodes in order. The stacks are rebuilt rather than
    /// walked: one pass over the slab in index order pushes each live node (not in the ready
    /// queue) onto its slot's stack and chains every other node into the free list, in index
    /// order. The slab is read in order, where walking the stacks waited on a dependent cache
    /// miss at every node, tombstones included (a steady state of cancels at 1e5 timers spent
    /// over half its time there, with 16 stacks walked at once). A rebuilt stack holds its
    /// nodes in index order, not start order; the sequences each node keeps restore start
    /// order among timers due on the same tick ([`NodeStore::order_due`]). Starts after a
    /// sweep take their nodes in order, so each one's load of the next free node is a
    /// sequential read.
    #[cold]
    #[inline(never)]
    fn sweep(&mut self) -> usize {
        if self.sweeps == Sweeps::Walk {
            return self.sweep_by(Walk::for_size(self.nodes.len()));
        }
        self.sweeps = Sweeps::Rebuild;
        self.rebuild()
    }

    /// [`NodeStore::sweep`] by rebuilding the stacks.
    fn rebuild(&mut self) -> usize {
        let (ready_latest, ready_live) = self.keep_live_ready();
        let mut skipped = 0;
        for (word, bits) in self.occupied.iter_mut().enumerate() {
            let mut bits = std::mem::take(bits);
            while bits != 0 {
                self.heads[word * 64 + bits.trailing_zeros() as usize] = NIL;
                bits &= bits - 1;
            }
        }
        let mask = self.heads.len() as u64 - 1;
        let (mut free, mut free_tail) = (NIL, NIL);
        let mut freed = 0;
        for index in 0..self.nodes.len() as u32 {
            let node = &mut self.nodes[index as usize];
            if self.gens[index as usize] & 1 == 1 {
                let deadline = node.deadline();
                if ready_latest.is_some_and(|latest| deadline <= latest) {
                    // In the ready queue (a stack's live nodes are all due later).
                    skipped += 1;
                    continue;
                }
                let slot = (deadline & mask) as usize;
                node.next = self.heads[slot];
                self.heads[slot] = index;
                self.occupied[slot / 64] |= 1 << (slot % 64);
            } else {
                node.value = None;
                node.next = NIL;
                if free_tail == NIL {
                    free = index;
                } else {
                    self.nodes[free_tail as usize].next = index;
                }
                free_tail = index;
                freed += 1;
            }
        }
        debug_assert_eq!(skipped, ready_live, "the live nodes left out are the ready ones");
        self.free = free;
        freed
    }

    /// [`NodeStore::sweep`], its stacks walked as `walk` says.
    fn sweep_by(&mut self, walk: Walk) -> usize {
        let mut dropped = crate::sweep::sweep(self, walk);
        dropped += self.unlink_ready_tombstones();
        self.chain_free_nodes();
        dropped
    }

    /// Unlinks the ready queue's tombstones, keeping its live nodes in order; they are left
    /// for [`NodeStore::chain_free_nodes`]. How many were unlinked.
    fn unlink_ready_tombstones(&mut self) -> usize {
        let mut cursor = self.ready.head;
        self.ready = Queue::EMPTY;
        let mut dropped = 0;
        while cursor != NIL {
            let index = cursor;
            cursor = self.nodes[index as usize].next;
            if self.is_live(index) {
                self.nodes[index as usize].next = NIL;
                self.ready.append(&mut self.nodes, index);
            } else {
                dropped += 1;
            }
        }
        dropped
    }

    /// Makes the free list every node that is not live, in index order, dropping the values
    /// discarded timers left: for a store none of whose tombstones is in a list any more.
    fn chain_free_nodes(&mut self) {
        let mut free = NIL;
        for index in (0..self.nodes.len()).rev() {
            if self.gens[index] & 1 == 0 {
                let node = &mut self.nodes[index];
                node.value = None;
                node.next = free;
                free = index as u32;
            }
        }
        self.free = free;
    }

    /// Unlinks the ready queue's tombstones, keeping its live nodes in order (the tombstones
    /// are left for the sweep). The latest deadline of a live node in it, if any, and how
    /// many live nodes it holds.
    fn keep_live_ready(&mut self) -> (Option<u64>, usize) {
        let mut cursor = self.ready.head;
        self.ready = Queue::EMPTY;
        let (mut latest, mut live) = (None, 0);
        while cursor != NIL {
            let index = cursor;
            let node = &mut self.nodes[index as usize];
            cursor = node.next;
            if self.gens[index as usize] & 1 == 1 {
                latest = latest.max(Some(node.deadline()));
                live += 1;
                node.next = NIL;
                self.ready.append(&mut self.nodes, index);
            }
        }
        (latest, live)
    }

    /// The live nodes of slot `slot`'s stack, newest first.
    pub(crate) fn live_refs(&self, slot: u32) -> impl Iterator<Item = Ref> + '_ {
        let live = |r: &Ref| self.is_live(r.index);
        self.chain(self.heads[slot as usize]).filter(live)
    }

    /// The first occupied slot after `slot` in the same bitmap word, if any.
    #[inline(always)]
    pub(crate) fn next_occupied_in_word(&self, slot: usize) -> Option<usize> {
        let word = slot / 64;
        let bits = self.occupied[word] & ((!0u64 << (slot % 64)) << 1);
        (bits != 0).then(|| word * 64 + bits.trailing_zeros() as usize)
    }

    /// [`NodeStore::collect_due`] if slot `slot` is occupied; else `false`, changing nothing.
    #[inline(always)]
    pub(crate) fn collect_due_if_occupied(&mut self, slot: u32, tick: u64) -> bool {
        self.is_occupied(slot) && self.collect_due_inline(slot, tick)
    }

    /// The first occupied slot in `from..limit`, if any.
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

    /// When the store is small, the earliest deadline of any live timer (`Some(None)` when
    /// there is none); `None` when the store is too large for that to be kept.
    #[inline]
    pub(crate) fn small_min(&self) -> Option<Option<u64>> {
        self.is_small().then(|| (self.len > 0).then_some(self.earliest))
    }

    /// The smallest deadline of any live timer not in the ready queue, by walking every
    /// stack (O(n)).
    pub(crate) fn min_deadline(&self) -> Option<u64> {
        let mut best: Option<u64> = None;
        let mut slot = 0;
        while let Some(found) = self.next_occupied(slot, self.heads.len()) {
            for r in self.live_refs(found as u32) {
                best = Some(best.map_or(r.deadline, |b| b.min(r.deadline)));
            }
            slot = found + 1;
        }
        best
    }
}

/// A sweep's view of the slot stacks: a tombstone is unlinked from the live node before it
/// (live nodes are not written) and left for [`NodeStore::chain_free_nodes`].
impl<T> SweptLists for NodeStore<T> {
    fn occupied(&self) -> &[u64] {
        &self.occupied
    }

    #[inline(always)]
    fn head(&self, slot: u32) -> u32 {
        self.heads[slot as usize]
    }

    #[inline(always)]
    fn visit(&mut self, index: u32) -> (u32, bool) {
        (self.nodes[index as usize].next, self.is_live(index))
    }

    #[inline(always)]
    fn unlink(&mut self, slot: u32, before: u32, _index: u32, next: u32) {
        if before == NIL {
            self.heads[slot as usize] = next;
        } else {
            self.nodes[before as usize].next = next;
        }
    }

    #[inline(always)]
    fn finish(&mut self, slot: u32, last: u32) {
        if last == NIL {
            self.clear_bit(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The node sizes the docs give.
    #[test]
    fn node_sizes() {
        #[allow(dead_code)]
        enum Small {
            A,
            B,
        }
        assert_eq!(std::mem::size_of::<Node<u32>>(), 20);
        assert_eq!(std::mem::size_of::<Node<Small>>(), 16);
    }

    /// Resets move a timer's node rather than leaving a tombstone, so re-arming timers (as a
    /// connection does) keeps the slab at one node a timer.
    #[test]
    fn resets_keep_one_node_a_timer() {
        let mut store = NodeStore::new(1024);
        let timers: Vec<u32> = (0..100)
            .map(|i| {
                let (r, handle) = store.alloc(i * 7, i as u32).expect("room");
                store.push_front(store.slot_of(r.deadline), r);
                handle.index
            })
            .collect();
        for round in 0..50 {
            for &index in &timers {
                let r = store.renew(index, 1_000 + u64::from(index) * 3 + round);
                store.push_front(store.slot_of(r.deadline), r);
            }
        }
        assert_eq!(store.nodes.len(), timers.len());
        assert_eq!(store.len(), timers.len());
    }

    /// A tombstone's node is reused only after its slot is visited or swept.
    #[test]
    fn tombstones_are_reused_after_their_slot_is_visited() {
        let mut store = NodeStore::new(64);
        let handles: Vec<TimerHandle> = (0..40)
            .map(|i| {
                let (r, handle) = store.alloc(100 + i, i as u32).expect("room");
                store.push_front(store.slot_of(r.deadline), r);
                handle
            })
            .collect();
        let victim = store.resolve(handles[20]).expect("live");
        assert_eq!(store.cancel(victim), 20);
        assert_eq!(store.len(), 39);
        assert!(store.resolve(handles[20]).is_none());
        // Not free yet: a new timer takes a new node.
        let (r, handle) = store.alloc(200, 99).expect("room");
        store.push_front(store.slot_of(r.deadline), r);
        assert_ne!(handle.index, victim);
        // Visiting the victim's slot frees it.
        assert!(!store.collect_due(store.slot_of(120), 119));
        let (_, handle) = store.alloc(300, 98).expect("room");
        assert_eq!(handle.index, victim);
        assert_ne!(handle, handles[20]);
    }

    /// A sweep frees every tombstone, at the head of a stack, behind live nodes or between
    /// them, keeps each stack's live nodes newest first, and clears the bit of a stack it
    /// empties.
    #[test]
    fn a_sweep_frees_tombstones_anywhere_in_a_stack() {
        let mut store = NodeStore::new(8);
        // Five timers in each of the 8 slots, started round-robin: slot s holds deadlines
        // s + 8k, newest (largest) first.
        let deadlines: Vec<u64> = (0..40).map(|i| 100 + i).collect();
        let handles: Vec<TimerHandle> = deadlines
            .iter()
            .map(|&deadline| {
                let (r, handle) = store.alloc(deadline, deadline as u32).expect("room");
                store.push_front(store.slot_of(r.deadline), r);
                handle
            })
            .collect();
        // Slot 4 (deadlines 100, 108, ...) loses all; the others lose their newest, their
        // oldest and a middle one, or only middle ones.
        let cancelled = |deadline: u64| {
            let k = (deadline - 100) / 8;
            deadline % 8 == 4 || (deadline.is_multiple_of(2) && k != 1 && k != 3) || k == 2
        };
        let mut dropped = 0;
        for (&deadline, &handle) in deadlines.iter().zip(&handles) {
            if cancelled(deadline) {
                assert_eq!(store.cancel(store.resolve(handle).expect("live")), deadline as u32);
                dropped += 1;
            }
        }
        assert_eq!(store.sweep(), dropped);
        for slot in 0..8 {
            let live: Vec<u64> = store.live_refs(slot).map(|r| r.deadline).collect();
            let chain: Vec<u64> =
                store.chain(store.heads[slot as usize]).map(|r| r.deadline).collect();
            let mut expected: Vec<u64> = deadlines
                .iter()
                .copied()
                .filter(|&d| store.slot_of(d) == slot && !cancelled(d))
                .collect();
            expected.reverse();
            assert_eq!(chain, expected, "slot {slot} holds its live nodes alone, newest first");
            assert_eq!(live, expected);
            let occupied = store.next_occupied(slot as usize, slot as usize + 1).is_some();
            assert_eq!(occupied, !expected.is_empty(), "slot {slot}'s bit");
        }
        // Every freed node is reused before the slab grows.
        for i in 0..dropped {
            let (_, handle) = store.alloc(200 + i as u64, 0).expect("room");
            assert!((handle.index as usize) < deadlines.len());
        }
        assert_eq!(store.nodes.len(), deadlines.len());
    }

    /// A sweep of many stacks of every length (more than it walks at once, some emptied, some
    /// untouched) keeps exactly the live nodes of each, newest first, and leaves every other
    /// node on the free list in index order: walked one stack at a time, in lanes, or rebuilt
    /// (the timers here took their nodes in start order, so index order is start order).
    #[test]
    fn a_sweep_of_many_stacks_keeps_their_live_nodes_and_frees_the_rest_in_order() {
        for walk in [Walk::InTurn, Walk::InLanes] {
            sweep_many_stacks(&format!("{walk:?}"), |store| store.sweep_by(walk));
        }
        sweep_many_stacks("rebuild", |store| {
            assert_eq!(store.sweeps, Sweeps::Undecided);
            let freed = store.sweep();
            assert_eq!(store.sweeps, Sweeps::Rebuild);
            freed
        });
    }

    /// A rebuild files a slot's timers in node order, not start order: timers due on the same
    /// tick still come out in start order. (Breaking `order_due` fails this test.)
    #[test]
    fn timers_due_together_keep_start_order_across_a_rebuild() {
        let mut store = NodeStore::new(64);
        let deadline = 1_000;
        let start = |store: &mut NodeStore<u32>, deadline: u64, value: u32| {
            let (r, handle) = store.alloc(deadline, value).expect("room");
            store.push_front(store.slot_of(r.deadline), r);
            handle
        };
        // 20 fillers in other slots (nodes 0..20), then the first due timer (node 20).
        let fillers: Vec<TimerHandle> =
            (0..20).map(|i| start(&mut store, 2_000 + i * 64 + 1, 100 + i as u32)).collect();
        let first = start(&mut store, deadline, 0);
        assert_eq!(first.index, 20);
        for filler in &fillers[..10] {
            store.discard(filler.index);
        }
        assert_eq!(store.sweep(), 10);
        // The next two take nodes 0 and 1, below the first's.
        let later = [start(&mut store, deadline, 1), start(&mut store, deadline, 2)];
        assert_eq!(later.map(|handle| handle.index), [0, 1]);
        store.discard(fillers[10].index);
        assert_eq!(store.sweep(), 9, "the filler's node and the eight still free");
        assert_eq!(store.sweeps, Sweeps::Rebuild);
        let stack: Vec<u32> =
            store.chain(store.heads[store.slot_of(deadline) as usize]).map(|r| r.index).collect();
        assert_eq!(stack, [20, 1, 0], "rebuilt in node order");
        assert!(store.collect_due(store.slot_of(deadline), deadline));
        let fired: Vec<u32> = std::iter::from_fn(|| store.pop_ready()).map(|e| e.value).collect();
        assert_eq!(fired, [0, 1, 2], "start order");
    }

    /// A wheel whose timers crowd a few ticks, most of them discarded, sweeps (by rebuilding)
    /// while many share a deadline and their nodes are reused out of start order; each tick's
    /// timers still fire in start order. (Breaking `order_due` fails this test.)
    #[test]
    fn ties_fire_in_start_order_across_rebuilds() {
        let seed = 0x51ed_270b_c2d4_a7f3_u64;
        let mut next = crate::testing::xorshift(seed);
        let mut wheel = crate::HashedWheel::new(0, 64).expect("power of two");
        let mut live: Vec<(TimerHandle, u64, u64)> = Vec::new();
        let (mut expected, mut fired) = (Vec::new(), Vec::new());
        for id in 0..20_000_u64 {
            let deadline = wheel.now() + 200 + next() % 4;
            live.push((wheel.insert(deadline, id).expect("future"), deadline, id));
            if !next().is_multiple_of(8) {
                let (handle, _, _) = live.swap_remove((next() % live.len() as u64) as usize);
                assert!(wheel.discard(handle));
            }
            if next().is_multiple_of(32) {
                let now = wheel.now() + 1;
                let mut due: Vec<(u64, u64)> = Vec::new();
                live.retain(|&(_, deadline, id)| {
                    let is_due = deadline <= now;
                    if is_due {
                        due.push((deadline, id));
                    }
                    !is_due
                });
                due.sort_unstable();
                expected.extend(due);
                fired.extend(wheel.drain(now).map(|e| (e.deadline, e.value)));
            }
        }
        assert_eq!(wheel.store.sweeps, Sweeps::Rebuild, "seed {seed:#x}: the wheel rebuilt");
        assert_eq!(fired, expected, "seed {seed:#x}");
    }

    /// A rebuild while timers wait in the ready queue leaves them there, in order, and files
    /// none of them in a stack (a debug build also checks the count as it goes).
    #[test]
    fn a_rebuild_leaves_the_ready_queue_alone() {
        let mut store = NodeStore::new(64);
        let start = |store: &mut NodeStore<u32>, deadline: u64, value: u32| {
            let (r, handle) = store.alloc(deadline, value).expect("room");
            store.push_front(store.slot_of(r.deadline), r);
            handle
        };
        let due: Vec<TimerHandle> = (0..20).map(|i| start(&mut store, 100, i)).collect();
        let later: Vec<TimerHandle> =
            (0..20).map(|i| start(&mut store, 101 + i as u64, 100 + i as u32)).collect();
        assert!(store.collect_due(store.slot_of(100), 100));
        // Three of the due timers and half the later ones end: tombstones in the ready queue
        // and in the stacks.
        for handle in due.iter().step_by(7).chain(later.iter().step_by(2)) {
            store.discard(handle.index);
        }
        assert_eq!(store.sweep(), 13);
        assert_eq!(store.sweeps, Sweeps::Rebuild);
        let fired: Vec<u32> = std::iter::from_fn(|| store.pop_ready()).map(|e| e.value).collect();
        let expected: Vec<u32> = (0..20).filter(|i| i % 7 != 0).collect();
        assert_eq!(fired, expected, "the ready queue's live timers, in order");
        for (i, handle) in later.iter().enumerate() {
            let slot = store.slot_of(101 + i as u64);
            let filed: Vec<u32> = store.live_refs(slot).map(|r| r.index).collect();
            let expected = if i % 2 == 0 { vec![] } else { vec![handle.index] };
            assert_eq!(filed, expected, "slot {slot}");
        }
        assert_eq!(store.len(), 10, "the later timers left");
    }

    fn sweep_many_stacks(name: &str, sweep: impl Fn(&mut NodeStore<u32>) -> usize) {
        let slots = 64;
        let mut store = NodeStore::new(slots);
        let mut next = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15_u64);
        let mut timers = Vec::new();
        for i in 0..600_u32 {
            // Slots 0..8 get nothing; the rest from a few timers to a few dozen.
            let deadline = 1_000 + 8 + next() % (slots as u64 - 8) * (1 + next() % 3);
            let (r, handle) = store.alloc(deadline, i).expect("room");
            store.push_front(store.slot_of(r.deadline), r);
            timers.push((deadline, handle));
        }
        let mut kept = Vec::new();
        let mut dropped = 0;
        for &(deadline, handle) in &timers {
            // Every timer of slots 8..12 goes, about 70 % of the others.
            if (8..12).contains(&store.slot_of(deadline)) || next() % 10 < 7 {
                assert!(store.resolve(handle).is_some());
                store.discard(handle.index);
                dropped += 1;
            } else {
                kept.push((deadline, handle.index));
            }
        }
        assert_eq!(sweep(&mut store), dropped, "{name}");
        for slot in 0..slots as u32 {
            let chain: Vec<u32> =
                store.chain(store.heads[slot as usize]).map(|r| r.index).collect();
            let expected: Vec<u32> = kept
                .iter()
                .rev()
                .filter(|&&(deadline, _)| store.slot_of(deadline) == slot)
                .map(|&(_, index)| index)
                .collect();
            assert_eq!(chain, expected, "slot {slot}");
            assert_eq!(store.is_occupied(slot), !expected.is_empty(), "slot {slot}'s bit");
        }
        let free: Vec<u32> =
            std::iter::successors((store.free != NIL).then_some(store.free), |&i| {
                let next = store.nodes[i as usize].next;
                (next != NIL).then_some(next)
            })
            .collect();
        let dead: Vec<u32> =
            (0..store.nodes.len() as u32).filter(|&index| !store.is_live(index)).collect();
        assert_eq!(free, dead, "every dead node is free, in index order");
        assert!(free.iter().all(|&index| store.nodes[index as usize].value.is_none()));
        assert_eq!(store.len(), kept.len());
    }

    /// A wheel large enough to load slots ahead (`touch_ahead`), walked tick by tick and in
    /// jumps, with cancellations on the way, hands out exactly the live timers in
    /// `(deadline, start order)`.
    #[test]
    fn a_large_wheel_walked_tick_by_tick_fires_in_order() {
        let slots = 1 << 12;
        let mut wheel = crate::HashedWheel::new(0, slots).expect("power of two");
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1d_u64);
        let count = 40_000_u32;
        let mut expected: Vec<(u64, u32)> = Vec::new();
        let mut handles = Vec::new();
        for id in 0..count {
            // Mostly within a revolution, some several revolutions away.
            let deadline = 1 + next() % (slots as u64 * if id % 8 == 0 { 5 } else { 1 });
            handles.push(wheel.insert(deadline, id).expect("future"));
            expected.push((deadline, id));
        }
        for id in (0..count).step_by(7) {
            assert_eq!(wheel.cancel(handles[id as usize]), Some(id));
        }
        expected.retain(|&(_, id)| id % 7 != 0);
        expected.sort_unstable();
        let mut fired = Vec::new();
        let mut now = 0;
        while !wheel.is_empty() {
            now += if now % 1_000 < 900 { 1 } else { 1 + next() % 40 };
            fired.extend(wheel.drain(now).map(|expired| (expired.deadline, expired.value)));
        }
        assert_eq!(fired, expected);
    }

    /// Resetting or cancelling a timer that is already due (in the ready queue, not yet
    /// handed out) unlinks it from the ready queue, in a small wheel and a large one alike.
    #[test]
    fn due_timers_can_be_reset_and_cancelled() {
        for count in [5_u32, 40] {
            let mut wheel = crate::HashedWheel::new(0, 8).expect("power of two");
            let handles: Vec<TimerHandle> =
                (0..count).map(|i| wheel.insert(10, i).expect("future")).collect();
            assert_eq!(wheel.poll(10).map(|expired| expired.value), Some(0));
            // Now every other timer is in the ready queue.
            wheel.reset(handles[count as usize - 1], 12).expect("pending");
            assert_eq!(wheel.cancel(handles[2]), Some(2));
            wheel.reset(handles[1], 11).expect("pending");
            let fired: Vec<u32> = wheel.drain(20).map(|expired| expired.value).collect();
            let mut expected: Vec<u32> = (3..count - 1).collect();
            expected.extend([1, count - 1]);
            assert_eq!(fired, expected, "{count} timers");
            assert!(wheel.is_empty());
        }
    }

    /// A discarded timer's value is dropped when its node is freed: at once in a small wheel;
    /// in a large one when its slot is next visited, or with the wheel.
    #[test]
    fn discarded_values_are_dropped_when_their_node_is_freed() {
        use std::rc::Rc;
        let value = Rc::new(());
        let mut small = crate::HashedWheel::new(0, 64).expect("power of two");
        let handle = small.insert(5, Rc::clone(&value)).expect("future");
        assert!(small.discard(handle));
        assert!(!small.discard(handle));
        assert_eq!(Rc::strong_count(&value), 1);

        let mut large = crate::HashedWheel::new(0, 64).expect("power of two");
        let handles: Vec<TimerHandle> = (0..100u64)
            .map(|i| large.insert(1 + i % 10, Rc::clone(&value)).expect("future"))
            .collect();
        assert!(large.discard(handles[0]), "deadline 1");
        assert!(large.discard(handles[5]), "deadline 6");
        assert!(!large.discard(handles[5]));
        assert_eq!(large.len(), 98);
        assert_eq!(Rc::strong_count(&value), 101, "both tombstones still hold their values");
        assert_eq!(large.drain(1).count(), 9);
        assert_eq!(Rc::strong_count(&value), 91, "slot 1 visited: its tombstone freed");
        drop(large);
        assert_eq!(Rc::strong_count(&value), 1);
    }
}

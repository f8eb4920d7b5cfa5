//! `HashedWheel`: Varghese & Lauck's Scheme 6.
//!
//! A power-of-two table of slots; a timer due at tick `d` lives in slot `d & mask` and keeps
//! its absolute deadline, so a timer more than one revolution away simply stays put while the
//! cursor passes its slot (the paper's "rounds", stored as the deadline itself). Each slot list
//! is in start-sequence order, so filtering the due entries out of the slot at tick `t` yields
//! them already in `(deadline, sequence)` order.
//!
//! Time only moves inside [`HashedWheel::poll`]. Entries due at the wheel's current tick sit in
//! a separate *ready* queue until they are handed out. A wheel that has never held more than
//! 16 timers (a connection's) knows its earliest deadline exactly and steps straight to it.
//!
//! This module holds what is particular to Scheme 6: the table, where a deadline is filed,
//! `next_deadline` and how the clock steps to the next due slot. The methods both wheels share
//! (`insert`, `cancel`, `reset`, `get`, `deadline`, `poll`, `drain`, …) are generated from one
//! definition in `shared.rs`.

use crate::nodes::{NodeStore, Ref, CACHED_NODES};
use crate::shared::wheel_api;
use crate::SlotCountError;

/// The largest table [`HashedWheel::new`] accepts: 2^24 slots (16 Mi lists, 128 MiB of heads).
pub const HASHED_SLOTS_MAX: usize = 1 << 24;

/// A hashed timing wheel (Scheme 6) for many timers in local time.
///
/// Start, cancel and discard are O(1) (start amortized: see the crate docs on lazy
/// cancellation); reset is O(1) plus the newer entries of the timer's slot, which it walks to
/// move the timer's entry. Advancing one tick costs O(1) to skip an empty slot (a bitmap scan
/// finds the next occupied one) plus the length of each occupied slot visited. While the
/// wheel has never held more than 16 timers it knows its earliest deadline exactly, so a poll
/// with nothing due and `next_deadline` cost about a heap's peek.
/// Choose the slot count near the span of deadlines you use (for a retransmit timer in
/// milliseconds, 256–1024 is plenty); timers further away than one revolution stay correct
/// but are looked at once per revolution.
///
/// Entries due on the same tick come out in start order; see the crate docs for the full
/// ordering guarantee.
///
/// ```
/// use phalanx_wheel::HashedWheel;
///
/// let mut wheel = HashedWheel::new(0, 256).unwrap();
/// let retransmit = wheel.insert(300, "retransmit").unwrap();
/// let keep_alive = wheel.insert(500, "keep-alive").unwrap();
/// wheel.insert(40, "ack delay").unwrap();
/// assert_eq!(wheel.next_deadline(), Some(40));
/// // The ack came: hand back the timer's value, or just stop the timer.
/// assert_eq!(wheel.cancel(retransmit), Some("retransmit"));
/// assert!(wheel.discard(keep_alive));
/// assert!(!wheel.discard(keep_alive), "a stale handle stops nothing");
/// let fired: Vec<_> = wheel.drain(1_000).map(|expired| expired.value).collect();
/// assert_eq!(fired, ["ack delay"]);
/// assert_eq!(wheel.now(), 1_000);
/// ```
pub struct HashedWheel<T> {
    pub(crate) store: NodeStore<T>,
    mask: u64,
    slot_count: usize,
    now: u64,
    /// The last tick at which something became due; used to detect a whole quiet revolution
    /// and jump straight to the earliest deadline instead of circling.
    last_due: u64,
    /// A lower bound on every deadline not yet in the ready queue: until the clock reaches it
    /// nothing can be due, so empty ticks cost O(1).
    horizon: u64,
    /// The last tick whose slot [`touch_ahead`](Self::touch_ahead) loaded.
    touched_until: u64,
}

/// How many ticks ahead of a visited slot [`HashedWheel::touch_ahead`] loads slots.
const TOUCH_AHEAD: u64 = 8;

impl<T> HashedWheel<T> {
    /// A wheel whose clock reads `now`, with `slot_count` slots (a power of two, 1 to
    /// [`HASHED_SLOTS_MAX`]).
    pub fn new(now: u64, slot_count: usize) -> Result<Self, SlotCountError> {
        if !slot_count.is_power_of_two() || slot_count > HASHED_SLOTS_MAX {
            return Err(SlotCountError { requested: slot_count, max: HASHED_SLOTS_MAX });
        }
        Ok(HashedWheel {
            store: NodeStore::new(slot_count),
            mask: slot_count as u64 - 1,
            slot_count,
            now,
            last_due: now,
            horizon: u64::MAX,
            touched_until: now,
        })
    }

    /// The number of slots in the table.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    #[inline(always)]
    fn place(&mut self, r: Ref) {
        self.horizon = self.horizon.min(r.deadline);
        if r.deadline == self.now {
            self.store.push_ready(r);
        } else {
            self.store.push_front((r.deadline & self.mask) as u32, r);
        }
    }

    /// The earliest pending deadline: when a driver should next call [`poll`](Self::poll).
    ///
    /// Exact. When the wheel has never held more than 16 timers (a connection's handful) it
    /// scans those entries, a few loads; otherwise at most one revolution of occupied slots,
    /// and all entries when every timer is more than a revolution away.
    #[inline]
    pub fn next_deadline(&self) -> Option<u64> {
        match self.store.small_min() {
            Some(earliest) => earliest,
            None => self.find_next_deadline(),
        }
    }

    /// [`next_deadline`](Self::next_deadline) for a wheel that is not small.
    fn find_next_deadline(&self) -> Option<u64> {
        if self.store.ready_has_live() {
            return Some(self.now);
        }
        let mut offset = 0;
        while let Some((tick_offset, slot)) = self.next_occupied(offset, self.slot_count as u64) {
            let tick = self.tick_at(tick_offset);
            if self.store.live_refs(slot).any(|r| r.deadline == tick) {
                return Some(tick);
            }
            offset = tick_offset + 1;
        }
        // Every timer is more than a revolution away.
        self.store.min_deadline()
    }

    /// The tick `offset + 1` ticks after the clock. Wrapping: past `u64::MAX` no deadline can
    /// match, and a wrapped tick is below `now`.
    fn tick_at(&self, offset: u64) -> u64 {
        self.now.wrapping_add(1).wrapping_add(offset)
    }

    /// The first occupied slot at or after `offset` among the ticks `now + 1 + offset` for
    /// `offset < span` (`span` at most one revolution), as `(offset, slot)`.
    fn next_occupied(&self, mut offset: u64, span: u64) -> Option<(u64, u32)> {
        let first = (self.now.wrapping_add(1) & self.mask) as usize;
        while offset < span {
            let from = (first + offset as usize) & self.mask as usize;
            let limit = (from + (span - offset) as usize).min(self.slot_count);
            match self.store.next_occupied(from, limit) {
                Some(slot) => return Some((offset + (slot - from) as u64, slot as u32)),
                None => offset += (limit - from) as u64,
            }
        }
        None
    }

    /// [`step`](Self::step) for a small wheel, whose earliest deadline is known exactly:
    /// straight to that tick's slot, without walking the table.
    fn step_small(&mut self, earliest: Option<u64>, until: u64) {
        let Some(earliest) = earliest else {
            self.horizon = u64::MAX;
            self.now = until;
            return;
        };
        self.horizon = earliest;
        if earliest > until {
            self.now = until;
            return;
        }
        self.now = earliest;
        self.last_due = earliest;
        self.store.collect_due((earliest & self.mask) as u32, earliest);
    }

    /// Loads ahead the first nodes of the slots up to `TOUCH_AHEAD` ticks after `tick` not
    /// loaded yet, half that many or more at once, so that a tick-by-tick walk finds them in
    /// cache: their cache misses overlap each other and the work of the ticks before them,
    /// instead of stalling each visit.
    #[inline(always)]
    fn touch_ahead(&mut self, tick: u64) {
        if self.touched_until >= tick.saturating_add(TOUCH_AHEAD / 2) {
            return;
        }
        if self.store.slab_len() <= CACHED_NODES {
            // The nodes fit in a core's cache.
            return;
        }
        let to = tick.saturating_add(TOUCH_AHEAD);
        let from = self.touched_until.max(tick).saturating_add(1);
        if from <= to {
            self.store.touch((from & self.mask) as usize, (to - from + 1) as usize);
        }
        self.touched_until = to;
    }

    /// Moves the clock forward to the next tick with due entries (moving them to the ready
    /// queue), or to `until` if there is none before it.
    #[inline(always)]
    fn step(&mut self, until: u64) {
        let tick = self.horizon;
        if !self.store.is_small()
            && tick > self.now
            && self.store.collect_due_if_occupied((tick & self.mask) as u32, tick)
        {
            // The common case of a walk tick by tick: the horizon is the tick of the next
            // occupied slot (nothing is due before it), and that slot has due entries.
            self.arrive(tick);
            return;
        }
        self.step_slow(until);
    }

    /// The rest of [`step`](Self::step), out of line.
    #[inline(never)]
    fn step_slow(&mut self, until: u64) {
        if let Some(earliest) = self.store.small_min() {
            self.step_small(earliest, until);
            return;
        }
        if self.is_empty() {
            // Only tombstones, if anything: they are dropped when their slots come round.
            self.horizon = u64::MAX;
            self.now = until;
            return;
        }
        if self.horizon > until {
            self.now = until;
            return;
        }
        if self.now - self.last_due >= self.slot_count as u64 {
            // A whole revolution went by with nothing due: every deadline is far off. Jump to
            // just before the earliest one rather than circling the table again.
            if let Some(earliest) = self.store.min_deadline() {
                self.now = self.now.max(earliest - 1).min(until);
                self.last_due = self.now;
                self.horizon = earliest;
                if self.now == until {
                    return;
                }
            }
        }
        // Nothing is due before `horizon`: scan from there, one pass per occupied slot, moving
        // its due references (already in start order) to the ready queue; stop at the first
        // slot that had any.
        let from = self.horizon.max(self.now + 1);
        let span = (until - from).saturating_add(1).min(self.slot_count as u64);
        let mut offset = 0;
        while let Some(tick) = self.occupied_tick(from.wrapping_add(offset), span - offset) {
            if self.store.collect_due((tick & self.mask) as u32, tick) {
                self.arrive(tick);
                return;
            }
            offset = tick.wrapping_sub(from) + 1;
        }
        self.now = from + (span - 1);
        // Nothing is due before the next occupied slot: every pending deadline's slot is
        // occupied, and a deadline more than a revolution away is later still.
        self.horizon = self.horizon.max(self.next_horizon(self.now));
    }

    /// Moves the clock to `tick`, whose due entries have just been moved to the ready queue.
    #[inline(always)]
    fn arrive(&mut self, tick: u64) {
        self.touch_ahead(tick);
        self.now = tick;
        self.last_due = tick;
        self.horizon = self.next_horizon(tick);
    }

    /// A lower bound on every pending deadline after `tick`, for a wheel whose ticks up to
    /// `tick` have been visited: the next tick whose slot is occupied (`u64::MAX` if none).
    #[inline(always)]
    fn next_horizon(&self, tick: u64) -> u64 {
        let Some(next) = tick.checked_add(1) else {
            return u64::MAX;
        };
        let slot = (tick & self.mask) as usize;
        if let Some(found) = self.store.next_occupied_in_word(slot) {
            // Later in the same bitmap word: no wrap round the table in between.
            return tick.saturating_add((found - slot) as u64);
        }
        self.next_horizon_far(next)
    }

    /// [`next_horizon`](Self::next_horizon) past the visited slot's bitmap word, out of line.
    #[inline(never)]
    fn next_horizon_far(&self, next: u64) -> u64 {
        self.occupied_tick(next, self.slot_count as u64).unwrap_or(u64::MAX)
    }

    /// The first tick in `from..from + span` (`span` at most one revolution) whose slot is
    /// occupied. Wrapping: past `u64::MAX` no deadline can match.
    #[inline]
    fn occupied_tick(&self, from: u64, span: u64) -> Option<u64> {
        let first = (from & self.mask) as usize;
        let mut offset = 0;
        while offset < span {
            let slot = (first + offset as usize) & self.mask as usize;
            let limit = (slot + (span - offset) as usize).min(self.slot_count);
            match self.store.next_occupied(slot, limit) {
                Some(found) => return Some(from.wrapping_add(offset + (found - slot) as u64)),
                None => offset += (limit - slot) as u64,
            }
        }
        None
    }
}

wheel_api!(HashedWheel);

impl<T> std::fmt::Debug for HashedWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashedWheel")
            .field("now", &self.now)
            .field("slot_count", &self.slot_count)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

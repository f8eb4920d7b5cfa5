//! `HashedWheel`: Varghese & Lauck's Scheme 6.
//!
//! A power-of-two table of slots; a timer due at tick `d` lives in slot `d & mask` and keeps
//! its absolute deadline, so a timer more than one revolution away simply stays put while the
//! cursor passes its slot (the paper's "rounds", stored as the deadline itself). Each slot list
//! is in start-sequence order, so filtering the due entries out of the slot at tick `t` yields
//! them already in `(deadline, sequence)` order.
//!
//! Time only moves inside [`HashedWheel::poll`]. Entries due at the wheel's current tick sit in
//! a separate *ready* list until they are handed out.

use crate::store::{Store, NIL};
use crate::{Expired, InsertError, ResetError, SlotCountError, TimerHandle};

/// The largest table [`HashedWheel::new`] accepts: 2^24 slots (16 Mi lists, 128 MiB of heads).
pub const HASHED_SLOTS_MAX: usize = 1 << 24;

/// A hashed timing wheel (Scheme 6) for many timers in local time.
///
/// Start, cancel and reset are O(1). Advancing one tick costs O(1) to skip an empty slot (a
/// bitmap scan finds the next occupied one) plus the length of each occupied slot visited.
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
/// wheel.insert(40, "ack delay").unwrap();
/// assert_eq!(wheel.next_deadline(), Some(40));
/// wheel.cancel(retransmit);
/// let fired: Vec<_> = wheel.drain(1_000).map(|expired| expired.value).collect();
/// assert_eq!(fired, ["ack delay"]);
/// assert_eq!(wheel.now(), 1_000);
/// ```
pub struct HashedWheel<T> {
    store: Store<T>,
    mask: u64,
    slot_count: usize,
    now: u64,
    /// The last tick at which something became due; used to detect a whole quiet revolution
    /// and jump straight to the earliest deadline instead of circling.
    last_due: u64,
    /// A lower bound on every deadline not yet in the ready list: until the clock reaches it
    /// nothing can be due, so empty ticks cost O(1).
    horizon: u64,
}

impl<T> HashedWheel<T> {
    /// A wheel whose clock reads `now`, with `slot_count` slots (a power of two, 1 to
    /// [`HASHED_SLOTS_MAX`]).
    pub fn new(now: u64, slot_count: usize) -> Result<Self, SlotCountError> {
        if !slot_count.is_power_of_two() || slot_count > HASHED_SLOTS_MAX {
            return Err(SlotCountError { requested: slot_count, max: HASHED_SLOTS_MAX });
        }
        Ok(HashedWheel {
            store: Store::new(slot_count, 1),
            mask: slot_count as u64 - 1,
            slot_count,
            now,
            last_due: now,
            horizon: 0,
        })
    }

    #[inline]
    fn ready_list(&self) -> u32 {
        self.slot_count as u32
    }

    /// The wheel's current tick: the latest tick handed to [`poll`](Self::poll), or while a
    /// drain is under way, the tick whose entries are being handed out.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The number of slots in the table.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// How many timers are pending (including due ones not yet handed out).
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Makes room for `additional` more timers without allocating later.
    pub fn reserve(&mut self, additional: usize) {
        self.store.reserve(additional);
    }

    /// Starts a timer due at tick `deadline`.
    ///
    /// A deadline equal to [`now`](Self::now) is due at once: the next `poll` hands it out,
    /// after every entry already due at this tick. A deadline before `now` is refused with
    /// [`InsertError::DeadlineElapsed`] and nothing is stored.
    pub fn insert(&mut self, deadline: u64, value: T) -> Result<TimerHandle, InsertError> {
        if deadline < self.now {
            return Err(InsertError::DeadlineElapsed { deadline, now: self.now });
        }
        let index = self.store.alloc(deadline, value).ok_or(InsertError::Full)?;
        self.place(index, deadline);
        Ok(self.store.handle(index))
    }

    fn place(&mut self, index: u32, deadline: u64) {
        self.horizon = self.horizon.min(deadline);
        let list =
            if deadline == self.now { self.ready_list() } else { (deadline & self.mask) as u32 };
        self.store.push_back(list, index);
    }

    /// Stops a timer and returns its value, or `None` if the handle is stale (the timer
    /// already fired or was cancelled). A stale handle never touches another timer.
    pub fn cancel(&mut self, handle: TimerHandle) -> Option<T> {
        let index = self.store.resolve(handle)?;
        Some(self.store.release(index).value)
    }

    /// Re-arms a pending timer to `deadline`, keeping its handle and value. The timer counts
    /// as newly started: it takes a fresh start sequence. O(1); when the new deadline maps to
    /// the same slot the entry just moves to that slot's tail.
    pub fn reset(&mut self, handle: TimerHandle, deadline: u64) -> Result<(), ResetError> {
        let index = self.store.resolve(handle).ok_or(ResetError::NotFound)?;
        if deadline < self.now {
            return Err(ResetError::DeadlineElapsed { deadline, now: self.now });
        }
        self.store.unlink(index);
        self.store.renew_seq(index);
        self.store.node_mut(index).deadline = deadline;
        self.place(index, deadline);
        Ok(())
    }

    /// The value of a pending timer.
    pub fn get(&self, handle: TimerHandle) -> Option<&T> {
        self.store.resolve(handle).map(|index| &self.store.node(index).value)
    }

    /// The value of a pending timer, mutably.
    pub fn get_mut(&mut self, handle: TimerHandle) -> Option<&mut T> {
        let index = self.store.resolve(handle)?;
        Some(&mut self.store.node_mut(index).value)
    }

    /// The deadline of a pending timer.
    pub fn deadline(&self, handle: TimerHandle) -> Option<u64> {
        self.store.resolve(handle).map(|index| self.store.node(index).deadline)
    }

    /// The earliest pending deadline: when a driver should next call [`poll`](Self::poll).
    ///
    /// Exact. It scans at most one revolution of occupied slots, and all entries when every
    /// timer is more than a revolution away; with the few timers of a connection that is a
    /// handful of loads.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.store.head(self.ready_list()) != NIL {
            return Some(self.now);
        }
        if self.is_empty() {
            return None;
        }
        let mut offset = 0;
        while let Some((tick_offset, slot)) = self.next_occupied(offset, self.slot_count as u64) {
            let tick = self.tick_at(tick_offset);
            let mut cursor = self.store.head(slot);
            while cursor != NIL {
                if self.store.node(cursor).deadline == tick {
                    return Some(tick);
                }
                cursor = self.store.next_in_list(cursor);
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

    /// Hands out the next timer due at or before `until`, advancing the wheel's clock as far
    /// as needed, or returns `None` once nothing more is due by `until` (the clock then reads
    /// `until`). Entries come out in `(deadline, start sequence)` order.
    ///
    /// An `until` before [`now`](Self::now) does not move the clock back; it only hands out
    /// entries already due.
    #[inline]
    pub fn poll(&mut self, until: u64) -> Option<Expired<T>> {
        loop {
            if let Some(expired) = self.store.pop_front(self.ready_list()) {
                return Some(expired);
            }
            if self.now >= until {
                return None;
            }
            if self.horizon > until {
                // Nothing can be due by `until`: the common empty tick, in O(1).
                self.now = until;
                return None;
            }
            self.step(until);
        }
    }

    /// An iterator of [`poll`](Self::poll)`(until)`: every timer due by `until`, in order.
    pub fn drain(&mut self, until: u64) -> Drain<'_, T> {
        Drain { wheel: self, until }
    }

    /// Moves the clock forward to the next tick with due entries (moving them to the ready
    /// list), or to `until` if there is none before it.
    fn step(&mut self, until: u64) {
        if self.horizon > until || self.is_empty() {
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
        // One pass per occupied slot: move its due entries (already in start order) to the
        // ready list; stop at the first slot that had any.
        let span = (until - self.now).min(self.slot_count as u64);
        let ready = self.ready_list();
        let mut offset = 0;
        while let Some((tick_offset, slot)) = self.next_occupied(offset, span) {
            let tick = self.tick_at(tick_offset);
            let mut cursor = self.store.head(slot);
            while cursor != NIL {
                let next = self.store.next_in_list(cursor);
                if self.store.node(cursor).deadline == tick {
                    self.store.unlink(cursor);
                    self.store.push_back(ready, cursor);
                }
                cursor = next;
            }
            if self.store.head(ready) != NIL {
                self.now = tick;
                self.last_due = tick;
                self.horizon = tick;
                return;
            }
            offset = tick_offset + 1;
        }
        self.now += span;
        // Nothing is due before the next occupied slot: every pending deadline's slot is
        // occupied, and a deadline more than a revolution away is later still.
        if let Some((offset, _)) = self.next_occupied(0, self.slot_count as u64) {
            self.horizon = self.horizon.max(self.tick_at(offset));
        }
    }
}

impl<T> std::fmt::Debug for HashedWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashedWheel")
            .field("now", &self.now)
            .field("slot_count", &self.slot_count)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// The iterator returned by [`HashedWheel::drain`].
#[derive(Debug)]
pub struct Drain<'a, T> {
    wheel: &'a mut HashedWheel<T>,
    until: u64,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = Expired<T>;

    fn next(&mut self) -> Option<Expired<T>> {
        self.wheel.poll(self.until)
    }
}

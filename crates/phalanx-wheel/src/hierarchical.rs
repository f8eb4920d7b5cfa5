//! `HierarchicalWheel`: Varghese & Lauck's Scheme 7.
//!
//! Eleven levels of 64 slots. Level `L` slots are `64^L` ticks wide, so the levels together
//! cover every `u64` deadline (64^11 = 2^66): there is no overflow list and no deadline is
//! out of range. A timer goes in the level of the highest 6-bit digit in which its deadline
//! differs from the wheel's clock (`now`), in the slot named by that digit of the deadline.
//! When the clock enters a higher-level slot's window, that slot's entries *cascade*: each is
//! placed again relative to the new clock, into a lower level or straight into the ready slot.
//!
//! Why the order is exact: at the moment the clock enters a level-`L` window, every level
//! below `L` is empty (their windows all lay before it), and every slot list is in start
//! order (entries are appended at the tail, and a cascade appends a whole ordered list into
//! empty lists). So the entries due at a tick are always in start order, whichever level they
//! started in and however many cascades they went through.
//!
//! When the clock reaches a level-0 slot, that slot's list becomes the store's ready queue:
//! it holds exactly the entries due at `now` that have not been handed out.
//!
//! This module holds what is particular to Scheme 7: the level arithmetic, where a deadline
//! is filed, `next_deadline`, how the clock steps (and cascades) to the next occupied slot,
//! and `pending`. The methods both wheels share (`insert`, `cancel`, `reset`, `get`,
//! `deadline`, `poll`, `drain`, …) are generated from one definition in `shared.rs`.

use crate::shared::wheel_api;
use crate::store::{Ref, Store};
use crate::Pending;

/// Bits of the deadline per level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Levels: enough 6-bit digits for a whole `u64`.
pub(crate) const LEVELS: usize = 64_usize.div_ceil(SLOT_BITS as usize);

/// The level a timer due at `deadline` belongs in when the clock reads `now` (`deadline > now`).
pub(crate) fn level_for(now: u64, deadline: u64) -> usize {
    let differing = (now ^ deadline) | (SLOTS as u64 - 1);
    let highest_bit = 63 - differing.leading_zeros();
    (highest_bit / SLOT_BITS) as usize
}

/// The digit of `tick` at `level`: its slot index in that level.
pub(crate) fn digit(tick: u64, level: usize) -> usize {
    ((tick >> (SLOT_BITS as usize * level)) & (SLOTS as u64 - 1)) as usize
}

/// The first tick of slot `slot` at `level` in the window that holds `now`: `now` with its
/// `level` digit replaced by `slot` and every lower digit cleared.
pub(crate) fn slot_start(now: u64, level: usize, slot: usize) -> u64 {
    let shift = SLOT_BITS as usize * level;
    let upper_shift = shift + SLOT_BITS as usize;
    let upper = if upper_shift >= 64 { 0 } else { (now >> upper_shift) << upper_shift };
    upper | ((slot as u64) << shift)
}

/// The slots of a level strictly after `digit`.
fn slots_after(digit: usize) -> u64 {
    if digit + 1 >= SLOTS {
        0
    } else {
        !0u64 << (digit + 1)
    }
}

fn list_index(level: usize, slot: usize) -> u32 {
    (level * SLOTS + slot) as u32
}

/// A hierarchical timing wheel (Scheme 7) for gameplay events in logical ticks.
///
/// Start, cancel and reset are O(1). Advancing over empty ticks costs a few bitmap scans per
/// level crossed, however far the jump; each timer is touched at most once per level on its
/// way down (at most 10 cascades, usually 0–2). Entries due on the same tick come out in
/// start order; see the crate docs for the full ordering guarantee.
///
/// It is deterministic state: with the `serde` feature it serializes and restores exactly,
/// handles included, and [`pending`](Self::pending) lists it canonically for a state hash.
///
/// ```
/// use phalanx_wheel::HierarchicalWheel;
///
/// let mut events = HierarchicalWheel::new(0);
/// events.insert(12, "arrow hits").unwrap();
/// events.insert(5, "reload done").unwrap();
/// events.insert(12, "second arrow hits").unwrap();
/// let mut fired = Vec::new();
/// for tick in 1..=12 {
///     while let Some(event) = events.poll(tick) {
///         fired.push((event.deadline, event.value));
///     }
/// }
/// assert_eq!(fired, [(5, "reload done"), (12, "arrow hits"), (12, "second arrow hits")]);
/// ```
pub struct HierarchicalWheel<T> {
    pub(crate) store: Store<T>,
    pub(crate) now: u64,
    /// A lower bound on the start of every occupied slot other than the ready slot: until the
    /// clock reaches it there is nothing to cascade or fire, so empty ticks cost O(1).
    pub(crate) horizon: u64,
}

impl<T> HierarchicalWheel<T> {
    /// An empty wheel whose clock reads `now`.
    pub fn new(now: u64) -> Self {
        HierarchicalWheel { store: Store::new(LEVELS * SLOTS, false, true), now, horizon: u64::MAX }
    }

    /// Files a reference (`deadline >= now`) in the list its deadline belongs in.
    #[inline(always)]
    pub(crate) fn place(&mut self, r: Ref) {
        if r.deadline == self.now {
            self.store.push_ready(r);
        } else {
            let level = level_for(self.now, r.deadline);
            let slot = digit(r.deadline, level);
            // The deadline shares every digit above `level` with the clock, so its slot starts
            // at the deadline with the lower digits cleared.
            let shift = SLOT_BITS as usize * level;
            let start = (r.deadline >> shift) << shift;
            debug_assert_eq!(start, slot_start(self.now, level, slot));
            self.horizon = self.horizon.min(start);
            self.store.push(list_index(level, slot), r);
        }
    }

    /// The occupied slots after the clock, as `(level, slot)`, earliest first: the lowest
    /// level comes first, because every lower-level window lies before every higher-level one.
    fn occupied_slots(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..LEVELS).flat_map(move |level| {
            let mut after = self.store.occupied_word(level) & slots_after(digit(self.now, level));
            std::iter::from_fn(move || {
                (after != 0).then(|| {
                    let slot = after.trailing_zeros() as usize;
                    after &= after - 1;
                    (level, slot)
                })
            })
        })
    }

    /// The first occupied slot after the clock, as `(level, slot)`.
    fn next_occupied_slot(&self) -> Option<(usize, usize)> {
        (0..LEVELS).find_map(|level| {
            let after = self.store.occupied_word(level) & slots_after(digit(self.now, level));
            (after != 0).then(|| (level, after.trailing_zeros() as usize))
        })
    }

    /// The earliest pending deadline: when a driver should next call [`poll`](Self::poll).
    /// Exact; O(levels) plus a walk of the first slot holding a live timer (and of any
    /// slots before it holding only tombstones), or a scan of at most 16 entries when the
    /// wheel has never held more.
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
        self.occupied_slots().find_map(|(level, slot)| {
            let mut live = self.store.live_refs(list_index(level, slot));
            if level == 0 {
                live.next().map(|_| slot_start(self.now, 0, slot))
            } else {
                live.map(|r| r.deadline).min()
            }
        })
    }

    /// Moves the clock to the start of the next occupied slot (cascading it if it is above
    /// level 0), or to `until` if that slot starts later. Called with the ready queue empty.
    fn step(&mut self, until: u64) {
        if self.horizon > until {
            self.now = until;
            return;
        }
        let Some((level, slot)) = self.next_occupied_slot() else {
            self.horizon = u64::MAX;
            self.now = until;
            return;
        };
        let start = slot_start(self.now, level, slot);
        self.horizon = start;
        if start > until {
            self.now = until;
            return;
        }
        self.now = start;
        let list = list_index(level, slot);
        if level == 0 {
            // Every reference in the slot is due now.
            self.store.list_to_ready(list);
            return;
        }
        let mut cursor = self.store.detach(list);
        while let Some(r) = self.store.unlink_next(&mut cursor) {
            self.place(r);
        }
    }

    /// Every pending timer in canonical order — `(deadline, start sequence)`, the order they
    /// will fire in — for folding the wheel into a game's state hash. Allocates one index
    /// vector and sorts it: O(n log n).
    pub fn pending(&self) -> impl Iterator<Item = Pending<'_, T>> + '_ {
        self.store.sorted_live().into_iter().map(move |(deadline, sequence, index)| Pending {
            handle: self.store.handle(index),
            deadline,
            sequence,
            value: self.store.value(index),
        })
    }
}

wheel_api!(HierarchicalWheel);

impl<T> Default for HierarchicalWheel<T> {
    fn default() -> Self {
        HierarchicalWheel::new(0)
    }
}

impl<T> std::fmt::Debug for HierarchicalWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HierarchicalWheel")
            .field("now", &self.now)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    //! Exhaustive checks of the digit arithmetic at every level boundary.

    use super::*;

    /// Ticks around each power 2^(6k): 2^(6k) − 1, 2^(6k), 2^(6k) + 1.
    fn boundaries() -> Vec<u64> {
        let mut ticks = vec![0, 1, 2, u64::MAX - 1, u64::MAX];
        for k in 1..LEVELS as u32 {
            let power = 1u64 << (SLOT_BITS * k);
            ticks.extend([power - 1, power, power + 1]);
        }
        ticks
    }

    #[test]
    fn level_is_the_highest_differing_digit() {
        for &now in &boundaries() {
            for &deadline in &boundaries() {
                if deadline <= now {
                    continue;
                }
                let level = level_for(now, deadline);
                // The digits above `level` agree, the digit at `level` is larger.
                for higher in level + 1..LEVELS {
                    assert_eq!(digit(now, higher), digit(deadline, higher), "{now} {deadline}");
                }
                assert!(digit(deadline, level) > digit(now, level), "{now} {deadline}");
                // The deadline lies inside the slot window it is filed under.
                let start = slot_start(now, level, digit(deadline, level));
                assert!(start <= deadline && start > now, "{now} {deadline} {start}");
            }
        }
    }

    #[test]
    fn slot_start_round_trips_digits() {
        for &tick in &boundaries() {
            for level in 0..LEVELS {
                let start = slot_start(tick, level, digit(tick, level));
                assert!(start <= tick);
                for lower in 0..level {
                    assert_eq!(digit(start, lower), 0);
                }
                for same_or_higher in level..LEVELS {
                    assert_eq!(digit(start, same_or_higher), digit(tick, same_or_higher));
                }
            }
        }
    }

    #[test]
    fn levels_cover_u64() {
        assert_eq!(LEVELS, 11);
        assert_eq!(level_for(0, u64::MAX), LEVELS - 1);
        assert_eq!(level_for(u64::MAX - 1, u64::MAX), 0);
        assert_eq!(digit(u64::MAX, LEVELS - 1), 0xF);
        assert_eq!(slots_after(63), 0);
        assert_eq!(slots_after(0), !1);
    }

    #[test]
    fn every_boundary_fires_exactly_on_time() {
        for &start in &boundaries() {
            for &deadline in &boundaries() {
                if deadline < start {
                    continue;
                }
                let mut wheel = HierarchicalWheel::new(start);
                wheel.insert(deadline, ()).unwrap();
                assert_eq!(wheel.next_deadline(), Some(deadline));
                if deadline > start {
                    assert!(wheel.poll(deadline - 1).is_none(), "early: {start} -> {deadline}");
                }
                let fired = wheel.poll(deadline).expect("late");
                assert_eq!(fired.deadline, deadline);
                assert!(wheel.is_empty());
            }
        }
    }
}

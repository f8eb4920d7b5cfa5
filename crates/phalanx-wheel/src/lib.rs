//! Exact, deterministically ordered timing wheels.
//!
//! Two timer modules from Varghese & Lauck, "Hashed and Hierarchical Timing Wheels"
//! (SOSP '87), built for a lockstep game where timers must fire on the exact tick and in an
//! order every machine agrees on:
//!
//! - [`HashedWheel`] — **Scheme 6**. A power-of-two table of slots; a timer lives in the slot
//!   its deadline hashes to (the low bits) and remembers its absolute deadline, so timers more
//!   than one revolution away wrap correctly. phalanx gives every connection one, in *local*
//!   time (milliseconds), for retransmit, ack-delay, turn-deadline, keep-alive and idle timers.
//! - [`HierarchicalWheel`] — **Scheme 7**. Eleven levels of 64 slots covering every `u64`
//!   deadline; a timer starts in the coarsest level that fits and cascades down as it nears.
//!   A game keeps one, in *logical* sim ticks, for gameplay events (arrow impacts, cooldowns,
//!   build timers). It is part of the game state: it serializes (feature `serde`) and lists its
//!   pending entries canonically for a state hash.
//!
//! The crate is sans-IO: it reads no clock. Time is a `u64` tick in the caller's unit, passed
//! to [`HashedWheel::poll`] / [`HierarchicalWheel::poll`].
//!
//! # The ordering guarantee
//!
//! Every timer gets a *start sequence* number when it is inserted (and a fresh one when it is
//! [`reset`](HierarchicalWheel::reset)). Both wheels hand out due timers in
//! `(deadline, start sequence)` order — ascending deadline, and on the same tick first started,
//! first fired — whatever the table size, the level a timer started in, the cascades it went
//! through, or the cancellations before it. Big jumps of the clock change nothing: `poll(t)`
//! hands out everything due by `t` in that same order. This order is a documented guarantee
//! and is property-tested against a `BTreeMap<(deadline, sequence), T>` oracle.
//!
//! # Deadlines at or before now
//!
//! A deadline equal to the wheel's [`now`](HierarchicalWheel::now) is accepted and due at once:
//! the next `poll` hands it out, after the entries already due at that tick. This is what an
//! event scheduled "this tick" from inside an event handler wants. A deadline *before* `now`
//! is refused with [`InsertError::DeadlineElapsed`] (or [`ResetError::DeadlineElapsed`]):
//! it is a bug in the caller, and silently firing it late would hide it.
//!
//! # Handles
//!
//! [`TimerHandle`] is 8 bytes and `Copy`: a slab index and a generation. In a
//! [`HierarchicalWheel`] entries live in a slab with a free list and slot lists link them
//! through one pool with a free list; in a [`HashedWheel`] the slab entries are themselves the
//! list nodes (one cache line a timer when its slot is walked). Once warm no operation
//! allocates. A handle to a timer that fired
//! or was cancelled is *stale*: `cancel` returns `None`, `discard` returns `false`, `reset`
//! returns [`ResetError::NotFound`], and none of them touches any other timer. (A generation
//! is 32 bits: a handle kept across 2^32 reuses of the same slab entry, 2^31 in a hashed
//! wheel, would alias; don't keep one that long.)
//!
//! # Complexity
//!
//! | operation | `HashedWheel` | `HierarchicalWheel` |
//! |---|---|---|
//! | `insert` | O(1) amortized: plus a share of a sweep | same |
//! | `reset` | O(1) plus the newer entries of its slot (or of the due ones, if due) | O(1) amortized: plus a share of a sweep |
//! | `cancel` | O(1): one slab entry | same |
//! | `discard` | O(1): one 4-byte generation (the node while ≤ 16 timers) | as `cancel` |
//! | skip an empty tick | O(1): bitmap scan, 64 slots per word | O(levels): one bitmap word per level, any jump length |
//! | fire a timer | O(1) plus the other entries of its slot (other rounds, tombstones) | O(1) plus ≤ 10 cascades over its life |
//! | `next_deadline` | O(1) while the wheel has never held more than 16 timers; else ≤ one revolution of occupied slots, O(n) if all are > 1 revolution away | O(1) likewise; else O(levels), plus the first slot holding a live timer |
//! | `pending` | — | O(n log n), allocates |
//!
//! Cancellation is lazy: `cancel` and `discard` (and in a hierarchical wheel `reset`, for the
//! old deadline) end the timer at once — `len`, handles and snapshots are exact at every
//! moment — but leave its place in the slot list as a tombstone, dropped when the wheel next
//! visits that slot. (A hashed wheel's tombstone is the timer's own slab entry, reused only
//! once dropped, and a discarded value is dropped with it; its `reset` moves the entry to its
//! new slot, unlinking it from the old one.) A cancel
//! counts nothing; when a start or reset needs a new list link (a hashed wheel: a new entry),
//! none is free and tombstones outnumber three times the most timers the wheel ever held,
//! every list is swept instead of allocating, so memory stays within a constant factor of
//! that peak. [`reserve`](HierarchicalWheel::reserve) makes room for the tombstones too (a
//! hashed wheel's, for a quarter of them).
//!
//! # Which one to use
//!
//! Use [`HashedWheel`] when deadlines fall within a known horizon (a few hundred to a few
//! thousand ticks: network timers), sized to that horizon; it has the cheapest per-tick work.
//! Use [`HierarchicalWheel`] when deadlines can be anywhere from "this tick" to "in an hour",
//! when the clock jumps, or when the wheel is game state that must be snapshotted.
#![forbid(unsafe_code)]

mod hashed;
mod hierarchical;
mod lists;
mod nodes;
#[cfg(feature = "serde")]
mod serde_impl;
mod shared;
mod store;
mod sweep;

/// Helpers for the crate's unit tests.
#[cfg(test)]
mod testing {
    /// A xorshift64 stream from a (non-zero) seed: the unit tests' cheap, fixed inputs.
    pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }
}

pub use hashed::{Drain as HashedDrain, HashedWheel, HASHED_SLOTS_MAX};
pub use hierarchical::{Drain as HierarchicalDrain, HierarchicalWheel};
#[cfg(feature = "serde")]
pub use serde_impl::RestoreError;

/// Names one started timer. Small and `Copy`; stale once its timer fires or is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TimerHandle {
    index: u32,
    generation: u32,
}

/// A timer handed out by `poll`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired<T> {
    /// The handle it was started with (now stale).
    pub handle: TimerHandle,
    /// The tick it was due at. It is handed out when the wheel's clock reads this tick.
    pub deadline: u64,
    /// The value it was started with.
    pub value: T,
}

/// A pending timer, as listed by [`HierarchicalWheel::pending`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending<'a, T> {
    /// Its handle.
    pub handle: TimerHandle,
    /// The tick it is due at.
    pub deadline: u64,
    /// Its start sequence: the tie-break among timers due on the same tick.
    pub sequence: u64,
    /// Its value.
    pub value: &'a T,
}

/// Why `insert` refused a timer. Nothing was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The deadline is before the wheel's clock. Pass a deadline `>= now()`; `now()` itself
    /// fires on the next poll.
    DeadlineElapsed {
        /// The deadline asked for.
        deadline: u64,
        /// The wheel's clock.
        now: u64,
    },
    /// The wheel already holds 2^32 − 1 timers, the most a handle can address.
    Full,
}

/// Why `reset` did not re-arm a timer. The timer (if any) is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetError {
    /// The handle is stale: its timer already fired or was cancelled. Start a new one.
    NotFound,
    /// The new deadline is before the wheel's clock; the timer keeps its old deadline.
    DeadlineElapsed {
        /// The deadline asked for.
        deadline: u64,
        /// The wheel's clock.
        now: u64,
    },
}

/// [`HashedWheel::new`] was given a slot count that is not a power of two in
/// `1..=HASHED_SLOTS_MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotCountError {
    /// The slot count asked for.
    pub requested: usize,
    /// The largest slot count accepted.
    pub max: usize,
}

impl std::fmt::Display for InsertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InsertError::DeadlineElapsed { deadline, now } => {
                write!(f, "timer deadline {deadline} is before the wheel's clock {now}")
            }
            InsertError::Full => write!(f, "the wheel holds the most timers a handle can address"),
        }
    }
}

impl std::fmt::Display for ResetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResetError::NotFound => write!(f, "no pending timer has this handle"),
            ResetError::DeadlineElapsed { deadline, now } => {
                write!(f, "timer deadline {deadline} is before the wheel's clock {now}")
            }
        }
    }
}

impl std::fmt::Display for SlotCountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slot count {} is not a power of two between 1 and {}", self.requested, self.max)
    }
}

impl std::error::Error for InsertError {}
impl std::error::Error for ResetError {}
impl std::error::Error for SlotCountError {}

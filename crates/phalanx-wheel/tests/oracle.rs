//! Both wheels against a `BTreeMap<(deadline, sequence), id>` oracle.
//!
//! What this proves: over random sequences of insert / cancel / discard / reset / poll
//! (single ticks, partial drains and big jumps), with deadlines now, near, one revolution
//! away, across levels and at the end of `u64`, with stale handles and deadlines in the past,
//! each wheel fires exactly the oracle's entries in exactly the oracle's order, and agrees
//! with it on every result, on `now()`, `len()` and `next_deadline()` after every step. For
//! the hierarchical wheel with feature `serde` (`--all-features`), a serialize–restore is one
//! of the steps: the restored wheel carries on identically, with the old handles still valid,
//! and re-serializes to the same bytes.
//!
//! Seeded: `PHALANX_SEED=<u64>` picks the run, `PHALANX_CASES=<n>` the number of cases
//! (default 1000). A failure prints the seed, the shrunk case and the command to rerun it.

#![allow(clippy::print_stderr)] // a randomized test prints its seed

use std::collections::BTreeMap;

use phalanx_wheel::{
    HashedWheel, HierarchicalWheel, InsertError, ResetError, SlotCountError, TimerHandle,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// The operations a test applies, to the wheel and the oracle alike.
#[derive(Clone, Debug)]
enum Op {
    Insert {
        delta: u64,
    },
    /// A deadline `back` ticks before now (refused by both when `back > 0` and now allows).
    InsertPast {
        back: u64,
    },
    /// `which` picks any handle ever issued, live or stale.
    Cancel {
        which: usize,
    },
    /// A cancel that drops the value instead of handing it back.
    Discard {
        which: usize,
    },
    Reset {
        which: usize,
        delta: u64,
    },
    ResetPast {
        which: usize,
        back: u64,
    },
    /// Drain everything due by `now + delta`.
    Advance {
        delta: u64,
    },
    /// Drain everything due by `now + delta` through `Iterator::fold` (which the drain
    /// iterators implement themselves: `for_each`, `count`, `sum`, … go through it).
    Fold {
        delta: u64,
    },
    /// Take at most `count` entries due by `now + delta`, leaving a drain half done.
    PollSome {
        delta: u64,
        count: usize,
    },
    /// Serialize and restore (hierarchical wheel with feature `serde` only; a no-op otherwise).
    Restore,
    /// Make room for `additional` more timers (changes nothing the oracle sees).
    Reserve {
        additional: usize,
    },
}

fn delta() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..4u64,
        4 => 0..70u64,
        3 => 0..5_000u64,
        2 => 0..(1u64 << 20),
        1 => (0..8u64).prop_map(|k| (1u64 << 36) - 4 + k),
        1 => any::<u32>().prop_map(u64::from),
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => delta().prop_map(|delta| Op::Insert { delta }),
        1 => (0..100u64).prop_map(|back| Op::InsertPast { back }),
        2 => any::<usize>().prop_map(|which| Op::Cancel { which }),
        1 => any::<usize>().prop_map(|which| Op::Discard { which }),
        3 => (any::<usize>(), delta()).prop_map(|(which, delta)| Op::Reset { which, delta }),
        1 => (any::<usize>(), 1..50u64).prop_map(|(which, back)| Op::ResetPast { which, back }),
        3 => (0..4u64).prop_map(|delta| Op::Advance { delta }),
        2 => delta().prop_map(|delta| Op::Advance { delta }),
        2 => (0..4u64).prop_map(|delta| Op::Fold { delta }),
        1 => delta().prop_map(|delta| Op::Fold { delta }),
        2 => (delta(), 0..4usize).prop_map(|(delta, count)| Op::PollSome { delta, count }),
        1 => Just(Op::Restore),
        1 => (0..300usize).prop_map(|additional| Op::Reserve { additional }),
    ]
}

fn start() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), any::<u32>().prop_map(u64::from), Just(u64::MAX - 5_000)]
}

/// The common surface of the two wheels, for the test only.
trait Wheel {
    fn insert(&mut self, deadline: u64, id: u64) -> Result<TimerHandle, InsertError>;
    fn cancel(&mut self, handle: TimerHandle) -> Option<u64>;
    fn discard(&mut self, handle: TimerHandle) -> bool;
    fn reset(&mut self, handle: TimerHandle, deadline: u64) -> Result<(), ResetError>;
    fn poll(&mut self, until: u64) -> Option<(u64, u64, TimerHandle)>;
    /// Everything due by `until`, through the drain iterator's `fold`.
    fn fold(&mut self, until: u64) -> Vec<(u64, u64, TimerHandle)>;
    fn now(&self) -> u64;
    fn len(&self) -> usize;
    fn next_deadline(&self) -> Option<u64>;
    fn deadline(&self, handle: TimerHandle) -> Option<u64>;
    fn restore(&mut self) -> Result<(), TestCaseError>;
    fn reserve(&mut self, additional: usize);
}

macro_rules! impl_wheel {
    ($wheel:ty) => {
        fn insert(&mut self, deadline: u64, id: u64) -> Result<TimerHandle, InsertError> {
            <$wheel>::insert(self, deadline, id)
        }
        fn cancel(&mut self, handle: TimerHandle) -> Option<u64> {
            <$wheel>::cancel(self, handle)
        }
        fn discard(&mut self, handle: TimerHandle) -> bool {
            <$wheel>::discard(self, handle)
        }
        fn reset(&mut self, handle: TimerHandle, deadline: u64) -> Result<(), ResetError> {
            <$wheel>::reset(self, handle, deadline)
        }
        fn poll(&mut self, until: u64) -> Option<(u64, u64, TimerHandle)> {
            <$wheel>::poll(self, until).map(|e| (e.deadline, e.value, e.handle))
        }
        fn fold(&mut self, until: u64) -> Vec<(u64, u64, TimerHandle)> {
            <$wheel>::drain(self, until).fold(Vec::new(), |mut fired, e| {
                fired.push((e.deadline, e.value, e.handle));
                fired
            })
        }
        fn now(&self) -> u64 {
            <$wheel>::now(self)
        }
        fn len(&self) -> usize {
            <$wheel>::len(self)
        }
        fn next_deadline(&self) -> Option<u64> {
            <$wheel>::next_deadline(self)
        }
        fn deadline(&self, handle: TimerHandle) -> Option<u64> {
            <$wheel>::deadline(self, handle)
        }
        fn reserve(&mut self, additional: usize) {
            <$wheel>::reserve(self, additional)
        }
    };
}

impl Wheel for HashedWheel<u64> {
    impl_wheel!(HashedWheel<u64>);
    fn restore(&mut self) -> Result<(), TestCaseError> {
        Ok(())
    }
}

impl Wheel for HierarchicalWheel<u64> {
    impl_wheel!(HierarchicalWheel<u64>);
    #[cfg(feature = "serde")]
    fn restore(&mut self) -> Result<(), TestCaseError> {
        let bytes = postcard::to_allocvec(self).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let restored: HierarchicalWheel<u64> =
            postcard::from_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let again = postcard::to_allocvec(&restored).expect("serialize restored");
        prop_assert_eq!(&bytes, &again, "a restored wheel must re-serialize identically");
        *self = restored;
        Ok(())
    }
    /// Without the `serde` feature the wheel does not serialize: nothing to restore through.
    #[cfg(not(feature = "serde"))]
    fn restore(&mut self) -> Result<(), TestCaseError> {
        Ok(())
    }
}

/// The oracle: what a correct wheel does, written the obvious way.
#[derive(Default)]
struct Oracle {
    now: u64,
    next_seq: u64,
    queue: BTreeMap<(u64, u64), u64>,
    /// id -> its current key in `queue`.
    live: BTreeMap<u64, (u64, u64)>,
}

impl Oracle {
    fn insert(&mut self, deadline: u64, id: u64) -> Result<(), InsertError> {
        if deadline < self.now {
            return Err(InsertError::DeadlineElapsed { deadline, now: self.now });
        }
        let key = (deadline, self.next_seq);
        self.next_seq += 1;
        self.queue.insert(key, id);
        self.live.insert(id, key);
        Ok(())
    }

    fn cancel(&mut self, id: u64) -> Option<u64> {
        let key = self.live.remove(&id)?;
        self.queue.remove(&key)
    }

    fn reset(&mut self, id: u64, deadline: u64) -> Result<(), ResetError> {
        let Some(&key) = self.live.get(&id) else {
            return Err(ResetError::NotFound);
        };
        if deadline < self.now {
            return Err(ResetError::DeadlineElapsed { deadline, now: self.now });
        }
        self.queue.remove(&key);
        self.insert(deadline, id).expect("checked above");
        Ok(())
    }

    fn poll(&mut self, until: u64) -> Option<(u64, u64)> {
        let limit = until.max(self.now);
        match self.queue.first_key_value() {
            Some((&(deadline, seq), &id)) if deadline <= limit => {
                self.queue.remove(&(deadline, seq));
                self.live.remove(&id);
                self.now = deadline;
                Some((deadline, id))
            }
            _ => {
                self.now = limit;
                None
            }
        }
    }
}

/// A wheel and the oracle side by side, with every handle issued and every entry fired.
struct Run<W> {
    wheel: W,
    oracle: Oracle,
    /// Every handle ever issued, live or stale, with the id it was started with.
    handles: Vec<(TimerHandle, u64)>,
    next_id: u64,
    fired: Vec<(u64, u64, TimerHandle)>,
}

impl<W: Wheel> Run<W> {
    /// The issued handle `which` picks (modulo how many there are), if any.
    fn pick(&self, which: usize) -> Option<(TimerHandle, u64)> {
        self.handles.get(which % self.handles.len().max(1)).copied()
    }

    /// Applies `op` to both, failing on the first disagreement in what they return.
    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Insert { delta } => {
                let deadline = self.wheel.now().saturating_add(delta);
                let handle = self.wheel.insert(deadline, self.next_id).expect("future deadline");
                self.oracle.insert(deadline, self.next_id).expect("future deadline");
                prop_assert_eq!(self.wheel.deadline(handle), Some(deadline));
                self.handles.push((handle, self.next_id));
                self.next_id += 1;
            }
            Op::InsertPast { back } => {
                let deadline = self.wheel.now().saturating_sub(back);
                let got = self.wheel.insert(deadline, self.next_id);
                let want = self.oracle.insert(deadline, self.next_id);
                prop_assert_eq!(got.is_ok(), want.is_ok());
                if let Ok(handle) = got {
                    self.handles.push((handle, self.next_id));
                    self.next_id += 1;
                } else {
                    prop_assert_eq!(got.unwrap_err(), want.unwrap_err());
                }
            }
            Op::Cancel { which } => {
                if let Some((handle, id)) = self.pick(which) {
                    prop_assert_eq!(self.wheel.cancel(handle), self.oracle.cancel(id));
                }
            }
            Op::Discard { which } => {
                if let Some((handle, id)) = self.pick(which) {
                    prop_assert_eq!(self.wheel.discard(handle), self.oracle.cancel(id).is_some());
                    prop_assert_eq!(self.wheel.deadline(handle), None);
                }
            }
            Op::Reset { which, delta } => {
                if let Some((handle, id)) = self.pick(which) {
                    let deadline = self.wheel.now().saturating_add(delta);
                    let want = self.oracle.reset(id, deadline);
                    prop_assert_eq!(self.wheel.reset(handle, deadline), want);
                }
            }
            Op::ResetPast { which, back } => {
                if let Some((handle, id)) = self.pick(which) {
                    let deadline = self.wheel.now().saturating_sub(back);
                    let want = self.oracle.reset(id, deadline);
                    prop_assert_eq!(self.wheel.reset(handle, deadline), want);
                }
            }
            Op::Advance { delta } => {
                let until = self.wheel.now().saturating_add(delta);
                while self.poll(until)? {}
            }
            Op::Fold { delta } => {
                let until = self.wheel.now().saturating_add(delta);
                for entry in self.wheel.fold(until) {
                    prop_assert_eq!(Some((entry.0, entry.1)), self.oracle.poll(until));
                    self.fired.push(entry);
                }
                prop_assert_eq!(self.oracle.poll(until), None, "the fold stopped early");
            }
            Op::PollSome { delta, count } => {
                let until = self.wheel.now().saturating_add(delta);
                for _ in 0..count {
                    self.poll(until)?;
                }
            }
            Op::Restore => self.wheel.restore()?,
            Op::Reserve { additional } => self.wheel.reserve(additional),
        }
        Ok(())
    }

    /// Polls both once with `until`; whether the wheel handed out an entry.
    fn poll(&mut self, until: u64) -> Result<bool, TestCaseError> {
        let got = self.wheel.poll(until);
        prop_assert_eq!(got.map(|(d, id, _)| (d, id)), self.oracle.poll(until));
        if let Some(entry) = got {
            self.fired.push(entry);
        }
        Ok(got.is_some())
    }
}

/// Runs `ops` on `wheel` and the oracle side by side, failing on the first disagreement.
fn check<W: Wheel>(wheel: W, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let oracle = Oracle { now: start, ..Oracle::default() };
    let mut run = Run { wheel, oracle, handles: Vec::new(), next_id: 0, fired: Vec::new() };
    for op in ops {
        run.apply(op)?;
        let Run { wheel, oracle, .. } = &run;
        prop_assert_eq!(wheel.now(), oracle.now, "now after {:?}", op);
        prop_assert_eq!(wheel.len(), oracle.queue.len(), "len after {:?}", op);
        let want_next = oracle.queue.first_key_value().map(|(&(deadline, _), _)| deadline);
        prop_assert_eq!(wheel.next_deadline(), want_next, "next_deadline after {:?}", op);
    }
    let Run { mut wheel, mut oracle, fired, .. } = run;
    // A fired handle is stale for good.
    for &(_, _, handle) in &fired {
        prop_assert_eq!(wheel.cancel(handle), None);
        prop_assert!(!wheel.discard(handle));
        prop_assert_eq!(wheel.reset(handle, u64::MAX), Err(ResetError::NotFound));
    }
    // Finally drain everything left, to the end of time, in order.
    loop {
        let got = wheel.poll(u64::MAX);
        prop_assert_eq!(got.map(|(d, id, _)| (d, id)), oracle.poll(u64::MAX));
        if got.is_none() {
            break;
        }
    }
    prop_assert_eq!(wheel.len(), 0);
    Ok(())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// Runs a property with an explicit seed; on failure, says how to rerun exactly that run.
fn run_seeded<S: Strategy>(
    test_name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let seed = env_u64("PHALANX_SEED", 0x5eed_0001);
    let cases = env_u64("PHALANX_CASES", 1000) as u32;
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut config = Config::with_cases(cases);
    config.failure_persistence = None;
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    eprintln!("{test_name}: seed {seed}, {cases} cases");
    if let Err(failure) = runner.run(&strategy, test) {
        panic!(
            "{test_name} failed with seed {seed}: {failure}\n\
             rerun: PHALANX_SEED={seed} PHALANX_CASES={cases} \
             cargo test -p phalanx-wheel --all-features --test oracle -- {test_name}"
        );
    }
}

#[test]
fn hashed_wheel_matches_oracle() {
    let slots = prop_oneof![Just(1usize), Just(2), Just(8), Just(64), Just(256), Just(4096)];
    let strategy = (slots, start(), prop::collection::vec(op(), 1..200));
    run_seeded("hashed_wheel_matches_oracle", strategy, |(slots, start, ops)| {
        check(HashedWheel::new(start, slots).expect("power of two"), start, &ops)
    });
}

#[test]
fn hierarchical_wheel_matches_oracle() {
    let strategy = (start(), prop::collection::vec(op(), 1..200));
    run_seeded("hierarchical_wheel_matches_oracle", strategy, |(start, ops)| {
        check(HierarchicalWheel::new(start), start, &ops)
    });
}

/// Long runs heavy in cancels and resets, so tombstones pile up and are swept many times
/// (mid-drain too), against the same oracle.
fn churn() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => delta().prop_map(|delta| Op::Insert { delta }),
        3 => any::<usize>().prop_map(|which| Op::Cancel { which }),
        3 => any::<usize>().prop_map(|which| Op::Discard { which }),
        8 => (any::<usize>(), delta()).prop_map(|(which, delta)| Op::Reset { which, delta }),
        2 => (0..4u64).prop_map(|delta| Op::Advance { delta }),
        1 => delta().prop_map(|delta| Op::Advance { delta }),
        1 => (0..4u64).prop_map(|delta| Op::Fold { delta }),
        2 => (delta(), 0..4usize).prop_map(|(delta, count)| Op::PollSome { delta, count }),
        1 => Just(Op::Restore),
        1 => (0..300usize).prop_map(|additional| Op::Reserve { additional }),
    ]
}

#[test]
fn wheels_match_oracle_under_churn() {
    let slots = prop_oneof![Just(1usize), Just(8), Just(1024)];
    let strategy = (slots, start(), prop::collection::vec(churn(), 500..2_000));
    run_seeded("wheels_match_oracle_under_churn", strategy, |(slots, start, ops)| {
        check(HashedWheel::new(start, slots).expect("power of two"), start, &ops)?;
        check(HierarchicalWheel::new(start), start, &ops)
    });
}

/// Many timers on one tick, inserted from every level (some started far away, some near,
/// some reset onto the tick), fire in start order — 25 of the fault matrix.
#[test]
fn same_tick_order_is_start_order_across_levels() {
    run_seeded(
        "same_tick_order_is_start_order_across_levels",
        (any::<u32>(), prop::collection::vec(0..4096u64, 1..300)),
        |(target, steps)| {
            let target = u64::from(target) + (1 << 20);
            let mut wheel = HierarchicalWheel::new(0);
            let mut expected = Vec::new();
            // Interleave clock advances with inserts so the entries start at different levels.
            for (id, step) in steps.iter().enumerate() {
                let until = (wheel.now() + step).min(target);
                prop_assert!(wheel.poll(until).is_none());
                wheel.insert(target, id as u64).expect("future");
                expected.push(id as u64);
            }
            let fired: Vec<u64> = wheel.drain(target).map(|e| e.value).collect();
            prop_assert_eq!(fired, expected);
            Ok(())
        },
    );
}

#[test]
fn slot_counts_must_be_powers_of_two() {
    for slots in [1usize, 2, 4, 1024, 1 << 24] {
        assert_eq!(HashedWheel::<()>::new(0, slots).map(|w| w.slot_count()), Ok(slots));
    }
    for slots in [0usize, 3, 1000, (1 << 24) + 1, 1 << 25] {
        assert_eq!(
            HashedWheel::<()>::new(0, slots).map(|_| ()),
            Err(SlotCountError { requested: slots, max: 1 << 24 })
        );
    }
}

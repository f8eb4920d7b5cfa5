//! Draining through `for_each` (the drain iterators' own `fold`) when the game's handler
//! panics: the wheel stays whole. Public API only.

use std::panic::{catch_unwind, AssertUnwindSafe};

use phalanx_wheel::{HashedWheel, HierarchicalWheel};

/// A test for one wheel: 40 timers, due at ticks 5 and 69 in turn (one slot of a 64-slot
/// hashed wheel; more than a small wheel holds), drained to tick 5 by a `for_each` whose
/// handler panics at its fourth timer, then drained again. The timer given to the panicking
/// handler is gone, as with a `for` loop whose body panics; every other one comes out, in
/// order, and the clock reads what it should.
macro_rules! panicking_for_each {
    ($name:ident, $wheel:expr) => {
        #[test]
        fn $name() {
            let mut wheel = $wheel;
            for value in 0..40_u32 {
                wheel.insert(5 + u64::from(value % 2) * 64, value).expect("future");
            }
            let mut seen = Vec::new();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                wheel.drain(5).for_each(|expired| {
                    assert!(seen.len() < 3, "the game's handler panicked");
                    seen.push(expired.value);
                })
            }));
            assert!(outcome.is_err());
            assert_eq!(seen, [0, 2, 4]);
            assert_eq!(wheel.len(), 36, "the timer given to the panicking handler is gone");
            let mut rest = Vec::new();
            wheel.drain(5).for_each(|expired| rest.push(expired.value));
            assert_eq!(rest, (8..40).step_by(2).collect::<Vec<u32>>());
            assert_eq!(wheel.now(), 5);
            let mut later = Vec::new();
            wheel.drain(100).for_each(|expired| later.push((expired.deadline, expired.value)));
            assert_eq!(later, (1..40).step_by(2).map(|value| (69, value)).collect::<Vec<_>>());
            assert!(wheel.is_empty());
            assert_eq!(wheel.now(), 100);
        }
    };
}

panicking_for_each!(hashed_wheel_loses_no_other_timer, HashedWheel::new(0, 64).expect("pow2"));
panicking_for_each!(hierarchical_wheel_loses_no_other_timer, HierarchicalWheel::new(0));

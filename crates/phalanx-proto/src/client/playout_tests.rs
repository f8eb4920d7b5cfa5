//! The playout schedule's unit tests.

use super::*;

/// Offsets with `jitter(turn)` ms of extra delay on a 100 ms grid, 50 ms one way.
fn feed(playout: &mut Playout, turns: std::ops::Range<u32>, jitter: impl Fn(u32) -> u64) {
    for turn in turns {
        playout.on_arrival(Turn(turn), 1_000 + 100 * u64::from(turn) + 50 + jitter(turn), false);
    }
}

#[test]
fn a_perfect_link_needs_no_buffer_and_plays_on_the_grid() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..100, |_| 0);
    assert_eq!(playout.buffer_ms(), 0);
    assert_eq!(playout.due_ms(Turn(100)), Some(1_000 + 10_000 + 50));
}

#[test]
fn the_buffer_covers_the_jitter_and_shrinks_with_it() {
    let mut playout = Playout::new(0, 80, 100);
    // 0..=40 ms, spread evenly.
    feed(&mut playout, 0..100, |turn| u64::from(turn * 7 % 41));
    // The 95th percentile, and at most twice the margin (3 ms at 100 ms turns) to spare.
    let buffer = playout.buffer_ms();
    assert!((36..=40 + 2 * 3).contains(&buffer), "buffer {buffer}");
    // Every turn of the window arrives by its due time but the few above p95.
    let late = (36..100).filter(|&t| {
        1_000 + 100 * u64::from(t) + 50 + u64::from(t * 7 % 41) > playout.due_ms(Turn(t)).unwrap()
    });
    assert!(late.count() <= 3);
    // The jitter stops: a window later the buffer is gone.
    feed(&mut playout, 100..100 + WINDOW as u32, |_| 0);
    assert_eq!(playout.buffer_ms(), 0);
}

#[test]
fn a_buffer_within_a_margin_of_its_cap_takes_the_cap() {
    // 150 ms extra, 12 ms of jitter, 6 ms of margin while the window fills: 168 ms, within
    // the 3 ms margin of the 170 ms cap, so the cap (not 168, and 170 at a later step).
    let mut playout = Playout::new(150, 170, 100);
    feed(&mut playout, 0..20, |turn| u64::from(turn % 2) * 12);
    assert_eq!(playout.buffer_ms(), 170);
    // 8 ms of jitter: 164 ms, further from the cap than the margin: as it is.
    let mut playout = Playout::new(150, 170, 100);
    feed(&mut playout, 0..20, |turn| u64::from(turn % 2) * 8);
    assert_eq!(playout.buffer_ms(), 164);
}

#[test]
fn with_the_extra_after_loss_a_clean_link_has_no_buffer_until_a_loss() {
    let config = PlayoutConfig { extra_ms: 150, buffer_ms_max: 170, extra_after_loss: true };
    let mut playout = Playout::configured(&config, 100);
    feed(&mut playout, 0..100, |_| 0);
    assert_eq!(playout.buffer_ms(), 0, "no loss yet: the jitter's buffer alone");
    // The extra, and the margin the buffer grows with (3 ms at 100 ms turns).
    playout.on_loss(Turn(100));
    assert_eq!(playout.buffer_ms(), 153, "the extra at once");
    feed(&mut playout, 100..100 + LOSS_MEMORY_TURNS - 1, |_| 0);
    assert_eq!(playout.buffer_ms(), 153, "kept while the loss is recent");
    feed(&mut playout, 100 + LOSS_MEMORY_TURNS..110 + LOSS_MEMORY_TURNS, |_| 0);
    assert_eq!(playout.buffer_ms(), 0, "dropped once a loss memory passed clean");
    // Without the setting the extra is always there.
    let always = PlayoutConfig { extra_after_loss: false, ..config };
    let mut playout = Playout::configured(&always, 100);
    feed(&mut playout, 0..100, |_| 0);
    assert_eq!(playout.buffer_ms(), 150);
}

#[test]
fn a_turn_due_on_the_dot_is_not_overdue_before_its_margin() {
    // No buffer: a request cannot beat the turn, so it waits for the slowest arrival and
    // a margin (a thirty-second of the turn) instead of racing a turn due this very ms.
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..100, |_| 0);
    let due = playout.due_ms(Turn(100)).unwrap();
    assert_eq!(playout.overdue_ms(Turn(100), 100), Some(due + 3));
}

#[test]
fn the_buffer_is_capped() {
    let mut playout = Playout::new(0, 30, 100);
    feed(&mut playout, 0..100, |turn| u64::from(turn % 2) * 60);
    assert_eq!(playout.buffer_ms(), 30);
}

#[test]
fn a_stall_moves_the_schedule_after_a_few_turns() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..50, |_| 0);
    // The host stopped for 2 s: every later turn is 2 s behind the old grid.
    feed(&mut playout, 50..50 + SHIFT_SAMPLES, |_| 2_000);
    let due = playout.due_ms(Turn(60)).unwrap();
    assert_eq!(due, 1_000 + 6_000 + 50 + 2_000, "the schedule follows the host");
    assert_eq!(playout.buffer_ms(), 0);
}

/// The host stopped for 230 ms, less than the cap plus half a turn: the turns after it
/// arrive 80 ms past their due time (`resent`: each reported overdue before it came). After
/// three, the schedule follows.
fn a_230_ms_stall_moves_the_schedule(resent: bool) {
    let mut playout = Playout::new(150, 165, 150);
    for turn in 0..50 {
        playout.on_arrival(Turn(turn), 1_000 + 150 * u64::from(turn) + 50, false);
    }
    assert_eq!(playout.buffer_ms(), 150);
    for turn in 50..50 + SHIFT_SAMPLES {
        let arrival = 1_000 + 150 * u64::from(turn) + 50 + 230;
        assert!(arrival > playout.due_ms(Turn(turn)).unwrap());
        playout.on_arrival(Turn(turn), arrival, resent);
    }
    let next = 50 + SHIFT_SAMPLES;
    let arrival = 1_000 + 150 * u64::from(next) + 50 + 230;
    assert_eq!(playout.due_ms(Turn(next)), Some(arrival + 150));
}

#[test]
fn a_short_stall_moves_the_schedule_too() {
    a_230_ms_stall_moves_the_schedule(false);
}

#[test]
fn a_step_past_a_capped_buffer_moves_the_schedule() {
    // The quiet relay's shape: a turn length of extra buffer and its jitter, at the cap.
    let mut playout = Playout::new(150, 170, 150);
    let arrival = |turn: u32, late: u64| 1_000 + 150 * u64::from(turn) + 50 + late;
    for turn in 0..100 {
        playout.on_arrival(Turn(turn), arrival(turn, u64::from(turn * 13 % 21)), false);
    }
    assert_eq!(playout.buffer_ms(), 170);
    // The host stopped and started again 185 ms later on its own clock: every later turn
    // arrives 15-35 ms past its due time, under a quarter turn (37 ms), and the buffer
    // cannot grow to cover it. After three, the schedule follows.
    for turn in 100..100 + SHIFT_SAMPLES {
        let at = arrival(turn, 185 + u64::from(turn * 13 % 21));
        assert!(at > playout.due_ms(Turn(turn)).unwrap(), "{turn} late");
        playout.on_arrival(Turn(turn), at, false);
    }
    for turn in 100 + SHIFT_SAMPLES..200 {
        let at = arrival(turn, 185 + u64::from(turn * 13 % 21));
        let due = playout.due_ms(Turn(turn)).unwrap();
        assert!(at <= due, "turn {turn} arrives at {at}, due at {due}");
        playout.on_arrival(Turn(turn), at, false);
    }
}

#[test]
fn turns_reported_overdue_after_a_stall_still_move_the_schedule() {
    // Resends or not, three late in a row move the schedule.
    a_230_ms_stall_moves_the_schedule(true);
}

#[test]
fn a_resend_leaves_the_buffer_alone() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..20, |_| 0);
    assert_eq!(playout.buffer_ms(), 0);
    // Turns 20 and 21 were reported missing and came 20 ms late: resends, not the path.
    for turn in 20..22 {
        playout.on_arrival(Turn(turn), 1_000 + 100 * u64::from(turn) + 50 + 20, true);
    }
    assert_eq!(playout.buffer_ms(), 0);
    // The same arrivals as news of the path widen it (2 of 24: above the 95th percentile).
    for turn in 22..24 {
        playout.on_arrival(Turn(turn), 1_000 + 100 * u64::from(turn) + 50 + 20, false);
    }
    assert!(playout.buffer_ms() >= 20, "buffer {}", playout.buffer_ms());
}

#[test]
fn one_late_turn_does_not_move_the_schedule() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..50, |_| 0);
    feed(&mut playout, 50..51, |_| 2_000);
    feed(&mut playout, 51..60, |_| 0);
    assert_eq!(playout.due_ms(Turn(60)), Some(1_000 + 6_000 + 50));
}

#[test]
fn a_pace_change_restarts_the_offsets_but_keeps_the_buffer() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..50, |turn| u64::from(turn % 3) * 10);
    let buffer = playout.buffer_ms();
    // The jitter's 20 ms and, while the window fills, twice the margin (3 ms at 100 ms
    // turns).
    assert_eq!(buffer, 26);
    let due = playout.due_ms(Turn(50)).unwrap();
    playout.on_pace(Turn(50), 125);
    // The schedule goes on: turn 50 keeps its time, later turns come at the new length.
    assert_eq!(playout.due_ms(Turn(50)), Some(due));
    assert_eq!(playout.due_ms(Turn(52)), Some(due + 250));
    // The next arrival sets the new offsets.
    playout.on_arrival(Turn(50), 7_000, false);
    assert_eq!(playout.due_ms(Turn(52)), Some(7_000 + 250 + buffer));
}

#[test]
fn a_delay_change_alone_keeps_the_offsets() {
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..50, |turn| u64::from(turn % 3) * 10);
    let due = playout.due_ms(Turn(55));
    playout.on_pace(Turn(50), 100);
    assert_eq!(playout.due_ms(Turn(55)), due);
    // One late arrival is still just one sample among 51, not the whole window.
    feed(&mut playout, 50..51, |_| 70);
    assert_eq!(playout.buffer_ms(), 26);
}

#[test]
fn a_turn_length_more_hides_a_lost_turn() {
    let mut playout = Playout::new(100, 150, 100);
    feed(&mut playout, 0..100, |_| 0);
    assert_eq!(playout.buffer_ms(), 100);
    // 0..=20 ms of jitter: the buffer is its spread (95th percentile) plus the extra.
    feed(&mut playout, 100..200, |turn| u64::from(turn * 13 % 21));
    let buffer = playout.buffer_ms();
    assert!((118..=120).contains(&buffer), "buffer {buffer}");
    // Turn 200 lost: its copy rides in turn 201's datagram, a turn length later, with
    // that datagram's own jitter (up to the 95th percentile). It is in time.
    let repaired = 1_000 + 100 * 201 + 50 + (buffer - 100);
    assert!(repaired <= playout.due_ms(Turn(200)).unwrap());
    // Without the extra it would be a turn late.
    let mut bare = Playout::new(0, 150, 100);
    feed(&mut bare, 100..200, |turn| u64::from(turn * 13 % 21));
    assert!(repaired > bare.due_ms(Turn(200)).unwrap() + 80);
    // Up to the cap.
    feed(&mut playout, 200..300, |turn| u64::from(turn % 2) * 120);
    assert_eq!(playout.buffer_ms(), 150);
}

#[test]
fn the_schedule_does_not_creep_later_with_the_windows_noise() {
    let mut playout = Playout::new(0, 80, 100);
    // The fastest offset of the window is 0 ms of jitter once, then never below 1 ms.
    feed(&mut playout, 0..1, |_| 0);
    feed(&mut playout, 1..WINDOW as u32, |turn| 1 + u64::from(turn % 5));
    let due = playout.due_ms(Turn(200)).unwrap();
    let buffer = playout.buffer_ms();
    // The 0 ms sample leaves the window: the fastest offset is 1 ms later, within the
    // margin; nothing moves.
    feed(&mut playout, WINDOW as u32..2 * WINDOW as u32, |turn| 1 + u64::from(turn % 5));
    assert_eq!(playout.due_ms(Turn(200)), Some(due));
    assert_eq!(playout.buffer_ms(), buffer);
    // The path gets 10 ms slower for a whole window: beyond the margin, so it follows.
    let later = 2 * WINDOW as u32..3 * WINDOW as u32;
    feed(&mut playout, later, |turn| 11 + u64::from(turn % 5));
    // (The fastest offset in force: the due time without the buffer.)
    let fastest = |playout: &Playout| playout.due_ms(Turn(200)).unwrap() - playout.buffer_ms();
    assert_eq!(fastest(&playout), due - buffer + 11);
}

#[test]
fn the_buffer_shrinks_only_on_a_full_window() {
    let mut playout = Playout::new(0, 80, 100);
    // 0..=20 ms of jitter while the window fills: the buffer grows with the margin.
    feed(&mut playout, 0..10, |turn| u64::from(turn * 13 % 21));
    // It covers all 20 ms, and the margin (twice 3 ms at 100 ms turns) absorbed steps.
    let early = playout.buffer_ms();
    assert!((20..=26).contains(&early), "buffer {early}");
    // Calm turns do not shrink it while the window fills (few samples say little)...
    feed(&mut playout, 10..WINDOW as u32 - 1, |_| 0);
    assert_eq!(playout.buffer_ms(), early);
    // ...then a full window does, to what it calls for: 0 once the jitter has left it.
    feed(&mut playout, WINDOW as u32 - 1..WINDOW as u32 + 10, |_| 0);
    assert_eq!(playout.buffer_ms(), 0);
}

#[test]
fn off_means_on_arrival() {
    let mut playout = Playout::new(0, 0, 100);
    feed(&mut playout, 0..10, |_| 0);
    assert_eq!(playout.due_ms(Turn(10)), None);
}

#[test]
fn a_backlog_at_the_join_is_not_taken_for_jitter() {
    // The join's reply came late: turns 0-4 waited in the transport and arrive in one
    // millisecond, then the path's own 0-20 ms of jitter.
    let mut playout = Playout::new(0, 80, 100);
    feed(&mut playout, 0..5, |turn| u64::from(5 - turn) * 100);
    feed(&mut playout, 5..20, |turn| u64::from(turn * 13 % 21));
    let mut clean = Playout::new(0, 80, 100);
    feed(&mut clean, 5..20, |turn| u64::from(turn * 13 % 21));
    assert_eq!(playout.buffer_ms(), clean.buffer_ms(), "the jitter's buffer alone");
    assert_eq!(playout.due_ms(Turn(30)), clean.due_ms(Turn(30)));
}

#[test]
fn a_hold_released_at_once_leaves_the_schedule_as_it_was() {
    let jitter = |turn: u32| u64::from(turn * 13 % 21);
    let mut held = Playout::new(0, 80, 100);
    let mut path = Playout::new(0, 80, 100);
    feed(&mut held, 0..40, jitter);
    feed(&mut path, 0..40, jitter);
    // Turns 40-45 held until turn 45's time, then released together; turn 45 on time too.
    feed(&mut held, 40..46, |turn| u64::from(45 - turn) * 100);
    feed(&mut held, 46..100, jitter);
    feed(&mut path, 46..100, jitter);
    assert_eq!(held.buffer_ms(), path.buffer_ms());
    assert_eq!(held.due_ms(Turn(100)), path.due_ms(Turn(100)));
}

#[test]
fn turns_together_within_the_cap_are_jitter() {
    // 20 ms turns and an 80 ms cap: two turns in one millisecond are 20 ms of jitter the
    // buffer covers, and count.
    let mut playout = Playout::new(0, 80, 20);
    for turn in 0..40u32 {
        let late = if turn % 10 == 5 { 20 } else { 0 };
        playout.on_arrival(Turn(turn), 1_000 + 20 * u64::from(turn) + late, false);
    }
    assert!(playout.buffer_ms() >= 20, "buffer {}", playout.buffer_ms());
}

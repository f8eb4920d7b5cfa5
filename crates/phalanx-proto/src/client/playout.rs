//! The client's playout schedule: turns execute on a steady local clock derived from the
//! host's pace, behind a small buffer sized from the measured jitter, instead of the moment
//! they arrive.
//!
//! The host seals a turn every turn length, so a turn's *offset* — its first arrival minus
//! `turn × length` — is constant on a perfect link: one-way latency plus a fixed clock
//! difference. Jitter spreads the offsets. Only the newest turn of a datagram gives one, and
//! not when the client reported it missing: the older turns a datagram carries are copies or
//! resends, late by their own loss (after an outage, by the whole outage), not by the path, and
//! so is a turn resent on request. The schedule keeps the offsets of the last
//! [`WINDOW`] turns and plays turn `t` at `base + t × length + buffer`, where `base` is their
//! minimum (the fastest path) and `buffer` their 95th percentile above it, capped at
//! `playout.buffer_ms_max`. Every turn that arrives within the buffer executes exactly one turn length
//! after the one before; a later one executes on arrival (a hitch, counted in
//! [`ClientStats::playout_late`](crate::ClientStats::playout_late)). The window slides, so the
//! buffer shrinks when the jitter does.
//!
//! The schedule moves later only when it must, since every millisecond it moves later is added
//! to the latency of the commands in flight: the base follows a rise of the fastest offset only
//! beyond a margin of a thirty-second of a turn (the minimum of a window is noisy: the fastest
//! turn leaving it must not move every later turn); the buffer grows with that margin to
//! spare (twice that while the window fills; to the cap when within the margin of it) and
//! shrinks only when a full window calls for more than twice that margin less. The schedule
//! moves earlier at once.
//!
//! The offsets step up when the host stops sealing for a while (a stall waiting for a player, a
//! pause): once [`SHIFT_SAMPLES`] turns in a row arrive more than a quarter turn past their due
//! time (more than the margin with the buffer at its cap: below it the buffer grows to cover a
//! smaller step, at the cap it cannot), the older offsets are forgotten (even a stall shorter
//! than the buffer's cap: until then every turn would execute late, and the commands stamped
//! from them would miss their turns). They are forgotten too when the pace changes (the
//! offsets are measured against one turn length); the buffer then holds its last size until
//! the window refills.
//!
//! With `playout.extra_after_loss`, the extra (`playout.extra_ms`, a turn to hide a single lost
//! turn) is added only from a turn that arrived missing ([`Playout::on_loss`]: a later turn came
//! first, it first came as a copy or a resend, or it was reported overdue) until
//! [`LOSS_MEMORY_TURNS`] turns pass without another; a clean link keeps the jitter's buffer
//! alone. The overdue time waits a margin past the slowest arrival, so that a turn due on the
//! very millisecond it arrives is not taken for lost.
//!
//! The buffer adds latency only to what crosses the network once, the bundle's way down; a
//! client's own command executes `turns.command_delay_turns` turns after the turn it was submitted in
//! on the same steady clock, so its submit → execute latency is steadier, not longer. The host
//! does account for it: a command stamped from a later local turn reaches the host later, so
//! the client reports its buffer and speed control adds it to the round trip it covers.

use crate::config::PlayoutConfig;
use crate::types::Turn;
use crate::window::SortedWindow;

/// Turns whose offsets the schedule keeps: about 6 s of 100 ms turns.
const WINDOW: usize = 64;

/// Consecutive turns later than any buffer would cover that mark a step in the offsets.
const SHIFT_SAMPLES: u32 = 3;

/// With the extra only after a loss: turns after the last loss that the extra stays.
const LOSS_MEMORY_TURNS: u32 = 1024;

/// The schedule. Times are the client's local milliseconds.
#[derive(Debug)]
pub(crate) struct Playout {
    /// The longest buffer (0: turns execute on arrival).
    max_ms: u64,
    /// Added to the buffer the jitter calls for (at most `max_ms`).
    extra_ms: u64,
    /// The extra applies only within [`LOSS_MEMORY_TURNS`] of the last loss.
    extra_after_loss: bool,
    /// The last turn that arrived missing (with `extra_after_loss`).
    lost: Option<Turn>,
    /// The newest turn that arrived.
    newest: Turn,
    /// The turn length the offsets are measured against.
    length_ms: u64,
    /// Offsets are `arrival − (turn − anchor) × length_ms`, to stay small.
    anchor: Option<Turn>,
    /// The offsets of the most recent first arrivals.
    offsets: SortedWindow<i64>,
    /// Turns in a row that arrived a quarter turn past their due time.
    late_in_a_row: u32,
    /// The offsets of the first `late_in_a_row` of them, resends included: a run that reaches
    /// [`SHIFT_SAMPLES`] starts the window afresh from them.
    late_run: [i64; SHIFT_SAMPLES as usize - 1],
    /// The current base and buffer.
    base: i64,
    buffer_ms: u64,
}

impl Playout {
    /// A schedule whose buffer is the jitter's plus `extra_ms`, at most `max_ms` (0: off).
    pub(crate) fn new(extra_ms: u32, max_ms: u32, turn_length_ms: u32) -> Playout {
        Playout {
            max_ms: max_ms.into(),
            extra_ms: extra_ms.min(max_ms).into(),
            extra_after_loss: false,
            lost: None,
            newest: Turn::ZERO,
            length_ms: turn_length_ms.max(1).into(),
            anchor: None,
            offsets: SortedWindow::new(WINDOW),
            late_in_a_row: 0,
            late_run: [0; SHIFT_SAMPLES as usize - 1],
            base: 0,
            buffer_ms: 0,
        }
    }

    /// The schedule `config` asks for, at `turn_length_ms`: with `extra_after_loss`, the extra
    /// applies only from a turn that arrived missing ([`on_loss`](Self::on_loss)) until
    /// [`LOSS_MEMORY_TURNS`] later.
    pub(crate) fn configured(config: &PlayoutConfig, turn_length_ms: u32) -> Playout {
        Playout {
            extra_after_loss: config.extra_after_loss,
            ..Playout::new(config.extra_ms, config.buffer_ms_max, turn_length_ms)
        }
    }

    /// The buffer in force, ms.
    pub(crate) fn buffer_ms(&self) -> u64 {
        self.buffer_ms
    }

    /// `turn` arrived missing: a later turn came first, or it first came as a copy or a
    /// resend. With the extra only after a loss, the buffer takes the extra now.
    pub(crate) fn on_loss(&mut self, turn: Turn) {
        if !self.extra_after_loss {
            return;
        }
        let first = !self.extra_in_force();
        self.lost = Some(self.lost.map_or(turn, |lost| lost.max(turn)));
        if first {
            self.resize();
        }
    }

    /// The extra the buffer takes now: always, or within [`LOSS_MEMORY_TURNS`] of a loss.
    fn extra_in_force(&self) -> bool {
        !self.extra_after_loss
            || self.lost.is_some_and(|lost| self.newest.since(lost) < LOSS_MEMORY_TURNS)
    }

    fn offset(&self, anchor: Turn, turn: Turn, at_ms: u64) -> i64 {
        let turns = i64::from(turn.0) - i64::from(anchor.0);
        at_ms as i64 - turns * self.length_ms as i64
    }

    /// Turn `turn` arrived for the first time at `now_ms`, the newest turn of its datagram;
    /// `resent` if the client had reported it missing. A resend is late by its loss, not by
    /// the path, so its offset joins the window only as part of a run of late turns that
    /// moves the schedule (after a stall, every late turn may have been reported overdue).
    pub(crate) fn on_arrival(&mut self, turn: Turn, now_ms: u64, resent: bool) {
        if self.max_ms == 0 {
            return;
        }
        self.newest = self.newest.max(turn);
        let anchor = *self.anchor.get_or_insert(turn);
        let offset = self.offset(anchor, turn, now_ms);
        if !self.offsets.is_empty() {
            if offset > self.base + self.late_ms() as i64 {
                self.late_in_a_row += 1;
            } else {
                self.late_in_a_row = 0;
            }
            if self.late_in_a_row >= SHIFT_SAMPLES {
                // The host stopped for a while: the older offsets describe another schedule.
                self.offsets.clear();
                for &late in &self.late_run {
                    self.offsets.push(late);
                }
                self.late_in_a_row = 0;
            } else {
                if let Some(slot) = self.late_in_a_row.checked_sub(1) {
                    self.late_run[slot as usize] = offset;
                }
                if resent {
                    return;
                }
                if offset < self.base - (self.max_ms + self.length_ms / 2) as i64 {
                    // Far earlier than anything seen: the old offsets are of no use.
                    self.offsets.clear();
                }
            }
        }
        self.offsets.push(offset);
        self.resize();
    }

    /// How far past the base a turn is late, past its due time by more than any buffer
    /// covers: a quarter turn past, or the margin when the buffer is at a cap that the extra
    /// buffer, not the jitter, reached (it cannot grow to cover a step; with the jitter
    /// alone at the cap, more than one turn in twenty would be past by the margin).
    fn late_ms(&self) -> u64 {
        let capped = self.buffer_ms >= self.max_ms;
        let past = if capped && self.jitter_ms() + self.settle_ms() < self.max_ms {
            self.settle_ms()
        } else {
            self.length_ms / 4
        };
        self.buffer_ms + past
    }

    /// Recomputes the base and the buffer from the window, moving the schedule later only
    /// when it must (see the module docs): the base when the fastest offset rises by more
    /// than [`settle_ms`](Self::settle_ms) or the window restarted, the buffer when the jitter
    /// grows.
    fn resize(&mut self) {
        let samples = self.offsets.sorted().len();
        let full = samples >= WINDOW;
        let Some(low) = self.offsets.percentile(0) else {
            return;
        };
        let settle = self.settle_ms();
        if samples == 1 || low < self.base || low > self.base + settle as i64 {
            self.base = low;
        }
        let extra = if self.extra_in_force() { self.extra_ms } else { 0 };
        let spread = (self.jitter_ms() + extra).min(self.max_ms);
        if spread > self.buffer_ms {
            // The 95th percentile creeps up, a little at a time (more so while the window
            // fills): a margin now saves moving the schedule again at the next step. Within
            // a margin of the cap, the cap: a step that small is not worth another later.
            let margin = match (samples, full) {
                (1, _) => 0,
                (_, true) => settle,
                (_, false) => 2 * settle,
            };
            let grown = spread + margin;
            self.buffer_ms = if grown + settle >= self.max_ms { self.max_ms } else { grown };
        } else if full && spread + 2 * settle < self.buffer_ms {
            self.buffer_ms = spread;
        }
    }

    /// The window's jitter: its 95th-percentile offset above its fastest (0 when empty).
    fn jitter_ms(&self) -> u64 {
        match (self.offsets.percentile(0), self.offsets.percentile(95)) {
            (Some(low), Some(high)) => (high - low).max(0) as u64,
            _ => 0,
        }
    }

    /// How far the fastest offset may rise above the base in force before the base follows,
    /// and the margin the buffer grows with (twice that while the window fills, and twice
    /// that it must be above the need to shrink): a thirty-second of a turn, at least 2 ms.
    fn settle_ms(&self) -> u64 {
        (self.length_ms / 32).max(2)
    }

    /// The pace changed: turns from `turn` on last `turns.length_ms`. The schedule goes on from
    /// `turn`'s time at the new length; the offsets start over from the next arrival, and the
    /// buffer keeps its size until they refill. A change of the command delay alone changes
    /// nothing here (the offsets are still measured against the same length).
    pub(crate) fn on_pace(&mut self, turn: Turn, turn_length_ms: u32) {
        let length_ms = u64::from(turn_length_ms.max(1));
        if length_ms == self.length_ms {
            return;
        }
        let due = self.due_ms(turn);
        self.length_ms = length_ms;
        if let Some(due) = due {
            // In the new frame `turn` is the anchor: its due time is the base plus the buffer.
            self.base = due as i64 - self.buffer_ms as i64;
            self.anchor = Some(turn);
        }
        self.offsets.clear();
        self.late_in_a_row = 0;
    }

    /// When `turn` is due on the schedule (`None`: no schedule yet, or the buffer is off: it
    /// executes on arrival).
    pub(crate) fn due_ms(&self, turn: Turn) -> Option<u64> {
        let anchor = self.anchor?;
        let turns = i64::from(turn.0) - i64::from(anchor.0);
        let due = self.base + turns * self.length_ms as i64 + self.buffer_ms as i64;
        Some(due.max(0) as u64)
    }

    /// When `turn` is overdue, too late for its copy in a later datagram: the latest moment a
    /// request for it, `round_trip_ms` ahead of its due time, still gets it there, but not
    /// before it could arrive on the window's slow path (`None`: no schedule, or the buffer is
    /// off).
    pub(crate) fn overdue_ms(&self, turn: Turn, round_trip_ms: u64) -> Option<u64> {
        let due = self.due_ms(turn)?;
        let spread = self.jitter_ms();
        // A margin past the slowest arrival: a turn due on the dot is not missing yet.
        let slowest = due.saturating_sub(self.buffer_ms) + spread + self.settle_ms();
        Some(due.saturating_sub(round_trip_ms + spread).max(slowest))
    }

    /// The first turn whose time on the schedule is after `now_ms`: the turn a game on
    /// schedule executes next (`None`: no schedule yet, or the buffer is off).
    pub(crate) fn turn_after(&self, now_ms: u64) -> Option<Turn> {
        let anchor = self.anchor?;
        let since = now_ms as i64 - (self.base + self.buffer_ms as i64);
        let turns = since.div_euclid(self.length_ms as i64) + 1;
        let turn = (i64::from(anchor.0) + turns).clamp(0, i64::from(u32::MAX));
        Some(Turn(turn as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets with `jitter(turn)` ms of extra delay on a 100 ms grid, 50 ms one way.
    fn feed(playout: &mut Playout, turns: std::ops::Range<u32>, jitter: impl Fn(u32) -> u64) {
        for turn in turns {
            playout.on_arrival(
                Turn(turn),
                1_000 + 100 * u64::from(turn) + 50 + jitter(turn),
                false,
            );
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
            1_000 + 100 * u64::from(t) + 50 + u64::from(t * 7 % 41)
                > playout.due_ms(Turn(t)).unwrap()
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
}

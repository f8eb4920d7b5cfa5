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
//! Turns that first arrive in one millisecond came together because something held them:
//! a join whose reply was slow (the turns sealed meanwhile wait in the transport until the
//! client is in), a reader that did not run for a while, a queue on the path. Once such a
//! burst spans more turns than the buffer's cap covers (two at 100 ms turns and the default
//! 80 ms cap), its offsets measure the hold, not the path: the sizing goes back to what it
//! was before the burst and the schedule goes on from the next arrival. Kept, they would hold
//! the buffer at its cap for a whole window, and through the buffer the client reports, the
//! host's command delay a step up for every player.
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
    /// The schedule and the offsets behind it.
    sizing: Sizing,
    /// The arrivals of one millisecond so far: when, the first one's turn, and the sizing
    /// before it.
    burst: Burst,
}

/// What the arrivals set: the schedule and the offsets it is sized from.
#[derive(Debug)]
struct Sizing {
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

impl Sizing {
    fn new() -> Sizing {
        Sizing {
            anchor: None,
            offsets: SortedWindow::new(WINDOW),
            late_in_a_row: 0,
            late_run: [0; SHIFT_SAMPLES as usize - 1],
            base: 0,
            buffer_ms: 0,
        }
    }

    /// Becomes a copy of `other`, reusing its own window's memory.
    fn copy_from(&mut self, other: &Sizing) {
        self.anchor = other.anchor;
        self.offsets.clone_from(&other.offsets);
        self.late_in_a_row = other.late_in_a_row;
        self.late_run = other.late_run;
        self.base = other.base;
        self.buffer_ms = other.buffer_ms;
    }
}

/// Turns that first arrive in one millisecond (see the module docs).
#[derive(Debug)]
struct Burst {
    /// The millisecond (`None`: none yet, or the pace changed since).
    at_ms: Option<u64>,
    /// The oldest turn that arrived in it.
    first: Turn,
    /// The sizing before its first arrival.
    before: Sizing,
    /// Whether its arrivals were found held and taken back.
    held: bool,
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
            sizing: Sizing::new(),
            burst: Burst { at_ms: None, first: Turn::ZERO, before: Sizing::new(), held: false },
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
        self.sizing.buffer_ms
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
    /// Turns that first arrive in one millisecond, further apart than the cap, were held and
    /// released together: their arrivals are taken back (see the module docs).
    pub(crate) fn on_arrival(&mut self, turn: Turn, now_ms: u64, resent: bool) {
        if self.max_ms == 0 {
            return;
        }
        self.newest = self.newest.max(turn);
        if self.held_in_a_burst(turn, now_ms) {
            return;
        }
        let anchor = *self.sizing.anchor.get_or_insert(turn);
        let offset = self.offset(anchor, turn, now_ms);
        if !self.sizing.offsets.is_empty() {
            if offset > self.sizing.base + self.late_ms() as i64 {
                self.sizing.late_in_a_row += 1;
            } else {
                self.sizing.late_in_a_row = 0;
            }
            if self.sizing.late_in_a_row >= SHIFT_SAMPLES {
                // The host stopped for a while: the older offsets describe another schedule.
                self.sizing.offsets.clear();
                for &late in &self.sizing.late_run {
                    self.sizing.offsets.push(late);
                }
                self.sizing.late_in_a_row = 0;
            } else {
                if let Some(slot) = self.sizing.late_in_a_row.checked_sub(1) {
                    self.sizing.late_run[slot as usize] = offset;
                }
                if resent {
                    return;
                }
                if offset < self.sizing.base - (self.max_ms + self.length_ms / 2) as i64 {
                    // Far earlier than anything seen: the old offsets are of no use.
                    self.sizing.offsets.clear();
                }
            }
        }
        self.sizing.offsets.push(offset);
        self.resize();
    }

    /// Tracks the arrivals of one millisecond: whether `turn`, arriving at `now_ms`, belongs
    /// to a burst found held. Once a burst spans more turns than the buffer's cap covers, the
    /// sizing goes back to what it was before the burst's first arrival, and the burst's later
    /// arrivals are ignored too.
    fn held_in_a_burst(&mut self, turn: Turn, now_ms: u64) -> bool {
        let burst = &mut self.burst;
        if burst.at_ms != Some(now_ms) || turn <= burst.first {
            burst.at_ms = Some(now_ms);
            burst.first = turn;
            burst.held = false;
            burst.before.copy_from(&self.sizing);
            return false;
        }
        if !burst.held && u64::from(turn.since(burst.first)) * self.length_ms > self.max_ms {
            burst.held = true;
            self.sizing.copy_from(&burst.before);
            // A loss since may call for the extra.
            self.resize();
        }
        self.burst.held
    }

    /// How far past the base a turn is late, past its due time by more than any buffer
    /// covers: a quarter turn past, or the margin when the buffer is at a cap that the extra
    /// buffer, not the jitter, reached (it cannot grow to cover a step; with the jitter
    /// alone at the cap, more than one turn in twenty would be past by the margin).
    fn late_ms(&self) -> u64 {
        let capped = self.sizing.buffer_ms >= self.max_ms;
        let past = if capped && self.jitter_ms() + self.settle_ms() < self.max_ms {
            self.settle_ms()
        } else {
            self.length_ms / 4
        };
        self.sizing.buffer_ms + past
    }

    /// Recomputes the base and the buffer from the window, moving the schedule later only
    /// when it must (see the module docs): the base when the fastest offset rises by more
    /// than [`settle_ms`](Self::settle_ms) or the window restarted, the buffer when the jitter
    /// grows.
    fn resize(&mut self) {
        let samples = self.sizing.offsets.sorted().len();
        let full = samples >= WINDOW;
        let Some(low) = self.sizing.offsets.percentile(0) else {
            return;
        };
        let settle = self.settle_ms();
        if samples == 1 || low < self.sizing.base || low > self.sizing.base + settle as i64 {
            self.sizing.base = low;
        }
        let extra = if self.extra_in_force() { self.extra_ms } else { 0 };
        let spread = (self.jitter_ms() + extra).min(self.max_ms);
        if spread > self.sizing.buffer_ms {
            // The 95th percentile creeps up, a little at a time (more so while the window
            // fills): a margin now saves moving the schedule again at the next step. Within
            // a margin of the cap, the cap: a step that small is not worth another later.
            let margin = match (samples, full) {
                (1, _) => 0,
                (_, true) => settle,
                (_, false) => 2 * settle,
            };
            let grown = spread + margin;
            self.sizing.buffer_ms = if grown + settle >= self.max_ms { self.max_ms } else { grown };
        } else if full && spread + 2 * settle < self.sizing.buffer_ms {
            self.sizing.buffer_ms = spread;
        }
    }

    /// The window's jitter: its 95th-percentile offset above its fastest (0 when empty).
    fn jitter_ms(&self) -> u64 {
        match (self.sizing.offsets.percentile(0), self.sizing.offsets.percentile(95)) {
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
            self.sizing.base = due as i64 - self.sizing.buffer_ms as i64;
            self.sizing.anchor = Some(turn);
        }
        self.sizing.offsets.clear();
        self.sizing.late_in_a_row = 0;
        // A burst's sizing before the change is of another turn length.
        self.burst.at_ms = None;
    }

    /// When `turn` is due on the schedule (`None`: no schedule yet, or the buffer is off: it
    /// executes on arrival).
    pub(crate) fn due_ms(&self, turn: Turn) -> Option<u64> {
        let anchor = self.sizing.anchor?;
        let turns = i64::from(turn.0) - i64::from(anchor.0);
        let due = self.sizing.base + turns * self.length_ms as i64 + self.sizing.buffer_ms as i64;
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
        let slowest = due.saturating_sub(self.sizing.buffer_ms) + spread + self.settle_ms();
        Some(due.saturating_sub(round_trip_ms + spread).max(slowest))
    }

    /// The first turn whose time on the schedule is after `now_ms`: the turn a game on
    /// schedule executes next (`None`: no schedule yet, or the buffer is off).
    pub(crate) fn turn_after(&self, now_ms: u64) -> Option<Turn> {
        let anchor = self.sizing.anchor?;
        let since = now_ms as i64 - (self.sizing.base + self.sizing.buffer_ms as i64);
        let turns = since.div_euclid(self.length_ms as i64) + 1;
        let turn = (i64::from(anchor.0) + turns).clamp(0, i64::from(u32::MAX));
        Some(Turn(turn as u32))
    }
}

#[cfg(test)]
#[path = "playout_tests.rs"]
mod tests;

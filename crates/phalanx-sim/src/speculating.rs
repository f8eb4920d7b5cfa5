//! A speculating player's game (`SimConfig::speculate`): confirmed turns through
//! `phalanx::speculate`, the game run ahead on its own orders after each (and with
//! `SimConfig::late_seals`, on through late turns while it waits), and the frame work, the
//! time until each order shows and the rendered state's stalls measured into its
//! `SpeculationReport`.

use std::time::{Duration, Instant};

use phalanx::proto::{CommandSeq, Ticket};
use phalanx::speculate::{Rollback, Speculation};
use phalanx::{Client, PlayerId, TypedTurn};

use crate::report::FRAME_US;
use crate::run::{now_ms, Run};
use crate::SimGame;

/// A player's speculation, and the work of the frame under way.
pub(crate) struct Speculator<G: SimGame> {
    speculation: Speculation<G::Command, Vec<u8>>,
    /// Microseconds of work since the frame began (the confirmed turn's).
    frame_us: u64,
    /// Late seals: at most this many turns predicted past a late one (0: off).
    late_max: u32,
    /// The length of the turns now (the last confirmed turn's), ms.
    length_ms: u32,
}

impl<G: SimGame> Speculator<G> {
    /// Speculation from `game`'s state now, with late seals up to `late_max` turns.
    pub(crate) fn new(me: PlayerId, game: &mut G, late_max: u32) -> Speculator<G> {
        let speculation = Speculation::new(me, &mut Speculating(game));
        Speculator { speculation, frame_us: 0, late_max, length_ms: 100 }
    }

    /// A confirmed turn: the game back to the confirmed state, `turn` executed on it. Begins
    /// a frame.
    pub(crate) fn confirm(&mut self, game: &mut G, turn: &TypedTurn<G::Command>) {
        let started = Instant::now();
        self.speculation.confirm(&mut Speculating(game), turn);
        self.frame_us = elapsed_us(started);
        if turn.length_ms > 0 {
            self.length_ms = turn.length_ms;
        }
    }

    /// The host will never seal our order `seq`: it is no longer predicted (nor shown).
    pub(crate) fn refused(&mut self, game: &mut G, seq: CommandSeq) {
        self.speculation.refused(&mut Speculating(game), seq);
    }

    /// After confirmed turn `turn` and our orders (`tickets`): the game runs ahead through
    /// our newest order (and with late seals, through the turns due since the next one fell
    /// due `overdue`), which ends the frame; the report gets the counts, the frame's work,
    /// and how long until each order showed.
    pub(crate) fn predict(
        &mut self,
        run: &Run,
        machine: usize,
        game: &mut G,
        tickets: Vec<(Ticket, G::Command)>,
        overdue: Option<Duration>,
    ) {
        let orders = tickets.len();
        for (ticket, command) in tickets {
            self.speculation.submitted(ticket, command);
        }
        let started = Instant::now();
        self.predict_late(game, overdue);
        let predict_us = elapsed_us(started);
        let frame_us = self.frame_us + predict_us;
        // The orders were given now; they show in the first frame drawn after the work.
        let done_us = now_ms() * 1_000 + predict_us;
        let visible_us = predict_us + (FRAME_US - done_us % FRAME_US) % FRAME_US;
        let stats = self.speculation.stats();
        run.with_player(machine, |report| {
            let speculation = report.speculation.get_or_insert_with(Default::default);
            speculation.stats = stats;
            speculation.frame_us.push(clamp(frame_us));
            speculation.visible_us.extend(std::iter::repeat_n(clamp(visible_us), orders));
        });
    }

    /// The next confirmed turn, drawing a 60 Hz frame while it is late: with late seals the
    /// game predicts on through the turns due since; either way each frame in which the
    /// rendered state shows an earlier turn than the schedule's counts as a stalled frame.
    pub(crate) async fn next_turn(
        &mut self,
        run: &Run,
        machine: usize,
        game: &mut G,
        client: &mut Client<G::Command>,
    ) -> Option<TypedTurn<G::Command>> {
        loop {
            // Biased: the turn first, and the same order on every run of a seed.
            tokio::select! {
                biased;
                turn = client.next_turn() => return turn,
                () = tokio::time::sleep(Duration::from_micros(FRAME_US)) => {}
            }
            let Some(overdue) = client.overdue() else { continue };
            if self.late_max > 0 {
                self.predict_late(game, Some(overdue));
            }
            let stats = self.speculation.stats();
            let behind = self.behind(overdue);
            run.with_player(machine, |report| {
                let speculation = report.speculation.get_or_insert_with(Default::default);
                speculation.stats = stats;
                speculation.rendered_stall_us += if behind { FRAME_US } else { 0 };
            });
        }
    }

    /// Whether the rendered state shows an earlier turn than the schedule's, the next
    /// confirmed turn having fallen due `overdue` ago: the turns due since are
    /// `next_confirmed + overdue / length`.
    fn behind(&self, overdue: Duration) -> bool {
        let next = self.speculation.next_confirmed();
        let late = overdue.as_millis() / u128::from(self.length_ms.max(1));
        let due = u128::from(next.0) + late;
        let shown = self
            .speculation
            .predicted_through()
            .map_or(i128::from(next.0) - 1, |t| i128::from(t.0));
        shown < due as i128
    }

    /// Predicts through our newest order, and through the late turns (at most `late_max`).
    fn predict_late(&mut self, game: &mut G, overdue: Option<Duration>) {
        let overdue_ms = overdue.map_or(0, |late| late.as_millis().min(u128::from(u64::MAX)));
        let horizon =
            self.speculation.horizon_late(overdue_ms as u64, self.length_ms, self.late_max);
        self.speculation.predict(&mut Speculating(game), horizon);
    }
}

fn elapsed_us(started: Instant) -> u64 {
    started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
}

fn clamp(us: u64) -> u32 {
    us.min(u64::from(u32::MAX)) as u32
}

/// A [`SimGame`] as speculation sees it: saved and restored through its snapshots.
struct Speculating<'a, G>(&'a mut G);

impl<G: SimGame> Rollback<G::Command> for Speculating<'_, G> {
    type Saved = Vec<u8>;

    fn save(&mut self) -> Vec<u8> {
        self.0.save().expect("SimConfig::speculate needs a game that saves its state")
    }

    fn restore(&mut self, saved: &Vec<u8>) {
        let restored = self.0.restore(saved);
        assert!(restored, "a game restores the state it saved");
    }

    fn execute(&mut self, turn: &TypedTurn<G::Command>) {
        self.0.execute(turn);
    }
}

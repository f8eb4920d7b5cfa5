//! A speculating player's game (`SimConfig::speculate`): confirmed turns through
//! `phalanx::speculate`, the game run ahead on its own orders after each, and the frame work
//! and the time until each order shows measured into its `SpeculationReport`.

use std::time::Instant;

use phalanx::proto::Ticket;
use phalanx::speculate::{Rollback, Speculation};
use phalanx::{PlayerId, Turn, TypedTurn};

use crate::report::FRAME_US;
use crate::run::{now_ms, Run};
use crate::SimGame;

/// A player's speculation, and the work of the frame under way.
pub(crate) struct Speculator<G: SimGame> {
    speculation: Speculation<G::Command, Vec<u8>>,
    /// Microseconds of work since the frame began (the confirmed turn's).
    frame_us: u64,
}

impl<G: SimGame> Speculator<G> {
    /// Speculation from `game`'s state now.
    pub(crate) fn new(me: PlayerId, game: &mut G) -> Speculator<G> {
        Speculator { speculation: Speculation::new(me, &mut Speculating(game)), frame_us: 0 }
    }

    /// A confirmed turn: the game back to the confirmed state, `turn` executed on it. Begins
    /// a frame.
    pub(crate) fn confirm(&mut self, game: &mut G, turn: &TypedTurn<G::Command>) {
        let started = Instant::now();
        self.speculation.confirm(&mut Speculating(game), turn);
        self.frame_us = elapsed_us(started);
    }

    /// After confirmed turn `turn` and our orders (`tickets`): the game runs ahead through
    /// our newest order, which ends the frame; the report gets the counts, the frame's work,
    /// and how long until each order showed.
    pub(crate) fn predict(
        &mut self,
        run: &Run,
        machine: usize,
        game: &mut G,
        tickets: Vec<(Ticket, G::Command)>,
        turn: Turn,
    ) {
        let orders = tickets.len();
        for (ticket, command) in tickets {
            self.speculation.submitted(ticket, command);
        }
        let started = Instant::now();
        let horizon = self.speculation.horizon(turn.next());
        self.speculation.predict(&mut Speculating(game), horizon);
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

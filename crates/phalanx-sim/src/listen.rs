//! The host's own player, when the host plays ([`SimConfig::host_plays`]): its game runs in
//! the host's process, between the host's events, and plays as a client machine's game does
//! (`player.rs::play`): it executes every sealed turn in order, records it, reports its state
//! hash (and its state, when kept or wanted for a snapshot), then gives the game's orders for
//! that turn — until the run's last turn. Its report is `players[SimConfig::players]` until the
//! run folds it.
//!
//! [`SimConfig::host_plays`]: crate::SimConfig::host_plays

use phalanx::{Host, PlayerId, TypedTurn};

use crate::player::record_records;
use crate::report::latencies;
use crate::run::{now_ms, Run};
use crate::sampler::Sampler;
use crate::SimGame;

/// The game of the host's own player.
pub(crate) struct ListenGame<G> {
    /// The host's player.
    me: PlayerId,
    /// Its index in the report's players (until the run folds it).
    machine: usize,
    game: G,
    sampler: Sampler,
    /// 1 once [`SimConfig::desync_at`](crate::SimConfig::desync_at) names this player and
    /// turn: the reported hashes have their lowest bit flipped from then on.
    flipped: u64,
}

impl<G: SimGame> ListenGame<G> {
    /// The host's player's game, when `host` has a player of its own.
    pub(crate) fn new(run: &Run, host: &Host<G::Command>, setup: &G::Setup) -> Option<Self> {
        let me = host.local_player()?;
        let machine = run.config.players;
        run.with_player(machine, |report| {
            report.player = Some(me);
            report.incarnations = 1;
        });
        Some(ListenGame {
            me,
            machine,
            game: G::new(me, run.config.seed, setup),
            sampler: Sampler::new(machine, run.config.samples_every_ms),
            flipped: 0,
        })
    }

    /// Executes `turn`, records and reports it, and gives the game's orders after it as a
    /// client's game does. `false`: that was the run's last turn, and the game is finished.
    pub(crate) async fn play(
        &mut self,
        run: &Run,
        host: &Host<G::Command>,
        turn: &TypedTurn<G::Command>,
    ) -> bool {
        self.game.execute(turn);
        self.sampler.executed(self.me, turn, &run.report);
        if run.config.desync_at == Some((self.me, turn.turn.0)) {
            self.flipped = 1;
        }
        let hash = self.game.state_hash() ^ self.flipped;
        record_records(run, self.machine, turn, hash);
        self.report_state(run, host, turn, hash).await;
        if turn.turn.0 + 1 >= run.config.turns {
            self.finish(run, host);
            return false;
        }
        for command in self.game.commands(turn.turn) {
            let submitted = host.submit(&command).await;
            if let Ok(ticket) = &submitted {
                self.sampler.submitted(ticket);
            }
            run.with_player(self.machine, |report| match submitted {
                Ok(ticket) => {
                    report.submitted += 1;
                    report.tickets.push(ticket);
                }
                Err(_) => report.submit_refused += 1,
            });
        }
        true
    }

    /// Tells the session of the state after `turn`, as a client's game does: its hash every
    /// turn, the state itself when kept or wanted for a snapshot.
    async fn report_state(
        &self,
        run: &Run,
        host: &Host<G::Command>,
        turn: &TypedTurn<G::Command>,
        hash: u64,
    ) {
        let _ = host.report_state_hash(turn.turn, hash).await;
        if run.config.keep_states {
            if let Some(state) = self.game.save() {
                let _ = host.keep_state(turn.turn, state).await;
            }
        }
        if turn.wants_snapshot {
            if let Some(state) = self.game.save() {
                let _ = host.offer_snapshot(turn.turn, hash, state).await;
            }
        }
    }

    /// The game is over for this run (its last turn, or the session's end): when, how the
    /// session ended if it did, and the latency figures of its own commands.
    pub(crate) fn finish(&self, run: &Run, host: &Host<G::Command>) {
        let ended = host.ended();
        run.with_player(self.machine, |report| {
            report.finished_ms = Some(now_ms());
            report.ended = ended;
            let mut sorted: Vec<u32> = report.command_latencies.iter().map(|&(_, ms)| ms).collect();
            sorted.sort_unstable();
            // Ranked as a client's session ranks its latencies.
            let at = |percent: usize| {
                sorted.get((sorted.len() * percent / 100).min(sorted.len().saturating_sub(1)))
            };
            report.latency_ms = latencies(at(50).copied(), at(95).copied(), sorted.last().copied());
        });
    }
}

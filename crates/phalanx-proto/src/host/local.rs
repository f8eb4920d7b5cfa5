//! The host's own player (a listen server: submit, next turn, state hash, turn cost) and its
//! operator (pause and resume, recording).

use bytes::Bytes;

use crate::bundle::{EndCause, PauseBy, Record, TurnBundle};
use crate::config::{Fairness, TURN_COST_MAX_MS};
use crate::replay::{Recorder, Replay, REPLAY_FORMAT_VERSION};
use crate::types::{stamp, CommandSeq, PlayerId, Ticket, Turn};
use crate::SubmitError;

use super::{EndError, Host, HostEvent, LocalSeat, Readmit, RemoveError, Seat};

impl Host {
    /// Pauses or resumes: the record goes into the next sealed turn. A pause takes effect
    /// after that turn; a resume seals that turn one turn length from now.
    pub(super) fn set_paused(&mut self, now_ms: u64, paused: bool, by: PauseBy) {
        if self.ended {
            return;
        }
        if paused {
            if self.paused || self.pause_pending {
                return;
            }
            self.open[0].controls.push(Record::Paused(by));
            self.push_event(HostEvent::Paused(by));
            // The pause record itself must still go out: it is sealed at the next deadline,
            // and sealing stops after it (see `try_seal`).
            self.pause_pending = true;
        } else {
            if !self.paused {
                return;
            }
            self.paused = false;
            self.open[0].controls.push(Record::Resumed(by));
            self.push_event(HostEvent::Resumed(by));
            self.next_seal_at_ms = now_ms + u64::from(self.pace.current.turn_length_ms);
        }
    }
    /// Ends the game: an [`EndCause::Finished`] record with the game's `code` goes into the
    /// next sealed turn, the last one; every peer executes up to it and then ends
    /// ([`EndReason::Finished`](crate::EndReason::Finished)). A paused game seals that turn at
    /// once. Returns the last turn.
    pub fn end(&mut self, now_ms: u64, code: u32) -> Result<Turn, EndError> {
        if !self.started {
            return Err(EndError::NotStarted);
        }
        if self.ended || self.end_pending.is_some() {
            return Err(EndError::AlreadyEnded);
        }
        let cause = EndCause::Finished { code };
        self.open[0].controls.push(Record::Ended(cause));
        self.end_pending = Some(cause);
        if self.paused {
            self.paused = false;
            self.next_seal_at_ms = now_ms;
        }
        Ok(self.next_seal)
    }

    /// Removes a remote player now (kicked by the operator, or their connection closed on
    /// purpose): a `Left` record in the next sealed turn, and the window stops waiting for
    /// them. With [`Readmit::Allow`] their seat stays open for a rejoin within
    /// `catch_up.rejoin_window_ms`, as after a timeout (a player back before that `Left` was sealed
    /// simply stays: no game sees it go); with [`Readmit::Never`] their token is revoked.
    /// After the game ended there is no turn for the record: the host just stops waiting for
    /// them (see [`is_finished`](Self::is_finished)).
    pub fn remove(
        &mut self,
        now_ms: u64,
        player: PlayerId,
        readmit: Readmit,
    ) -> Result<(), RemoveError> {
        if !matches!(self.seats.get(player.0 as usize), Some(Seat::Remote(_))) {
            return Err(RemoveError::NotSeated(player));
        }
        self.remove_player(now_ms, player, readmit == Readmit::Allow);
        if readmit == Readmit::Never {
            self.seats[player.0 as usize] = Seat::Revoked;
        }
        self.push_event(HostEvent::PlayerRemoved(player));
        Ok(())
    }

    /// Pauses the game after the next sealed turn (the host's operator).
    pub fn pause(&mut self, now_ms: u64) {
        self.set_paused(now_ms, true, PauseBy::Host);
    }
    /// Resumes a paused game.
    pub fn resume(&mut self, now_ms: u64) {
        self.set_paused(now_ms, false, PauseBy::Host);
    }
    /// The host's own player's state hash after executing `turn`: compared with the others'
    /// on check turns (multiples of `sync.interval_turns`); every turn's is kept for a
    /// desync's forensics (report every turn to have the first divergent one pinned).
    pub fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        if let Some(player) = self.local_player() {
            let interval = self.config.sync.interval_turns;
            self.sync.report(player, turn, hash, interval, self.next_seal);
            self.keep_own_hash(turn, hash);
        }
    }
    /// How long the host's own game takes to simulate a turn (speed control input).
    pub fn report_turn_cost(&mut self, cost_ms: u32) {
        self.local_cost_ms = cost_ms.min(TURN_COST_MAX_MS);
    }
    /// Starts recording every turn sealed from now on into a [`Replay`] (at most `turns_max`
    /// turns; past that the replay is marked truncated). `seed` is the game's own seed.
    pub fn start_recording(&mut self, seed: u64, turns_max: usize) {
        let first = self.pace.current;
        self.recorder = Some(Recorder::new(
            Replay {
                format_version: REPLAY_FORMAT_VERSION,
                protocol_version: crate::PROTOCOL_VERSION,
                game_data_hash: self.config.game_data_hash,
                seed,
                players_max: self.config.turns.players_max,
                first_pace: (first.turn_length_ms, first.command_delay_turns),
                first_turn: self.next_seal.0,
                turns: Vec::new(),
                checks: Vec::new(),
                truncated: false,
            },
            turns_max,
        ));
    }
    /// The recording so far, if recording.
    pub fn replay(&self) -> Option<&Replay> {
        self.recorder.as_ref().map(|recorder| &recorder.replay)
    }
    /// The next turn the host's own player executes, if it plays.
    pub(super) fn local_next_exec(&mut self) -> Option<Turn> {
        self.local_seat().map(|(_, local)| local.next_exec)
    }
    /// The host's own player's seat.
    fn local_seat(&mut self) -> Option<(PlayerId, &mut LocalSeat)> {
        self.seats.iter_mut().enumerate().find_map(|(index, seat)| match seat {
            Seat::Local(local) => Some((PlayerId(index as u8), local)),
            _ => None,
        })
    }

    /// Submits a command for the host's own player. With [`Fairness::Fast`] (the default) it
    /// goes into the next turn the host seals: as early as the network allows, since it
    /// reaches the clients inside that turn, one hop away, while a client's command crosses
    /// the network twice (the command delay covers the round trip), so the host's player sees
    /// its commands sooner than a client does. With [`Fairness::Fair`] it is stamped as a
    /// client's is: the turn after the one the host's game is executing plus the current
    /// command delay. Refused, with nothing queued, when too large, over budget, or refused by
    /// the game's rule ([`set_command_rule`](Self::set_command_rule)).
    pub fn submit(&mut self, payload: &[u8]) -> Result<Ticket, SubmitError> {
        let next_seal = self.next_seal;
        if self.ended {
            return Err(SubmitError::NotRunning);
        }
        let Some((player, local)) = self.local_seat() else {
            return Err(SubmitError::NoPlayer);
        };
        let (next_seq, next_exec) = (local.next_seq, local.next_exec);
        if payload.len() > usize::from(self.config.budget.command_bytes_max) {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max: self.config.budget.command_bytes_max.into(),
            });
        }
        let delay = match self.config.turns.fairness {
            Fairness::Fast => 0,
            Fairness::Fair => self.pace.current.command_delay_turns,
        };
        if !self.admits(player, payload) {
            return Err(SubmitError::Refused);
        }
        let stamped = stamp(next_exec, delay).max(next_seal);
        // Over budget for the stamped turn is refused, as a client's would be — or with
        // `budget.overflow_turns_max`, spilled into the first later turn with room, as a client's.
        let turns = self.config.budget.overflow_turns_max as usize + 1;
        let payload = Bytes::copy_from_slice(payload);
        let turn = self
            .place_command(player, next_seq, stamped, turns, payload)
            .ok_or(SubmitError::OverBudget { turn: stamped })?;
        if let Some((_, local)) = self.local_seat() {
            local.next_seq = CommandSeq(next_seq.0.wrapping_add(1));
        }
        Ok(Ticket { seq: next_seq, turn })
    }

    /// The next sealed turn for the host's own game, in order, each exactly once: its
    /// player's, or with [`observe_turns`](Self::observe_turns) a dedicated host's.
    pub fn next_turn(&mut self) -> Option<TurnBundle> {
        let next = match self.observer {
            Some(next) => next,
            None => self.local_seat()?.1.next_exec,
        };
        let index = next.0.checked_sub(self.sealed_base.0)? as usize;
        let bundle = self.sealed.get(index)?.bundle.clone();
        match self.observer.as_mut() {
            Some(observer) => *observer = next.next(),
            None => {
                if let Some((_, local)) = self.local_seat() {
                    local.next_exec = next.next();
                }
                self.keep_own_turn(&bundle);
            }
        }
        self.prune_sealed();
        Some(bundle)
    }
}

//! The turn deadline and sealing: at each deadline the host seals the next turn if the window
//! allows (no player more than `turns.window_turns` turns behind), announces stalls, and writes
//! its own records (sync verdicts, the desync policy, pace changes) ahead of the commands.

use crate::bundle::{EndCause, PauseBy, Record, TurnBundle};
use crate::config::DesyncPolicy;
use crate::types::{players_in, PlayerId, Turn};
use crate::wire::encode_bundle;
use bytes::Bytes;

use super::{Host, HostEvent, OpenTurn, Sealed, Seat};

impl Host {
    /// Seals every due turn the window allows.
    pub(super) fn try_seal(&mut self, now_ms: u64) {
        while self.is_sealing() && now_ms >= self.next_seal_at_ms {
            if !self.window_allows(self.next_seal) {
                let since = *self.stalled_since_ms.get_or_insert(now_ms);
                if now_ms >= since + u64::from(self.config.turns.stall_notice_ms) {
                    self.announce_waiting(self.blocking_players(self.next_seal));
                }
                return;
            }
            if let Some(since) = self.stalled_since_ms.take() {
                self.stats.stall_ms += now_ms - since;
            }
            self.announce_waiting(0);
            let deadline = self.next_seal_at_ms;
            self.seal();
            if std::mem::take(&mut self.pause_pending) {
                self.paused = true;
            }
            if let Some(cause) = self.end_pending.take() {
                self.ended = true;
                self.push_event(HostEvent::Ended(cause));
            }
            let turn_ms = u64::from(self.pace.current.turn_length_ms);
            // Keep the cadence unless a whole turn was lost waiting; then restart it from now
            // rather than bursting to catch up.
            self.next_seal_at_ms =
                if now_ms > deadline + turn_ms { now_ms + turn_ms } else { deadline + turn_ms };
        }
    }

    /// The players whose position holds `turn` back, as a bit mask.
    fn blocking_players(&self, turn: Turn) -> u64 {
        let window = self.config.turns.window_turns;
        self.seats.iter().enumerate().fold(0, |mask, (index, seat)| {
            let behind = seat.next_exec().is_some_and(|next_exec| turn.since(next_exec) >= window);
            mask | (u64::from(behind) << index)
        })
    }

    /// Whether sealing `turn` keeps every player, and the host's own observing game, within
    /// the window.
    fn window_allows(&self, turn: Turn) -> bool {
        let window = self.config.turns.window_turns;
        let observer_behind = self.observer.is_some_and(|next| turn.since(next) >= window);
        self.blocking_players(turn) == 0 && !observer_behind
    }

    /// Tells the driver and every client who the game is waiting for (0: nobody).
    fn announce_waiting(&mut self, mask: u64) {
        if mask == self.waiting {
            return;
        }
        let was_waiting = self.waiting != 0;
        self.waiting = mask;
        for seat in &mut self.seats {
            if let Seat::Remote(peer) = seat {
                peer.notify_due = true;
            }
        }
        if mask == 0 {
            if was_waiting {
                self.push_event(HostEvent::StallEnded);
            }
        } else {
            self.push_event(HostEvent::Waiting(players_in(mask)));
        }
    }

    /// Seals turn `next_seal`: its control records, the host's own records, then its commands
    /// in the order `turns.order` gives the seats, each player's in `seq` order.
    fn seal(&mut self) {
        let mut open = self.open.pop_front().unwrap_or_default();
        self.open.push_back(OpenTurn::default());
        let ranks = self.config.turns.order.ranks(self.next_seal, self.config.turns.players_max);
        open.commands.sort_unstable_by_key(|&(player, seq, _)| {
            (ranks.get(usize::from(player.0)).copied().unwrap_or(u8::MAX), player, seq)
        });
        self.open_commands -= open.commands.len();
        self.stats.commands_sealed += open.commands.len() as u64;
        let mut records = open.controls;
        // This turn's length: a pace change sealed into it applies from the next.
        let length_ms = self.pace.current.turn_length_ms;
        self.seal_verdicts(&mut records);
        self.seal_pace(&mut records);
        records.extend(open.commands.into_iter().map(|(player, seq, payload)| Record::Command {
            player,
            seq,
            payload,
        }));
        let bundle = TurnBundle { turn: self.next_seal, records, length_ms };
        let mut encoded = Vec::with_capacity(64);
        encode_bundle(&mut encoded, &bundle.records);
        if let Some(recorder) = &mut self.recorder {
            recorder.record(&bundle);
        }
        let encoded = Bytes::from(encoded);
        self.snapshot_after_seal(self.next_seal, &encoded);
        self.spectators_after_seal(self.next_seal, &encoded);
        if self.sealed.is_empty() {
            self.sealed_base = self.next_seal;
        }
        self.sealed.push_back(Sealed { bundle, encoded });
        self.next_seal = self.next_seal.next();
        self.stats.turns_sealed += 1;
        self.stats.sealed_high_water = self.stats.sealed_high_water.max(self.sealed.len());
        self.prune_sealed();
    }

    /// Sync-check verdicts decided by now, and what the desync policy does about them.
    fn seal_verdicts(&mut self, records: &mut Vec<Record>) {
        let players = self.active_players();
        let host_player = self.local_player();
        let decided = self.sync.decide(
            &players,
            self.next_seal,
            self.config.turns.window_turns,
            self.config.sync.reference,
            host_player,
        );
        for verdict in decided {
            if let (Some(recorder), Some(reference)) = (&mut self.recorder, verdict.reference) {
                recorder.check(verdict.turn, reference);
            }
            self.snapshot_decided(verdict.turn, verdict.reference);
            self.spectators_decided(verdict.turn, verdict.reference);
            let Some(report) = verdict.desync else { continue };
            self.forensics_open(report.turn, &report.hashes, &report.diverged);
            records.push(Record::Desync(report.clone()));
            self.push_event(HostEvent::Desync(report));
            match self.config.sync.policy {
                DesyncPolicy::Warn => {}
                DesyncPolicy::Pause if !self.paused => {
                    self.paused = true;
                    records.push(Record::Paused(PauseBy::Host));
                    self.push_event(HostEvent::Paused(PauseBy::Host));
                }
                DesyncPolicy::Pause => {}
                DesyncPolicy::End if !self.ended && self.end_pending.is_none() => {
                    self.ended = true;
                    records.push(Record::Ended(EndCause::Desync));
                    self.push_event(HostEvent::Ended(EndCause::Desync));
                }
                DesyncPolicy::End => {}
            }
        }
    }

    /// Speed control: a pace change from the slowest round trip and turn cost, if due.
    fn seal_pace(&mut self, records: &mut Vec<Record>) {
        // A client's commands leave its playout buffer later than the turns arrive.
        let need_ms = self
            .peers()
            .filter_map(|(_, peer)| Some(peer.link.smoothed_rtt_ms()? + u64::from(peer.playout_ms)))
            .max()
            .unwrap_or(0);
        let cost_ms = self
            .peers()
            .map(|(_, peer)| peer.cost_ms)
            .chain([self.local_cost_ms])
            .max()
            .unwrap_or(0);
        if let Some(pace) = self.pace.on_turn(need_ms, cost_ms) {
            records.push(Record::Pace(pace));
            self.push_event(HostEvent::PaceChanged(pace));
        }
    }

    fn active_players(&self) -> Vec<PlayerId> {
        self.seats
            .iter()
            .enumerate()
            .filter(|(_, seat)| seat.is_playing())
            .map(|(index, _)| PlayerId(index as u8))
            .collect()
    }

    /// Forgets bundles every player has (remote: acknowledged; local: executed).
    pub(super) fn prune_sealed(&mut self) {
        let oldest_needed = self
            .seats
            .iter()
            .filter_map(|seat| match seat {
                Seat::Remote(peer) => Some(peer.turn_ack),
                Seat::Local(local) => Some(local.next_exec),
                Seat::Free | Seat::Away { .. } | Seat::Gone | Seat::Revoked => None,
            })
            .chain(self.observer)
            .min()
            .unwrap_or(self.next_seal);
        while self.sealed_base < oldest_needed && !self.sealed.is_empty() {
            self.sealed.pop_front();
            self.sealed_base = self.sealed_base.next();
        }
        if self.sealed.is_empty() {
            self.sealed_base = self.next_seal;
        }
    }
}

//! Spectators: seated with tokens of their own, sent the sealed turns (after the broadcast
//! delay) from a buffer of their own, never in the window, never in a turn. A spectator that
//! falls `catch_up.spectator_lag_turns_max` behind is dropped; one that sends commands has them refused
//! and counted, and each such datagram is an offence (past `link.misbehaviour_max` it is dropped).

use std::collections::VecDeque;

use bytes::Bytes;

use crate::config::ConfigError;
use crate::link::{repeat_delay_ms, Intake, Link, Offence, Sent};
use crate::stats::PeerStats;
use crate::types::{CommandSeq, Joined, SpectatorId, Turn};
use crate::wire::{
    decode_up, encode_join_reply_with_log, put_down_header, DownExtras, JoinRefusal, Rejoin,
};

use super::transmit::fit_bundles;
use super::{refused, Host, HostEvent, JoinResponse};

/// Why a spectator left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpectatorGone {
    /// Its connection went silent past `link.idle_timeout_ms`.
    TimedOut,
    /// It fell more than `catch_up.spectator_lag_turns_max` behind.
    Lagged,
    /// It sent more than `link.misbehaviour_max` bad datagrams (commands among them).
    Misbehaved,
    /// A new connection with its token took its slot.
    Replaced,
    /// It left (the driver saw its connection close: [`Host::remove_spectator`]).
    Left,
}

/// A spectator's connection and where it is.
#[derive(Debug)]
struct Watcher {
    link: Link,
    /// It holds every turn before this one.
    turn_ack: Turn,
    /// The next turn never sent to it.
    send_next: Turn,
    /// Its latest state hash report, acknowledged (it is not in the game's sync check).
    hash_acked: Option<Turn>,
    /// Its latest check-turn hash whose verdict is not in yet: compared with the reference
    /// once it is.
    unchecked: Option<(Turn, u64)>,
    /// It was found diverged (reported once).
    diverged: bool,
}

/// Decided reference hashes kept to check spectators' reports against, at most.
const REFERENCES_MAX: usize = 4_096;

/// The host's spectators and the turns kept for them.
#[derive(Debug, Default)]
pub(super) struct Spectators {
    /// Spectator tokens and the slot each one took.
    tokens: Vec<(u64, Option<SpectatorId>)>,
    slots: Vec<Option<Box<Watcher>>>,
    /// Encoded sealed turns from `base`, while spectators are allowed.
    turns: VecDeque<Bytes>,
    base: Turn,
    cursor: usize,
    /// `(check turn, reference hash)` of the latest verdicts, oldest first.
    references: VecDeque<(Turn, Option<u64>)>,
}

impl Host {
    /// Lets spectators join with `tokens` (each usable by one spectator at a time; at most
    /// `catch_up.spectators_max`, or a [`ConfigError::OutOfRange`] names `tokens`; a token given twice,
    /// or also a player's, is a [`ConfigError::DuplicateToken`]). A spectator gets
    /// the sealed turns `catch_up.spectator_delay_turns` after they are sealed, starting from a
    /// snapshot when it joins mid-game; the players never wait for it, and it cannot submit.
    /// Call it before the game starts: turns sealed before it are not kept for spectators.
    pub fn allow_spectators(&mut self, tokens: &[u64]) -> Result<(), ConfigError> {
        let max = self.config.catch_up.spectators_max;
        if tokens.len() > usize::from(max) {
            return Err(ConfigError::OutOfRange {
                field: "spectator tokens",
                value: tokens.len() as u64,
                min: 0,
                max: max.into(),
            });
        }
        let players = self.tokens.iter().map(|&(token, _)| token);
        let all: Vec<u64> = players.chain(tokens.iter().copied()).collect();
        if let Some(token) = super::first_duplicate(&all) {
            return Err(ConfigError::DuplicateToken { token });
        }
        self.spectators.tokens = tokens.iter().map(|&token| (token, None)).collect();
        self.spectators.slots = (0..tokens.len()).map(|_| None).collect();
        Ok(())
    }

    /// Whether `token` is a spectator's.
    pub(super) fn spectator_token(&self, token: u64) -> Option<usize> {
        self.spectators.tokens.iter().position(|&(known, _)| known == token)
    }

    /// The first turn a spectator may not be sent yet: the broadcast delay behind sealing.
    fn visible_end(&self) -> Turn {
        Turn(self.next_seal.0.saturating_sub(self.config.catch_up.spectator_delay_turns))
    }

    /// Seats a spectator with the token at `index`: its slot (a live connection with the
    /// same token is replaced), caught up from a snapshot when the game is running.
    pub(super) fn join_spectator(&mut self, now_ms: u64, index: usize) -> JoinResponse {
        if self.ended {
            return refused(JoinRefusal::GameStarted);
        }
        let start = if self.started { self.visible_end() } else { Turn::ZERO };
        if self.started && self.spectate_material(start).is_none() {
            return refused(JoinRefusal::RejoinUnavailable);
        }
        let id = SpectatorId(index as u8);
        self.spectators.tokens[index].1 = Some(id);
        if self.spectators.slots[index].take().is_some() {
            self.push_event(HostEvent::SpectatorLeft(id, SpectatorGone::Replaced));
        }
        let watcher = Watcher {
            link: self.new_link(now_ms),
            turn_ack: start,
            send_next: start,
            hash_acked: None,
            unchecked: None,
            diverged: false,
        };
        self.spectators.slots[index] = Some(Box::new(watcher));
        self.stats.spectators = self.spectators.slots.iter().flatten().count();
        self.push_event(HostEvent::SpectatorJoined(id));
        let mut accept = self.accept_fields(Joined::Spectator(id), None);
        let material = if self.started { self.spectate_material(start) } else { None };
        let reply = match material {
            None => encode_join_reply_with_log(&Ok(accept), &[], std::iter::empty()),
            Some((snapshot, skip)) => {
                accept.rejoin = Some(Rejoin {
                    turns: start.0,
                    next_seq: CommandSeq(0),
                    snapshot: snapshot.map(|s| (s.turn, s.hash)),
                });
                let state = snapshot.map_or(&[][..], |s| &s.state[..]);
                encode_join_reply_with_log(&Ok(accept), state, self.log_from(skip))
            }
        };
        JoinResponse { reply: Some(reply), result: Ok(Joined::Spectator(id)) }
    }

    /// Handles a datagram from spectator `id`'s connection: its acknowledgements and progress.
    /// Commands in it are refused and counted ([`HostStats::spectator_commands_refused`]);
    /// bad input is dropped and counted as a player's is.
    ///
    /// [`HostStats::spectator_commands_refused`]: crate::HostStats::spectator_commands_refused
    pub fn handle_spectator_datagram(&mut self, now_ms: u64, id: SpectatorId, datagram: &[u8]) {
        let (limits, visible) = (self.limits, self.visible_end());
        let Some(watcher) = self.watcher_mut(id) else { return };
        let up = match watcher.link.intake(now_ms, datagram.len(), decode_up(datagram, &limits)) {
            Intake::Accept(up) => up,
            Intake::Drop => return,
            Intake::Disconnect => return self.drop_spectator(id, SpectatorGone::Misbehaved),
        };
        let claim_ok = up.turn_ack <= visible && up.next_exec <= up.turn_ack;
        if claim_ok && up.turn_ack > watcher.turn_ack {
            watcher.turn_ack = up.turn_ack;
            let outstanding = watcher.turn_ack < visible && watcher.send_next > watcher.turn_ack;
            watcher.link.on_data_acked(now_ms, outstanding);
        }
        if up.extras.probe {
            watcher.link.on_probe();
        }
        if let Some((turn, hash)) = up.extras.hash_report.filter(|&(turn, _)| turn < visible) {
            watcher.hash_acked = watcher.hash_acked.max(Some(turn));
            if watcher.unchecked.is_none_or(|(held, _)| turn > held) {
                watcher.unchecked = Some((turn, hash));
            }
            self.check_spectator(id);
        }
        let commands = up.commands.len() as u64;
        self.stats.spectator_commands_refused += commands;
        if !claim_ok || commands > 0 {
            let Some(watcher) = self.watcher_mut(id) else { return };
            if watcher.link.offence(Offence::Spoofed) {
                self.drop_spectator(id, SpectatorGone::Misbehaved);
            }
        }
    }

    /// Writes the next datagram due to a spectator into `buf` (cleared first) and returns the
    /// spectator to send it to, or `None` when nothing is due. Call it beside
    /// [`poll_transmit`](Self::poll_transmit) until both say `None`.
    pub fn poll_transmit_spectators(
        &mut self,
        now_ms: u64,
        buf: &mut Vec<u8>,
    ) -> Option<SpectatorId> {
        let slots = self.spectators.slots.len();
        for step in 0..slots {
            let index = (self.spectators.cursor + step) % slots;
            if self.transmit_to_spectator(now_ms, index, buf) {
                self.spectators.cursor = (index + 1) % slots;
                return Some(SpectatorId(index as u8));
            }
        }
        None
    }

    fn transmit_to_spectator(&mut self, now_ms: u64, index: usize, buf: &mut Vec<u8>) -> bool {
        let visible = self.visible_end();
        let (redundant_turns, budget) =
            (self.config.link.redundant_turns, usize::from(self.config.link.datagram_bytes_max));
        let window = self.config.turns.window_turns as usize;
        let (turn_length, waiting) = (self.pace.current.turn_length_ms, self.waiting);
        let spectators = &mut self.spectators;
        let Some(watcher) = spectators.slots[index].as_deref_mut() else { return false };
        let has_new = watcher.send_next < visible;
        let has_unacked = watcher.turn_ack < visible;
        if !(has_new || watcher.link.is_due(has_unacked)) {
            return false;
        }
        buf.clear();
        let (pn, ack) = watcher.link.next_packet(now_ms);
        let oldest = watcher.turn_ack.max(spectators.base);
        // Far behind what was sent (a loss on a long link, a spell of not listening): resend
        // from what it holds, a window a datagram, rather than waiting for the backed-off
        // retransmit timer while the game runs away from it.
        let behind = watcher.send_next.since(watcher.turn_ack) as usize > window / 2;
        let first = if watcher.link.is_retransmitting() || behind {
            oldest
        } else {
            oldest.max(Turn(watcher.send_next.0.saturating_sub(redundant_turns)))
        };
        let carry = has_new || watcher.link.resend_due(has_unacked);
        let (base, skip) = (spectators.base, first.since(spectators.base) as usize);
        // A spectator far behind is sent its window at a time: it holds no more, and its
        // decoder refuses a datagram with more.
        let end = if carry { (visible.since(base) as usize).min(skip + window) } else { 0 };
        let turns = spectators.turns.iter().enumerate().take(end).skip(skip);
        let bundles = turns.map(|(offset, bundle)| (Turn(base.0 + offset as u32), &bundle[..]));
        let (count, redundant) = fit_bundles(bundles.clone(), watcher.send_next, budget);
        let extras = DownExtras {
            hash_ack: watcher.hash_acked,
            waiting,
            probe: watcher.link.is_probing(now_ms),
            snapshot_wanted: None,
            inspect: None,
            refused: None,
        };
        put_down_header(buf, pn, ack, CommandSeq(0), &extras, first, count);
        bundles.take(count).for_each(|(_, encoded)| buf.extend_from_slice(encoded));
        if behind && has_new {
            // Each newly visible turn triggers one such datagram, not a burst.
            watcher.send_next = visible;
        } else if count > 0 {
            watcher.send_next = watcher.send_next.max(first.saturating_add(count as u32));
        }
        let sent = Sent {
            pn,
            len: buf.len(),
            carries_data: count > 0,
            redundant_bytes: redundant,
            repeat_after_ms: has_new.then(|| repeat_delay_ms(turn_length)),
        };
        watcher.link.on_sent(now_ms, sent);
        true
    }

    /// A check turn was decided with `reference`: check the spectators waiting for it.
    pub(super) fn spectators_decided(&mut self, turn: Turn, reference: Option<u64>) {
        if self.spectators.tokens.is_empty() {
            return;
        }
        let references = &mut self.spectators.references;
        if references.len() == REFERENCES_MAX {
            references.pop_front();
        }
        references.push_back((turn, reference));
        for index in 0..self.spectators.slots.len() {
            self.check_spectator(SpectatorId(index as u8));
        }
    }

    /// Compares spectator `id`'s waiting hash report with its turn's reference, once decided:
    /// a spectator whose state differs is reported once
    /// ([`HostEvent::SpectatorDesync`]; it plays on, outside the game).
    fn check_spectator(&mut self, id: SpectatorId) {
        let Some(watcher) = self.spectators.slots.get(id.0 as usize).and_then(|w| w.as_deref())
        else {
            return;
        };
        let Some((turn, hash)) = watcher.unchecked else { return };
        let references = &self.spectators.references;
        let decided = references.back().is_some_and(|&(newest, _)| newest >= turn);
        if !decided {
            return;
        }
        let reference = references.iter().find(|&&(held, _)| held == turn).and_then(|r| r.1);
        let diverged = reference.is_some_and(|reference| reference != hash) && !watcher.diverged;
        if let Some(watcher) = self.watcher_mut(id) {
            watcher.unchecked = None;
            watcher.diverged |= diverged;
        }
        if let (true, Some(reference)) = (diverged, reference) {
            self.stats.spectator_desyncs += 1;
            self.push_event(HostEvent::SpectatorDesync { spectator: id, turn, hash, reference });
        }
    }

    /// A spectator's counters, if it is connected.
    pub fn spectator_stats(&self, id: SpectatorId) -> Option<PeerStats> {
        let watcher = self.spectators.slots.get(id.0 as usize)?.as_deref()?;
        Some(PeerStats {
            link: watcher.link.stats().clone(),
            drops: watcher.link.drops().clone(),
            turn_ack: watcher.turn_ack,
            commands_accepted: 0,
        })
    }

    /// Drops spectator `id` (its connection closed); `false` if it was not watching.
    pub fn remove_spectator(&mut self, id: SpectatorId) -> bool {
        let watching = self.watcher_mut(id).is_some();
        self.drop_spectator(id, SpectatorGone::Left);
        watching
    }

    fn watcher_mut(&mut self, id: SpectatorId) -> Option<&mut Watcher> {
        self.spectators.slots.get_mut(id.0 as usize)?.as_deref_mut()
    }

    fn drop_spectator(&mut self, id: SpectatorId, why: SpectatorGone) {
        let Some(slot) = self.spectators.slots.get_mut(id.0 as usize) else { return };
        if slot.take().is_some() {
            self.stats.spectators -= 1;
            self.push_event(HostEvent::SpectatorLeft(id, why));
        }
    }

    /// The earliest of the spectators' timers.
    pub(super) fn spectators_timeout(&self) -> Option<u64> {
        self.spectators.slots.iter().flatten().filter_map(|w| w.link.poll_timeout()).min()
    }

    /// Fires the spectators' timers; a silent one is dropped.
    pub(super) fn spectators_handle_timeout(&mut self, now_ms: u64) {
        for index in 0..self.spectators.slots.len() {
            let Some(watcher) = self.spectators.slots[index].as_deref_mut() else { continue };
            watcher.link.handle_timeout(now_ms);
            if watcher.link.is_timed_out() {
                self.drop_spectator(SpectatorId(index as u8), SpectatorGone::TimedOut);
            }
        }
    }

    /// Turn `turn` was just sealed as `encoded`: keep it for spectators, drop the ones too far
    /// behind, and forget what no spectator (present or joining) needs.
    pub(super) fn spectators_after_seal(&mut self, turn: Turn, encoded: &Bytes) {
        if self.spectators.tokens.is_empty() {
            return;
        }
        if self.spectators.turns.is_empty() {
            self.spectators.base = turn;
        }
        self.spectators.turns.push_back(encoded.clone());
        self.stats.spectator_turns_bytes += encoded.len();
        let visible =
            Turn(turn.next().0.saturating_sub(self.config.catch_up.spectator_delay_turns));
        let lag_max = self.config.catch_up.spectator_lag_turns_max;
        for index in 0..self.spectators.slots.len() {
            let behind = self.spectators.slots[index]
                .as_deref()
                .is_some_and(|watcher| visible.since(watcher.turn_ack) > lag_max);
            if behind {
                self.stats.spectators_lagged += 1;
                self.drop_spectator(SpectatorId(index as u8), SpectatorGone::Lagged);
            }
        }
        // A joining spectator starts at `visible`: keep from there, or the oldest ack.
        let keep_from = self
            .spectators
            .slots
            .iter()
            .flatten()
            .map(|watcher| watcher.turn_ack)
            .chain([visible])
            .min()
            .unwrap_or(visible);
        while self.spectators.base < keep_from {
            let Some(bundle) = self.spectators.turns.pop_front() else { break };
            self.stats.spectator_turns_bytes -= bundle.len();
            self.spectators.base = self.spectators.base.next();
        }
    }
}

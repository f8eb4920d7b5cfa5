//! Datagrams from players: the link's intake, then what only the host checks (claims about
//! turns), the riders (state hashes, turn costs, pause requests) and the commands, placed into
//! open turns within each player's budget. Offences count against the sender's link; past
//! `link.misbehaviour_max` the player is removed.

use bytes::Bytes;

use crate::bundle::{PauseBy, Record};
use crate::config::{PLAYOUT_MAX_MS, TURN_COST_MAX_MS};
use crate::link::{Intake, Offence};
use crate::sync::is_check_turn;
use crate::types::{CommandSeq, PlayerId, Turn};
use crate::wire::{decode_up, PauseKind, Up, UpExtras};

use super::{Host, HostEvent, Peer, Seat};

/// A command taken from a datagram: its sequence, the turn it was stamped for, and the first
/// open turn it may go into.
struct Accepted {
    seq: CommandSeq,
    stamped: Turn,
    target: Turn,
    payload: Bytes,
}

/// A game's rule for commands: `false` refuses `player`'s `payload`.
type RuleFn = dyn FnMut(PlayerId, &[u8]) -> bool + Send;

/// A game's rule for commands, as [`Host::set_command_rule`] took it.
pub(super) struct CommandRule(Box<RuleFn>);

impl std::fmt::Debug for CommandRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandRule")
    }
}

impl Peer {
    /// Takes what the client says it holds and has executed; `false` (nothing taken) for a
    /// claim it cannot make: holding a bundle not sealed yet, or having executed one it does
    /// not hold.
    fn on_progress(&mut self, now_ms: u64, up: &Up<'_>, next_seal: Turn) -> bool {
        if up.turn_ack > next_seal || up.next_exec > up.turn_ack {
            return false;
        }
        self.next_exec = self.next_exec.max(up.next_exec);
        if up.turn_ack > self.turn_ack {
            self.turn_ack = up.turn_ack;
            let outstanding = self.turn_ack < next_seal && self.send_next > self.turn_ack;
            self.link.on_data_acked(now_ms, outstanding);
        }
        true
    }

    /// The datagram's commands that come next in sequence and fit the window; duplicates,
    /// gaps (the missing command comes again) and commands too far ahead are dropped and
    /// counted.
    fn take_commands(&mut self, up: &Up<'_>, next_seal: Turn, window: u32) -> Vec<Accepted> {
        let mut accepted = Vec::new();
        for (offset, command) in up.commands.iter().enumerate() {
            let seq = CommandSeq(up.first_seq.0.wrapping_add(offset as u32));
            if seq < self.next_seq {
                self.link.drops_mut().duplicate += 1;
                continue;
            }
            if seq > self.next_seq {
                // A gap: the missing command rides in every later datagram, so wait for it.
                self.link.drops_mut().out_of_order += (up.commands.len() - offset) as u64;
                break;
            }
            self.next_seq = CommandSeq(self.next_seq.0.wrapping_add(1));
            let target = command.turn.max(next_seal);
            if target.since(next_seal) >= window {
                self.link.drops_mut().future += 1;
                continue;
            }
            let payload = Bytes::copy_from_slice(command.payload);
            accepted.push(Accepted { seq, stamped: command.turn, target, payload });
        }
        accepted
    }
}

impl Host {
    /// Handles a datagram from `player`'s connection. Bad input is dropped and counted in
    /// that player's [`PeerStats`](crate::PeerStats); it never panics and allocates at most
    /// the datagram's size.
    pub fn handle_datagram(&mut self, now_ms: u64, player: PlayerId, datagram: &[u8]) {
        let limits = self.limits;
        let next_seal = self.next_seal;
        let Some(peer) = self.remote_mut(player) else { return };
        let up = match peer.link.intake(now_ms, datagram.len(), decode_up(datagram, &limits)) {
            Intake::Accept(up) => up,
            Intake::Drop => return,
            Intake::Disconnect => return self.disconnect_misbehaving(now_ms, player),
        };
        if !peer.on_progress(now_ms, &up, next_seal) {
            return self.offence(now_ms, player, Offence::Spoofed);
        }
        // No ack-delay timer on this side: a bundle goes to every player each turn and carries
        // the acknowledgement (clients size their retransmit timeout for that), which saves a
        // standalone datagram per command. Commands are also repeated in every datagram a
        // client sends until acknowledged, so a lost one rarely waits for a timeout.
        self.handle_extras(now_ms, player, &up.extras);
        let window = self.config.turns.window_turns;
        let Some(peer) = self.remote_mut(player) else { return };
        let accepted = peer.take_commands(&up, next_seal, window);
        self.place_accepted(now_ms, player, accepted);
        // An acknowledgement may have opened the window.
        self.prune_sealed();
        self.try_seal(now_ms);
    }

    /// Sets the game's rule for commands. Before any command enters an open turn, the host's
    /// own player's and every client's, `rule(player, payload)` decides; `false` refuses it.
    /// A refused command is never sealed: no game executes it, no replay holds it, nothing
    /// else changes, so it cannot desync anyone. Each refusal is counted
    /// ([`HostStats::commands_refused`](crate::HostStats::commands_refused), and a client's
    /// in its [`DropCounters::refused`](crate::DropCounters::refused)), raises a
    /// [`HostEvent::CommandRefused`] for a client's and is an offence of the client's: past `link.misbehaviour_max` offences it is removed as misbehaving
    /// ([`HostEvent::PlayerMisbehaved`]). The host's own player's refused command is a
    /// [`SubmitError::Refused`](crate::SubmitError::Refused).
    ///
    /// Refuse what an honest client never sends: a payload that does not decode, a unit id
    /// out of range, an order for another player's units, a rate no human gives. An order the
    /// game may make moot before it executes (a unit dies on the way) is for the simulation
    /// to ignore, deterministically: the command executes turns after the rule saw it. The
    /// client is told ([`ClientEvent::CommandRefused`](crate::ClientEvent::CommandRefused)).
    /// The rule runs on the host's thread for every command: keep it short.
    pub fn set_command_rule(&mut self, rule: impl FnMut(PlayerId, &[u8]) -> bool + Send + 'static) {
        self.rule = Some(CommandRule(Box::new(rule)));
    }

    /// Whether the game's rule lets `player`'s `payload` in; counts a refusal.
    pub(super) fn admits(&mut self, player: PlayerId, payload: &[u8]) -> bool {
        let admitted = self.rule.as_mut().is_none_or(|rule| (rule.0)(player, payload));
        if !admitted {
            self.stats.commands_refused += 1;
        }
        admitted
    }

    /// Places a player's accepted commands; counts the late ones, those the window had no
    /// room for and those the game's rule refused (an offence each: the player may be removed
    /// on the way, and the rest of its commands with it).
    fn place_accepted(&mut self, now_ms: u64, player: PlayerId, accepted: Vec<Accepted>) {
        let (mut placed, mut over_budget) = (0, 0);
        for command in accepted {
            if !self.admits(player, &command.payload) {
                self.push_event(HostEvent::CommandRefused { player, seq: command.seq });
                if let Some(peer) = self.remote_mut(player) {
                    peer.refusals.refuse(command.seq);
                }
                self.offence(now_ms, player, Offence::Refused);
                if self.remote_mut(player).is_none() {
                    return;
                }
                continue;
            }
            // Anywhere in the window: a late command is never lost.
            let (seq, target) = (command.seq, command.target);
            match self.place_command(player, seq, target, usize::MAX, command.payload) {
                Some(turn) => {
                    if turn > command.stamped {
                        self.stats.commands_late += 1;
                    }
                    placed += 1;
                }
                None => {
                    over_budget += 1;
                    if let Some(peer) = self.remote_mut(player) {
                        peer.refusals.refuse(seq);
                    }
                }
            }
        }
        if let Some(peer) = self.remote_mut(player) {
            peer.commands_accepted += placed;
            peer.link.drops_mut().over_budget += over_budget;
        }
    }

    /// Puts a command into the first open turn at or after `target`, among the `turns`
    /// turns from it, with budget left for its player; returns that turn, or `None` if there
    /// is no room (within the window).
    pub(super) fn place_command(
        &mut self,
        player: PlayerId,
        seq: CommandSeq,
        target: Turn,
        turns: usize,
        payload: Bytes,
    ) -> Option<Turn> {
        let players = usize::from(self.config.turns.players_max);
        let first = target.since(self.next_seal) as usize;
        for index in first..first.saturating_add(turns).min(self.open.len()) {
            let open = &mut self.open[index];
            if open.usage.is_empty() {
                open.usage.resize(players, Default::default());
            }
            let usage = &mut open.usage[player.0 as usize];
            if usage.admits(&self.config, payload.len()) {
                usage.add(payload.len());
                open.commands.push((player, seq, payload));
                self.open_commands += 1;
                self.stats.open_commands_high_water =
                    self.stats.open_commands_high_water.max(self.open_commands);
                return self.next_seal.checked_add(index as u32);
            }
        }
        None
    }

    /// State hash, turn cost and pause requests riding in a client's datagram.
    fn handle_extras(&mut self, now_ms: u64, player: PlayerId, extras: &UpExtras) {
        let spoofed = match extras.hash_report {
            Some((turn, hash)) => !self.take_hash_report(player, turn, hash),
            None => false,
        };
        let pauses_max = self.config.turns.pauses_per_player_max;
        let can_pause = !self.paused && !self.pause_pending;
        let can_resume = self.paused && !self.ended;
        let Some(peer) = self.remote_mut(player) else { return };
        if extras.probe {
            peer.link.on_probe();
        }
        if extras.gap {
            peer.link.repair_now();
        }
        if let Some(cost) = extras.cost_ms {
            peer.cost_ms = cost.min(TURN_COST_MAX_MS);
        }
        if let Some(playout) = extras.playout_ms {
            peer.playout_ms = playout.min(PLAYOUT_MAX_MS);
        }
        let mut pause_change = None;
        if let Some((seq, kind)) = extras.pause.filter(|&(seq, _)| peer.pause_seq != Some(seq)) {
            peer.pause_seq = Some(seq);
            match kind {
                PauseKind::Pause if can_pause && peer.pauses_used < pauses_max => {
                    peer.pauses_used += 1;
                    pause_change = Some(true);
                }
                PauseKind::Resume if can_resume => pause_change = Some(false),
                _ => {}
            }
        }
        if spoofed {
            self.offence(now_ms, player, Offence::Spoofed);
        }
        if let Some(paused) = pause_change {
            self.set_paused(now_ms, paused, PauseBy::Player(player));
        }
    }

    /// A state hash a player reports for `turn`; `false` if no one can have executed that
    /// turn yet (it is not sealed).
    fn take_hash_report(&mut self, player: PlayerId, turn: Turn, hash: u64) -> bool {
        let (interval, next_seal) = (self.config.sync.interval_turns, self.next_seal);
        if turn >= next_seal {
            return false;
        }
        // Recorded if it is a pending check turn; otherwise (already decided, not a check
        // turn, or a repeat) ignored. Acknowledged either way, so the client moves on to its
        // next report instead of repeating this one forever.
        if is_check_turn(turn, interval) {
            self.sync.report(player, turn, hash, interval, next_seal);
        }
        if let Some(peer) = self.remote_mut(player) {
            peer.hash_acked = peer.hash_acked.max(Some(turn));
        }
        true
    }

    /// Counts an offence against `player`; past the limit they are disconnected.
    fn offence(&mut self, now_ms: u64, player: PlayerId, offence: Offence) {
        let Some(peer) = self.remote_mut(player) else { return };
        if peer.link.offence(offence) {
            self.disconnect_misbehaving(now_ms, player);
        }
    }

    /// Removes a player who sent more than `link.misbehaviour_max` bad datagrams.
    fn disconnect_misbehaving(&mut self, now_ms: u64, player: PlayerId) {
        self.remove_player(now_ms, player, false);
        self.push_event(HostEvent::PlayerMisbehaved(player));
    }

    /// Removes a player: they leave at the next sealed turn, and the window no longer waits
    /// for them. A `rejoinable` remote player's seat stays open for `catch_up.rejoin_window_ms`.
    pub(super) fn remove_player(&mut self, now_ms: u64, player: PlayerId, rejoinable: bool) {
        let rejoin = self.config.catch_up.rejoin_window_ms > 0;
        if let Some(seat) = self.seats.get_mut(player.0 as usize) {
            *seat = match seat {
                Seat::Free | Seat::Away { .. } | Seat::Gone | Seat::Revoked => return,
                Seat::Remote(peer) if rejoinable && rejoin => Seat::Away {
                    since_ms: now_ms,
                    next_seq: peer.next_seq,
                    pauses_used: peer.pauses_used,
                },
                _ => Seat::Gone,
            };
            // After the last turn there is no turn to carry the record: the seat just empties
            // (the session no longer waits for that player's acknowledgements).
            if !self.ended {
                self.open[0].controls.push(Record::Left(player));
            }
        }
    }
}

//! The host: seals turns, relays them, and is the authority on order and membership.
//!
//! # Call order (driver loop)
//!
//! 1. [`Host::handle_join`] for each join request that arrives on a reliable stream, sending
//!    back the reply bytes (and [`Host::handle_join_delivered`] once the transport says the
//!    client has them); [`Host::start`] when the game begins.
//! 2. [`Host::handle_datagram`] for each datagram from a joined player's connection.
//! 3. [`Host::handle_timeout`] when [`Host::poll_timeout`] says (calling it early is a
//!    harmless no-op).
//! 4. Drain [`Host::poll_transmit`] until it returns `None`, sending each datagram to the
//!    player it names; drain [`Host::poll_event`].
//! 5. Sleep until `poll_timeout()` or the next input, then go to 2.
//!
//! The host may also be a player ([`Host::add_local_player`]): its commands go through
//! [`Host::submit`] and its game takes turns from [`Host::next_turn`], the same path as any
//! client's, so a listen server cannot gain an edge.

use std::collections::VecDeque;

use crate::bundle::{DesyncReport, EndCause, PauseBy, Record, TurnBundle};
use crate::config::{ConfigError, DesyncPolicy, SessionConfig};
use crate::link::Link;
use crate::pace::{Pace, PaceControl};
use crate::recovery::Arrival;
use crate::replay::{Recorder, Replay, REPLAY_FORMAT_VERSION};
use crate::stats::{DropCounters, HostStats, PeerStats};
use crate::sync::{is_check_turn, SyncChecks};
use crate::types::{CommandSeq, PlayerId, Ticket, Turn};
use crate::wire::{
    decode_up, encode_bundle, encode_join_reply, encode_join_reply_with_log, put_down_header,
    DecodeError, DownExtras, JoinAccept, JoinRefusal, JoinRequest, Limits, PauseKind, Rejoin,
    UpExtras,
};
use crate::{SubmitError, PROTOCOL_VERSION};
use bytes::Bytes;

/// Something the host's driver or game should know. Drained with [`Host::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostEvent {
    /// A player joined; their `Joined` record is in the next sealed turn.
    PlayerJoined(PlayerId),
    /// A player came back on a new connection: after timing out, within `rejoin_window_ms`
    /// (their `Joined` record is in the next sealed turn), or in place of a connection of
    /// theirs that was never heard from (no record: they never left). Either way the join
    /// reply carried every sealed turn so far.
    PlayerRejoined(PlayerId),
    /// A player's connection went silent past `idle_timeout_ms`. They leave at the next
    /// sealed turn; the driver should close the connection.
    PlayerTimedOut(PlayerId),
    /// A player sent more than `misbehaviour_max` malformed or spoofed datagrams. They leave
    /// at the next sealed turn; the driver must close the connection.
    PlayerMisbehaved(PlayerId),
    /// A check turn's state hashes differ; the report is in the turn just sealed.
    Desync(DesyncReport),
    /// Sealing has waited `stall_notice_ms` for these players (their acknowledgements are a
    /// whole window behind). Every client gets the same notice.
    Waiting(Vec<PlayerId>),
    /// The stall announced by `Waiting` is over.
    StallEnded,
    /// Speed control changed the pace from the turn after the one just sealed.
    PaceChanged(Pace),
    /// The game paused after the turn just sealed.
    Paused(PauseBy),
    /// The game resumed.
    Resumed(PauseBy),
    /// The session ended after the turn just sealed; nothing more is sealed.
    Ended(EndCause),
}

/// Why a join did not succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// Refused; the reply bytes tell the client why.
    Refused(JoinRefusal),
    /// The request did not decode; there is no reply, close the stream.
    Malformed(DecodeError),
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Refused(refusal) => write!(f, "join refused: {refusal}"),
            JoinError::Malformed(error) => write!(f, "malformed join request: {error}"),
        }
    }
}

impl std::error::Error for JoinError {}

/// What [`Host::handle_join`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    /// Bytes to send back on the stream, if any.
    pub reply: Option<Vec<u8>>,
    /// The seat given, or why none was.
    pub result: Result<PlayerId, JoinError>,
}

/// The host's view of a remote player.
#[derive(Debug)]
struct Peer {
    link: Link,
    /// The peer holds every bundle before this turn.
    turn_ack: Turn,
    /// The peer's game has executed every turn before this one: the window is counted from
    /// here, so a slow machine holds the game back instead of falling ever further behind.
    turn_exec: Turn,
    /// The next turn never sent to this peer yet.
    send_next: Turn,
    /// The next command sequence expected from this peer.
    cmd_next: CommandSeq,
    misbehaviour: u32,
    drops: DropCounters,
    commands_accepted: u64,
    /// The peer's reported time to simulate a turn.
    cost_ms: u32,
    /// The latest check turn whose state hash we hold from this peer.
    hash_acked: Option<Turn>,
    /// The sequence number of the last pause request handled, and pauses used.
    pause_seq: Option<u8>,
    pauses_used: u32,
    /// The waiting notice changed: tell this peer even if nothing else is due.
    notify_due: bool,
}

#[derive(Debug)]
enum Seat {
    Free,
    Local {
        next_seq: CommandSeq,
        next_exec: Turn,
    },
    Remote(Box<Peer>),
    /// Timed out; may rejoin until `since_ms + rejoin_window_ms`.
    Away {
        since_ms: u64,
        cmd_next: CommandSeq,
        pauses_used: u32,
    },
    Gone,
}

/// Commands and controls waiting for a turn that is not sealed yet.
#[derive(Debug, Default)]
struct OpenTurn {
    controls: Vec<Record>,
    /// `(player, seq, payload)`; sorted at sealing.
    commands: Vec<(PlayerId, CommandSeq, Bytes)>,
    /// Per player: (commands, bytes) used of the budget.
    usage: Vec<(u16, u32)>,
}

#[derive(Debug)]
struct Sealed {
    bundle: TurnBundle,
    encoded: Bytes,
}

/// The host side of a lockstep session. Sans-IO: see the module docs for the call order.
#[derive(Debug)]
pub struct Host {
    config: SessionConfig,
    limits: Limits,
    /// Join tokens and the seat each one took.
    tokens: Vec<(u64, Option<PlayerId>)>,
    seats: Vec<Seat>,
    started: bool,
    /// The next turn to seal.
    next_seal: Turn,
    next_seal_at_ms: u64,
    /// Due but held back by the window since this time.
    stalled_since_ms: Option<u64>,
    /// `open[i]` collects turn `next_seal + i`.
    open: VecDeque<OpenTurn>,
    /// `sealed[i]` is turn `sealed_base + i`.
    sealed: VecDeque<Sealed>,
    sealed_base: Turn,
    open_commands: usize,
    events: VecDeque<HostEvent>,
    send_cursor: usize,
    stats: HostStats,
    pace: PaceControl,
    sync: SyncChecks,
    paused: bool,
    /// A pause was granted: stop after sealing the turn that carries its record.
    pause_pending: bool,
    ended: bool,
    /// Players announced as holding up the game (bit i: player i).
    waiting: u64,
    local_cost_ms: u32,
    recorder: Option<Recorder>,
    /// Every sealed turn's encoding from turn 0, for rejoins (empty when rejoin is off or the
    /// log outgrew `rejoin_log_bytes_max`, see `rejoin_log_full`).
    rejoin_log: Vec<Bytes>,
    rejoin_log_bytes: usize,
    rejoin_log_full: bool,
}

/// The most events held for the driver; older ones are dropped first (they are also
/// reflected in stats and bundles, so nothing is lost but the notification).
const EVENTS_MAX: usize = 1024;

impl Host {
    /// A host in the lobby, accepting joins with any of `tokens` (each
    /// usable once).
    pub fn new(config: SessionConfig, tokens: &[u64]) -> Result<Host, ConfigError> {
        config.validate()?;
        let window = config.turns_ahead_max as usize;
        let mut open = VecDeque::with_capacity(window);
        open.resize_with(window, OpenTurn::default);
        Ok(Host {
            limits: Limits::new(&config),
            tokens: tokens.iter().map(|&token| (token, None)).collect(),
            seats: (0..config.players_max).map(|_| Seat::Free).collect(),
            started: false,
            next_seal: Turn::ZERO,
            next_seal_at_ms: u64::MAX,
            stalled_since_ms: None,
            open,
            sealed: VecDeque::with_capacity(window),
            sealed_base: Turn::ZERO,
            open_commands: 0,
            events: VecDeque::new(),
            send_cursor: 0,
            stats: HostStats::default(),
            pace: PaceControl::new(&config),
            sync: SyncChecks::default(),
            paused: false,
            pause_pending: false,
            ended: false,
            waiting: 0,
            local_cost_ms: 0,
            recorder: None,
            rejoin_log: Vec::new(),
            rejoin_log_bytes: 0,
            rejoin_log_full: config.rejoin_window_ms == 0,
            config,
        })
    }

    /// The session's config.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Seats the host's own player (a listen server). Before [`start`](Self::start) only.
    pub fn add_local_player(&mut self) -> Result<PlayerId, JoinRefusal> {
        if self.started {
            return Err(JoinRefusal::GameStarted);
        }
        let player = self.free_seat().ok_or(JoinRefusal::SessionFull)?;
        self.seats[player.0 as usize] =
            Seat::Local { next_seq: CommandSeq(0), next_exec: Turn::ZERO };
        self.open[0].controls.push(Record::Joined(player));
        Ok(player)
    }

    fn free_seat(&self) -> Option<PlayerId> {
        self.seats.iter().position(|seat| matches!(seat, Seat::Free)).map(|i| PlayerId(i as u8))
    }

    /// Handles a join request from the reliable stream of a new connection. On success the
    /// driver binds the connection to the returned player: from then on every datagram of that
    /// connection is handed in with that id, and no id inside a message is ever trusted.
    pub fn handle_join(&mut self, now_ms: u64, request: &[u8]) -> JoinResponse {
        let request = match JoinRequest::decode(request) {
            Ok(request) => request,
            Err(error) => {
                return JoinResponse { reply: None, result: Err(JoinError::Malformed(error)) }
            }
        };
        if request.protocol_version != PROTOCOL_VERSION {
            return refused(JoinRefusal::VersionMismatch {
                host: PROTOCOL_VERSION,
                client: request.protocol_version,
            });
        }
        if request.game_data_hash != self.config.game_data_hash {
            return refused(JoinRefusal::GameDataMismatch {
                host: self.config.game_data_hash,
                client: request.game_data_hash,
            });
        }
        let Some(token) = self.tokens.iter().position(|&(token, _)| token == request.token) else {
            return refused(JoinRefusal::BadToken);
        };
        if let Some(player) = self.tokens[token].1 {
            return match self.seats[player.0 as usize] {
                Seat::Away { since_ms, cmd_next, pauses_used } => {
                    if now_ms.saturating_sub(since_ms) > u64::from(self.config.rejoin_window_ms) {
                        refused(JoinRefusal::RejoinExpired)
                    } else if self.rejoin_log_full || self.ended {
                        refused(JoinRefusal::RejoinUnavailable)
                    } else {
                        self.rejoin(now_ms, player, cmd_next, pauses_used)
                    }
                }
                Seat::Gone if self.started => refused(JoinRefusal::RejoinUnavailable),
                // The seat's connection never sent a datagram: most likely this client's own
                // earlier attempt, whose reply was lost or too slow. The new connection takes
                // the seat over (with every sealed turn if the game has started).
                Seat::Remote(ref peer) if peer.link.stats.datagrams_received == 0 => {
                    let cmd_next = peer.cmd_next;
                    self.take_over(now_ms, player, cmd_next)
                }
                _ => refused(JoinRefusal::TokenUsed),
            };
        }
        if self.started {
            return refused(JoinRefusal::GameStarted);
        }
        let Some(player) = self.free_seat() else {
            return refused(JoinRefusal::SessionFull);
        };
        self.tokens[token].1 = Some(player);
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, Turn::ZERO, CommandSeq(0), 0)));
        self.open[0].controls.push(Record::Joined(player));
        self.push_event(HostEvent::PlayerJoined(player));
        let accept = self.accept(player, None);
        JoinResponse { reply: Some(encode_join_reply(&Ok(accept))), result: Ok(player) }
    }

    fn new_peer(&self, now_ms: u64, from: Turn, cmd_next: CommandSeq, pauses_used: u32) -> Peer {
        let mut link = Link::new(now_ms, &self.config, self.config.ack_delay_ms);
        // The client cannot send before our reply reaches it over the reliable stream.
        link.await_first_datagram(now_ms + u64::from(self.config.join_grace_ms));
        Peer {
            link,
            turn_ack: from,
            turn_exec: from,
            send_next: from,
            cmd_next,
            misbehaviour: 0,
            drops: DropCounters::default(),
            commands_accepted: 0,
            cost_ms: 0,
            hash_acked: None,
            pause_seq: None,
            pauses_used,
            notify_due: false,
        }
    }

    /// Takes a player back: the reply carries every sealed turn; live play resumes at the
    /// next one, whose `Joined` record tells every game the player is back. The window
    /// counts the returning player as caught up, so replaying the log is their own cost.
    fn rejoin(
        &mut self,
        now_ms: u64,
        player: PlayerId,
        cmd_next: CommandSeq,
        pauses_used: u32,
    ) -> JoinResponse {
        let from = self.next_seal;
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, from, cmd_next, pauses_used)));
        self.open[0].controls.push(Record::Joined(player));
        self.push_event(HostEvent::PlayerRejoined(player));
        self.stats.rejoins += 1;
        let accept = self.accept(player, Some(Rejoin { turns: from.0, next_seq: cmd_next }));
        let reply = encode_join_reply_with_log(&Ok(accept), &self.rejoin_log);
        JoinResponse { reply: Some(reply), result: Ok(player) }
    }

    /// A new connection replaces a seated one that was never heard from. Nothing changes for
    /// the other players: the seat never left the game.
    fn take_over(&mut self, now_ms: u64, player: PlayerId, cmd_next: CommandSeq) -> JoinResponse {
        if self.ended || (self.started && self.rejoin_log_full) {
            return refused(JoinRefusal::RejoinUnavailable);
        }
        let from = self.next_seal;
        self.seats[player.0 as usize] =
            Seat::Remote(Box::new(self.new_peer(now_ms, from, cmd_next, 0)));
        self.push_event(HostEvent::PlayerRejoined(player));
        self.stats.rejoins += 1;
        let rejoin = (from > Turn::ZERO).then_some(Rejoin { turns: from.0, next_seq: cmd_next });
        let reply = encode_join_reply_with_log(&Ok(self.accept(player, rejoin)), &self.rejoin_log);
        JoinResponse { reply: Some(reply), result: Ok(player) }
    }

    fn accept(&self, player: PlayerId, rejoin: Option<Rejoin>) -> JoinAccept {
        JoinAccept {
            player,
            turn_length_ms: self.pace.current.turn_length_ms,
            command_delay_turns: self.pace.current.command_delay_turns,
            turns_ahead_max: self.config.turns_ahead_max,
            players_max: self.config.players_max,
            commands_per_turn_max: self.config.commands_per_turn_max,
            turn_bytes_per_player_max: self.config.turn_bytes_per_player_max,
            command_bytes_max: self.config.command_bytes_max,
            sync_interval_turns: self.config.sync_interval_turns,
            rejoin,
        }
    }

    /// The driver learned that `player`'s join reply reached the client (its transport
    /// acknowledged every byte). Optional: until the first datagram arrives, a new player is
    /// given `join_grace_ms`; with this call the usual idle timeout runs from delivery, so a
    /// client that dies right after joining is noticed as fast as any other.
    pub fn handle_join_delivered(&mut self, now_ms: u64, player: PlayerId) {
        if let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) {
            peer.link.on_reply_delivered(now_ms);
        }
    }

    /// Starts the game: turn 0 is sealed one turn length from now. Idempotent.
    pub fn start(&mut self, now_ms: u64) {
        if self.started {
            return;
        }
        self.started = true;
        self.schedule_seal(now_ms + u64::from(self.config.turn_length_ms));
    }

    /// Whether [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// The host has a single turn deadline, so it is a plain field; the per-connection
    /// timers live in each connection's `HashedWheel`.
    fn schedule_seal(&mut self, at_ms: u64) {
        self.next_seal_at_ms = at_ms;
    }

    fn push_event(&mut self, event: HostEvent) {
        if self.events.len() == EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    /// When the host next needs [`handle_timeout`](Self::handle_timeout): the earliest of the
    /// turn deadline and every connection's timers.
    pub fn poll_timeout(&self) -> Option<u64> {
        let sealing = self.started && !self.paused && !self.ended;
        let seal = match self.stalled_since_ms {
            None if sealing => Some(self.next_seal_at_ms),
            // Stalled: wake to announce it once the notice time has passed.
            Some(since) if sealing && self.waiting == 0 => {
                Some(since + u64::from(self.config.stall_notice_ms))
            }
            _ => None,
        };
        self.peers().filter_map(|(_, peer)| peer.link.poll_timeout()).chain(seal).min()
    }

    fn peers(&self) -> impl Iterator<Item = (PlayerId, &Peer)> + '_ {
        self.seats.iter().enumerate().filter_map(|(i, seat)| match seat {
            Seat::Remote(peer) => Some((PlayerId(i as u8), &**peer)),
            _ => None,
        })
    }

    /// Fires due timers: connection timers, and the turn deadline (sealing every turn that is
    /// due and that the window allows).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        for index in 0..self.seats.len() {
            let Seat::Remote(peer) = &mut self.seats[index] else {
                continue;
            };
            peer.link.handle_timeout(now_ms);
            if peer.link.timed_out {
                self.remove_player(now_ms, PlayerId(index as u8), true);
                self.push_event(HostEvent::PlayerTimedOut(PlayerId(index as u8)));
            }
        }
        self.try_seal(now_ms);
    }

    /// Seals every due turn the window allows.
    fn try_seal(&mut self, now_ms: u64) {
        while self.started && !self.paused && !self.ended && now_ms >= self.next_seal_at_ms {
            if !self.window_allows(self.next_seal) {
                let since = *self.stalled_since_ms.get_or_insert(now_ms);
                if now_ms >= since + u64::from(self.config.stall_notice_ms) {
                    self.announce_waiting(self.blocking_players(self.next_seal));
                }
                return;
            }
            if let Some(since) = self.stalled_since_ms.take() {
                self.stats.stall_ms += now_ms - since;
            }
            self.announce_waiting(0);
            let deadline = self.next_seal_at_ms;
            self.seal(now_ms);
            if std::mem::take(&mut self.pause_pending) {
                self.paused = true;
            }
            let turn_ms = u64::from(self.pace.current.turn_length_ms);
            // Keep the cadence unless a whole turn was lost waiting; then restart it from now
            // rather than bursting to catch up.
            let next =
                if now_ms > deadline + turn_ms { now_ms + turn_ms } else { deadline + turn_ms };
            self.schedule_seal(next);
        }
    }

    /// The players whose position holds `turn` back, as a bit mask.
    fn blocking_players(&self, turn: Turn) -> u64 {
        let window = self.config.turns_ahead_max;
        self.seats.iter().enumerate().fold(0, |mask, (index, seat)| {
            let behind = match seat {
                Seat::Remote(peer) => turn.since(peer.turn_exec) >= window,
                Seat::Local { next_exec, .. } => turn.since(*next_exec) >= window,
                Seat::Free | Seat::Away { .. } | Seat::Gone => false,
            };
            mask | (u64::from(behind) << index)
        })
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
            let players = (0..64u8).filter(|i| mask & (1 << i) != 0).map(PlayerId).collect();
            self.push_event(HostEvent::Waiting(players));
        }
    }

    /// Whether sealing `turn` keeps every player within the window.
    fn window_allows(&self, turn: Turn) -> bool {
        let window = self.config.turns_ahead_max;
        self.seats.iter().all(|seat| match seat {
            Seat::Remote(peer) => turn.since(peer.turn_exec) < window,
            Seat::Local { next_exec, .. } => turn.since(*next_exec) < window,
            Seat::Free | Seat::Away { .. } | Seat::Gone => true,
        })
    }

    fn seal(&mut self, _now_ms: u64) {
        let mut open = self.open.pop_front().unwrap_or_default();
        self.open.push_back(OpenTurn::default());
        open.commands.sort_unstable_by_key(|&(player, seq, _)| (player, seq));
        self.open_commands -= open.commands.len();
        self.stats.commands_sealed += open.commands.len() as u64;
        let mut records = open.controls;
        self.seal_controls(&mut records);
        records.extend(open.commands.into_iter().map(|(player, seq, payload)| Record::Command {
            player,
            seq,
            payload,
        }));
        let bundle = TurnBundle { turn: self.next_seal, records };
        let mut encoded = Vec::with_capacity(64);
        encode_bundle(&mut encoded, &bundle.records);
        if let Some(recorder) = &mut self.recorder {
            recorder.record(&bundle);
        }
        let encoded = Bytes::from(encoded);
        if !self.rejoin_log_full {
            self.rejoin_log_bytes += encoded.len();
            if self.rejoin_log_bytes > self.config.rejoin_log_bytes_max as usize {
                self.rejoin_log_full = true;
                self.rejoin_log = Vec::new();
                self.stats.rejoin_log_bytes = 0;
            } else {
                self.rejoin_log.push(encoded.clone());
                self.stats.rejoin_log_bytes = self.rejoin_log_bytes;
            }
        }
        if self.sealed.is_empty() {
            self.sealed_base = self.next_seal;
        }
        self.sealed.push_back(Sealed { bundle, encoded });
        self.next_seal = self.next_seal.next();
        self.stats.turns_sealed += 1;
        self.stats.sealed_high_water = self.stats.sealed_high_water.max(self.sealed.len());
        self.prune_sealed();
    }

    /// The host's own records for the turn being sealed: sync-check verdicts (and the desync
    /// policy), then a pace change.
    fn seal_controls(&mut self, records: &mut Vec<Record>) {
        let players = self.active_players();
        let host_player = self.local_player();
        let decided = self.sync.decide(
            &players,
            self.next_seal,
            self.config.turns_ahead_max,
            self.config.desync_reference,
            host_player,
        );
        for verdict in decided {
            if let (Some(recorder), Some(reference)) = (&mut self.recorder, verdict.reference) {
                recorder.check(verdict.turn, reference);
            }
            let Some(report) = verdict.desync else { continue };
            records.push(Record::Desync(report.clone()));
            self.push_event(HostEvent::Desync(report));
            match self.config.desync_policy {
                DesyncPolicy::Warn => {}
                DesyncPolicy::Pause if !self.paused => {
                    self.paused = true;
                    records.push(Record::Paused(PauseBy::Host));
                    self.push_event(HostEvent::Paused(PauseBy::Host));
                }
                DesyncPolicy::Pause => {}
                DesyncPolicy::End if !self.ended => {
                    self.ended = true;
                    records.push(Record::Ended(EndCause::Desync));
                    self.push_event(HostEvent::Ended(EndCause::Desync));
                }
                DesyncPolicy::End => {}
            }
        }
        let need_ms =
            self.peers().filter_map(|(_, peer)| peer.link.rtt.smoothed_ms).max().unwrap_or(0);
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
            .filter(|(_, seat)| matches!(seat, Seat::Remote(_) | Seat::Local { .. }))
            .map(|(index, _)| PlayerId(index as u8))
            .collect()
    }

    fn local_player(&self) -> Option<PlayerId> {
        let index = self.seats.iter().position(|seat| matches!(seat, Seat::Local { .. }))?;
        Some(PlayerId(index as u8))
    }

    /// Forgets bundles every player has (remote: acknowledged; local: executed).
    fn prune_sealed(&mut self) {
        let oldest_needed = self
            .seats
            .iter()
            .filter_map(|seat| match seat {
                Seat::Remote(peer) => Some(peer.turn_ack),
                Seat::Local { next_exec, .. } => Some(*next_exec),
                Seat::Free | Seat::Away { .. } | Seat::Gone => None,
            })
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

    /// Removes a player: they leave at the next sealed turn, and the window no longer waits
    /// for them. A `rejoinable` remote player's seat stays open for `rejoin_window_ms`.
    fn remove_player(&mut self, now_ms: u64, player: PlayerId, rejoinable: bool) {
        let rejoin = self.config.rejoin_window_ms > 0;
        if let Some(seat) = self.seats.get_mut(player.0 as usize) {
            *seat = match seat {
                Seat::Free | Seat::Away { .. } | Seat::Gone => return,
                Seat::Remote(peer) if rejoinable && rejoin => Seat::Away {
                    since_ms: now_ms,
                    cmd_next: peer.cmd_next,
                    pauses_used: peer.pauses_used,
                },
                _ => Seat::Gone,
            };
            self.open[0].controls.push(Record::Left(player));
        }
    }

    /// Counts a bad datagram against `player`; past the limit they are disconnected.
    fn misbehaved(&mut self, now_ms: u64, player: PlayerId) {
        let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) else {
            return;
        };
        peer.misbehaviour += 1;
        if peer.misbehaviour > self.config.misbehaviour_max {
            self.remove_player(now_ms, player, false);
            self.push_event(HostEvent::PlayerMisbehaved(player));
        }
    }

    /// Handles a datagram from `player`'s connection. Bad input is dropped and counted in
    /// that player's [`PeerStats`]; it never panics and allocates at most the datagram's size.
    pub fn handle_datagram(&mut self, now_ms: u64, player: PlayerId, datagram: &[u8]) {
        let limits = self.limits;
        let window = self.config.turns_ahead_max;
        let next_seal = self.next_seal;
        let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) else {
            return;
        };
        let up = match decode_up(datagram, &limits) {
            Ok(up) => up,
            Err(_) => {
                peer.drops.malformed += 1;
                self.misbehaved(now_ms, player);
                return;
            }
        };
        if peer.link.on_received(now_ms, up.pn, datagram.len()) == Arrival::Duplicate {
            peer.drops.duplicate += 1;
            return;
        }
        if let Some(ack) = up.ack {
            if peer.link.on_ack(now_ms, ack).is_err() {
                peer.drops.spoofed += 1;
                self.misbehaved(now_ms, player);
                return;
            }
        }
        // The peer cannot hold a bundle not sealed yet, nor have executed one it does not hold.
        if up.turn_ack > next_seal || up.turn_exec > up.turn_ack {
            peer.drops.spoofed += 1;
            self.misbehaved(now_ms, player);
            return;
        }
        peer.turn_exec = peer.turn_exec.max(up.turn_exec);
        if up.turn_ack > peer.turn_ack {
            peer.turn_ack = up.turn_ack;
            let outstanding = peer.turn_ack < next_seal && peer.send_next > peer.turn_ack;
            peer.link.on_data_acked(now_ms, outstanding);
        }
        // No ack-delay timer on this side: a bundle goes to every player each turn and carries
        // the acknowledgement (clients size their retransmit timeout for that), which saves a
        // standalone datagram per command. Commands are also repeated in every datagram a
        // client sends until acknowledged, so a lost one rarely waits for a timeout.
        self.handle_extras(now_ms, player, &up.extras);
        let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) else { return };
        let mut accepted = Vec::new();
        for (offset, command) in up.commands.iter().enumerate() {
            let seq = CommandSeq(up.first_seq.0.wrapping_add(offset as u32));
            if seq < peer.cmd_next {
                peer.drops.duplicate += 1;
                continue;
            }
            if seq > peer.cmd_next {
                // A gap: the missing command rides in every later datagram, so wait for it.
                peer.drops.out_of_order += (up.commands.len() - offset) as u64;
                break;
            }
            peer.cmd_next = CommandSeq(peer.cmd_next.0.wrapping_add(1));
            let target = command.turn.max(next_seal);
            if target.since(next_seal) >= window {
                peer.drops.future += 1;
                continue;
            }
            accepted.push((seq, command.turn, target, Bytes::copy_from_slice(command.payload)));
        }
        for (seq, stamped, target, payload) in accepted {
            match self.place_command(player, seq, target, payload) {
                Some(turn) => {
                    if turn > stamped {
                        self.stats.commands_late += 1;
                    }
                    if let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) {
                        peer.commands_accepted += 1;
                    }
                }
                None => {
                    if let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) {
                        peer.drops.over_budget += 1;
                    }
                }
            }
        }
        // An acknowledgement may have opened the window.
        self.prune_sealed();
        self.try_seal(now_ms);
    }

    /// State hash, turn cost and pause requests riding in a client's datagram.
    fn handle_extras(&mut self, now_ms: u64, player: PlayerId, extras: &UpExtras) {
        let interval = self.config.sync_interval_turns;
        let next_seal = self.next_seal;
        let pauses_max = self.config.pauses_per_player_max;
        let Some(Seat::Remote(peer)) = self.seats.get_mut(player.0 as usize) else { return };
        if let Some(cost) = extras.cost_ms {
            peer.cost_ms = cost.min(60_000);
        }
        let mut spoofed = false;
        if let Some((turn, hash)) = extras.hash_report {
            if turn >= next_seal {
                // Nobody can have executed a turn the host has not sealed.
                spoofed = true;
            } else {
                // Recorded if it is a pending check turn; otherwise (already decided, not a
                // check turn, or a repeat) ignored. Acknowledged either way, so the client
                // moves on to its next report instead of repeating this one forever.
                if is_check_turn(turn, interval) {
                    self.sync.report(player, turn, hash, interval, next_seal);
                }
                peer.hash_acked = peer.hash_acked.max(Some(turn));
            }
        }
        let mut pause_change = None;
        if let Some((seq, kind)) = extras.pause {
            if peer.pause_seq != Some(seq) {
                peer.pause_seq = Some(seq);
                match kind {
                    PauseKind::Pause
                        if !self.paused && !self.pause_pending && peer.pauses_used < pauses_max =>
                    {
                        peer.pauses_used += 1;
                        pause_change = Some(true);
                    }
                    PauseKind::Resume if self.paused && !self.ended => pause_change = Some(false),
                    _ => {}
                }
            }
        }
        if spoofed {
            peer.drops.spoofed += 1;
            self.misbehaved(now_ms, player);
        }
        match pause_change {
            Some(true) => self.set_paused(now_ms, true, PauseBy::Player(player)),
            Some(false) => self.set_paused(now_ms, false, PauseBy::Player(player)),
            None => {}
        }
    }

    /// Pauses or resumes: the record goes into the next sealed turn. A pause takes effect
    /// after that turn; a resume seals that turn one turn length from now.
    fn set_paused(&mut self, now_ms: u64, paused: bool, by: PauseBy) {
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
            self.schedule_seal(now_ms + u64::from(self.pace.current.turn_length_ms));
        }
    }

    /// Pauses the game after the next sealed turn (the host's operator).
    pub fn pause(&mut self, now_ms: u64) {
        self.set_paused(now_ms, true, PauseBy::Host);
    }

    /// Resumes a paused game.
    pub fn resume(&mut self, now_ms: u64) {
        self.set_paused(now_ms, false, PauseBy::Host);
    }

    /// Whether the game is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The pace in force.
    pub fn pace(&self) -> Pace {
        self.pace.current
    }

    /// The host's own player's state hash after executing check turn `turn` (a multiple of
    /// `sync_interval_turns`). Ignored for other turns.
    pub fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        if let Some(player) = self.local_player() {
            let interval = self.config.sync_interval_turns;
            self.sync.report(player, turn, hash, interval, self.next_seal);
        }
    }

    /// How long the host's own game takes to simulate a turn (speed control input).
    pub fn report_turn_cost(&mut self, cost_ms: u32) {
        self.local_cost_ms = cost_ms.min(60_000);
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
                players_max: self.config.players_max,
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

    /// Puts a command into the first open turn at or after `target` with budget left for its
    /// player; returns that turn, or `None` if the window has no room (the command is dropped).
    fn place_command(
        &mut self,
        player: PlayerId,
        seq: CommandSeq,
        target: Turn,
        payload: Bytes,
    ) -> Option<Turn> {
        let players = usize::from(self.config.players_max);
        let count_max = self.config.commands_per_turn_max;
        let bytes_max = u32::from(self.config.turn_bytes_per_player_max);
        let first = target.since(self.next_seal) as usize;
        for index in first..self.open.len() {
            let open = &mut self.open[index];
            if open.usage.is_empty() {
                open.usage.resize(players, (0, 0));
            }
            let usage = &mut open.usage[player.0 as usize];
            if usage.0 < count_max && usage.1 + payload.len() as u32 <= bytes_max {
                usage.0 += 1;
                usage.1 += payload.len() as u32;
                open.commands.push((player, seq, payload));
                self.open_commands += 1;
                self.stats.open_commands_high_water =
                    self.stats.open_commands_high_water.max(self.open_commands);
                return self.next_seal.checked_add(index as u32);
            }
        }
        None
    }

    /// Submits a command for the host's own player. It is stamped for the turn after the one
    /// the local game is executing plus the command delay, exactly as a client's would be.
    pub fn submit(&mut self, payload: &[u8]) -> Result<Ticket, SubmitError> {
        let Some(local) = self.seats.iter().position(|seat| matches!(seat, Seat::Local { .. }))
        else {
            return Err(SubmitError::NotRunning);
        };
        if payload.len() > usize::from(self.config.command_bytes_max) {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max: self.config.command_bytes_max.into(),
            });
        }
        let Seat::Local { next_seq, next_exec } = self.seats[local] else { unreachable!() };
        let stamped = stamp(next_exec, self.pace.current.command_delay_turns).max(self.next_seal);
        // The local player has no network between it and the host: over budget for the
        // stamped turn is refused rather than spilled, as a client's would be.
        let player = PlayerId(local as u8);
        let index = stamped.since(self.next_seal) as usize;
        let (count, bytes) =
            self.open.get(index).and_then(|open| open.usage.get(local).copied()).unwrap_or((0, 0));
        if count >= self.config.commands_per_turn_max
            || bytes + payload.len() as u32 > u32::from(self.config.turn_bytes_per_player_max)
        {
            return Err(SubmitError::OverBudget { turn: stamped });
        }
        let turn = self
            .place_command(player, next_seq, stamped, Bytes::copy_from_slice(payload))
            .ok_or(SubmitError::OverBudget { turn: stamped })?;
        if let Seat::Local { next_seq: seq, .. } = &mut self.seats[local] {
            *seq = CommandSeq(seq.0.wrapping_add(1));
        }
        Ok(Ticket { seq: next_seq, turn })
    }

    /// The next sealed turn for the host's own game, in order, each exactly once.
    pub fn next_turn(&mut self) -> Option<TurnBundle> {
        let local = self.seats.iter().position(|seat| matches!(seat, Seat::Local { .. }))?;
        let Seat::Local { next_exec, .. } = &mut self.seats[local] else { unreachable!() };
        let index = next_exec.0.checked_sub(self.sealed_base.0)? as usize;
        let bundle = self.sealed.get(index)?.bundle.clone();
        *next_exec = next_exec.next();
        self.prune_sealed();
        Some(bundle)
    }

    /// Writes the next datagram to send into `buf` (cleared first) and returns the player to
    /// send it to, or `None` when nothing is due.
    pub fn poll_transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> Option<PlayerId> {
        let seats = self.seats.len();
        for step in 0..seats {
            let index = (self.send_cursor + step) % seats;
            if self.transmit_to(now_ms, index, buf) {
                self.send_cursor = (index + 1) % seats;
                return Some(PlayerId(index as u8));
            }
        }
        None
    }

    fn transmit_to(&mut self, now_ms: u64, index: usize, buf: &mut Vec<u8>) -> bool {
        let latest = self.next_seal;
        let Seat::Remote(peer) = &mut self.seats[index] else {
            return false;
        };
        let has_new = peer.send_next < latest;
        let has_unacked = peer.turn_ack < latest;
        let due = has_new
            || (peer.link.retransmit_due && has_unacked)
            || peer.link.ack_due
            || peer.link.keep_alive_due
            || (peer.link.repeat_due && has_unacked)
            || peer.notify_due;
        if !due {
            return false;
        }
        buf.clear();
        let (pn, ack) = peer.link.next_packet(now_ms);
        // Redundancy: a datagram with a new bundle also repeats the `redundant_turns` bundles
        // before it that are still unacknowledged; the retransmit timer resends all of them.
        let oldest_unacked = peer.turn_ack.max(self.sealed_base);
        let first = if peer.link.retransmit_due {
            oldest_unacked
        } else {
            let sent_before = Turn(peer.send_next.0.saturating_sub(self.config.redundant_turns));
            oldest_unacked.max(sent_before)
        };
        let skip = first.since(self.sealed_base) as usize;
        let budget = usize::from(self.config.datagram_bytes_max);
        // Header first with a placeholder count, then as many bundles as fit.
        let mut count = 0usize;
        let mut body = Vec::new();
        let mut redundant = 0u64;
        // A datagram sent only to acknowledge or keep the line alive carries no bundles: a new
        // bundle goes out every turn anyway and repeats whatever is unacknowledged, so
        // repeating it in between would only add bytes.
        let carry = has_new || ((peer.link.retransmit_due || peer.link.repeat_due) && has_unacked);
        let bundles = if carry { self.sealed.len() } else { 0 };
        for sealed in self.sealed.iter().take(bundles).skip(skip) {
            // Header bound: count as a varint of at most 2 bytes for a window of <= 256.
            if crate::wire::DOWN_HEADER_BYTES_MAX + body.len() + sealed.encoded.len() > budget {
                break;
            }
            if sealed.bundle.turn < peer.send_next {
                redundant += sealed.encoded.len() as u64;
            }
            body.extend_from_slice(&sealed.encoded);
            count += 1;
        }
        let extras = DownExtras { hash_ack: peer.hash_acked, waiting: self.waiting };
        peer.notify_due = false;
        put_down_header(buf, pn, ack, peer.cmd_next, &extras, first, count);
        buf.extend_from_slice(&body);
        if count > 0 {
            peer.send_next = peer.send_next.max(first.saturating_add(count as u32));
        }
        peer.link.stats.redundant_bytes += redundant;
        let repeat = has_new.then_some(u64::from(self.pace.current.turn_length_ms) / 4);
        peer.link.on_sent(now_ms, pn, buf.len(), count > 0, repeat);
        true
    }

    /// The session-wide counters.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// One player's counters, if they are connected.
    pub fn peer_stats(&self, player: PlayerId) -> Option<PeerStats> {
        match self.seats.get(player.0 as usize)? {
            Seat::Remote(peer) => Some(PeerStats {
                link: peer.link.stats.clone(),
                drops: peer.drops.clone(),
                turn_ack: peer.turn_ack,
                commands_accepted: peer.commands_accepted,
            }),
            _ => None,
        }
    }

    /// The next turn the host will seal.
    pub fn next_seal(&self) -> Turn {
        self.next_seal
    }
}

/// A refused join: the reply that names the cause, and the same cause for the driver.
fn refused(refusal: JoinRefusal) -> JoinResponse {
    JoinResponse {
        reply: Some(encode_join_reply(&Err(refusal))),
        result: Err(JoinError::Refused(refusal)),
    }
}

/// The turn a command submitted now is stamped for: the game is executing the turn before
/// `next_exec`, and commands execute `delay` turns after it (AoE: issued in 1000, run in 1002).
pub(crate) fn stamp(next_exec: Turn, delay: u32) -> Turn {
    Turn(next_exec.0.saturating_sub(1)).saturating_add(delay).max(next_exec)
}

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
//! client's. Its commands skip the network, though: with `turns.fairness` at
//! [`Fairness::Fair`](crate::Fairness::Fair) they wait the command delay as a client's do.
//!
//! # Layout
//!
//! This file holds the state (seats, open and sealed turns) and the timers; the rest is one
//! concern a file: `errors.rs` (what the operations return), `join.rs` (joins, rejoins, take-overs), `intake.rs` (datagrams from players:
//! commands, reports, offences), `seal.rs` (the turn deadline, the window, sealing and the
//! host's own records), `transmit.rs` (datagrams to players), `local.rs` (the host's own
//! player and operator: submit, next turn, pause, recording), `snapshot.rs` (snapshots and the
//! rejoin log), `spectate.rs` (spectators) and `forensics.rs` (desync forensics).

mod errors;
mod forensics;
mod intake;
mod join;
mod local;
mod refusals;
mod seal;
mod snapshot;
mod spectate;
mod transmit;

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::budget::Usage;
use crate::bundle::{DesyncReport, EndCause, PauseBy, Record, TurnBundle};
use crate::config::{ConfigError, SessionConfig};
use crate::desync::DesyncBundle;
use crate::events::EventQueue;
use crate::link::Link;
use crate::pace::{Pace, PaceControl};
use crate::replay::Recorder;
use crate::snapshot::SnapshotRejection;
use crate::stats::{HostStats, PeerStats};
use crate::sync::SyncChecks;
use crate::types::{CommandSeq, Joined, PlayerId, SpectatorId, Turn};
use crate::wire::{encode_join_reply, JoinRefusal, Limits};
pub use errors::{EndError, JoinError, ObserveError, Readmit, RemoveError};
pub use forensics::UploadError;
pub use spectate::SpectatorGone;

/// Something the host's driver or game should know. Drained with [`Host::poll_event`]
/// (in `phalanx`: `Host::try_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// A player joined; their `Joined` record is in the next sealed turn.
    PlayerJoined(PlayerId),
    /// A player came back on a new connection: after timing out, within `catch_up.rejoin_window_ms`
    /// (their `Joined` record is in the next sealed turn), or in place of a connection of
    /// theirs that was never heard from (no record: they never left). Either way the join
    /// reply carried every sealed turn so far.
    PlayerRejoined(PlayerId),
    /// A player's connection went silent past `link.idle_timeout_ms`. They leave at the next
    /// sealed turn; the driver should close the connection.
    PlayerTimedOut(PlayerId),
    /// A player sent more than `link.misbehaviour_max` malformed or spoofed datagrams or
    /// refused commands. They leave at the next sealed turn; the driver must close the
    /// connection.
    PlayerMisbehaved(PlayerId),
    /// The game's rule ([`Host::set_command_rule`]) refused a client's command: it is not
    /// sealed, and counts as an offence of the player's.
    CommandRefused {
        /// Whose.
        player: PlayerId,
        /// Its sequence number.
        seq: CommandSeq,
    },
    /// A player was removed by [`Host::remove`] (kicked, or left on purpose). They leave at
    /// the next sealed turn; the driver should close the connection.
    PlayerRemoved(PlayerId),
    /// A check turn's state hashes differ; the report is in the turn just sealed.
    Desync(DesyncReport),
    /// Sealing has waited `turns.stall_notice_ms` for these players (their acknowledgements are a
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
    /// A snapshot's hash matched its turn's reference: it is what a returning player gets
    /// from now on, and the turns before it are forgotten.
    SnapshotStored {
        /// The check turn it follows.
        turn: Turn,
        /// Who gave it (`None`: the host's own game).
        from: Option<PlayerId>,
        /// The state's size.
        bytes: usize,
    },
    /// A snapshot was not kept; the last good one stays in use, and the next snapshot turn
    /// asks another player.
    SnapshotRejected {
        /// The check turn it follows.
        turn: Turn,
        /// Who gave it (`None`: the host's own game).
        from: Option<PlayerId>,
        /// Why.
        reason: SnapshotRejection,
    },
    /// A spectator joined (it is sent every sealed turn from then on, after the broadcast
    /// delay).
    SpectatorJoined(SpectatorId),
    /// A spectator left; the driver should close its connection.
    SpectatorLeft(SpectatorId, SpectatorGone),
    /// The first divergent turn of a desync, found from the players' per-turn hashes since
    /// the check turn before (they send them when they execute the `Desync` record, if their
    /// game reports a hash every turn).
    DesyncPinned {
        /// The check turn whose hashes differed.
        check_turn: Turn,
        /// The first turn after which a diverged player's state differed from the reference.
        first_turn: Turn,
        /// The diverged players whose state differed by then.
        players: Vec<PlayerId>,
        /// Whether the turn before `first_turn` was compared and agreed (otherwise the hashes
        /// held did not reach back far enough: it is the earliest turn compared).
        exact: bool,
    },
    /// The states after a pinned desync's first divergent turn, from a reference player and a
    /// diverged one (asked for after [`DesyncPinned`](Self::DesyncPinned), from players whose
    /// games keep their states: `Client::keep_state`). Name what differs with
    /// [`DesyncBundle::diff`] and the game's inspection hook; write it to disk for a tool.
    DesyncDiagnosed(Arc<DesyncBundle>),
    /// A spectator's state hash at a check turn differs from the players' reference: what it
    /// shows is not the game (a bug in its game, or a bad restore). Reported once per
    /// spectator; the players' game is not affected.
    SpectatorDesync {
        /// Who.
        spectator: SpectatorId,
        /// The check turn.
        turn: Turn,
        /// Its hash.
        hash: u64,
        /// The players' reference hash.
        reference: u64,
    },
}

/// What [`Host::handle_join`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    /// Bytes to send back on the stream, if any.
    pub reply: Option<Vec<u8>>,
    /// The seat (or spectator slot) given, or why none was.
    pub result: Result<Joined, JoinError>,
}

/// The host's view of a remote player.
#[derive(Debug)]
struct Peer {
    link: Link,
    /// The peer holds every bundle before this turn.
    turn_ack: Turn,
    /// The peer's game has executed every turn before this one: the window is counted from
    /// here, so a slow machine holds the game back instead of falling ever further behind.
    next_exec: Turn,
    /// The next turn never sent to this peer yet.
    send_next: Turn,
    /// The next command sequence expected from this peer.
    next_seq: CommandSeq,
    commands_accepted: u64,
    /// The peer's reported time to simulate a turn.
    cost_ms: u32,
    /// The peer's reported playout buffer: its commands leave that much later.
    playout_ms: u32,
    /// The latest check turn whose state hash we hold from this peer.
    hash_acked: Option<Turn>,
    /// The sequence number of the last pause request handled, and pauses used.
    pause_seq: Option<u8>,
    pauses_used: u32,
    /// The waiting notice changed: tell this peer even if nothing else is due.
    notify_due: bool,
    /// Its commands the host will never seal, until it knows.
    refusals: refusals::Refusals,
}

/// The host's own player (a listen server).
#[derive(Debug)]
struct LocalSeat {
    /// The sequence of its next command.
    next_seq: CommandSeq,
    /// The next turn its game executes.
    next_exec: Turn,
}

#[derive(Debug)]
enum Seat {
    Free,
    Local(LocalSeat),
    Remote(Box<Peer>),
    /// Timed out; may rejoin until `since_ms + catch_up.rejoin_window_ms`.
    Away {
        since_ms: u64,
        next_seq: CommandSeq,
        pauses_used: u32,
    },
    Gone,
    /// Removed for good by the host ([`Readmit::Never`]): its token is refused.
    Revoked,
}

impl Seat {
    /// The next turn this seat's game executes, if the window waits for it.
    fn next_exec(&self) -> Option<Turn> {
        match self {
            Seat::Remote(peer) => Some(peer.next_exec),
            Seat::Local(local) => Some(local.next_exec),
            Seat::Free | Seat::Away { .. } | Seat::Gone | Seat::Revoked => None,
        }
    }

    /// Whether the seat plays in the game now.
    fn is_playing(&self) -> bool {
        matches!(self, Seat::Remote(_) | Seat::Local(_))
    }
}

/// Commands and controls waiting for a turn that is not sealed yet.
#[derive(Debug, Default)]
struct OpenTurn {
    controls: Vec<Record>,
    /// `(player, seq, payload)`; sorted at sealing.
    commands: Vec<(PlayerId, CommandSeq, Bytes)>,
    /// Per player: what they used of the budget.
    usage: Vec<Usage>,
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
    /// The turn deadline: the host has a single one, so it is a plain field; the
    /// per-connection timers live in each connection's `HashedWheel`.
    next_seal_at_ms: u64,
    /// Due but held back by the window since this time.
    stalled_since_ms: Option<u64>,
    /// `open[i]` collects turn `next_seal + i`.
    open: VecDeque<OpenTurn>,
    /// `sealed[i]` is turn `sealed_base + i`.
    sealed: VecDeque<Sealed>,
    sealed_base: Turn,
    open_commands: usize,
    events: EventQueue<HostEvent>,
    send_cursor: usize,
    stats: HostStats,
    pace: PaceControl,
    sync: SyncChecks,
    paused: bool,
    /// A pause was granted: stop after sealing the turn that carries its record.
    pause_pending: bool,
    /// With [`Host::observe_turns`]: the next sealed turn the host's own (non-playing) game
    /// takes.
    observer: Option<Turn>,
    /// [`Host::end`] was called: the cause goes out in the next sealed turn, the last.
    end_pending: Option<EndCause>,
    ended: bool,
    /// Players announced as holding up the game (bit i: player i).
    waiting: u64,
    local_cost_ms: u32,
    recorder: Option<Recorder>,
    /// Snapshots and the encoded turns a rejoin needs besides them.
    snapshots: snapshot::Snapshots,
    spectators: spectate::Spectators,
    forensics: forensics::Forensics,
    /// The game's rule for commands, if it set one.
    rule: Option<intake::CommandRule>,
}

/// The first token that appears twice in `tokens`, if any.
pub(super) fn first_duplicate(tokens: &[u64]) -> Option<u64> {
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).find(|pair| pair[0] == pair[1]).map(|pair| pair[0])
}

impl Host {
    /// A host in the lobby, accepting joins with any of `tokens` (each usable once; at most
    /// `turns.players_max` of them, or a [`ConfigError::OutOfRange`] names `tokens`; a token given
    /// twice is a [`ConfigError::DuplicateToken`]).
    pub fn new(config: SessionConfig, tokens: &[u64]) -> Result<Host, ConfigError> {
        config.validate()?;
        if tokens.len() > usize::from(config.turns.players_max) {
            // More seat tokens than seats: some player would be refused a seat it was promised.
            return Err(ConfigError::OutOfRange {
                field: "tokens",
                value: tokens.len() as u64,
                min: 0,
                max: config.turns.players_max.into(),
            });
        }
        if let Some(token) = first_duplicate(tokens) {
            return Err(ConfigError::DuplicateToken { token });
        }
        let window = config.turns.window_turns as usize;
        let mut open = VecDeque::with_capacity(window);
        open.resize_with(window, OpenTurn::default);
        Ok(Host {
            limits: Limits::new(&config),
            tokens: tokens.iter().map(|&token| (token, None)).collect(),
            seats: (0..config.turns.players_max).map(|_| Seat::Free).collect(),
            started: false,
            next_seal: Turn::ZERO,
            next_seal_at_ms: u64::MAX,
            stalled_since_ms: None,
            open,
            sealed: VecDeque::with_capacity(window),
            sealed_base: Turn::ZERO,
            open_commands: 0,
            events: EventQueue::new(),
            send_cursor: 0,
            stats: HostStats::default(),
            pace: PaceControl::new(&config),
            sync: SyncChecks::default(),
            paused: false,
            pause_pending: false,
            observer: None,
            end_pending: None,
            ended: false,
            waiting: 0,
            local_cost_ms: 0,
            recorder: None,
            snapshots: snapshot::Snapshots::new(config.catch_up.rejoin_window_ms == 0),
            spectators: spectate::Spectators::default(),
            forensics: forensics::Forensics::default(),
            rule: None,
            config,
        })
    }

    /// The session's config.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Starts the game: turn 0 is sealed one turn length from now. Idempotent.
    pub fn start(&mut self, now_ms: u64) {
        if self.started {
            return;
        }
        self.started = true;
        self.next_seal_at_ms = now_ms + u64::from(self.config.turns.length_ms);
    }

    /// Whether [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Whether the game is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether turns are being sealed: started, neither paused nor ended.
    fn is_sealing(&self) -> bool {
        self.started && !self.paused && !self.ended
    }

    /// Whether the last turn is sealed ([`end`](Self::end), or the desync policy): nothing
    /// more is sealed, but the host keeps delivering what it sealed.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Whether the session is over for the host: it ended, every remote player still seated
    /// holds every sealed turn, and the host's own game (if it plays) took them all. A driver
    /// may then close the connections.
    pub fn is_finished(&self) -> bool {
        let next_seal = self.next_seal;
        self.ended
            && self.observer.is_none_or(|next| next >= next_seal)
            && self.seats.iter().all(|seat| match seat {
                Seat::Remote(peer) => peer.turn_ack >= next_seal,
                Seat::Local(local) => local.next_exec >= next_seal,
                _ => true,
            })
    }

    /// The pace in force.
    pub fn pace(&self) -> Pace {
        self.pace.current
    }

    /// The next turn the host will seal.
    pub fn next_seal(&self) -> Turn {
        self.next_seal
    }

    /// When the next turn is sealed — and the host's own game may execute it — in the
    /// caller's clock (`None` in the lobby, paused, ended or stalled waiting for a player).
    pub fn next_seal_at_ms(&self) -> Option<u64> {
        let sealing = self.is_sealing();
        (sealing && self.stalled_since_ms.is_none()).then_some(self.next_seal_at_ms)
    }

    fn push_event(&mut self, event: HostEvent) {
        self.events.push(event);
        self.stats.events_dropped = self.events.dropped();
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.events.pop()
    }

    /// When the host next needs [`handle_timeout`](Self::handle_timeout): the earliest of the
    /// turn deadline and every connection's timers.
    pub fn poll_timeout(&self) -> Option<u64> {
        let sealing = self.is_sealing();
        let seal = match self.stalled_since_ms {
            None if sealing => Some(self.next_seal_at_ms),
            // Stalled: wake to announce it once the notice time has passed.
            Some(since) if sealing && self.waiting == 0 => {
                Some(since + u64::from(self.config.turns.stall_notice_ms))
            }
            _ => None,
        };
        let peers = self.peers().filter_map(|(_, peer)| peer.link.poll_timeout());
        peers.chain(seal).chain(self.spectators_timeout()).min()
    }

    /// Fires due timers: connection timers, and the turn deadline (sealing every turn that is
    /// due and that the window allows).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        for index in 0..self.seats.len() {
            let player = PlayerId(index as u8);
            let Some(peer) = self.remote_mut(player) else { continue };
            peer.link.handle_timeout(now_ms);
            if peer.link.is_timed_out() {
                self.remove_player(now_ms, player, true);
                self.push_event(HostEvent::PlayerTimedOut(player));
            }
        }
        self.spectators_handle_timeout(now_ms);
        self.try_seal(now_ms);
    }

    /// The session-wide counters.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// One player's counters, if they are connected.
    pub fn peer_stats(&self, player: PlayerId) -> Option<PeerStats> {
        match self.seats.get(player.0 as usize)? {
            Seat::Remote(peer) => Some(PeerStats {
                link: peer.link.stats().clone(),
                drops: peer.link.drops().clone(),
                turn_ack: peer.turn_ack,
                commands_accepted: peer.commands_accepted,
            }),
            _ => None,
        }
    }

    fn peers(&self) -> impl Iterator<Item = (PlayerId, &Peer)> + '_ {
        self.seats.iter().enumerate().filter_map(|(i, seat)| match seat {
            Seat::Remote(peer) => Some((PlayerId(i as u8), &**peer)),
            _ => None,
        })
    }

    /// `player`'s connection, if they have one.
    fn remote_mut(&mut self, player: PlayerId) -> Option<&mut Peer> {
        match self.seats.get_mut(player.0 as usize) {
            Some(Seat::Remote(peer)) => Some(peer),
            _ => None,
        }
    }

    /// The host's own player, if it plays.
    fn local_player(&self) -> Option<PlayerId> {
        let index = self.seats.iter().position(|seat| matches!(seat, Seat::Local(_)))?;
        Some(PlayerId(index as u8))
    }
}

/// A refused join: the reply that names the cause, and the same cause for the driver.
fn refused(refusal: JoinRefusal) -> JoinResponse {
    JoinResponse {
        reply: Some(encode_join_reply(&Err(refusal))),
        result: Err(JoinError::Refused(refusal)),
    }
}

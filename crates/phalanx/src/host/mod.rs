//! The host, over QUIC or raw UDP: an accept loop, one task per connection for its join and datagrams, and
//! one driver task (see `driver.rs`) that owns the sans-IO [`phalanx_proto::Host`] and is the
//! only thing that touches it; [`HostSide`] is what the driver needs to know of the host.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use phalanx_proto::{
    CommandCodec, CommandOrder, DefaultCodec, EndError, EndReason, HostEvent, HostStats, JoinError,
    JoinResponse, Joined, PeerStats, PlayerId, Readmit, RemoveError, Replay, SessionConfig,
    Snapshot, SnapshotError, SpectatorGone, SubmitError, Ticket, Turn, TurnBundle, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::admission::{Admission, AdmissionStats, Gate, Outcome, Pass};
use crate::conn::{Conn, CLOSE_REMOVED};
use crate::driver::{self, Handle, Side};
use crate::session::{NoTurn, Submitter, Update};
use crate::{Clock, Event, HostError, SessionError, Transport};

mod control;
mod rule;
pub use control::HostControl;
pub use rule::CommandRule;

/// Everything a host needs to listen.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostOptions {
    /// The session's config. Default: `SessionConfig::default()`.
    pub session: SessionConfig,
    /// The seat tokens the lobby handed out (each usable once; at most `turns.players_max`, one
    /// fewer when the host plays).
    pub tokens: Vec<u64>,
    /// Whether the host also plays (a listen server). Default: no.
    pub local_player: bool,
    /// A dedicated host (no `local_player`) whose own game takes every sealed turn through
    /// [`Host::next_turn`] (to run the simulation, check state, record). Like a player's, that
    /// game must keep up: a window (`turns.window_turns`) behind, it holds the session back.
    /// Ignored when the host plays (its player takes the turns). Default: no.
    pub observe_turns: bool,
    /// The transport and the host's identity on it: QUIC with a certificate whose
    /// fingerprint clients pin ([`quic::HostConfig`](crate::quic::HostConfig)), or raw UDP
    /// with a static key clients pin ([`udp::HostConfig`](crate::udp::HostConfig)).
    pub transport: HostTransport,
    /// Where to listen (`127.0.0.1:0` picks a free loopback port).
    pub bind: SocketAddr,
    /// Limits on connections that have not joined yet. Default: [`Admission::default`].
    pub admission: Admission,
    /// Spectator tokens (at most `SessionConfig::catch_up.spectators_max`): a client joining with one
    /// watches every turn, after `catch_up.spectator_delay_turns`, from a snapshot when it comes
    /// mid-game; it cannot submit and the players never wait for it. Default: none.
    pub spectator_tokens: Vec<u64>,
    /// Browser players over WebTransport, on a port of their own beside `bind`: the same
    /// seats, tokens and admission control (see [`web`](crate::web)). Default: none.
    #[cfg(feature = "webtransport")]
    pub browsers: Option<crate::web::BrowserConfig>,
    /// The game's rule for commands: which ones the host lets into its turns (see
    /// [`CommandRule`]). Default: none (every command within the budgets).
    pub command_rule: Option<CommandRule>,
}

impl HostOptions {
    /// Options for a host over `transport` (a [`quic::HostIdentity`](crate::quic::HostIdentity)
    /// or a [`udp::HostConfig`](crate::udp::HostConfig) converts into one) listening on
    /// `bind`, with the default session.
    pub fn new(
        transport: impl Into<HostTransport>,
        bind: SocketAddr,
        tokens: Vec<u64>,
    ) -> HostOptions {
        HostOptions {
            session: SessionConfig::default(),
            tokens,
            local_player: false,
            observe_turns: false,
            transport: transport.into(),
            bind,
            admission: Admission::default(),
            spectator_tokens: Vec::new(),
            #[cfg(feature = "webtransport")]
            browsers: None,
            command_rule: None,
        }
    }
}

/// The transport a host listens on, with the identity clients pin. Each transport's own
/// identity type makes an identity for the other one a type error.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostTransport {
    /// QUIC (quinn, TLS 1.3) with this certificate and settings.
    #[cfg(feature = "quic")]
    Quic(crate::quic::HostConfig),
    /// Raw UDP with a Noise IK handshake, with this static key and settings.
    #[cfg(feature = "udp")]
    Udp(crate::udp::HostConfig),
}

impl HostTransport {
    /// Which transport this is.
    pub fn kind(&self) -> Transport {
        match self {
            #[cfg(feature = "quic")]
            HostTransport::Quic(_) => Transport::Quic,
            #[cfg(feature = "udp")]
            HostTransport::Udp(_) => Transport::Udp,
        }
    }
}

#[cfg(feature = "quic")]
impl From<crate::quic::HostConfig> for HostTransport {
    fn from(config: crate::quic::HostConfig) -> Self {
        HostTransport::Quic(config)
    }
}

/// QUIC with this identity (the other settings at their defaults).
#[cfg(feature = "quic")]
impl From<crate::quic::HostIdentity> for HostTransport {
    fn from(identity: crate::quic::HostIdentity) -> Self {
        HostTransport::Quic(crate::quic::HostConfig::new(identity))
    }
}

#[cfg(feature = "udp")]
impl From<crate::udp::HostConfig> for HostTransport {
    fn from(config: crate::udp::HostConfig) -> Self {
        HostTransport::Udp(config)
    }
}

/// Where the host listens, by transport.
enum HostEndpoint {
    #[cfg(feature = "quic")]
    Quic(quinn::Endpoint),
    /// The UDP endpoint task owns the socket; the host keeps its connections to close them
    /// at shutdown.
    #[cfg(feature = "udp")]
    Udp(crate::udp::host::Listening),
}

/// What a transport's listener needs from the host.
pub(crate) struct Listen<'a> {
    pub(crate) session: &'a SessionConfig,
    pub(crate) admission: &'a Admission,
    pub(crate) bind: SocketAddr,
    /// Where the connection tasks send what they hear.
    pub(crate) inputs: mpsc::Sender<Input>,
    pub(crate) gate: Arc<Gate>,
}

/// Inputs from the connection tasks waiting for the driver before those tasks wait too.
const INPUTS_MAX: usize = 4 * 1024;

/// What the connection tasks tell the driver.
pub(crate) enum Input {
    Join {
        conn: Conn,
        request: Vec<u8>,
        reply: oneshot::Sender<JoinResponse>,
    },
    /// A datagram from the connection with this `stable_id`, seated as the player (or
    /// spectator). After a rejoin the old connection may still deliver: only the current one
    /// counts.
    Datagram(Joined, usize, Bytes),
    Closed(Joined, usize),
    /// The client closed its connection on purpose: it left.
    Left(Joined, usize),
    /// The client acknowledged every byte of the join reply.
    Delivered(Joined, usize),
    /// A snapshot upload's bytes (read to the end of its stream, within the session's limit),
    /// or `None` when the stream was longer than that or broke off.
    Snapshot(Joined, usize, Option<Vec<u8>>),
}

/// The host's own commands (besides submitting and reporting hashes).
enum Command {
    Start,
    Stats(oneshot::Sender<(HostStats, Vec<(PlayerId, PeerStats)>)>),
    End(u32, oneshot::Sender<Result<Turn, EndError>>),
    Remove(PlayerId, Readmit, oneshot::Sender<Result<(), RemoveError>>),
    Pause(bool),
    Record { seed: u64, turns_max: usize },
    RequestSnapshot(oneshot::Sender<Result<(), SnapshotError>>),
    Replay(oneshot::Sender<Option<Replay>>),
    KeepState(Turn, Vec<u8>, oneshot::Sender<Result<(), SnapshotError>>),
}

/// A running host. Generic over the game's command type `C` and codec `K` (postcard).
pub struct Host<C, K: CommandCodec = DefaultCodec> {
    endpoint: HostEndpoint,
    /// The browsers' WebTransport listener and its accept loop, if any.
    #[cfg(feature = "webtransport")]
    browsers: Option<(crate::web::host::Listening, JoinHandle<()>)>,
    local_player: Option<PlayerId>,
    handle: Handle<Command, Event>,
    driver: JoinHandle<()>,
    accept: JoinHandle<()>,
    control: HostControl,
    /// How the session ended, once the turn carrying the end is sealed.
    ended: tokio::sync::watch::Receiver<Option<EndReason>>,
    _types: PhantomData<fn(C) -> (C, K)>,
}

impl<C: Serialize + DeserializeOwned, K: CommandCodec> Host<C, K> {
    /// Starts listening. New players join until [`start`](Self::start) (afterwards only with
    /// `SessionConfig::catch_up.late_join`); players who dropped out rejoin at any time.
    pub async fn bind(options: HostOptions) -> Result<Self, HostError> {
        let HostOptions {
            session,
            tokens,
            local_player,
            observe_turns,
            transport,
            bind,
            admission,
            spectator_tokens,
            #[cfg(feature = "webtransport")]
            browsers,
            command_rule,
        } = options;
        let roles = (local_player, observe_turns);
        let (host, local_player) =
            session_host(&session, (&tokens, &spectator_tokens), roles, command_rule)?;
        let (inputs, input_rx) = mpsc::channel(INPUTS_MAX);
        let gate = Gate::new(admission.clone());
        let listen =
            Listen { session: &session, admission: &admission, bind, inputs, gate: gate.clone() };
        #[cfg(feature = "webtransport")]
        let browsers = match browsers {
            Some(config) => Some(crate::web::host::listen(config, &listen)?),
            None => None,
        };
        let (endpoint, accept, pin) = match transport {
            #[cfg(feature = "quic")]
            HostTransport::Quic(config) => {
                let pin = crate::Pin::Fingerprint(config.identity.fingerprint());
                let (endpoint, accept) = crate::quic::host::listen(config, listen)?;
                (HostEndpoint::Quic(endpoint), accept, pin)
            }
            #[cfg(feature = "udp")]
            HostTransport::Udp(config) => {
                let pin = crate::Pin::UdpKey(config.public_key());
                let (listening, accept) = crate::udp::host::listen(config, listen)?;
                (HostEndpoint::Udp(listening), accept, pin)
            }
        };
        let (ended_tx, ended) = tokio::sync::watch::channel(None);
        let side = HostSide { host, conns: BTreeMap::new(), ended: ended_tx };
        let window = session.turns.window_turns as usize;
        let (handle, driver) = driver::spawn(side, Clock::new, input_rx, window);
        let local = match &endpoint {
            #[cfg(feature = "quic")]
            HostEndpoint::Quic(endpoint) => endpoint.local_addr().map_err(HostError::Bind)?,
            #[cfg(feature = "udp")]
            HostEndpoint::Udp(listening) => listening.local,
        };
        let control = HostControl {
            control: handle.control(),
            local,
            pin,
            gate,
            #[cfg(feature = "udp")]
            drops: match &endpoint {
                HostEndpoint::Udp(listening) => Some(listening.drops.clone()),
                #[cfg(feature = "quic")]
                HostEndpoint::Quic(_) => None,
            },
            #[cfg(feature = "webtransport")]
            browsers: browsers
                .as_ref()
                .map(|(listening, _)| (listening.local, listening.hash.clone())),
        };
        Ok(Host {
            endpoint,
            #[cfg(feature = "webtransport")]
            browsers,
            local_player,
            handle,
            driver,
            accept,
            control,
            ended,
            _types: PhantomData,
        })
    }

    /// The host's controls as a cloneable, blocking handle, for a lobby or operator thread
    /// (see [`HostControl`]).
    pub fn control(&self) -> HostControl {
        self.control.clone()
    }

    /// How the session ended, once the turn carrying its end was sealed (`None` while it
    /// runs): `Finished` after [`end`](Self::end), `Desync` under `DesyncPolicy::End`.
    pub fn ended(&self) -> Option<EndReason> {
        *self.ended.borrow()
    }

    /// The address the host listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.endpoint {
            #[cfg(feature = "quic")]
            HostEndpoint::Quic(endpoint) => endpoint.local_addr(),
            #[cfg(feature = "udp")]
            HostEndpoint::Udp(listening) => Ok(listening.local),
        }
    }

    /// What clients pin to join this host (see [`HostControl::pin`]).
    pub fn pin(&self) -> crate::Pin {
        self.control.pin()
    }

    /// What admission control did so far: attempts admitted and refused by cause, join
    /// outcomes, connections pending now (exact counters; see [`Admission`]).
    pub fn admission_stats(&self) -> AdmissionStats {
        self.control.admission_stats()
    }

    /// The host's own player, if it plays.
    pub fn local_player(&self) -> Option<PlayerId> {
        self.local_player
    }

    /// Starts the game: turn 0 is sealed one turn from now; no more joins.
    pub async fn start(&self) -> Result<(), SessionError> {
        self.handle.tell(Command::Start).await
    }

    /// Submits a command for the host's own player.
    pub async fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        self.handle.submit::<C, K>(command).await
    }

    /// The next turn for the host's own game, in order; `None` once the session is over. The
    /// host's player's game, or a dedicated host's with [`HostOptions::observe_turns`] (without
    /// either, no turn ever comes). A game that stops calling this holds the session back (the
    /// window), as a slow client would. Cancel-safe.
    pub async fn next_turn(&mut self) -> Option<TypedTurn<C>> {
        self.handle.next_turn::<C, K>().await
    }

    /// A handle that submits for the host's own player from another task or thread.
    pub fn submitter(&self) -> Submitter<C, K> {
        self.handle.submitter()
    }

    /// The next turn for the host's own game if it is due, without waiting; see [`NoTurn`].
    pub fn try_next_turn(&mut self) -> Result<TypedTurn<C>, NoTurn> {
        self.handle.try_next_turn::<C, K>()
    }

    /// The host's own game's state hash after a check turn (see sync checks).
    pub async fn report_state_hash(&self, turn: Turn, hash: u64) -> Result<(), SessionError> {
        self.handle.report_state_hash(turn, hash).await
    }

    /// The host's own game's state after `turn`, serialized, and its state hash there: the
    /// snapshot the session wanted ([`TypedTurn::wants_snapshot`]; a host whose game runs —
    /// its own player's, or with `observe_turns` — gives every snapshot itself). Kept once
    /// the hash matches the sync check's reference (`HostEvent::SnapshotStored`); a returning
    /// player then restores it instead of replaying the game. Refused with
    /// [`SessionError::Snapshot`] when not wanted, too large or stale.
    pub async fn offer_snapshot(
        &self,
        turn: Turn,
        hash: u64,
        state: Vec<u8>,
    ) -> Result<(), SessionError> {
        self.handle.offer_snapshot(turn, hash, state).await
    }

    /// How long until the next turn is due — for a renderer interpolating between turns
    /// (zero when due already; `None` before the first turn, paused, stalled or over).
    pub fn until_next_turn(&self) -> Option<std::time::Duration> {
        self.handle.until_next_turn()
    }

    /// How long ago the next turn fell due, when it has and is not taken yet: it is late
    /// (lost, or the host stalled) or the game has not asked for it. `None` when it is not
    /// due yet, or before the first turn, paused or over. A speculating game uses it for late
    /// seals ([`Speculation::horizon_late`](crate::speculate::Speculation::horizon_late)).
    pub fn overdue(&self) -> Option<std::time::Duration> {
        self.handle.overdue()
    }

    /// Events dropped because they were not taken with [`try_event`](Self::try_event) (1,024
    /// are held; newer ones are dropped and counted here).
    pub fn events_dropped(&self) -> u64 {
        self.handle.events_dropped()
    }

    /// The next turn or event, whichever comes first (turns first when both wait): one
    /// future to await for a loop that does both, where [`next_turn`](Self::next_turn) and
    /// [`next_event`](Self::next_event) would each need this handle. Cancel-safe; `None` once
    /// the session is over and its last turn and events were taken (so `while let Some(u) =
    /// x.next_update().await` ends with the game, though the driver stays up for `stats`).
    pub async fn next_update(&mut self) -> Option<Update<C>> {
        self.handle.next_update::<C, K>().await
    }

    /// The next event, waiting for it (cancel-safe: use it in `select!` beside the game's own
    /// work); `None` once the session's driver has stopped.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.handle.next_event().await
    }

    /// The next event, if one is waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        self.handle.try_event()
    }

    /// Session counters and every connected player's.
    pub async fn stats(&self) -> Result<(HostStats, Vec<(PlayerId, PeerStats)>), SessionError> {
        self.handle.ask(Command::Stats).await
    }

    /// Ends the game with the game's own `code`: the next sealed turn is the last, every peer
    /// executes up to it and ends with [`EndReason::Finished`](crate::EndReason::Finished);
    /// [`next_turn`](Self::next_turn) returns `None` after it. The driver stays up for
    /// [`stats`](Self::stats) and [`replay`](Self::replay) until [`shutdown`](Self::shutdown)
    /// (a client that still holds turns to execute when the host shuts down plays them out
    /// and ends `Finished`). Returns the last turn.
    pub async fn end(&self, code: u32) -> Result<Turn, SessionError> {
        self.handle.ask(|reply| Command::End(code, reply)).await?.map_err(SessionError::End)
    }

    /// Removes (kicks) a remote player: they leave at the next sealed turn and their
    /// connection is closed ([`CLOSE_REMOVED`]: they end with `EndReason::Removed` at once).
    /// `readmit` says whether they may come back: [`Readmit::Allow`] keeps their seat open
    /// for `catch_up.rejoin_window_ms` (their token takes it back, as after a crash);
    /// [`Readmit::Never`] is a ban (their token is refused with `JoinRefusal::TokenRevoked`
    /// for the rest of the session).
    pub async fn remove(&self, player: PlayerId, readmit: Readmit) -> Result<(), SessionError> {
        let remove = |reply| Command::Remove(player, readmit, reply);
        self.handle.ask(remove).await?.map_err(SessionError::Remove)
    }

    /// Keeps the host's own game's serialized state after `turn`, which it just executed, for
    /// desync forensics (a listen server; see [`Client::keep_state`](crate::Client::keep_state)):
    /// call it after every turn, with [`report_state_hash`](Self::report_state_hash) for every
    /// turn, and a divergence of the host's own game is diagnosed like a client's
    /// (`HostEvent::DesyncDiagnosed`). Refused with [`SessionError::Snapshot`] past
    /// `catch_up.snapshot_bytes_max`, without a player of the host's own, or for a turn not executed
    /// yet or not after the last one kept.
    pub async fn keep_state(&self, turn: Turn, state: Vec<u8>) -> Result<(), SessionError> {
        let keep = |reply| Command::KeepState(turn, state, reply);
        self.handle.ask(keep).await?.map_err(SessionError::Snapshot)
    }

    /// Asks for a snapshot after the next check turn, besides those of
    /// `catch_up.snapshot_interval_turns` (see `phalanx_proto::Host::request_snapshot`): before a late
    /// join, say. Refused when sync checks are off.
    pub async fn request_snapshot(&self) -> Result<(), SessionError> {
        self.handle.ask(Command::RequestSnapshot).await?.map_err(SessionError::Snapshot)
    }

    /// Pauses the game after the next sealed turn (every peer gets `Paused` on that turn).
    pub async fn pause(&self) -> Result<(), SessionError> {
        self.handle.tell(Command::Pause(true)).await
    }

    /// Resumes a paused game.
    pub async fn resume(&self) -> Result<(), SessionError> {
        self.handle.tell(Command::Pause(false)).await
    }

    /// Starts recording every turn sealed from now on into a [`Replay`] (at most `turns_max`
    /// turns, then it is marked truncated); `seed` is the game's own seed, stored with it.
    pub async fn start_recording(&self, seed: u64, turns_max: usize) -> Result<(), SessionError> {
        self.handle.tell(Command::Record { seed, turns_max }).await
    }

    /// A copy of the recording so far (`None`: not recording). The replay holds the real
    /// sealed bundles and the agreed check hashes: `phalanx_proto::verify_replay` checks a
    /// game against it.
    pub async fn replay(&self) -> Result<Option<Replay>, SessionError> {
        self.handle.ask(Command::Replay).await
    }

    /// Closes every connection and stops the tasks.
    pub async fn shutdown(self) {
        self.accept.abort();
        self.driver.abort();
        #[cfg(feature = "webtransport")]
        if let Some((listening, accept)) = self.browsers {
            accept.abort();
            crate::web::host::shutdown(listening).await;
        }
        match self.endpoint {
            #[cfg(feature = "quic")]
            HostEndpoint::Quic(endpoint) => crate::quic::host::shutdown(endpoint).await,
            #[cfg(feature = "udp")]
            HostEndpoint::Udp(listening) => crate::udp::host::shutdown(listening),
        }
    }
}

/// The sans-IO host for `tokens` and `spectator_tokens`, with the host's own player when it
/// plays (`roles.0`), or observing every turn (`roles.1`), and the game's command rule; and
/// that player.
fn session_host(
    session: &SessionConfig,
    (tokens, spectator_tokens): (&[u64], &[u64]),
    (local_player, observe_turns): (bool, bool),
    command_rule: Option<CommandRule>,
) -> Result<(phalanx_proto::Host, Option<PlayerId>), HostError> {
    let seats = usize::from(session.turns.players_max) - usize::from(local_player);
    if tokens.len() > seats {
        // Every token promises a seat: the host's own player takes one of them.
        return Err(HostError::Config(phalanx_proto::ConfigError::OutOfRange {
            field: "tokens",
            value: tokens.len() as u64,
            min: 0,
            max: seats as u64,
        }));
    }
    let mut session = session.clone();
    if session.turns.order == (CommandOrder::Shuffled { salt: 0 }) {
        // A salt no player can know: the turns in which each seat comes first stay unknown.
        let salt = u64::from_le_bytes(crate::random_bytes());
        session.turns.order = CommandOrder::Shuffled { salt };
    }
    let mut host = phalanx_proto::Host::new(session, tokens).map_err(HostError::Config)?;
    host.allow_spectators(spectator_tokens).map_err(HostError::Config)?;
    if let Some(rule) = command_rule {
        host.set_command_rule(move |player, payload| rule.admits(player, payload));
    }
    let local_player = if local_player {
        Some(host.add_local_player().map_err(|_| HostError::NoSeatForLocalPlayer)?)
    } else {
        if observe_turns {
            // Before the start and without a local player: cannot be refused.
            let _ = host.observe_turns();
        }
        None
    };
    Ok((host, local_player))
}

/// How long a refused client has to read its refusal before the host closes the connection
/// (it closes itself once it has).
pub(crate) const REFUSAL_GRACE: Duration = Duration::from_secs(2);

/// Counts a refused join by its kind (either transport).
pub(crate) fn count_refusal(pass: &Pass, error: &JoinError) {
    let outcome = match error {
        JoinError::Malformed(_) => Outcome::JoinMalformed,
        _ => Outcome::JoinRefused,
    };
    pass.gate().count(outcome, Some(pass.address()), Some(&error.to_string()));
}

/// The host as its driver sees it: the sans-IO host and each seated player's connection.
struct HostSide {
    host: phalanx_proto::Host,
    conns: BTreeMap<Joined, Conn>,
    ended: tokio::sync::watch::Sender<Option<EndReason>>,
}

impl HostSide {
    /// Whether the connection with `stable_id` is `player`'s current one (after a rejoin the
    /// old connection may still deliver: only the current one counts).
    fn is_current(&self, player: Joined, stable_id: usize) -> bool {
        self.conns.get(&player).is_some_and(|conn| conn.stable_id() == stable_id)
    }
}

impl Side for HostSide {
    type Command = Command;
    type Inputs = mpsc::Receiver<Input>;
    type Event = Event;
    const STOPS_WHEN_INPUTS_END: bool = true;

    fn datagram_bytes_max(&self) -> usize {
        usize::from(self.host.config().link.datagram_bytes_max)
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.host.poll_timeout()
    }

    fn submit(&mut self, _now_ms: u64, bytes: &[u8]) -> Result<Ticket, SubmitError> {
        self.host.submit(bytes)
    }

    fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        self.host.report_state_hash(turn, hash);
    }

    fn wants_snapshot(&self, turn: Turn) -> bool {
        self.host.wants_snapshot(turn)
    }

    fn offer_snapshot(&mut self, snapshot: Snapshot) -> Result<(), SnapshotError> {
        self.host.offer_snapshot(snapshot.turn, snapshot.hash, snapshot.state)
    }

    fn take_restore(&mut self) -> Option<Snapshot> {
        None
    }

    fn handle_command(&mut self, now_ms: u64, command: Command) {
        match command {
            Command::Start => self.host.start(now_ms),
            Command::End(code, reply) => {
                let _ = reply.send(self.host.end(now_ms, code));
            }
            Command::Remove(player, readmit, reply) => {
                let _ = reply.send(self.host.remove(now_ms, player, readmit));
            }
            Command::Pause(true) => self.host.pause(now_ms),
            Command::Pause(false) => self.host.resume(now_ms),
            Command::Record { seed, turns_max } => self.host.start_recording(seed, turns_max),
            Command::RequestSnapshot(reply) => {
                let _ = reply.send(self.host.request_snapshot());
            }
            Command::Replay(reply) => {
                let _ = reply.send(self.host.replay().cloned());
            }
            Command::KeepState(turn, state, reply) => {
                let _ = reply.send(self.host.keep_state(turn, state));
            }
            Command::Stats(reply) => {
                let host = &self.host;
                let players = self.conns.keys().filter_map(|joined| joined.player());
                let peers = players.filter_map(|p| host.peer_stats(p).map(|s| (p, s)));
                let _ = reply.send((host.stats().clone(), peers.collect()));
            }
        }
    }

    fn handle_input(&mut self, now_ms: u64, input: Input) {
        match input {
            Input::Join { conn, request, reply } => {
                let response = self.host.handle_join(now_ms, &request);
                if let Ok(player) = response.result {
                    if let Some(old) = self.conns.insert(player, conn) {
                        old.close(CLOSE_REMOVED, b"rejoined");
                    }
                }
                let _ = reply.send(response);
            }
            Input::Datagram(joined, id, bytes) if self.is_current(joined, id) => match joined {
                Joined::Player(player) => self.host.handle_datagram(now_ms, player, &bytes),
                Joined::Spectator(spectator) => {
                    self.host.handle_spectator_datagram(now_ms, spectator, &bytes);
                }
            },
            Input::Delivered(Joined::Player(player), id) => {
                if self.is_current(Joined::Player(player), id) {
                    self.host.handle_join_delivered(now_ms, player);
                }
            }
            Input::Snapshot(Joined::Player(player), id, bytes) => {
                if self.is_current(Joined::Player(player), id) {
                    // An unreadable stream is refused like bad bytes (and counted).
                    let result = self.host.handle_upload(player, bytes.as_deref().unwrap_or(&[]));
                    crate::trace::upload(player, &result);
                }
            }
            Input::Closed(player, id) => {
                if self.is_current(player, id) {
                    self.conns.remove(&player);
                }
            }
            Input::Left(joined, id) => {
                if self.is_current(joined, id) {
                    self.conns.remove(&joined);
                    // Seated and current: removal cannot fail. After the last turn it only
                    // stops the host waiting for the player's acknowledgements.
                    match joined {
                        Joined::Player(player) => {
                            let _ = self.host.remove(now_ms, player, Readmit::Allow);
                        }
                        Joined::Spectator(id) => {
                            self.host.remove_spectator(id);
                        }
                    }
                }
            }
            // Not the current connection's, or nothing a spectator may send.
            Input::Datagram(..) | Input::Delivered(..) | Input::Snapshot(..) => {}
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.host.handle_timeout(now_ms);
    }

    fn transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> bool {
        let to = match self.host.poll_transmit(now_ms, buf) {
            Some(player) => Joined::Player(player),
            None => match self.host.poll_transmit_spectators(now_ms, buf) {
                Some(spectator) => Joined::Spectator(spectator),
                None => return false,
            },
        };
        if let Some(conn) = self.conns.get(&to) {
            // A refused datagram is loss, which the session repairs.
            let _ = conn.send_datagram(buf);
        }
        true
    }

    fn poll_event(&mut self) -> Option<Event> {
        let event = self.host.poll_event()?;
        crate::trace::host_event(&event);
        if let HostEvent::Ended(cause) = event {
            let _ = self.ended.send(Some(crate::event::end_reason(cause)));
        }
        let gone = match event {
            HostEvent::PlayerTimedOut(player)
            | HostEvent::PlayerMisbehaved(player)
            | HostEvent::PlayerRemoved(player) => Some(Joined::Player(player)),
            // A replaced spectator's connection was closed when the new one was seated; one
            // that left closed its own.
            HostEvent::SpectatorLeft(id, why)
                if !matches!(why, SpectatorGone::Replaced | SpectatorGone::Left) =>
            {
                Some(Joined::Spectator(id))
            }
            _ => None,
        };
        if let Some(conn) = gone.and_then(|joined| self.conns.remove(&joined)) {
            conn.close(CLOSE_REMOVED, b"removed");
        }
        Some(event.into())
    }

    fn next_turn(&mut self, _now_ms: u64) -> Option<TurnBundle> {
        self.host.next_turn()
    }

    fn is_catching_up(&self) -> bool {
        false
    }

    fn is_over(&self) -> bool {
        self.host.is_finished()
    }

    fn next_turn_due_ms(&self) -> Option<u64> {
        self.host.next_seal_at_ms()
    }
}

//! The client, over QUIC or raw UDP: connect, join on a stream, then one driver task (see `driver.rs`)
//! that owns the sans-IO [`phalanx_proto::Client`] and feeds it the connection's datagrams and
//! timers; [`ClientSide`] is what the driver needs to know of the client.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use phalanx_proto::{
    ClientEvent, ClientStats, CommandCodec, DefaultCodec, EndReason, Joined, PlayerId,
    SessionConfig, Snapshot, SnapshotError, SpectatorId, SubmitError, Ticket, Turn, TurnBundle,
    TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::conn::{Conn, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN};
use crate::driver::{self, Datagrams, FromHost, Handle, Side};
use crate::session::{NoTurn, Submitter, Update};
use crate::{Clock, ConnectError, Event, SessionError, Transport};

/// Everything a client needs to join a host.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Local settings (timers, datagram size, versions, game-data hash, playout buffer,
    /// overflow); the turn pipeline settings come from the host. Default:
    /// `SessionConfig::default()`.
    pub session: SessionConfig,
    /// The seat token from the lobby.
    pub token: u64,
    /// The transport, and how it checks the host: QUIC pinning the certificate's fingerprint
    /// ([`quic::ClientConfig`](crate::quic::ClientConfig)), or raw UDP pinning the host's
    /// static key ([`udp::ClientConfig`](crate::udp::ClientConfig)).
    pub transport: ClientTransport,
    /// How long the handshake and the join may take before [`ConnectError::Timeout`].
    /// Default: 10 s.
    pub join_timeout: std::time::Duration,
    /// Told the bytes of the join reply received so far, as they arrive: a rejoin's or a
    /// late join's reply carries a snapshot and the turns after it, which a loading screen
    /// can show (over UDP the reply is one message: told once, when it is whole). Default:
    /// none.
    pub join_progress: Option<JoinProgress>,
}

/// The transport a client joins over, with the pin that checks the host. Each transport's
/// own pin type makes a pin for the other one a type error.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ClientTransport {
    /// QUIC (quinn, TLS 1.3); the host's certificate is checked as the config says.
    #[cfg(feature = "quic")]
    Quic(crate::quic::ClientConfig),
    /// Raw UDP with a Noise IK handshake; the host's static key is pinned.
    #[cfg(feature = "udp")]
    Udp(crate::udp::ClientConfig),
}

impl ClientTransport {
    /// Which transport this is.
    pub fn kind(&self) -> Transport {
        match self {
            #[cfg(feature = "quic")]
            ClientTransport::Quic(_) => Transport::Quic,
            #[cfg(feature = "udp")]
            ClientTransport::Udp(_) => Transport::Udp,
        }
    }
}

#[cfg(feature = "quic")]
impl From<crate::quic::ClientConfig> for ClientTransport {
    fn from(config: crate::quic::ClientConfig) -> Self {
        ClientTransport::Quic(config)
    }
}

/// QUIC, checking the host with this verification (the other settings at their defaults).
#[cfg(feature = "quic")]
impl From<crate::quic::HostVerification> for ClientTransport {
    fn from(verification: crate::quic::HostVerification) -> Self {
        ClientTransport::Quic(crate::quic::ClientConfig::new(verification))
    }
}

#[cfg(feature = "udp")]
impl From<crate::udp::ClientConfig> for ClientTransport {
    fn from(config: crate::udp::ClientConfig) -> Self {
        ClientTransport::Udp(config)
    }
}

/// Raw UDP, pinning this host key (the other settings at their defaults).
#[cfg(feature = "udp")]
impl From<crate::udp::HostPublicKey> for ClientTransport {
    fn from(host_key: crate::udp::HostPublicKey) -> Self {
        ClientTransport::Udp(crate::udp::ClientConfig::new(host_key))
    }
}

/// A callback for [`ClientOptions::join_progress`]: called with the bytes of the join reply
/// received so far, from the task that connects (keep it short).
#[derive(Clone)]
pub struct JoinProgress(Arc<dyn Fn(usize) + Send + Sync>);

impl JoinProgress {
    /// Wraps `report`.
    pub fn new(report: impl Fn(usize) + Send + Sync + 'static) -> Self {
        JoinProgress(Arc::new(report))
    }

    /// Tells the callback `bytes`.
    pub(crate) fn report(&self, bytes: usize) {
        (self.0)(bytes);
    }
}

impl std::fmt::Debug for JoinProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinProgress(..)")
    }
}

impl ClientOptions {
    /// Options for joining with seat `token` over `transport`, with the default session. The
    /// host's [`Pin`](crate::Pin) converts into one (its transport, checking the host against
    /// it), as do a [`quic::HostVerification`](crate::quic::HostVerification) and a
    /// [`udp::HostPublicKey`](crate::udp::HostPublicKey).
    pub fn new(token: u64, transport: impl Into<ClientTransport>) -> ClientOptions {
        ClientOptions {
            session: SessionConfig::default(),
            token,
            transport: transport.into(),
            join_timeout: std::time::Duration::from_secs(10),
            join_progress: None,
        }
    }
}

/// What a client keeps of its transport besides the connection: QUIC's endpoint (a client's
/// shutdown waits for it to send the close); over UDP the endpoint task ends by itself.
#[cfg(feature = "quic")]
type Kept = Option<quinn::Endpoint>;
#[cfg(not(feature = "quic"))]
type Kept = ();

/// What either transport's join needs besides its own config.
pub(crate) struct Join<'a> {
    pub(crate) addr: SocketAddr,
    pub(crate) session: &'a SessionConfig,
    pub(crate) request: &'a [u8],
    pub(crate) timeout: std::time::Duration,
    pub(crate) progress: Option<&'a JoinProgress>,
}

/// The client's own commands (besides submitting and reporting hashes).
enum Command {
    ReportCost(u32),
    Pause(bool),
    Stats(oneshot::Sender<ClientStats>),
    KeepState(Turn, Vec<u8>, oneshot::Sender<Result<(), SnapshotError>>),
}

/// Sends raw datagrams on a client's connection; see
/// [`Client::dangerous_raw_datagram_sender`].
#[derive(Clone, Debug)]
pub struct RawDatagramSender(Conn);

impl RawDatagramSender {
    /// Sends `bytes` as one datagram (unreliable, like every datagram).
    pub fn send(&self, bytes: Vec<u8>) -> Result<(), SessionError> {
        self.0.send_datagram(&bytes).then_some(()).ok_or(SessionError::Closed)
    }
}

/// A joined client. Generic over the game's command type `C` and codec `K` (postcard).
pub struct Client<C, K: CommandCodec = DefaultCodec> {
    #[cfg_attr(not(feature = "quic"), allow(dead_code))]
    endpoint: Kept,
    connection: Conn,
    joined: Joined,
    handle: Handle<Command, Event>,
    ended: tokio::sync::watch::Receiver<Option<EndReason>>,
    driver: JoinHandle<()>,
    _types: PhantomData<fn(C) -> (C, K)>,
}

impl<C: Serialize + DeserializeOwned, K: CommandCodec> Client<C, K> {
    /// Connects to the host at `addr` and joins. Fails with a typed error if the host cannot be
    /// reached, its certificate does not verify, or it refuses the join (the refusal names
    /// both versions or hashes on a mismatch).
    pub async fn connect(addr: SocketAddr, options: ClientOptions) -> Result<Self, ConnectError> {
        let (mut client, request) =
            phalanx_proto::Client::new(options.session.clone(), options.token)
                .map_err(ConnectError::Config)?;
        let clock = Clock::new();
        let ClientOptions { session, transport, join_timeout, join_progress, .. } = options;
        let join = Join {
            addr,
            session: &session,
            request: &request,
            timeout: join_timeout,
            progress: join_progress.as_ref(),
        };
        let (connection, inputs, reply, endpoint) = match transport {
            #[cfg(feature = "quic")]
            ClientTransport::Quic(config) => {
                let (endpoint, connection, reply) = crate::quic::client::join(config, join).await?;
                let inputs = Datagrams::quic(connection.clone());
                (Conn::Quic(connection), inputs, reply, Kept::from(Some(endpoint)))
            }
            #[cfg(feature = "udp")]
            ClientTransport::Udp(config) => {
                let (connection, receiver, reply) = crate::udp::client::join(config, join).await?;
                (Conn::udp(connection), Datagrams::udp(receiver), reply, Kept::default())
            }
        };
        let joined = match client.handle_join_reply(clock.now_ms(), &reply) {
            Ok(joined) => joined,
            Err(error) => {
                connection.close(0, b"join refused");
                return Err(ConnectError::Join(error));
            }
        };
        let window = client.config().turns.window_turns as usize;
        let (ended_tx, ended_rx) = tokio::sync::watch::channel(None);
        let restore = client.take_restore(); // rides the first turn handed to the game
        let side = ClientSide { client, connection: connection.clone(), ended: ended_tx, restore };
        let (handle, driver) = driver::spawn(side, move || clock, inputs, window);
        Ok(Client {
            endpoint,
            connection,
            joined,
            handle,
            ended: ended_rx,
            driver,
            _types: PhantomData,
        })
    }

    /// Our player (`None`: we joined as a spectator).
    pub fn player(&self) -> Option<PlayerId> {
        self.joined.player()
    }

    /// Our spectator slot, when we joined as a spectator (with a spectator token): we execute
    /// every turn, after the host's broadcast delay, and cannot submit.
    pub fn spectator(&self) -> Option<SpectatorId> {
        self.joined.spectator()
    }

    /// How the session ended, if it has.
    pub fn ended(&self) -> Option<EndReason> {
        *self.ended.borrow()
    }

    /// Submits a command for our player.
    pub async fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        self.handle.submit::<C, K>(command).await
    }

    /// The next turn to execute, in order; `None` once the session is over. Cancel-safe: a
    /// turn is never lost to a `select!` that drops this future.
    pub async fn next_turn(&mut self) -> Option<TypedTurn<C>> {
        self.handle.next_turn::<C, K>().await
    }

    /// A handle that submits for our player from another task or thread, while this one takes
    /// the turns.
    pub fn submitter(&self) -> Submitter<C, K> {
        self.handle.submitter()
    }

    /// The next turn if it is due, without waiting (for a frame loop); see [`NoTurn`].
    pub fn try_next_turn(&mut self) -> Result<TypedTurn<C>, NoTurn> {
        self.handle.try_next_turn::<C, K>()
    }

    /// Whether the last turn taken was a past one, replayed to catch up after a rejoin or a
    /// late join ([`TypedTurn::catching_up`]): while it is, the player should give no orders
    /// (they would all be stamped for the first live turn, whose budget refuses the excess).
    pub fn is_catching_up(&self) -> bool {
        self.handle.is_catching_up()
    }

    /// Reports the game's state hash after a check turn.
    pub async fn report_state_hash(&self, turn: Turn, hash: u64) -> Result<(), SessionError> {
        self.handle.report_state_hash(turn, hash).await
    }

    /// Our game's state after `turn`, serialized, and its state hash there, when the host
    /// asked for it ([`TypedTurn::wants_snapshot`]): uploaded on a stream of its own beside
    /// the turns. Refused with [`SessionError::Snapshot`] when not asked for or too large.
    pub async fn offer_snapshot(
        &self,
        turn: Turn,
        hash: u64,
        state: Vec<u8>,
    ) -> Result<(), SessionError> {
        self.handle.offer_snapshot(turn, hash, state).await
    }

    /// Keeps our game's serialized state after `turn`, which it just executed, for desync
    /// forensics: call it after every turn (with [`report_state_hash`](Self::report_state_hash)
    /// for every turn) if the game can afford to serialize its state that often. On a desync
    /// the host asks a diverged player and a reference player for their states after the
    /// first divergent turn and reports both (`HostEvent::DesyncDiagnosed`). The latest
    /// `sync.interval_turns + 2 × turns.window_turns` states are kept. Refused with
    /// [`SessionError::Snapshot`] past `catch_up.snapshot_bytes_max`, or for a turn not executed yet
    /// or not after the last one kept.
    pub async fn keep_state(&self, turn: Turn, state: Vec<u8>) -> Result<(), SessionError> {
        self.handle
            .ask(|reply| Command::KeepState(turn, state, reply))
            .await?
            .map_err(SessionError::Snapshot)
    }

    /// Reports how long the game takes to simulate a turn (speed control input).
    pub async fn report_turn_cost(&self, cost_ms: u32) -> Result<(), SessionError> {
        self.handle.tell(Command::ReportCost(cost_ms)).await
    }

    /// Asks the host to pause (`true`) or resume (`false`).
    pub async fn request_pause(&self, pause: bool) -> Result<(), SessionError> {
        self.handle.tell(Command::Pause(pause)).await
    }

    /// A handle that sends arbitrary bytes as datagrams on this authenticated connection,
    /// bypassing the session. **Dangerous**: for fault-testing a host against a buggy or hostile
    /// client (phalanx-sim uses it); a real game never needs it.
    pub fn dangerous_raw_datagram_sender(&self) -> RawDatagramSender {
        RawDatagramSender(self.connection.clone())
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

    /// The client's counters.
    pub async fn stats(&self) -> Result<ClientStats, SessionError> {
        self.handle.ask(Command::Stats).await
    }

    /// Leaves: closes the connection (code [`CLOSE_LEFT`]) and stops the driver. The host
    /// removes our player at its next sealed turn, so the others see us go within a turn and
    /// a round trip instead of an idle timeout.
    pub async fn shutdown(self) {
        self.driver.abort();
        self.connection.close(CLOSE_LEFT, b"client left");
        #[cfg(feature = "quic")]
        if let Some(endpoint) = self.endpoint {
            let wait = endpoint.wait_idle();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), wait).await;
        }
    }
}

/// The client as its driver sees it: the sans-IO client, its connection to send on, and where
/// the end of the session is published for [`Client::ended`].
struct ClientSide {
    client: phalanx_proto::Client,
    connection: Conn,
    ended: tokio::sync::watch::Sender<Option<EndReason>>,
    /// A rejoin's snapshot, taken from the session at the join: it rides the first turn.
    restore: Option<Snapshot>,
}

impl Side for ClientSide {
    type Command = Command;
    type Inputs = Datagrams;
    type Event = Event;
    // A lost connection does not stop the driver: the session's idle timer ends it shortly
    // with a typed outcome (HostLost).
    const STOPS_WHEN_INPUTS_END: bool = false;

    fn datagram_bytes_max(&self) -> usize {
        usize::from(self.client.config().link.datagram_bytes_max)
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.client.poll_timeout()
    }

    fn submit(&mut self, now_ms: u64, bytes: &[u8]) -> Result<Ticket, SubmitError> {
        self.client.submit(now_ms, bytes)
    }

    fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        self.client.report_state_hash(turn, hash);
    }

    fn wants_snapshot(&self, turn: Turn) -> bool {
        self.client.wants_snapshot(turn)
    }

    fn offer_snapshot(&mut self, snapshot: Snapshot) -> Result<(), SnapshotError> {
        // The upload goes out with the next datagrams (`transmit`).
        self.client.offer_snapshot(snapshot.turn, snapshot.hash, &snapshot.state)
    }

    fn take_restore(&mut self) -> Option<Snapshot> {
        self.restore.take()
    }

    fn handle_command(&mut self, _now_ms: u64, command: Command) {
        match command {
            Command::ReportCost(cost) => self.client.report_turn_cost(cost),
            Command::Pause(true) => self.client.request_pause(),
            Command::Pause(false) => self.client.request_resume(),
            Command::Stats(reply) => {
                let _ = reply.send(self.client.stats());
            }
            Command::KeepState(turn, state, reply) => {
                let _ = reply.send(self.client.keep_state(turn, state));
            }
        }
    }

    fn handle_input(&mut self, now_ms: u64, input: FromHost) {
        match input {
            FromHost::Datagram(datagram) => self.client.handle_datagram(now_ms, &datagram),
            // The host said why it closed: end at once rather than after the idle timeout.
            FromHost::Closed(code) if code == u64::from(CLOSE_SHUTDOWN) => {
                self.client.on_host_closed();
            }
            FromHost::Closed(code) if code == u64::from(CLOSE_REMOVED) => {
                self.client.on_removed();
            }
            FromHost::Closed(_) => {}
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.client.handle_timeout(now_ms);
    }

    fn transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> bool {
        while let Some(bytes) = self.client.poll_upload() {
            // A snapshot or a desync's turn hashes: a stream of its own beside the datagrams
            // (over UDP a reliable message); the host reads it to its end.
            self.connection.upload(bytes);
        }
        if !self.client.poll_transmit(now_ms, buf) {
            return false;
        }
        // A refused datagram is loss, which the session repairs.
        let _ = self.connection.send_datagram(buf);
        true
    }

    fn poll_event(&mut self) -> Option<Event> {
        let event = self.client.poll_event()?;
        crate::trace::client_event(&event);
        if let ClientEvent::Ended(reason) = event {
            let _ = self.ended.send(Some(reason));
        }
        Some(event.into())
    }

    fn next_turn(&mut self, now_ms: u64) -> Option<TurnBundle> {
        self.client.next_turn(now_ms)
    }

    fn is_catching_up(&self) -> bool {
        self.client.is_catching_up()
    }

    fn is_over(&self) -> bool {
        self.client.ended().is_some()
    }

    fn next_turn_due_ms(&self) -> Option<u64> {
        self.client.next_turn_due_ms()
    }
}

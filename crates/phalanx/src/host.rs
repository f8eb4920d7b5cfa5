//! The host over QUIC: an accept loop, one task per connection for its join and datagrams, and
//! one driver task (see `driver.rs`) that owns the sans-IO [`phalanx_proto::Host`] and is the
//! only thing that touches it; [`HostSide`] is what the driver needs to know of the host.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use phalanx_proto::{
    CommandCodec, DefaultCodec, HostEvent, HostStats, JoinResponse, PeerStats, PlayerId,
    SessionConfig, SubmitError, Ticket, Turn, TurnBundle, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::driver::{self, Handle, Side};
use crate::tls::{Fingerprint, HostIdentity};
use crate::transport::{transport_config, HOST_STREAM_WINDOW, JOIN_BYTES_MAX, JOIN_TIMEOUT};
use crate::{Clock, HostError, SessionError};

/// QUIC application error code when the host closes a connection it removed or refused.
pub const CLOSE_REMOVED: u32 = 1;
/// QUIC application error code when the host shuts down.
pub const CLOSE_SHUTDOWN: u32 = 2;

/// Everything a host needs to listen.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostOptions {
    /// The session's config.
    pub session: SessionConfig,
    /// The seat tokens the lobby handed out (each usable once).
    pub tokens: Vec<u64>,
    /// Whether the host also plays (a listen server).
    pub local_player: bool,
    /// The certificate and key; clients pin its fingerprint.
    pub identity: HostIdentity,
    /// Where to listen (`127.0.0.1:0` picks a free loopback port).
    pub bind: SocketAddr,
    /// The stateless-reset key. Persist it: a restarted host that keeps it is noticed by its
    /// old clients in one round trip instead of an idle timeout. `None`: a fresh random one.
    pub reset_key: Option<[u8; 32]>,
    /// The transport under the endpoint: a real UDP socket on `bind` (the default), or any
    /// [`quinn::AsyncUdpSocket`] — phalanx-sim passes a simulated one.
    pub socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    /// Seeds quinn's own randomness (and connection ids): set by simulations so a seed
    /// reproduces a run. `None` for real games.
    pub quic_seed: Option<[u8; 32]>,
}

impl HostOptions {
    /// Options with the default session, listening on `bind`.
    pub fn new(identity: HostIdentity, bind: SocketAddr, tokens: Vec<u64>) -> HostOptions {
        HostOptions {
            session: SessionConfig::default(),
            tokens,
            local_player: false,
            identity,
            bind,
            reset_key: None,
            socket: None,
            quic_seed: None,
        }
    }
}

/// Inputs from the connection tasks waiting for the driver before those tasks wait too.
const INPUTS_MAX: usize = 4 * 1024;

/// What the connection tasks tell the driver.
enum Input {
    Join {
        conn: quinn::Connection,
        request: Vec<u8>,
        reply: oneshot::Sender<JoinResponse>,
    },
    /// A datagram from the connection with this `stable_id`, seated as the player. After a
    /// rejoin the player's old connection may still deliver: only the current one counts.
    Datagram(PlayerId, usize, Bytes),
    Closed(PlayerId, usize),
    /// The client acknowledged every byte of the join reply.
    Delivered(PlayerId, usize),
}

/// The host's own commands (besides submitting and reporting hashes).
enum Command {
    Start,
    Stats(oneshot::Sender<(HostStats, Vec<(PlayerId, PeerStats)>)>),
}

/// A running host. Generic over the game's command type `C` and codec `K` (postcard).
pub struct Host<C, K: CommandCodec = DefaultCodec> {
    endpoint: quinn::Endpoint,
    fingerprint: Fingerprint,
    local_player: Option<PlayerId>,
    handle: Handle<Command, HostEvent>,
    driver: JoinHandle<()>,
    accept: JoinHandle<()>,
    _types: PhantomData<fn(C) -> (C, K)>,
}

impl<C: Serialize + DeserializeOwned, K: CommandCodec> Host<C, K> {
    /// Starts listening. Joins are accepted until [`start`](Self::start).
    pub async fn bind(options: HostOptions) -> Result<Self, HostError> {
        let HostOptions {
            session,
            tokens,
            local_player,
            identity,
            bind,
            reset_key,
            socket,
            quic_seed,
        } = options;
        let mut host =
            phalanx_proto::Host::new(session.clone(), &tokens).map_err(HostError::Config)?;
        let local_player = if local_player {
            Some(host.add_local_player().map_err(|_| HostError::NoSeatForLocalPlayer)?)
        } else {
            None
        };
        let tls = identity.server_tls().map_err(HostError::Identity)?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
            .map_err(|error| HostError::Tls(error.to_string()))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(transport_config(&session, HOST_STREAM_WINDOW));
        let key = reset_key.unwrap_or_else(random_key);
        let reset = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        let mut endpoint_config = quinn::EndpointConfig::new(Arc::new(reset));
        crate::seed_endpoint(&mut endpoint_config, quic_seed, crate::HOST_CID_LEN);
        let runtime = quinn::default_runtime().ok_or(HostError::NoRuntime)?;
        let endpoint = match socket {
            Some(socket) => quinn::Endpoint::new_with_abstract_socket(
                endpoint_config,
                Some(server),
                socket,
                runtime,
            ),
            None => {
                let socket = std::net::UdpSocket::bind(bind).map_err(HostError::Bind)?;
                quinn::Endpoint::new(endpoint_config, Some(server), socket, runtime)
            }
        }
        .map_err(HostError::Bind)?;

        let (input_tx, input_rx) = mpsc::channel(INPUTS_MAX);
        let side = HostSide { host, conns: BTreeMap::new() };
        let window = session.turns_ahead_max as usize;
        let (handle, driver) = driver::spawn(side, Clock::new, input_rx, window);
        let accept = tokio::spawn(accept_loop(endpoint.clone(), input_tx));
        Ok(Host {
            endpoint,
            fingerprint: identity.fingerprint(),
            local_player,
            handle,
            driver,
            accept,
            _types: PhantomData,
        })
    }

    /// The address the host listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// The fingerprint clients must pin.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
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

    /// The next turn for the host's own game, in order; `None` once the session is over. A game
    /// that stops calling this holds the session back (the window), as a slow client would.
    pub async fn next_turn(&mut self) -> Option<TypedTurn<C>> {
        self.handle.next_turn::<C, K>().await
    }

    /// The host's own game's state hash after a check turn (see sync checks).
    pub async fn report_state_hash(&self, turn: Turn, hash: u64) -> Result<(), SessionError> {
        self.handle.report_state_hash(turn, hash).await
    }

    /// The next event, if one is waiting.
    pub fn try_event(&mut self) -> Option<HostEvent> {
        self.handle.try_event()
    }

    /// Session counters and every connected player's.
    pub async fn stats(&self) -> Result<(HostStats, Vec<(PlayerId, PeerStats)>), SessionError> {
        self.handle.ask(Command::Stats).await
    }

    /// Closes every connection and stops the tasks.
    pub async fn shutdown(self) {
        self.accept.abort();
        self.driver.abort();
        self.endpoint.close(quinn::VarInt::from_u32(CLOSE_SHUTDOWN), b"host shut down");
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.endpoint.wait_idle())
            .await;
    }
}

fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    // The reset key only needs to be unpredictable; failure to read OS randomness is fatal.
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .expect("OS randomness is available");
    key
}

async fn accept_loop(endpoint: quinn::Endpoint, inputs: mpsc::Sender<Input>) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(serve_connection(incoming, inputs.clone()));
    }
}

/// One connection: its join on the first bidirectional stream, then its datagrams.
async fn serve_connection(incoming: quinn::Incoming, inputs: mpsc::Sender<Input>) {
    let Ok(conn) = incoming.await else { return };
    let join = tokio::time::timeout(JOIN_TIMEOUT, async {
        let (send, mut recv) = conn.accept_bi().await.ok()?;
        let request = recv.read_to_end(JOIN_BYTES_MAX).await.ok()?;
        Some((send, request))
    })
    .await;
    let Ok(Some((mut send, request))) = join else {
        conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"no join request");
        return;
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    let join = Input::Join { conn: conn.clone(), request, reply: reply_tx };
    if inputs.send(join).await.is_err() {
        return;
    }
    let Ok(response) = reply_rx.await else { return };
    if let Some(reply) = &response.reply {
        let _ = send.write_all(reply).await;
        let _ = send.finish();
    }
    if let Ok(player) = response.result {
        // Tell the session when the client holds the reply: its idle timer starts then.
        let (inputs, id) = (inputs.clone(), conn.stable_id());
        tokio::spawn(async move {
            if let Ok(None) = send.stopped().await {
                let _ = inputs.send(Input::Delivered(player, id)).await;
            }
        });
    }
    let Ok(player) = response.result else {
        // Let the refusal arrive; the client closes when it has read it.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.closed()).await;
        conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"join refused");
        return;
    };
    let id = conn.stable_id();
    loop {
        match conn.read_datagram().await {
            Ok(bytes) => {
                if inputs.send(Input::Datagram(player, id, bytes)).await.is_err() {
                    return;
                }
            }
            Err(_) => {
                let _ = inputs.send(Input::Closed(player, id)).await;
                return;
            }
        }
    }
}

/// The host as its driver sees it: the sans-IO host and each seated player's connection.
struct HostSide {
    host: phalanx_proto::Host,
    conns: BTreeMap<PlayerId, quinn::Connection>,
}

impl HostSide {
    /// Whether the connection with `stable_id` is `player`'s current one (after a rejoin the
    /// old connection may still deliver: only the current one counts).
    fn is_current(&self, player: PlayerId, stable_id: usize) -> bool {
        self.conns.get(&player).is_some_and(|conn| conn.stable_id() == stable_id)
    }
}

impl Side for HostSide {
    type Command = Command;
    type Inputs = mpsc::Receiver<Input>;
    type Event = HostEvent;
    const STOPS_WHEN_INPUTS_END: bool = true;

    fn datagram_bytes_max(&self) -> usize {
        usize::from(self.host.config().datagram_bytes_max)
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

    fn handle_command(&mut self, now_ms: u64, command: Command) {
        match command {
            Command::Start => self.host.start(now_ms),
            Command::Stats(reply) => {
                let host = &self.host;
                let peers = self.conns.keys().filter_map(|&p| host.peer_stats(p).map(|s| (p, s)));
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
                        old.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"rejoined");
                    }
                }
                let _ = reply.send(response);
            }
            Input::Datagram(player, id, bytes) => {
                if self.is_current(player, id) {
                    self.host.handle_datagram(now_ms, player, &bytes);
                }
            }
            Input::Delivered(player, id) => {
                if self.is_current(player, id) {
                    self.host.handle_join_delivered(now_ms, player);
                }
            }
            Input::Closed(player, id) => {
                if self.is_current(player, id) {
                    self.conns.remove(&player);
                }
            }
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.host.handle_timeout(now_ms);
    }

    fn transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> bool {
        let Some(player) = self.host.poll_transmit(now_ms, buf) else { return false };
        if let Some(conn) = self.conns.get(&player) {
            // A full send buffer drops the oldest datagram: loss, which the session repairs.
            let _ = conn.send_datagram(Bytes::copy_from_slice(buf));
        }
        true
    }

    fn poll_event(&mut self) -> Option<HostEvent> {
        let event = self.host.poll_event()?;
        if let HostEvent::PlayerTimedOut(player) | HostEvent::PlayerMisbehaved(player) = event {
            if let Some(conn) = self.conns.remove(&player) {
                conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"removed");
            }
        }
        Some(event)
    }

    fn next_turn(&mut self, _now_ms: u64) -> Option<TurnBundle> {
        self.host.next_turn()
    }

    fn is_over(&self) -> bool {
        false
    }
}

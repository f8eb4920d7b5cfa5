//! The client over QUIC: connect, join on a stream, then one driver task that owns the sans-IO
//! [`phalanx_proto::Client`] and feeds it the connection's datagrams and timers.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use phalanx_proto::{
    ClientEvent, ClientStats, CommandCodec, DefaultCodec, EndReason, PlayerId, SessionConfig,
    Ticket, Turn, TurnBundle, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::tls::{client_tls, HostVerification};
use crate::transport::{transport_config, CLIENT_STREAM_WINDOW, JOIN_BYTES_MAX, JOIN_TIMEOUT};
use crate::{ask, tell, Clock, ConnectError, SessionError, EVENTS_MAX};

/// Everything a client needs to join a host.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Local settings (timers, datagram size, versions, game-data hash); the turn pipeline
    /// settings come from the host.
    pub session: SessionConfig,
    /// The seat token from the lobby.
    pub token: u64,
    /// How to check the host's certificate.
    pub verification: HostVerification,
    /// The name the host's certificate is checked against (for `Roots`).
    pub server_name: String,
    /// The transport under the endpoint: an ephemeral UDP socket (the default), or any
    /// [`quinn::AsyncUdpSocket`] — phalanx-sim passes a simulated one.
    pub socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    /// Seeds quinn's own randomness (and connection ids), for reproducible simulations.
    pub quic_seed: Option<[u8; 32]>,
    /// How long the handshake and the join may take before [`ConnectError::Timeout`].
    pub join_timeout: std::time::Duration,
}

impl ClientOptions {
    /// Options that pin `verification`, with the default session.
    pub fn new(token: u64, verification: HostVerification) -> ClientOptions {
        ClientOptions {
            session: SessionConfig::default(),
            token,
            verification,
            server_name: "phalanx".to_owned(),
            socket: None,
            quic_seed: None,
            join_timeout: JOIN_TIMEOUT * 2,
        }
    }
}

enum Command {
    Submit(Vec<u8>, oneshot::Sender<Result<Ticket, phalanx_proto::SubmitError>>),
    ReportHash(Turn, u64),
    ReportCost(u32),
    Pause(bool),
    Stats(oneshot::Sender<ClientStats>),
}

/// Sends raw datagrams on a client's connection; see
/// [`Client::dangerous_raw_datagram_sender`].
#[derive(Clone, Debug)]
pub struct RawDatagramSender(quinn::Connection);

impl RawDatagramSender {
    /// Sends `bytes` as one datagram (unreliable, like every datagram).
    pub fn send(&self, bytes: Vec<u8>) -> Result<(), SessionError> {
        self.0.send_datagram(Bytes::from(bytes)).map_err(|_| SessionError::Closed)
    }
}

/// A joined client. Generic over the game's command type `C` and codec `K` (postcard).
pub struct Client<C, K: CommandCodec = DefaultCodec> {
    endpoint: quinn::Endpoint,
    connection: quinn::Connection,
    player: PlayerId,
    commands: mpsc::Sender<Command>,
    turns: mpsc::Receiver<TurnBundle>,
    events: mpsc::Receiver<ClientEvent>,
    ended: tokio::sync::watch::Receiver<Option<EndReason>>,
    driver: JoinHandle<()>,
    _types: PhantomData<fn(C) -> (C, K)>,
}

impl<C: Serialize + DeserializeOwned, K: CommandCodec> Client<C, K> {
    /// Connects to the host at `addr` and joins. Fails with a typed error if the host cannot be
    /// reached, its certificate does not verify, or it refuses the join (the refusal names
    /// both versions or hashes on a mismatch).
    pub async fn connect(addr: SocketAddr, options: ClientOptions) -> Result<Self, ConnectError> {
        let ClientOptions {
            session,
            token,
            verification,
            server_name,
            socket,
            quic_seed,
            join_timeout,
        } = options;
        let (mut client, request) =
            phalanx_proto::Client::new(session.clone(), token).map_err(ConnectError::Config)?;
        let tls = client_tls(&verification).map_err(ConnectError::Tls)?;
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
            .map_err(|error| ConnectError::Tls(rustls::Error::General(error.to_string())))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport_config(&session, CLIENT_STREAM_WINDOW));
        let bind: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let mut endpoint_config = quinn::EndpointConfig::default();
        crate::seed_endpoint(&mut endpoint_config, quic_seed, crate::CLIENT_CID_LEN);
        let runtime = quinn::default_runtime()
            .ok_or_else(|| ConnectError::Stream("no tokio runtime is running".into()))?;
        let mut endpoint = match socket {
            Some(socket) => {
                quinn::Endpoint::new_with_abstract_socket(endpoint_config, None, socket, runtime)
            }
            None => {
                let socket = std::net::UdpSocket::bind(bind).map_err(ConnectError::Endpoint)?;
                quinn::Endpoint::new(endpoint_config, None, socket, runtime)
            }
        }
        .map_err(ConnectError::Endpoint)?;
        endpoint.set_default_client_config(config);
        let connecting = endpoint.connect(addr, &server_name).map_err(ConnectError::Connect)?;
        let clock = Clock::new();
        let reply_max = JOIN_BYTES_MAX + session.rejoin_log_bytes_max as usize;
        let joined = tokio::time::timeout(join_timeout, async {
            let connection = connecting.await.map_err(ConnectError::Connection)?;
            let (mut send, mut recv) =
                connection.open_bi().await.map_err(ConnectError::Connection)?;
            send.write_all(&request).await.map_err(|e| ConnectError::Stream(e.to_string()))?;
            send.finish().map_err(|e| ConnectError::Stream(e.to_string()))?;
            let reply = recv
                .read_to_end(reply_max)
                .await
                .map_err(|e| ConnectError::Stream(e.to_string()))?;
            Ok::<_, ConnectError>((connection, reply))
        })
        .await
        .map_err(|_| ConnectError::Timeout)??;
        let (connection, reply) = joined;
        let player = match client.handle_join_reply(clock.now_ms(), &reply) {
            Ok(player) => player,
            Err(error) => {
                connection.close(quinn::VarInt::from_u32(0), b"join refused");
                return Err(ConnectError::Join(error));
            }
        };
        let window = client.config().turns_ahead_max as usize;
        let (command_tx, command_rx) = mpsc::channel(256);
        let (turn_tx, turn_rx) = mpsc::channel(window);
        let (event_tx, event_rx) = mpsc::channel(EVENTS_MAX);
        let (ended_tx, ended_rx) = tokio::sync::watch::channel(None);
        let driver = tokio::spawn(drive(
            client,
            clock,
            connection.clone(),
            command_rx,
            turn_tx,
            event_tx,
            ended_tx,
        ));
        Ok(Client {
            endpoint,
            connection,
            player,
            commands: command_tx,
            turns: turn_rx,
            events: event_rx,
            ended: ended_rx,
            driver,
            _types: PhantomData,
        })
    }

    /// Our player.
    pub fn player(&self) -> PlayerId {
        self.player
    }

    /// How the session ended, if it has.
    pub fn ended(&self) -> Option<EndReason> {
        *self.ended.borrow()
    }

    /// Submits a command for our player.
    pub async fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        let bytes = K::encode(command).map_err(SessionError::Codec)?;
        ask(&self.commands, |reply| Command::Submit(bytes, reply))
            .await?
            .map_err(SessionError::Submit)
    }

    /// The next turn to execute, in order; `None` once the session is over.
    pub async fn next_turn(&mut self) -> Option<TypedTurn<C>> {
        self.turns.recv().await.map(TypedTurn::decode::<K>)
    }

    /// Reports the game's state hash after a check turn.
    pub async fn report_state_hash(&self, turn: Turn, hash: u64) -> Result<(), SessionError> {
        tell(&self.commands, Command::ReportHash(turn, hash)).await
    }

    /// Reports how long the game takes to simulate a turn (speed control input).
    pub async fn report_turn_cost(&self, cost_ms: u32) -> Result<(), SessionError> {
        tell(&self.commands, Command::ReportCost(cost_ms)).await
    }

    /// Asks the host to pause (`true`) or resume (`false`).
    pub async fn request_pause(&self, pause: bool) -> Result<(), SessionError> {
        tell(&self.commands, Command::Pause(pause)).await
    }

    /// A handle that sends arbitrary bytes as datagrams on this authenticated connection,
    /// bypassing the session. **Dangerous**: for fault-testing a host against a buggy or hostile
    /// client (phalanx-sim uses it); a real game never needs it.
    pub fn dangerous_raw_datagram_sender(&self) -> RawDatagramSender {
        RawDatagramSender(self.connection.clone())
    }

    /// The next event, if one is waiting.
    pub fn try_event(&mut self) -> Option<ClientEvent> {
        self.events.try_recv().ok()
    }

    /// The client's counters.
    pub async fn stats(&self) -> Result<ClientStats, SessionError> {
        ask(&self.commands, Command::Stats).await
    }

    /// Leaves: closes the connection and stops the driver.
    pub async fn shutdown(self) {
        self.driver.abort();
        self.connection.close(quinn::VarInt::from_u32(0), b"client left");
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.endpoint.wait_idle())
            .await;
    }
}

async fn drive(
    mut client: phalanx_proto::Client,
    clock: Clock,
    connection: quinn::Connection,
    mut commands: mpsc::Receiver<Command>,
    turns: mpsc::Sender<TurnBundle>,
    events: mpsc::Sender<ClientEvent>,
    ended: tokio::sync::watch::Sender<Option<EndReason>>,
) {
    let mut buf = Vec::with_capacity(usize::from(client.config().datagram_bytes_max));
    let mut connection_open = true;
    // The first datagram (the hello) goes out before waiting for anything.
    while client.poll_transmit(clock.now_ms(), &mut buf) {
        let _ = connection.send_datagram(Bytes::copy_from_slice(&buf));
    }
    loop {
        let wake = clock.instant(client.poll_timeout().unwrap_or(clock.now_ms() + 60_000));
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                None => break,
                Some(Command::Submit(bytes, reply)) => {
                    let _ = reply.send(client.submit(clock.now_ms(), &bytes));
                }
                Some(Command::ReportHash(turn, hash)) => client.report_state_hash(turn, hash),
                Some(Command::ReportCost(cost)) => client.report_turn_cost(cost),
                Some(Command::Pause(true)) => client.request_pause(),
                Some(Command::Pause(false)) => client.request_resume(),
                Some(Command::Stats(reply)) => {
                    let _ = reply.send(client.stats());
                }
            },
            datagram = connection.read_datagram(), if connection_open => match datagram {
                Ok(bytes) => client.handle_datagram(clock.now_ms(), &bytes),
                // The connection is gone; the session's idle timer ends it with a typed
                // outcome (HostLost) shortly.
                Err(_) => connection_open = false,
            },
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = clock.now_ms();
        client.handle_timeout(now);
        while client.poll_transmit(now, &mut buf) {
            let _ = connection.send_datagram(Bytes::copy_from_slice(&buf));
        }
        while let Some(event) = client.poll_event() {
            if let ClientEvent::Ended(reason) = event {
                let _ = ended.send(Some(reason));
            }
            let _ = events.try_send(event);
        }
        while turns.capacity() > 0 {
            let Some(bundle) = client.next_turn(now) else { break };
            if turns.try_send(bundle).is_err() {
                break;
            }
        }
        if client.ended().is_some() {
            // Hand over what is left, then stop: next_turn returns None after the last turn.
            break;
        }
    }
}

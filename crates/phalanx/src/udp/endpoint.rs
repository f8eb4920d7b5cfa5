//! The endpoint task: one per socket. It reads every datagram, opens those from known peers
//! (data, stream packets, close), answers handshakes (the host), runs the streams' timers and
//! ends idle connections.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use phalanx_udp::stream::{StreamConfig, ACK, SEGMENT};
use phalanx_udp::{
    ClientHandshake, HandshakeError, HostKey, HostPublicKey, Outcome, Progress, Responder, Stream,
    MAX_PACKET,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{
    CloseReason, Core, DatagramSocket, Link, UdpConnection, UdpReceiver, KIND_CLOSE, KIND_DATAGRAM,
};
use phalanx_udp::mismatch;

/// A transport's limits and timers.
#[derive(Clone, Copy, Debug)]
pub struct UdpOptions {
    /// A connection from which nothing was heard for this long ends
    /// ([`CloseReason::Idle`]).
    pub idle_timeout: Duration,
    /// A client gives up connecting after this long ([`UdpConnectError::TimedOut`]).
    pub handshake_timeout: Duration,
    /// The reliable stream's window, segment size, limits and timers.
    pub stream: StreamConfig,
    /// The host holds at most this many connections; further handshakes are dropped.
    pub peers_max: usize,
    /// Datagrams (and, separately, messages) held for a receiver that does not keep up;
    /// past that they are dropped and counted ([`super::UdpStats::receive_overflow`]).
    pub queue: usize,
    /// Seeds the transport's randomness (ephemeral keys, cookie secrets) for reproducible
    /// simulations. `None` (the default): OS randomness, as real games want.
    pub seed: Option<[u8; 32]>,
}

impl Default for UdpOptions {
    fn default() -> Self {
        UdpOptions {
            idle_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            stream: StreamConfig::default(),
            peers_max: 64,
            queue: 256,
            seed: None,
        }
    }
}

/// Why [`connect`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum UdpConnectError {
    /// The host answered with another static key than the pinned one.
    WrongHostKey {
        /// The key the client pinned.
        pinned: HostPublicKey,
        /// The key the host announced (unauthenticated: it only explains the failure).
        host: HostPublicKey,
    },
    /// No handshake completed within [`UdpOptions::handshake_timeout`].
    TimedOut,
    /// A QUIC endpoint answered at that address: the host speaks QUIC, not raw UDP.
    QuicHost,
    /// The socket failed.
    Io(std::io::Error),
    /// The handshake failed otherwise.
    Handshake(HandshakeError),
}

impl std::fmt::Display for UdpConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UdpConnectError::WrongHostKey { pinned, host } => write!(
                f,
                "the host's key is {host}, not the pinned {pinned}: wrong host, or its key changed"
            ),
            UdpConnectError::TimedOut => f.write_str("no answer from the host"),
            UdpConnectError::QuicHost => f.write_str("the host speaks QUIC, not raw UDP"),
            UdpConnectError::Io(error) => write!(f, "socket: {error}"),
            UdpConnectError::Handshake(error) => write!(f, "handshake: {error}"),
        }
    }
}

impl std::error::Error for UdpConnectError {}

/// 32 unpredictable bytes for keys and cookies: from the OS, or derived from `seed` (for
/// `label`'s use) in a simulation.
fn random_bytes(seed: Option<[u8; 32]>, label: &[u8]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    match seed {
        Some(seed) => {
            let mut context = ring::digest::Context::new(&ring::digest::SHA256);
            context.update(&seed);
            context.update(label);
            bytes.copy_from_slice(context.finish().as_ref());
        }
        None => ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("OS randomness is available"),
    }
    bytes
}

/// A new connection to `remote` and the endpoint's record of it.
fn open<S: DatagramSocket>(
    socket: &Arc<S>,
    remote: SocketAddr,
    channel: phalanx_udp::Channel,
    options: &UdpOptions,
    response: Option<Vec<u8>>,
) -> (Entry<S>, UdpConnection<S>, UdpReceiver) {
    let core = Core {
        channel,
        stream: Stream::new(options.stream),
        closed: false,
        send_blocked: 0,
        receive_overflow: 0,
        bytes_sent: 0,
        packets_sent: 0,
    };
    let link = Arc::new(Link {
        socket: socket.clone(),
        remote,
        core: Mutex::new(core),
        epoch: Instant::now(),
    });
    let (datagram_tx, datagrams) = mpsc::channel(options.queue.max(1));
    let (message_tx, messages) = mpsc::channel(options.queue.max(1));
    let closed = Arc::new(Mutex::new(None));
    let entry = Entry {
        link: link.clone(),
        datagrams: datagram_tx,
        messages: message_tx,
        closed: closed.clone(),
        last_heard: Instant::now(),
        response,
    };
    (entry, UdpConnection { link }, UdpReceiver { datagrams, messages, closed })
}

/// The endpoint's record of one connection.
struct Entry<S> {
    link: Arc<Link<S>>,
    datagrams: mpsc::Sender<Vec<u8>>,
    messages: mpsc::Sender<Vec<u8>>,
    closed: Arc<Mutex<Option<CloseReason>>>,
    last_heard: Instant,
    /// The host's handshake response, sent again while the client repeats its initiation
    /// (the response was lost), until the client's first data packet.
    response: Option<Vec<u8>>,
}

type Accepted<S> = (UdpConnection<S>, UdpReceiver);

enum Role<S> {
    Host {
        responder: Box<Responder>,
        accepted: mpsc::Sender<Accepted<S>>,
        drops: Arc<Mutex<UdpHostStats>>,
    },
    Client,
}

/// What a UDP host's endpoint answered and dropped, over every address: handshakes (cookies,
/// replays, packets that are not handshakes) and the data packets of its connections that did
/// not open (forged, replayed, too old). An attack shows here before it shows anywhere else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpHostStats {
    /// The handshake responder's counters.
    pub handshakes: phalanx_udp::ResponderStats,
    /// Data packets dropped as malformed (truncated, oversize, wrong type).
    pub packets_malformed: u64,
    /// Data packets whose tag did not verify (corrupted, forged, another channel's).
    pub packets_tampered: u64,
    /// Authentic data packets already delivered (replays).
    pub packets_replayed: u64,
    /// Authentic data packets older than the replay window.
    pub packets_too_old: u64,
    /// QUIC clients told at once that this host speaks raw UDP (answered with QUIC's version
    /// negotiation, so they fail with `ConnectError::TransportMismatch`).
    pub quic_clients_answered: u64,
}

impl UdpHostStats {
    fn count(&mut self, dropped: phalanx_udp::Dropped) {
        let counter = match dropped {
            phalanx_udp::Dropped::Malformed => &mut self.packets_malformed,
            phalanx_udp::Dropped::Tampered => &mut self.packets_tampered,
            phalanx_udp::Dropped::Replayed => &mut self.packets_replayed,
            phalanx_udp::Dropped::TooOld => &mut self.packets_too_old,
        };
        *counter += 1;
    }
}

struct Endpoint<S> {
    socket: Arc<S>,
    role: Role<S>,
    peers: BTreeMap<SocketAddr, Entry<S>>,
    options: UdpOptions,
    epoch: Instant,
}

impl<S: DatagramSocket> Endpoint<S> {
    async fn run(mut self) {
        let mut buf = vec![0u8; MAX_PACKET + 1];
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Biased, so that one seed gives one run in a simulator (select!'s random order
            // would not); the tick first, as it is ready at most once a period and a flood
            // of packets cannot starve it.
            tokio::select! {
                biased;
                _ = tick.tick() => {
                    if !self.on_tick() {
                        return;
                    }
                }
                received = std::future::poll_fn(|cx| self.socket.poll_recv_from(cx, &mut buf)) => {
                    if let Ok((len, from)) = received {
                        self.on_packet(from, &buf[..len]);
                    }
                }
            }
        }
    }

    fn on_packet(&mut self, from: SocketAddr, packet: &[u8]) {
        let Some(&first) = packet.first() else { return };
        if packet.len() > MAX_PACKET {
            return;
        }
        if let Some(entry) = self.peers.get_mut(&from) {
            if first & 0x80 != 0 {
                return self.on_data(from, packet);
            }
            if let Some(response) = &entry.response {
                // The client repeats its initiation: our response was lost.
                let _ = self.socket.try_send_to(response, from);
                return;
            }
        }
        if let Role::Host { drops, .. } = &self.role {
            match mismatch::at_udp_host(packet) {
                mismatch::Foreign::No => self.on_handshake(from, packet),
                mismatch::Foreign::Answer(negotiation) => {
                    drops.lock().unwrap_or_else(PoisonError::into_inner).quic_clients_answered += 1;
                    let _ = self.socket.try_send_to(&negotiation, from);
                }
                mismatch::Foreign::Ignore => {}
            }
        }
    }

    fn on_data(&mut self, from: SocketAddr, packet: &[u8]) {
        let Some(entry) = self.peers.get_mut(&from) else { return };
        let link = entry.link.clone();
        let mut core = link.core();
        // A packet that does not open is counted (by the channel, and the host's endpoint) and
        // dropped.
        let payload = match core.channel.open(packet) {
            Ok(payload) => payload,
            Err(dropped) => {
                if let Role::Host { drops, .. } = &self.role {
                    drops.lock().unwrap_or_else(PoisonError::into_inner).count(dropped);
                }
                return;
            }
        };
        entry.last_heard = Instant::now();
        entry.response = None;
        match payload.split_first() {
            Some((&KIND_DATAGRAM, rest)) if entry.datagrams.try_send(rest.to_vec()).is_err() => {
                core.receive_overflow += 1;
            }
            Some((&KIND_DATAGRAM, _)) => {}
            Some((&(SEGMENT | ACK), _)) => {
                let _ = core.stream.handle(link.now_ms(), &payload);
                while let Some(message) = core.stream.poll_message() {
                    if entry.messages.try_send(message).is_err() {
                        core.receive_overflow += 1;
                    }
                }
                link.pump(&mut core);
            }
            Some((&KIND_CLOSE, rest)) => {
                let code =
                    rest.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                drop(core);
                self.end(from, CloseReason::Peer(code));
            }
            _ => {}
        }
    }

    /// A handshake packet from an address without a connection (the host).
    fn on_handshake(&mut self, from: SocketAddr, packet: &[u8]) {
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let Role::Host { responder, accepted, drops } = &mut self.role else { return };
        let outcome = responder.handle(from, packet, now_ms);
        drops.lock().unwrap_or_else(PoisonError::into_inner).handshakes = responder.stats();
        match outcome {
            Outcome::Reply(reply) => {
                let _ = self.socket.try_send_to(&reply, from);
            }
            Outcome::Join(request) => {
                let known = self.peers.contains_key(&from);
                if !known && self.peers.len() >= self.options.peers_max {
                    return;
                }
                let Ok((channel, response)) = request.accept(&[]) else { return };
                let _ = self.socket.try_send_to(&response, from);
                let (entry, connection, receiver) =
                    open(&self.socket, from, channel, &self.options, Some(response));
                if accepted.try_send((connection, receiver)).is_err() {
                    return;
                }
                if known {
                    self.end(from, CloseReason::Replaced);
                }
                self.peers.insert(from, entry);
            }
            Outcome::Dropped(_) => {}
        }
    }

    /// Timers: streams' retransmits, idle and closed connections. `false`: the task is done.
    fn on_tick(&mut self) -> bool {
        let mut ended = Vec::new();
        for (&address, entry) in &self.peers {
            let mut core = entry.link.core();
            let abandoned = Arc::strong_count(&entry.link) == 1 && entry.datagrams.is_closed();
            if abandoned && !core.closed {
                // Every handle was dropped without `close`: tell the peer.
                let _ = entry.link.send(&mut core, KIND_CLOSE, &0u32.to_le_bytes());
                core.closed = true;
            }
            if core.closed {
                ended.push((address, CloseReason::Local));
            } else if entry.last_heard.elapsed() >= self.options.idle_timeout {
                ended.push((address, CloseReason::Idle));
            } else {
                entry.link.pump(&mut core);
            }
        }
        for (address, reason) in ended {
            self.end(address, reason);
        }
        match &self.role {
            Role::Host { accepted, .. } => !(accepted.is_closed() && self.peers.is_empty()),
            Role::Client => !self.peers.is_empty(),
        }
    }

    /// Ends a connection: its receiver's queues close after what they hold.
    fn end(&mut self, address: SocketAddr, reason: CloseReason) {
        if let Some(entry) = self.peers.remove(&address) {
            entry.link.core().closed = true;
            *entry.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(reason);
        }
    }
}

/// A host on a UDP socket: answers handshakes and hands over each connection.
pub struct UdpHost<S = tokio::net::UdpSocket> {
    local: SocketAddr,
    public: HostPublicKey,
    accepted: mpsc::Receiver<Accepted<S>>,
    drops: Arc<Mutex<UdpHostStats>>,
}

impl<S> std::fmt::Debug for UdpHost<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpHost").field("local", &self.local).field("public", &self.public).finish()
    }
}

impl<S: DatagramSocket> UdpHost<S> {
    /// Serves handshakes on `socket` with the host's static `key` (clients pin its
    /// [`HostKey::public`]). Spawns the endpoint task on the current tokio runtime; it ends
    /// when this is dropped and its last connection has ended.
    pub fn bind(socket: S, key: HostKey, options: UdpOptions) -> std::io::Result<UdpHost<S>> {
        let local = socket.local_addr()?;
        let public = key.public();
        let (tx, accepted) = mpsc::channel(options.peers_max.max(1));
        let drops = Arc::new(Mutex::new(UdpHostStats::default()));
        let endpoint = Endpoint {
            socket: Arc::new(socket),
            role: Role::Host {
                responder: Box::new(Responder::new(key, random_bytes(options.seed, b"responder"))),
                accepted: tx,
                drops: drops.clone(),
            },
            peers: BTreeMap::new(),
            options,
            epoch: Instant::now(),
        };
        tokio::spawn(endpoint.run());
        Ok(UdpHost { local, public, accepted, drops })
    }

    /// What the endpoint answered and dropped so far.
    pub fn stats(&self) -> UdpHostStats {
        *self.drops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A cloneable reader of [`stats`](Self::stats), for whoever outlives this handle.
    pub(crate) fn stats_handle(&self) -> Arc<Mutex<UdpHostStats>> {
        self.drops.clone()
    }

    /// The next client whose handshake completed; `None` if the endpoint stopped.
    pub async fn accept(&mut self) -> Option<(UdpConnection<S>, UdpReceiver)> {
        self.accepted.recv().await
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The static key clients pin.
    pub fn public_key(&self) -> HostPublicKey {
        self.public
    }
}

/// Connects to the host at `host` whose static key is `pinned`: the handshake (resent with
/// backoff, 250 ms to 1 s, until [`UdpOptions::handshake_timeout`]), then a connection whose
/// endpoint task runs on the current tokio runtime.
pub async fn connect<S: DatagramSocket>(
    socket: S,
    host: SocketAddr,
    pinned: HostPublicKey,
    options: UdpOptions,
) -> Result<(UdpConnection<S>, UdpReceiver), UdpConnectError> {
    let (mut handshake, first) =
        ClientHandshake::new(pinned, &[], random_bytes(options.seed, b"client"))
            .map_err(UdpConnectError::Handshake)?;
    let socket = Arc::new(socket);
    let deadline = Instant::now() + options.handshake_timeout;
    let mut buf = vec![0u8; MAX_PACKET + 1];
    let mut wait = Duration::from_millis(250);
    let mut probed = false;
    send_handshake(&*socket, &first, host)?;
    let channel = loop {
        let resend_at = Instant::now() + wait;
        let received = tokio::select! {
            biased;
            received = std::future::poll_fn(|cx| socket.poll_recv_from(cx, &mut buf)) => Some(received),
            () = tokio::time::sleep_until(resend_at.min(deadline)) => None,
        };
        match received {
            Some(Ok((len, from)))
                if from == host && mismatch::is_quic_answer(&buf[..len], &first) =>
            {
                return Err(UdpConnectError::QuicHost);
            }
            Some(Ok((len, from))) if from == host => match handshake.handle(&buf[..len]) {
                Ok(Progress::Resend(packet)) => send_handshake(&*socket, &packet, host)?,
                Ok(Progress::Established { channel, .. }) => break channel,
                Ok(_) => {}
                Err(HandshakeError::WrongHostKey { pinned, host }) => {
                    return Err(UdpConnectError::WrongHostKey { pinned, host })
                }
                Err(error) => return Err(UdpConnectError::Handshake(error)),
            },
            Some(_) => {}
            None if Instant::now() >= deadline => return Err(UdpConnectError::TimedOut),
            None => {
                wait = (wait * 2).min(Duration::from_secs(1));
                send_handshake(&*socket, handshake.packet(), host)?;
                if !probed {
                    // No answer yet: if a QUIC host is there, its version negotiation says so.
                    probed = true;
                    send_handshake(&*socket, &mismatch::probe(&first), host)?;
                }
            }
        }
    };
    let (entry, connection, receiver) = open(&socket, host, channel, &options, None);
    let mut peers = BTreeMap::new();
    peers.insert(host, entry);
    let endpoint = Endpoint { socket, role: Role::Client, peers, options, epoch: Instant::now() };
    tokio::spawn(endpoint.run());
    Ok((connection, receiver))
}

/// Sends a handshake packet; a full buffer is as a loss (the resend timer covers it), any
/// other error ends the attempt.
fn send_handshake<S: DatagramSocket>(
    socket: &S,
    packet: &[u8],
    host: SocketAddr,
) -> Result<(), UdpConnectError> {
    match socket.try_send_to(packet, host) {
        Err(error) if error.kind() != std::io::ErrorKind::WouldBlock => {
            Err(UdpConnectError::Io(error))
        }
        _ => Ok(()),
    }
}

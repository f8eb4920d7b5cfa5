//! The raw-UDP transport, built with the `udp` cargo feature (on by default): encrypted
//! datagrams and reliable messages between a host and its clients over one UDP socket each,
//! with the Noise IK handshake, stateless cookies, replay window and reliable `Stream` of
//! `phalanx-udp`.
//!
//! Sessions use it through a [`HostConfig`] (the host's static [`HostKey`]) and a
//! [`ClientConfig`] (the [`HostPublicKey`] a client pins), which convert into the session's
//! options: `HostOptions::new(udp::HostConfig::generate(), bind, tokens)` and
//! `ClientOptions::new(token, host_public_key)`. The join request and reply, and every
//! upload, are reliable messages; turns and commands are datagrams. The rest of this module
//! is the layer underneath, usable on its own. The host's admission control sees only
//! connections whose handshake completed (the cookie step guards the rest).
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx::{udp, ClientOptions, HostOptions};
//!
//! let host = udp::HostConfig::generate();
//! let pin = host.public_key(); // the lobby hands it to players (it prints as hex)
//! let host = HostOptions::new(host, "0.0.0.0:7777".parse()?, vec![7]);
//! let client = ClientOptions::new(7, pin);
//! # let _ = (host, client); Ok(()) }
//! ```
//!
//! Unlike QUIC it sends no packet the caller did not ask for — no ACK-only packets, no path
//! MTU probes, no keep-alives — except a stream's acknowledgements and retransmissions while a
//! message is in flight, and the handshake. A datagram costs 19 bytes besides its payload (a
//! kind byte, the 2-byte packet number, the 16-byte tag) and the 28 of UDP/IPv4.
//!
//! - The host: [`UdpHost::bind`] answers handshakes and hands each established client over as
//!   a [`UdpConnection`] and its [`UdpReceiver`].
//! - A client: [`connect`] pins the host's static key ([`HostPublicKey`]); a wrong key fails
//!   at once with [`UdpConnectError::WrongHostKey`].
//! - Both: [`UdpConnection::send_datagram`] (unreliable, never blocks: a full socket buffer
//!   drops it, as a congested network would), [`UdpConnection::send_message`] (reliable,
//!   ordered), [`UdpConnection::close`]; [`UdpReceiver::datagram`] and
//!   [`UdpReceiver::message`] end (`None`) when the connection closes or goes idle.
//!
//! The socket is any [`DatagramSocket`]: tokio's `UdpSocket`, or a simulator's.

pub(crate) mod client;
mod endpoint;
pub(crate) mod host;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use phalanx_udp::stream::SendError;
use phalanx_udp::{Channel, SealError, Stream};
use tokio::sync::mpsc;

pub use endpoint::{connect, UdpConnectError, UdpHost, UdpHostStats, UdpOptions};
pub use phalanx_udp::{HostKey, HostPublicKey};

use phalanx_udp::{KIND_CLOSE, KIND_DATAGRAM};

/// A UDP socket as the transport uses it: non-blocking sends, polled receives. Object-safe,
/// so sessions take any socket as an `Arc<dyn DatagramSocket>` (see [`HostConfig::socket`]).
pub trait DatagramSocket: Send + Sync + 'static {
    /// Sends at once or fails (`WouldBlock` when the socket's buffer is full).
    fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize>;
    /// The next datagram and its source, when one is there; otherwise registers `cx` to be
    /// woken when one arrives.
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>>;
    /// The address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// The socket a session's UDP transport runs on.
pub(crate) type SharedSocket = Arc<dyn DatagramSocket>;

impl<T: DatagramSocket + ?Sized> DatagramSocket for Arc<T> {
    fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        (**self).try_send_to(buf, target)
    }

    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        (**self).poll_recv_from(cx, buf)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        (**self).local_addr()
    }
}

impl DatagramSocket for tokio::net::UdpSocket {
    fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        // Straight to the kernel (non-blocking): tokio's own `try_send_to` refuses with
        // `WouldBlock` until its reactor has first seen the socket writable.
        socket2::SockRef::from(self).send_to(buf, &target.into())
    }

    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let mut read = tokio::io::ReadBuf::new(buf);
        match tokio::net::UdpSocket::poll_recv_from(self, cx, &mut read) {
            Poll::Ready(Ok(from)) => Poll::Ready(Ok((read.filled().len(), from))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::UdpSocket::local_addr(self)
    }
}

/// A real UDP socket bound to `addr`, on the running tokio runtime.
pub(crate) fn bind_socket(addr: SocketAddr) -> io::Result<SharedSocket> {
    let socket = std::net::UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    Ok(Arc::new(tokio::net::UdpSocket::from_std(socket)?))
}

/// quinn's socket abstraction as a [`DatagramSocket`]: how phalanx-sim runs the UDP transport
/// on the simulated socket it gives quinn.
#[cfg(feature = "quic")]
#[derive(Clone, Debug)]
pub struct QuinnSocket(pub Arc<dyn quinn::AsyncUdpSocket>);

#[cfg(feature = "quic")]
impl DatagramSocket for QuinnSocket {
    fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        let transmit = quinn::udp::Transmit {
            destination: target,
            ecn: None,
            contents: buf,
            segment_size: None,
            src_ip: None,
        };
        self.0.try_send(&transmit).map(|()| buf.len())
    }

    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let mut meta = [quinn::udp::RecvMeta::default()];
        let mut bufs = [io::IoSliceMut::new(buf)];
        match self.0.poll_recv(cx, &mut bufs, &mut meta) {
            Poll::Ready(Ok(_)) => Poll::Ready(Ok((meta[0].len, meta[0].addr))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A UDP host's settings for a session: its static key, and what simulations need.
#[derive(Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// The host's static Noise key; clients pin its public half ([`HostKey::public`]). Keep
    /// it (its [`to_bytes`](HostKey::to_bytes)) to keep the pin across restarts.
    pub key: HostKey,
    /// The socket: `None` (the default) binds a real UDP socket on the host's address;
    /// phalanx-sim passes a simulated one.
    pub socket: Option<Arc<dyn DatagramSocket>>,
    /// Seeds the transport's randomness (cookie secrets), so a simulation's seed reproduces
    /// a run. Default: `None` (OS randomness), as real games want.
    pub seed: Option<[u8; 32]>,
}

impl HostConfig {
    /// A host keyed with `key`, and the defaults.
    pub fn new(key: HostKey) -> HostConfig {
        HostConfig { key, socket: None, seed: None }
    }

    /// A host with a fresh random key (from the OS), and the defaults.
    pub fn generate() -> HostConfig {
        HostConfig::new(HostKey::from_bytes(crate::random_bytes::<32>()))
    }

    /// What clients pin: the key's public half.
    pub fn public_key(&self) -> HostPublicKey {
        self.key.public()
    }
}

impl std::fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let socket = self.socket.as_ref().map(|_| "..");
        f.debug_struct("HostConfig")
            .field("public_key", &self.key.public())
            .field("socket", &socket)
            .field("seed", &self.seed.map(|_| ".."))
            .finish()
    }
}

/// A UDP client's settings for a session: the host's key it pins, and what simulations need.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The host's static key, pinned as the Noise handshake's responder key: a host with
    /// another fails the connect with [`UdpConnectError::WrongHostKey`].
    pub host_key: HostPublicKey,
    /// The socket: `None` (the default) binds an ephemeral UDP socket; phalanx-sim passes a
    /// simulated one.
    pub socket: Option<Arc<dyn DatagramSocket>>,
    /// Seeds the transport's randomness (the ephemeral key), for reproducible simulations.
    /// Default: `None` (OS randomness).
    pub seed: Option<[u8; 32]>,
}

impl ClientConfig {
    /// A client that pins `host_key`, and the defaults.
    pub fn new(host_key: HostPublicKey) -> ClientConfig {
        ClientConfig { host_key, socket: None, seed: None }
    }
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let socket = self.socket.as_ref().map(|_| "..");
        f.debug_struct("ClientConfig")
            .field("host_key", &self.host_key)
            .field("socket", &socket)
            .field("seed", &self.seed.map(|_| ".."))
            .finish()
    }
}

/// Why a send failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum UdpError {
    /// The connection is closed (by either end, or idle).
    Closed,
    /// The payload does not fit one packet.
    TooLarge(SealError),
    /// The reliable stream refused the message (too large, or its buffer is full).
    Stream(SendError),
}

impl std::fmt::Display for UdpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UdpError::Closed => f.write_str("the connection is closed"),
            UdpError::TooLarge(error) => write!(f, "{error}"),
            UdpError::Stream(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for UdpError {}

/// What a connection counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Packets sealed, opened and dropped by the channel (tampered, replayed...).
    pub channel: phalanx_udp::ChannelStats,
    /// The reliable stream's segments, acks, retransmits and drops.
    pub stream: phalanx_udp::stream::StreamStats,
    /// Datagrams dropped because the socket's send buffer was full.
    pub send_blocked: u64,
    /// Datagrams dropped because the receiver did not keep up.
    pub receive_overflow: u64,
    /// UDP payload bytes sent (headers of UDP/IP not included).
    pub bytes_sent: u64,
    /// Packets sent.
    pub packets_sent: u64,
}

/// The secure state of one connection, shared by its handle and its endpoint's task.
struct Core {
    channel: Channel,
    stream: Stream,
    closed: bool,
    send_blocked: u64,
    receive_overflow: u64,
    bytes_sent: u64,
    packets_sent: u64,
}

/// One connection's sending side, shared.
struct Link<S> {
    socket: Arc<S>,
    remote: SocketAddr,
    core: Mutex<Core>,
    /// Milliseconds are counted from here (the stream's timers).
    epoch: tokio::time::Instant,
}

impl<S: DatagramSocket> Link<S> {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn core(&self) -> std::sync::MutexGuard<'_, Core> {
        // A panic while holding the lock leaves plain counters and crypto state: usable.
        self.core.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Seals `kind ‖ payload` and sends it.
    fn send(&self, core: &mut Core, kind: u8, payload: &[u8]) -> Result<(), UdpError> {
        let mut plain = Vec::with_capacity(payload.len() + 1);
        plain.push(kind);
        plain.extend_from_slice(payload);
        let packet = core.channel.seal(&plain).map_err(UdpError::TooLarge)?;
        match self.socket.try_send_to(&packet, self.remote) {
            Ok(_) => {
                core.packets_sent += 1;
                core.bytes_sent += packet.len() as u64;
            }
            // A full buffer or a transient error: the datagram is lost, as on the network.
            Err(_) => core.send_blocked += 1,
        }
        Ok(())
    }

    /// Sends what the reliable stream has due (acks, segments).
    fn pump(&self, core: &mut Core) {
        let now = self.now_ms();
        core.stream.handle_timeout(now);
        while let Some(packet) = core.stream.poll_transmit(now) {
            // The stream's packets carry their own kind byte (1 or 2): sent as they are.
            let Some((&kind, rest)) = packet.split_first() else { continue };
            if self.send(core, kind, rest).is_err() {
                break;
            }
        }
    }
}

/// A connection's handle: send datagrams and messages, close. Cheap to clone.
pub struct UdpConnection<S = tokio::net::UdpSocket> {
    link: Arc<Link<S>>,
}

impl<S> Clone for UdpConnection<S> {
    fn clone(&self) -> Self {
        UdpConnection { link: self.link.clone() }
    }
}

impl<S> std::fmt::Debug for UdpConnection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpConnection").field("remote", &self.link.remote).finish_non_exhaustive()
    }
}

impl<S: DatagramSocket> UdpConnection<S> {
    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.link.remote
    }

    /// Sends one datagram (unreliable, unordered; at most
    /// [`MAX_DATAGRAM`] bytes). Never blocks.
    pub fn send_datagram(&self, payload: &[u8]) -> Result<(), UdpError> {
        let mut core = self.link.core();
        if core.closed {
            return Err(UdpError::Closed);
        }
        self.link.send(&mut core, KIND_DATAGRAM, payload)
    }

    /// Queues a message on the reliable stream and sends what the window allows; the rest
    /// follows as acknowledgements come back.
    pub fn send_message(&self, message: &[u8]) -> Result<(), UdpError> {
        let mut core = self.link.core();
        if core.closed {
            return Err(UdpError::Closed);
        }
        core.stream.send(message).map_err(UdpError::Stream)?;
        self.link.pump(&mut core);
        Ok(())
    }

    /// Whether every message sent was acknowledged.
    pub fn messages_delivered(&self) -> bool {
        self.link.core().stream.is_idle()
    }

    /// Closes the connection with `code` (sent three times, unreliably: the peer's idle
    /// timeout covers their loss). Later sends fail with [`UdpError::Closed`].
    pub fn close(&self, code: u32) {
        let mut core = self.link.core();
        if core.closed {
            return;
        }
        for _ in 0..3 {
            let _ = self.link.send(&mut core, KIND_CLOSE, &code.to_le_bytes());
        }
        core.closed = true;
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.link.core().closed
    }

    /// What the connection counted.
    pub fn stats(&self) -> UdpStats {
        let core = self.link.core();
        UdpStats {
            channel: core.channel.stats(),
            stream: core.stream.stats(),
            send_blocked: core.send_blocked,
            receive_overflow: core.receive_overflow,
            bytes_sent: core.bytes_sent,
            packets_sent: core.packets_sent,
        }
    }
}

/// The largest datagram payload [`UdpConnection::send_datagram`] takes.
pub const MAX_DATAGRAM: usize = phalanx_udp::MAX_DATA_PAYLOAD - 1;

/// A connection's receiving side: datagrams and messages from the peer.
#[derive(Debug)]
pub struct UdpReceiver {
    datagrams: mpsc::Receiver<Vec<u8>>,
    messages: mpsc::Receiver<Vec<u8>>,
    closed: Arc<Mutex<Option<CloseReason>>>,
}

/// What [`UdpReceiver::next`] got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// A datagram.
    Datagram(Vec<u8>),
    /// A whole message from the reliable stream.
    Message(Vec<u8>),
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed it with this code.
    Peer(u32),
    /// Nothing was heard from the peer for the idle timeout.
    Idle,
    /// This end closed it (or dropped every handle to it).
    Local,
    /// The same address completed a new handshake (the client restarted): the new connection
    /// replaces this one.
    Replaced,
}

impl UdpReceiver {
    /// The next datagram; `None` once the connection ended.
    pub async fn datagram(&mut self) -> Option<Vec<u8>> {
        self.datagrams.recv().await
    }

    /// The next whole message; `None` once the connection ended.
    pub async fn message(&mut self) -> Option<Vec<u8>> {
        self.messages.recv().await
    }

    /// The next datagram or message, whichever comes first; `None` once the connection ended
    /// and both queues are empty.
    pub async fn next(&mut self) -> Option<Received> {
        // Biased, so that one seed gives one run in a simulator; messages first, as they are
        // few and cannot starve the datagrams.
        tokio::select! {
            biased;
            Some(message) = self.messages.recv() => Some(Received::Message(message)),
            Some(datagram) = self.datagrams.recv() => Some(Received::Datagram(datagram)),
            else => None,
        }
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        *self.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

//! phalanx: deterministic-lockstep multiplayer for real-time strategy games, over QUIC or raw
//! UDP.
//!
//! This crate drives the sans-IO session of [`phalanx_proto`] over [quinn] (QUIC) or its own
//! raw-UDP transport with a Noise handshake ([`udp`]): turns and commands travel in datagrams
//! with phalanx's own acknowledgements, redundancy and timers; the join travels on one
//! reliable stream (or reliable message). A [`Host`] listens and seals turns; each
//! player runs a [`Client`]. Both are generic over the game's command type (any serde type;
//! postcard on the wire).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx::{Client, ClientOptions, Host, HostIdentity, HostOptions, HostVerification};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! enum Order { Move { unit: u32, x: i32, y: i32 } }
//!
//! // The host: a self-signed identity whose fingerprint the lobby shows to players.
//! let identity = HostIdentity::generate_self_signed("my-game")?;
//! let fingerprint = identity.fingerprint();
//! let host: Host<Order> = Host::bind(HostOptions::new(identity, "127.0.0.1:0".parse()?, vec![7])).await?;
//!
//! // A player pins that fingerprint and joins with its seat token.
//! let options = ClientOptions::new(7, HostVerification::Pinned(fingerprint));
//! let mut client: Client<Order> = Client::connect(host.local_addr()?, options).await?;
//! host.start().await?;
//! client.submit(&Order::Move { unit: 1, x: 10, y: 20 }).await?;
//! while let Some(turn) = client.next_turn().await {
//!     // Execute every command of `turn`, in order, in the deterministic simulation.
//!     # let _ = turn; break;
//! }
//! // The host ends the game for everyone (the code is the game's own); each client's
//! // `next_turn` returns `None` after the last turn and `ended()` says why.
//! host.end(0).await?;
//! println!("{:?}", client.ended()); // Some(Finished { code: 0 }) once the last turn ran
//! # Ok(()) }
//! ```
//!
//! A session ends when the host calls [`Host::end`] (every client: `EndReason::Finished`),
//! shuts down (`HostClosed`, at once) or removes a player; a client leaves with
//! [`Client::shutdown`] (the others execute its `Left` record at the next sealed turn).
//!
//! Each end runs one driver task that owns its sans-IO endpoint: one loop for both ends,
//! differing only in where inputs come from and where datagrams go.
//!
//! quinn is configured for games, not bulk transfer: one stream, small
//! windows, bounded datagram buffers, QUIC idle timeout just behind phalanx's own, and
//! **0-RTT off** (early data is replayable). Crypto is rustls with ring, TLS 1.3.
#![forbid(unsafe_code)]

mod admission;
mod client;
mod conn;
mod driver;
mod host;
mod session;
mod tls;
mod trace;
mod transport;
pub mod udp;

use std::fmt;

pub use admission::{Admission, AdmissionStats};
pub use client::{Client, ClientOptions, JoinProgress, RawDatagramSender};
pub use conn::Transport;
pub use driver::{Submitter, Update};
pub use host::{Host, HostOptions, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN};
pub use phalanx_proto::{
    verify_replay, ClientEvent, ClientJoinError, ClientStats, CodecError, CommandCodec, CommandSeq,
    ConfigError, DefaultCodec, DesyncBundle, DesyncPolicy, DesyncReference, DesyncReport,
    DiffError, DropCounters, EndCause, EndError, EndReason, HostEvent, HostStats, JoinRefusal,
    Joined, LinkStats, Pace, PauseBy, PeerState, PeerStats, PlayerId, Readmit, RemoveError, Replay,
    ReplayError, ReplayGame, ReplayVerified, SessionConfig, Snapshot, SnapshotError,
    SnapshotRejection, SpectatorGone, SpectatorId, SplitMix64, SubmitError, Ticket, Turn,
    TurnBundle, TypedRecord, TypedTurn,
};
pub use session::{Session, SessionEvent, SessionStats};
pub use tls::{
    Fingerprint, FingerprintParseError, HostIdentity, HostVerification, IdentityError, ALPN,
};

/// Seeds an endpoint's randomness and connection ids, for reproducible simulations.
pub(crate) fn seed_endpoint(
    config: &mut quinn::EndpointConfig,
    seed: Option<[u8; 32]>,
    cid_len: usize,
) {
    match seed {
        Some(seed) => {
            config.rng_seed(Some(seed));
            let key = u64::from_le_bytes(seed[..8].try_into().expect("eight bytes"));
            config.cid_generator(move || Box::new(SeededCids { next: key, key, len: cid_len }));
        }
        None => {
            // Unpredictable ids: a random key per endpoint.
            let mut key = [0u8; 8];
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
                .expect("OS randomness is available");
            let key = u64::from_le_bytes(key);
            config.cid_generator(move || Box::new(SeededCids { next: key, key, len: cid_len }));
        }
    }
}

/// Connection ids every packet carries. The host's are 4 bytes (enough to tell a few thousand
/// connections apart; quinn's default is 8); a client's are empty (a client has one connection
/// per endpoint and never migrates, so the host's address names it, as browsers do). Together
/// 12 bytes less per packet pair — on a link of a few small packets per turn, a tenth of the rate.
pub(crate) const HOST_CID_LEN: usize = 4;
/// The clients' connection id length (see [`HOST_CID_LEN`]).
pub(crate) const CLIENT_CID_LEN: usize = 0;

/// Connection ids from a counter mixed with a key: unique per endpoint, the same every run.
#[derive(Debug)]
struct SeededCids {
    next: u64,
    key: u64,
    len: usize,
}

impl quinn::ConnectionIdGenerator for SeededCids {
    fn generate_cid(&mut self) -> quinn::ConnectionId {
        self.next = self.next.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.next;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        quinn::ConnectionId::new(&(z ^ (z >> 31) ^ self.key).to_le_bytes()[..self.len])
    }

    fn cid_len(&self) -> usize {
        self.len
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Local time for the sans-IO core: milliseconds since the driver started (monotonic).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock(tokio::time::Instant);

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock(tokio::time::Instant::now())
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    pub(crate) fn instant(&self, ms: u64) -> tokio::time::Instant {
        self.0 + std::time::Duration::from_millis(ms)
    }
}

/// Why a host could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostError {
    /// The session config is invalid.
    Config(phalanx_proto::ConfigError),
    /// The identity does not make a TLS configuration.
    Identity(IdentityError),
    /// The TLS configuration does not suit QUIC (no TLS 1.3 cipher suite QUIC can start with).
    Tls(quinn::crypto::rustls::NoInitialCipherSuite),
    /// The socket could not be bound.
    Bind(std::io::Error),
    /// No tokio runtime is running: call from inside one.
    NoRuntime,
    /// `local_player` was asked for but the session has no free seat.
    NoSeatForLocalPlayer,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Config(error) => write!(f, "invalid session config: {error}"),
            HostError::Identity(error) => error.fmt(f),
            HostError::Tls(error) => write!(f, "TLS configuration: {error}"),
            HostError::Bind(error) => write!(f, "cannot bind the socket: {error}"),
            HostError::NoRuntime => write!(f, "no tokio runtime is running"),
            HostError::NoSeatForLocalPlayer => write!(f, "no seat left for the host's player"),
        }
    }
}

impl std::error::Error for HostError {}

/// How the join's reliable stream failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum JoinStreamError {
    /// Sending the join request failed.
    Write(quinn::WriteError),
    /// The stream was closed before the request was finished.
    Closed(quinn::ClosedStream),
    /// Reading the host's reply failed (or it was longer than a join reply may be).
    Read(quinn::ReadToEndError),
}

impl fmt::Display for JoinStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinStreamError::Write(error) => write!(f, "sending the request: {error}"),
            JoinStreamError::Closed(error) => write!(f, "finishing the request: {error}"),
            JoinStreamError::Read(error) => write!(f, "reading the reply: {error}"),
        }
    }
}

impl std::error::Error for JoinStreamError {}

/// Why a client could not join.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The session config is invalid.
    Config(phalanx_proto::ConfigError),
    /// The TLS configuration could not be built.
    Tls(rustls::Error),
    /// The local socket could not be bound.
    Endpoint(std::io::Error),
    /// The connection could not be started (bad address or server name).
    Connect(quinn::ConnectError),
    /// The connection failed: unreachable host, certificate not accepted, or closed.
    Connection(quinn::ConnectionError),
    /// The join stream failed.
    Stream(JoinStreamError),
    /// No tokio runtime with IO and time is running: call from inside one (or use a
    /// [`Session`], which brings its own).
    NoRuntime,
    /// The host did not answer the join in time.
    Timeout,
    /// The host refused every connection attempt before its handshake until the join
    /// timeout: too many connections are waiting to join (or too many from this address;
    /// see [`Admission`]). `connect` already tried again at short intervals.
    HostBusy,
    /// The host refused the join, or its reply was unusable.
    Join(phalanx_proto::ClientJoinError),
    /// The host's certificate is not the pinned one: another host, or an impostor.
    WrongHost {
        /// The fingerprint the client pinned.
        expected: Fingerprint,
        /// The one the host presented.
        found: Fingerprint,
    },
    /// Over [`Transport::Udp`]: the handshake failed (a wrong pinned key names both keys).
    Udp(udp::UdpConnectError),
    /// Over [`Transport::Udp`]: the join's reliable message failed (the connection ended
    /// before the reply, or the reply was over the limit).
    UdpJoin(udp::UdpError),
    /// [`Transport::Udp`] needs [`HostVerification::UdpKey`], and only it takes that.
    VerificationForOtherTransport,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(error) => write!(f, "invalid session config: {error}"),
            ConnectError::Tls(error) => write!(f, "TLS configuration: {error}"),
            ConnectError::Endpoint(error) => write!(f, "cannot bind a local socket: {error}"),
            ConnectError::Connect(error) => write!(f, "cannot connect: {error}"),
            ConnectError::Connection(error) => write!(f, "connection failed: {error}"),
            ConnectError::Stream(error) => write!(f, "join stream failed: {error}"),
            ConnectError::NoRuntime => write!(f, "no tokio runtime is running"),
            ConnectError::Timeout => write!(f, "the host did not answer the join in time"),
            ConnectError::HostBusy => {
                write!(f, "the host is busy (too many connections waiting to join): retry soon")
            }
            ConnectError::WrongHost { expected, found } => write!(
                f,
                "the host's certificate fingerprint is {found}, not the pinned {expected}: \
                 another host (or an impostor) answers at that address"
            ),
            ConnectError::Join(error) => error.fmt(f),
            ConnectError::Udp(error) => error.fmt(f),
            ConnectError::UdpJoin(error) => write!(f, "join over UDP failed: {error}"),
            ConnectError::VerificationForOtherTransport => {
                f.write_str("Transport::Udp pins HostVerification::UdpKey, and only it takes one")
            }
        }
    }
}

impl std::error::Error for ConnectError {}

impl ConnectError {
    /// The host's refusal, if the host refused the join (as opposed to a network or setup
    /// failure): retrying the same join will not help.
    pub fn refusal(&self) -> Option<JoinRefusal> {
        match self {
            ConnectError::Join(phalanx_proto::ClientJoinError::Refused(refusal)) => Some(*refusal),
            _ => None,
        }
    }
}

/// Why an operation on a running session failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// The command did not encode.
    Codec(CodecError),
    /// The session refused the command (too large, over budget, not running).
    Submit(SubmitError),
    /// The session's driver has stopped (the session ended or was shut down).
    Closed,
    /// [`Host::end`] was refused (not started, or already ending).
    End(EndError),
    /// [`Host::remove`] was refused (nobody remote in that seat).
    Remove(RemoveError),
    /// Only a host does that (a [`Session`] of a client was asked to start or end the game).
    NotHost,
    /// The snapshot was not taken (not wanted, too large, stale).
    Snapshot(SnapshotError),
}

/// Why `try_next_turn` returned no turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoTurn {
    /// The next turn has not arrived, or its time on the playout schedule has not come.
    NotYet,
    /// The session is over and every turn was taken: none will come.
    Over,
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Codec(error) => error.fmt(f),
            SessionError::Submit(error) => error.fmt(f),
            SessionError::Closed => write!(f, "the session has ended"),
            SessionError::End(error) => write!(f, "cannot end the game: {error}"),
            SessionError::Remove(error) => write!(f, "cannot remove the player: {error}"),
            SessionError::NotHost => write!(f, "only a host can do that"),
            SessionError::Snapshot(error) => write!(f, "snapshot not taken: {error}"),
        }
    }
}

impl std::error::Error for SessionError {}

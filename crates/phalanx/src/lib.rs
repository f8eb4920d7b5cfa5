//! phalanx: deterministic-lockstep multiplayer for real-time strategy games, over QUIC or raw
//! UDP.
//!
//! This crate drives the sans-IO session of [`phalanx_proto`] over one of two transports:
//! QUIC ([`quic`], quinn with TLS 1.3) or raw UDP with a Noise handshake ([`udp`]). Turns and
//! commands travel in datagrams with phalanx's own acknowledgements, redundancy and timers;
//! the join travels on one reliable stream (or reliable message). A game holds one
//! [`Session`] whatever its role — a host (a listen server or a dedicated host) or a client —
//! and a host's lobby or operator holds its [`HostControl`]. [`Host`] and [`Client`] are the
//! same roles for async games. All are generic over the game's command type (any serde type;
//! postcard on the wire).
//!
//! ```no_run
//! # #[cfg(feature = "quic")]
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx::quic::{HostIdentity, HostVerification};
//! use phalanx::{Client, ClientOptions, Host, HostOptions};
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
//! Each end runs one driver task that owns its sans-IO endpoint: one loop for both ends and
//! both transports, differing only in where inputs come from and where datagrams go.
//!
//! # Cargo features
//!
//! - `quic` (default): the QUIC transport ([`quic`]); brings quinn, rustls and rcgen.
//! - `udp` (default): the raw-UDP transport ([`udp`]); brings snow (Noise).
//!
//! A game that ships one transport builds only it (`default-features = false, features =
//! ["udp"]`); at least one is needed.
#![forbid(unsafe_code)]

#[cfg(not(any(feature = "quic", feature = "udp")))]
compile_error!("phalanx needs a transport: enable the `quic` feature, the `udp` feature, or both");

mod admission;
mod client;
mod conn;
pub mod desync;
mod driver;
pub mod error;
mod event;
mod host;
#[cfg(feature = "udp")]
pub mod mesh;
mod pin;
#[cfg(feature = "quic")]
pub mod quic;
pub mod replay;
pub mod session;
mod signed;
pub mod stats;
mod trace;
#[cfg(feature = "udp")]
pub mod udp;
#[cfg(feature = "webtransport")]
pub mod web;

pub use client::{Client, ClientOptions, ClientTransport};
pub use conn::Transport;
pub use error::{ConnectError, HostError, SessionError};
pub use event::Event;
pub use host::{CommandRule, Host, HostControl, HostOptions, HostTransport};
pub use phalanx_proto as proto;
pub use phalanx_proto::speculate;
pub use phalanx_proto::{
    EndReason, JoinCode, PlayerId, Readmit, SessionConfig, Turn, TypedRecord, TypedTurn,
};
pub use pin::Pin;
pub use session::Session;

/// `N` unpredictable bytes from the OS (keys, connection-id salts). Failing to read OS
/// randomness is fatal.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("OS randomness is available");
    bytes
}

/// 32 bytes as 64 lower-case hex digits: fingerprints, certificate hashes, match keys.
pub(crate) fn hex32(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// 64 hex digits (surrounding whitespace ignored) as 32 bytes; `None` for anything else.
pub(crate) fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16).ok()?;
    }
    Some(bytes)
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

/// The README's examples, compiled as doc tests (its first game must build against the API).
#[cfg(all(doctest, feature = "quic"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

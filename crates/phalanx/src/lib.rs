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
pub mod desync;
mod driver;
pub mod error;
mod event;
mod host;
pub mod replay;
pub mod session;
pub mod stats;
mod tls;
mod trace;
mod transport;
pub mod udp;

pub use client::{Client, ClientOptions};
pub use conn::Transport;
pub use error::{ConnectError, HostError, SessionError};
pub use event::Event;
pub use host::{Host, HostControl, HostOptions};
pub use phalanx_proto as proto;
pub use phalanx_proto::{
    EndReason, PlayerId, Readmit, SessionConfig, Turn, TypedRecord, TypedTurn,
};
pub use session::Session;
pub use tls::{Fingerprint, HostIdentity, HostVerification};

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

/// The README's examples, compiled as doc tests (its first game must build against the API).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

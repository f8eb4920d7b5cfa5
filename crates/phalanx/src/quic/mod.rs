//! The QUIC transport (quinn, TLS 1.3 with ring): turns and commands in datagrams with
//! phalanx's own acknowledgements and redundancy, the join and uploads on streams. Built with
//! the `quic` cargo feature (on by default).
//!
//! A host listens with a [`HostConfig`] (its [`HostIdentity`]: a certificate whose
//! [`Fingerprint`] the lobby shows); a client connects with a [`ClientConfig`] that says how
//! it checks the host ([`HostVerification`], usually the pinned fingerprint). Both convert
//! into the session's options, so the common case reads
//! `HostOptions::new(identity, bind, tokens)` and
//! `ClientOptions::new(token, HostVerification::Pinned(fingerprint))`:
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use phalanx::quic::{HostIdentity, HostVerification};
//! use phalanx::{ClientOptions, HostOptions};
//!
//! let identity = HostIdentity::generate_self_signed("my-game")?;
//! let pin = HostVerification::Pinned(identity.fingerprint());
//! let host = HostOptions::new(identity, "0.0.0.0:7777".parse()?, vec![7]);
//! let client = ClientOptions::new(7, pin);
//! # let _ = (host, client); Ok(()) }
//! ```
//!
//! quinn is configured for games, not bulk transfer: one stream, small windows, bounded
//! datagram buffers, a fixed congestion window, QUIC's idle timeout just behind phalanx's own,
//! and **0-RTT off** (early data is replayable).

use std::sync::Arc;

pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod host;
mod tls;

pub use tls::{
    Fingerprint, FingerprintParseError, HostIdentity, HostVerification, IdentityError, ALPN,
};

/// A QUIC host's settings: its identity, and what simulations and restarts need.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostConfig {
    /// The certificate and key; clients pin its fingerprint.
    pub identity: HostIdentity,
    /// The stateless-reset key. Persist it: a restarted host that keeps it is noticed by its
    /// old clients in one round trip instead of an idle timeout. Default: `None` (a fresh
    /// random one).
    pub reset_key: Option<[u8; 32]>,
    /// The socket under the endpoint: `None` (the default) binds a real UDP socket on the
    /// host's address; phalanx-sim passes a simulated one.
    pub socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    /// Seeds quinn's own randomness (and connection ids), so a simulation's seed reproduces
    /// a run. Default: `None` (OS randomness), as real games want.
    pub seed: Option<[u8; 32]>,
}

impl HostConfig {
    /// A host with `identity` and the defaults.
    pub fn new(identity: HostIdentity) -> HostConfig {
        HostConfig { identity, reset_key: None, socket: None, seed: None }
    }
}

/// A QUIC client's settings: how it checks the host, and what simulations need.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// How the host's certificate is checked (usually the pinned fingerprint).
    pub verification: HostVerification,
    /// The name the host's certificate is checked against (for `Roots`). Default: `phalanx`.
    pub server_name: String,
    /// The socket under the endpoint: `None` (the default) binds an ephemeral UDP socket;
    /// phalanx-sim passes a simulated one.
    pub socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    /// Seeds quinn's own randomness (and connection ids), for reproducible simulations.
    /// Default: `None` (OS randomness).
    pub seed: Option<[u8; 32]>,
}

impl ClientConfig {
    /// A client that checks the host with `verification`, and the defaults.
    pub fn new(verification: HostVerification) -> ClientConfig {
        ClientConfig { verification, server_name: "phalanx".to_owned(), socket: None, seed: None }
    }
}

/// Seeds an endpoint's randomness and connection ids, for reproducible simulations.
pub(crate) fn seed_endpoint(
    config: &mut quinn::EndpointConfig,
    seed: Option<[u8; 32]>,
    cid_len: usize,
) {
    let key = match seed {
        Some(seed) => {
            config.rng_seed(Some(seed));
            u64::from_le_bytes(seed[..8].try_into().expect("eight bytes"))
        }
        // Unpredictable ids: a random key per endpoint.
        None => u64::from_le_bytes(crate::random_bytes::<8>()),
    };
    config.cid_generator(move || Box::new(SeededCids { next: key, key, len: cid_len }));
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

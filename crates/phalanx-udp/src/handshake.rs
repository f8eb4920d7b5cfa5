//! What the client and the host share: the Noise parameters, the packet types, the cookie MAC
//! and the handshake error.

use std::fmt;
use std::net::SocketAddr;

use blake2::digest::consts::U16;
use blake2::digest::{KeyInit, Mac};
use blake2::Blake2sMac;
use snow::{Builder, HandshakeState};

use crate::keys::{HostPublicKey, SeededResolver};

/// The Noise protocol: IK (the client knows the host's static key, as in WireGuard), X25519,
/// ChaCha20-Poly1305, BLAKE2s.
pub(crate) const NOISE: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
/// Mixed into the handshake hash: a peer speaking another version fails the handshake.
const PROLOGUE: &[u8] = b"phalanx-udp/1";

/// Packet type: an initiation without a cookie.
pub(crate) const INITIATION: u8 = 0x01;
/// Packet type: an initiation carrying a cookie MAC.
pub(crate) const INITIATION_WITH_COOKIE: u8 = 0x02;
/// Packet type: the host's cookie reply.
pub(crate) const COOKIE_REPLY: u8 = 0x03;
/// Packet type: the host's handshake response.
pub(crate) const RESPONSE: u8 = 0x04;

/// Bytes of a cookie and of a cookie MAC.
pub(crate) const COOKIE: usize = 16;
/// Bytes of the initiation echoed in a cookie reply (the start of the client's ephemeral key).
pub(crate) const ECHO: usize = 8;
/// Noise IK's first message without payload: ephemeral key, encrypted static key, tag.
pub(crate) const NOISE_MSG1: usize = 32 + 32 + 16 + 16;
/// Noise IK's second message without payload: ephemeral key, tag.
pub(crate) const NOISE_MSG2: usize = 32 + 16;

/// Why a handshake cannot go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// The host answered with another static key than the one pinned: the invite is stale or
    /// names another host. (The key in a cookie reply is not authenticated; see the crate docs.)
    WrongHostKey {
        /// The key the client pinned.
        pinned: HostPublicKey,
        /// The key the host said it has.
        host: HostPublicKey,
    },
    /// A handshake payload is over the size one packet carries.
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
        /// The largest payload this handshake message carries.
        max: usize,
    },
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::WrongHostKey { pinned, host } => write!(
                f,
                "the host's key is {host}, not the pinned {pinned}: the invite is for another host"
            ),
            HandshakeError::PayloadTooLarge { len, max } => {
                write!(f, "handshake payload of {len} bytes is over the {max} allowed")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

/// A Noise IK handshake state with randomness from `seed`. `remote` is the host's key on the
/// client (the initiator) and `None` on the host.
pub(crate) fn noise(
    local: &[u8; 32],
    remote: Option<&HostPublicKey>,
    seed: [u8; 32],
) -> HandshakeState {
    let params = NOISE.parse().expect("a valid Noise protocol name");
    let builder = Builder::with_resolver(params, Box::new(SeededResolver { seed }))
        .prologue(PROLOGUE)
        .and_then(|builder| builder.local_private_key(local))
        .expect("a 32-byte key and a short prologue are accepted");
    match remote {
        Some(remote) => builder
            .remote_public_key(&remote.0)
            .and_then(Builder::build_initiator)
            .expect("IK initiator with both keys set builds"),
        None => builder.build_responder().expect("IK responder with its key set builds"),
    }
}

/// The cookie MAC an initiation carries: a keyed BLAKE2s-128 under the cookie, over the packet
/// type and the Noise message. Binding the message means a cookie MAC seen on the wire cannot
/// be put on another initiation.
pub(crate) fn cookie_mac(cookie: &[u8; COOKIE], noise_msg1: &[u8]) -> [u8; COOKIE] {
    let mut mac =
        <Blake2sMac<U16> as KeyInit>::new_from_slice(cookie).expect("BLAKE2s takes a 16-byte key");
    mac.update(&[INITIATION_WITH_COOKIE]);
    mac.update(noise_msg1);
    mac.finalize().into_bytes().into()
}

/// The bytes of a source address that a cookie is bound to: family, IP, port.
pub(crate) fn address_bytes(addr: &SocketAddr) -> ([u8; 19], usize) {
    let mut bytes = [0u8; 19];
    let len = match addr {
        SocketAddr::V4(v4) => {
            bytes[0] = 4;
            bytes[1..5].copy_from_slice(&v4.ip().octets());
            bytes[5..7].copy_from_slice(&v4.port().to_be_bytes());
            7
        }
        SocketAddr::V6(v6) => {
            bytes[0] = 6;
            bytes[1..17].copy_from_slice(&v6.ip().octets());
            bytes[17..19].copy_from_slice(&v6.port().to_be_bytes());
            19
        }
    };
    (bytes, len)
}

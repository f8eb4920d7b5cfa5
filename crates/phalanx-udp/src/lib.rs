//! A sans-IO secure channel over raw UDP for phalanx: a Noise IK handshake behind stateless
//! cookies, then one AEAD packet per datagram with a replay window.
//!
//! The point of this transport (a diet for a 28.8 kbit/s modem) is that phalanx sends no packet it
//! did not ask for — QUIC adds ack-only packets and MTU probes — and spends as few header bytes
//! as it can. This crate is only the cryptography, sans-IO: bytes in, bytes out, time and
//! randomness passed in. It draws no OS randomness and reads no clock; the socket driver and
//! the session integration live elsewhere.
//!
//! # Handshake
//!
//! `Noise_IK_25519_ChaChaPoly_BLAKE2s` (the client knows the host's static key, as in
//! WireGuard; the prologue `phalanx-udp/1` binds the version):
//!
//! 1. The client sends an *initiation* ([`ClientHandshake::new`]).
//! 2. The host ([`Responder::handle`]) answers an initiation without a valid cookie with a
//!    *cookie reply*: a MAC of the source address under a secret that rotates every
//!    [`COOKIE_ROTATION_MS`], plus the host's static key. It stores nothing: a flood of
//!    initiations from spoofed addresses costs it one MAC each and no memory, and the reply
//!    is shorter than the initiation, so the host cannot be used as an amplifier.
//! 3. The client resends the same initiation with a MAC made with the cookie (proof that it
//!    receives packets at its source address). Only such an initiation is decrypted (an
//!    X25519 cost) and handed to the host as a [`JoinRequest`].
//! 4. The host [`JoinRequest::accept`]s with its payload: the client gets the *response* and
//!    both sides have a [`Channel`].
//!
//! The cookie reply carries the host's static public key so that a client with a stale pin
//! fails at once with [`HandshakeError::WrongHostKey`] instead of timing out. That key is not
//! authenticated (nothing in a stateless reply can be), and it is used for nothing but that
//! error: someone able to forge it could only make the join fail, which dropping the client's
//! packets does as well. To keep off-path forgers out, the reply echoes 8 bytes of the client's
//! ephemeral key, which only those who saw the initiation know.
//!
//! Randomness: [`HostKey::from_bytes`], [`ClientHandshake::new`] and [`Responder::new`] take 32
//! random bytes from the caller; snow gets its ephemeral keys from a BLAKE2s stream seeded from
//! them, through a custom resolver (snow is built without `getrandom`).
//!
//! # Wire format
//!
//! Sizes in bytes, without the IP and UDP headers (28 over IPv4, 48 over IPv6). `p` is the
//! payload's length.
//!
//! | packet | layout | size |
//! |---|---|---|
//! | initiation | `0x01` ‖ Noise msg 1 (ephemeral 32, static 32+16, payload p+16) | 97 + p |
//! | initiation with cookie | `0x02` ‖ cookie MAC 16 ‖ Noise msg 1 | 113 + p |
//! | cookie reply | `0x03` ‖ echo 8 ‖ cookie 16 ‖ host static key 32 | 57 |
//! | response | `0x04` ‖ Noise msg 2 (ephemeral 32, payload p+16) | 49 + p |
//! | data | `1ppppppp pppppppp` ‖ ciphertext p ‖ tag 16 | 18 + p |
//!
//! A data packet costs [`DATA_OVERHEAD`] = 18 bytes: 2 bytes of header (the top bit marks
//! data, 15 bits of packet number) and the 16-byte Poly1305 tag. QUIC's short header costs
//! 1 byte + the destination connection id (0–20; quinn uses 8 by default) + 1–4 bytes of
//! packet number + the 16-byte tag — 26 to 29 bytes with quinn's defaults — plus a frame
//! header (a DATAGRAM frame's type and length) inside. At 20 packets a second, each byte of
//! header is 160 bit/s, half a percent of a 28.8 kbit/s modem.
//!
//! The full 64-bit packet number is the AEAD nonce (separate keys per direction). The
//! receiver reconstructs it from the 15 bits on the wire and the highest number it delivered
//! (QUIC's rule, RFC 9000 A.3), which is right while the sender is less than 16,384 packets
//! ahead of that: over 13 minutes of total loss at 20 packets a second, long after the session
//! gives a peer up. There is no associated data: every header bit enters the nonce, so a
//! changed header fails authentication like a changed payload.
//!
//! Every packet is at most [`MAX_PACKET`] = 1200 bytes; longer datagrams are dropped unread.
//!
//! # Replay window
//!
//! [`Channel::open`] authenticates first, then checks a sliding bitmap of the last
//! [`REPLAY_WINDOW`] = 1024 packet numbers (RFC 6479, as WireGuard): each number is delivered at
//! most once, reordered packets within the window are delivered, older ones are dropped. Drops
//! are counted by reason in [`ChannelStats`].
//!
//! # Reliable messages
//!
//! The join and bulk data (snapshots, desync uploads) need what QUIC's streams give:
//! [`Stream`] cuts messages into segments, acknowledges them selectively, retransmits on an
//! RTT-based timeout and delivers whole messages in order, each once, with every buffer
//! bounded. Its packets start with [`stream::SEGMENT`] or [`stream::ACK`], so that a driver
//! can tell them from the session's own datagrams on the same channel.
//!
//! # Addresses
//!
//! The host demultiplexes by source address: the driver hands datagrams from an address with a
//! channel to that channel, and the rest to the [`Responder`]. Cookies are bound to the source
//! address, so a client whose NAT rebinds its port must join again (the driver's concern).
//!
//! A replayed initiation (valid cookie, same source address, within the cookie's lifetime) is
//! refused by remembering the ephemeral keys of accepted initiations ([`Responder::remembered`],
//! bounded). The host has no proof that the client holds the keys until a data packet from it
//! opens; the driver should treat a channel as confirmed only then.

#![forbid(unsafe_code)]

mod channel;
mod client;
mod handshake;
mod keys;
pub mod mesh;
pub mod mismatch;
mod responder;
pub mod stream;

pub use channel::{Channel, ChannelStats, Dropped, SealError, REPLAY_WINDOW};
pub use client::{ClientHandshake, Progress};
pub use handshake::HandshakeError;
pub use keys::{HostKey, HostPublicKey, KeyParseError};
pub use responder::{
    JoinRequest, Outcome, Rejected, Responder, ResponderStats, COOKIE_ROTATION_MS, REMEMBERED_MAX,
};
pub use stream::{Stream, StreamConfig};

/// The first byte of a channel payload as phalanx's drivers frame it: a session datagram
/// follows. (A [`Stream`]'s packets start with [`stream::SEGMENT`] or [`stream::ACK`].)
pub const KIND_DATAGRAM: u8 = 0x00;
/// The first byte of a channel payload as phalanx's drivers frame it: the sender closes the
/// connection; a little-endian `u32` close code follows.
pub const KIND_CLOSE: u8 = 0x03;

/// The largest datagram this crate makes or reads; anything longer is dropped unread.
pub const MAX_PACKET: usize = 1200;
/// Bytes of a data packet's header: the data bit and 15 bits of packet number.
pub const DATA_HEADER: usize = 2;
/// Bytes of the Poly1305 tag on every encrypted payload.
pub const TAG: usize = 16;
/// Bytes a data packet adds to its payload.
pub const DATA_OVERHEAD: usize = DATA_HEADER + TAG;
/// The largest payload [`Channel::seal`] takes.
pub const MAX_DATA_PAYLOAD: usize = MAX_PACKET - DATA_OVERHEAD;
/// Bytes an initiation adds to the client's payload (type and Noise message).
pub const INITIATION_OVERHEAD: usize = 1 + handshake::NOISE_MSG1;
/// Bytes an initiation with a cookie adds to the client's payload.
pub const INITIATION_WITH_COOKIE_OVERHEAD: usize = INITIATION_OVERHEAD + handshake::COOKIE;
/// The largest payload [`ClientHandshake::new`] takes.
pub const MAX_INITIATION_PAYLOAD: usize = MAX_PACKET - INITIATION_WITH_COOKIE_OVERHEAD;
/// Bytes a response adds to the host's payload.
pub const RESPONSE_OVERHEAD: usize = 1 + handshake::NOISE_MSG2;
/// The largest payload [`JoinRequest::accept`] takes.
pub const MAX_RESPONSE_PAYLOAD: usize = MAX_PACKET - RESPONSE_OVERHEAD;
/// Bytes of a cookie reply, whatever the initiation: always less than [`INITIATION_OVERHEAD`].
pub const COOKIE_REPLY_LEN: usize = 1 + handshake::ECHO + handshake::COOKIE + 32;

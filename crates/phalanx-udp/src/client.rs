//! The client's side of the handshake.

use std::fmt;

use snow::HandshakeState;
use subtle::ConstantTimeEq;

use crate::channel::Channel;
use crate::handshake::{
    cookie_mac, noise, HandshakeError, COOKIE, COOKIE_REPLY, ECHO, INITIATION,
    INITIATION_WITH_COOKIE, NOISE_MSG1, NOISE_MSG2, RESPONSE,
};
use crate::keys::{keyed_hash, HostKey, HostPublicKey};
use crate::{COOKIE_REPLY_LEN, MAX_INITIATION_PAYLOAD, MAX_PACKET};

/// What a packet from the host did to a [`ClientHandshake`].
#[derive(Debug)]
pub enum Progress {
    /// The host asked for a cookie: send this initiation (it carries the cookie) instead.
    /// [`ClientHandshake::packet`] returns it too, for retransmission.
    Resend(Vec<u8>),
    /// The handshake is done.
    Established {
        /// The channel to the host.
        channel: Channel,
        /// The host's handshake payload (its answer to the join).
        payload: Vec<u8>,
    },
    /// Not a packet for this handshake (garbage, forged, a duplicate, or after the end):
    /// nothing changed.
    Ignored,
}

/// A client's handshake with a host whose public key it pinned.
///
/// Sans-IO: send [`ClientHandshake::packet`] to the host (again on a retransmission timer the
/// caller runs) and pass every datagram from the host to [`ClientHandshake::handle`] until it
/// returns [`Progress::Established`] or an error.
pub struct ClientHandshake {
    pinned: HostPublicKey,
    /// `None` once established.
    noise: Option<HandshakeState>,
    /// The Noise initiation message; the same bytes are sent with and without a cookie, so
    /// the host's work depends only on which packet it answers.
    noise_msg1: Vec<u8>,
    packet: Vec<u8>,
}

impl fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("pinned", &self.pinned)
            .field("established", &self.noise.is_none())
            .finish_non_exhaustive()
    }
}

impl ClientHandshake {
    /// Starts a handshake with the host whose key is `pinned`, carrying `payload` (a join
    /// token, a name: encrypted to the host, at most [`MAX_INITIATION_PAYLOAD`] bytes).
    ///
    /// `random` must be 32 bytes from a cryptographic random source, fresh for every
    /// handshake: the client's static and ephemeral keys are derived from it. Returns the
    /// handshake and the first packet to send.
    pub fn new(
        pinned: HostPublicKey,
        payload: &[u8],
        random: [u8; 32],
    ) -> Result<(ClientHandshake, Vec<u8>), HandshakeError> {
        let identity = HostKey::from_bytes(keyed_hash(&random, &[b"client static"]));
        ClientHandshake::with_identity(pinned, &identity, payload, random)
    }

    /// [`ClientHandshake::new`] with a static key of our own rather than one made for this
    /// handshake: the host then learns who we are ([`JoinRequest::client_key`]) — what a
    /// peer of a match does, whose key the match's roster lists. `random` still seeds the
    /// ephemeral key and must be fresh.
    ///
    /// [`JoinRequest::client_key`]: crate::JoinRequest::client_key
    pub fn with_identity(
        pinned: HostPublicKey,
        identity: &HostKey,
        payload: &[u8],
        random: [u8; 32],
    ) -> Result<(ClientHandshake, Vec<u8>), HandshakeError> {
        if payload.len() > MAX_INITIATION_PAYLOAD {
            return Err(HandshakeError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_INITIATION_PAYLOAD,
            });
        }
        let seed = keyed_hash(&random, &[b"client ephemeral"]);
        let mut state = noise(identity.secret(), Some(&pinned), seed);
        let mut noise_msg1 = vec![0u8; NOISE_MSG1 + payload.len()];
        let len = state
            .write_message(payload, &mut noise_msg1)
            .expect("the buffer fits IK's first message and the payload");
        noise_msg1.truncate(len);
        let mut packet = Vec::with_capacity(1 + noise_msg1.len());
        packet.push(INITIATION);
        packet.extend_from_slice(&noise_msg1);
        let handshake =
            ClientHandshake { pinned, noise: Some(state), noise_msg1, packet: packet.clone() };
        Ok((handshake, packet))
    }

    /// The initiation to send now (or again): with the host's cookie once it sent one.
    pub fn packet(&self) -> &[u8] {
        &self.packet
    }

    /// The host key this handshake expects.
    pub fn pinned(&self) -> HostPublicKey {
        self.pinned
    }

    /// Takes one datagram from the host.
    ///
    /// A cookie reply naming another host key than the pinned one fails at once with
    /// [`HandshakeError::WrongHostKey`]; anything that is not a well-formed packet for this
    /// handshake is [`Progress::Ignored`].
    pub fn handle(&mut self, packet: &[u8]) -> Result<Progress, HandshakeError> {
        if self.noise.is_none() || packet.len() > MAX_PACKET {
            return Ok(Progress::Ignored);
        }
        match packet.first() {
            Some(&COOKIE_REPLY) if packet.len() == COOKIE_REPLY_LEN => self.on_cookie(packet),
            Some(&RESPONSE) if packet.len() > NOISE_MSG2 => Ok(self.on_response(&packet[1..])),
            _ => Ok(Progress::Ignored),
        }
    }

    fn on_cookie(&mut self, packet: &[u8]) -> Result<Progress, HandshakeError> {
        let echo = &packet[1..1 + ECHO];
        if !bool::from(echo.ct_eq(&self.noise_msg1[..ECHO])) {
            return Ok(Progress::Ignored);
        }
        let mut cookie = [0u8; COOKIE];
        cookie.copy_from_slice(&packet[1 + ECHO..1 + ECHO + COOKIE]);
        let mut host = [0u8; 32];
        host.copy_from_slice(&packet[1 + ECHO + COOKIE..]);
        let host = HostPublicKey(host);
        if host != self.pinned {
            return Err(HandshakeError::WrongHostKey { pinned: self.pinned, host });
        }
        let mac = cookie_mac(&cookie, &self.noise_msg1);
        self.packet.clear();
        self.packet.push(INITIATION_WITH_COOKIE);
        self.packet.extend_from_slice(&mac);
        self.packet.extend_from_slice(&self.noise_msg1);
        Ok(Progress::Resend(self.packet.clone()))
    }

    fn on_response(&mut self, noise_msg2: &[u8]) -> Progress {
        let Some(state) = self.noise.as_mut() else { return Progress::Ignored };
        let mut payload = vec![0u8; noise_msg2.len()];
        // A failed read leaves snow's state as it was: a forged response changes nothing.
        let Ok(len) = state.read_message(noise_msg2, &mut payload) else {
            return Progress::Ignored;
        };
        payload.truncate(len);
        let Some(state) = self.noise.take() else { return Progress::Ignored };
        match state.into_stateless_transport_mode() {
            Ok(transport) => Progress::Established { channel: Channel::new(transport), payload },
            Err(_) => Progress::Ignored,
        }
    }
}

//! The host's side of the handshake: stateless cookies, then Noise IK.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::net::SocketAddr;

use snow::HandshakeState;
use subtle::ConstantTimeEq;

use crate::channel::Channel;
use crate::handshake::{
    address_bytes, cookie_mac, noise, HandshakeError, COOKIE, COOKIE_REPLY, ECHO, INITIATION,
    INITIATION_WITH_COOKIE, NOISE_MSG1, NOISE_MSG2, RESPONSE,
};
use crate::keys::{keyed_hash, HostKey, HostPublicKey};
use crate::{COOKIE_REPLY_LEN, MAX_PACKET, MAX_RESPONSE_PAYLOAD};

/// How often the cookie secret changes. A cookie is accepted during the period it was made in
/// and the next one: for two to four minutes.
pub const COOKIE_ROTATION_MS: u64 = 120_000;
/// At most this many accepted initiations are remembered to refuse their replay.
pub const REMEMBERED_MAX: usize = 4096;

/// Why [`Responder::handle`] dropped a packet. Each is also counted in [`ResponderStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Empty, too short for its type, or over [`MAX_PACKET`] bytes.
    Malformed,
    /// The cookie was valid but the Noise message did not decrypt: sent to another host key,
    /// or corrupted.
    Undecryptable,
    /// The same initiation was already accepted (a replay within the cookie's lifetime).
    Replayed,
    /// Not a handshake packet for the host (data, a cookie reply or a response); the caller
    /// routes data from known peers to their [`Channel`] before calling the responder.
    NotHandshake,
}

/// What the host does with a datagram from an address that has no channel yet.
#[derive(Debug)]
pub enum Outcome {
    /// Send these bytes back to the source address: a cookie reply. Never longer than the
    /// datagram it answers.
    Reply(Vec<u8>),
    /// A client with a valid cookie and the right host key asks to join.
    Join(JoinRequest),
    /// Nothing to send.
    Dropped(Rejected),
}

/// What a responder answered and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStats {
    /// Cookie replies sent (to initiations with no cookie or an invalid one).
    pub cookie_replies: u64,
    /// Initiations whose cookie MAC was wrong or expired (each also got a cookie reply).
    pub bad_cookies: u64,
    /// Initiations decrypted and handed on as [`Outcome::Join`].
    pub joins: u64,
    /// Dropped as [`Rejected::Malformed`].
    pub malformed: u64,
    /// Dropped as [`Rejected::Undecryptable`].
    pub undecryptable: u64,
    /// Dropped as [`Rejected::Replayed`].
    pub replayed: u64,
    /// Dropped as [`Rejected::NotHandshake`].
    pub not_handshake: u64,
}

/// The host's handshake endpoint: answers initiations from any address.
///
/// It keeps no state per address: an initiation without a valid cookie gets a cookie reply
/// computed from the source address and a rotating secret, and nothing is stored. Only
/// initiations with a valid cookie are decrypted; their ephemeral keys are remembered (at most
/// [`REMEMBERED_MAX`], for at most two cookie periods) to refuse replays:
/// [`Responder::remembered`] counts them.
pub struct Responder {
    key: HostKey,
    /// Cookie secrets and ephemeral seeds are derived from this.
    random: [u8; 32],
    /// Noise responders made so far: numbers their ephemeral seeds.
    made: u64,
    /// Ephemeral keys of accepted initiations, oldest first, with when they were accepted.
    recent: VecDeque<(u64, [u8; 32])>,
    recent_set: BTreeSet<[u8; 32]>,
    stats: ResponderStats,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("key", &self.key)
            .field("remembered", &self.recent.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Responder {
    /// A responder for the host `key`. `random` must be 32 bytes from a cryptographic random
    /// source, fresh for every responder: the cookie secrets and the host's ephemeral keys are
    /// derived from it (a host restarted with the same bytes would reuse ephemeral keys).
    pub fn new(key: HostKey, random: [u8; 32]) -> Responder {
        Responder {
            key,
            random,
            made: 0,
            recent: VecDeque::new(),
            recent_set: BTreeSet::new(),
            stats: ResponderStats::default(),
        }
    }

    /// The host's public key, which clients pin.
    pub fn public(&self) -> HostPublicKey {
        self.key.public()
    }

    /// What to do with `packet` from `from` at `now_ms` (any monotonic milliseconds; it only
    /// selects the cookie secret). Never panics, whatever the bytes.
    pub fn handle(&mut self, from: SocketAddr, packet: &[u8], now_ms: u64) -> Outcome {
        self.forget_before(now_ms.saturating_sub(2 * COOKIE_ROTATION_MS));
        let outcome = self.classify(from, packet, now_ms);
        let counter = match &outcome {
            Outcome::Reply(_) => &mut self.stats.cookie_replies,
            Outcome::Join(_) => &mut self.stats.joins,
            Outcome::Dropped(Rejected::Malformed) => &mut self.stats.malformed,
            Outcome::Dropped(Rejected::Undecryptable) => &mut self.stats.undecryptable,
            Outcome::Dropped(Rejected::Replayed) => &mut self.stats.replayed,
            Outcome::Dropped(Rejected::NotHandshake) => &mut self.stats.not_handshake,
        };
        *counter += 1;
        outcome
    }

    fn classify(&mut self, from: SocketAddr, packet: &[u8], now_ms: u64) -> Outcome {
        if packet.len() > MAX_PACKET {
            return Outcome::Dropped(Rejected::Malformed);
        }
        match packet.first() {
            Some(&INITIATION) if packet.len() > NOISE_MSG1 => {
                Outcome::Reply(self.cookie_reply(&from, &packet[1..], now_ms))
            }
            Some(&INITIATION_WITH_COOKIE) if packet.len() >= 1 + COOKIE + NOISE_MSG1 => {
                let (mac, noise_msg1) = packet[1..].split_at(COOKIE);
                if !self.cookie_valid(&from, mac, noise_msg1, now_ms) {
                    self.stats.bad_cookies += 1;
                    return Outcome::Reply(self.cookie_reply(&from, noise_msg1, now_ms));
                }
                self.initiation(from, noise_msg1, now_ms)
            }
            Some(&(INITIATION | INITIATION_WITH_COOKIE)) | None => {
                Outcome::Dropped(Rejected::Malformed)
            }
            Some(_) => Outcome::Dropped(Rejected::NotHandshake),
        }
    }

    /// The cookie for `from` in the cookie period `epoch`: a keyed BLAKE2s of the address under
    /// that period's secret, truncated to 16 bytes.
    fn cookie(&self, from: &SocketAddr, epoch: u64) -> [u8; COOKIE] {
        let secret = keyed_hash(&self.random, &[b"cookie secret", &epoch.to_le_bytes()]);
        let (address, len) = address_bytes(from);
        let mut cookie = [0u8; COOKIE];
        cookie.copy_from_slice(&keyed_hash(&secret, &[&address[..len]])[..COOKIE]);
        cookie
    }

    /// `type ‖ echo (8) ‖ cookie (16) ‖ host static key (32)`: 57 bytes, shorter than any
    /// initiation (at least 97).
    fn cookie_reply(&self, from: &SocketAddr, noise_msg1: &[u8], now_ms: u64) -> Vec<u8> {
        let mut reply = Vec::with_capacity(COOKIE_REPLY_LEN);
        reply.push(COOKIE_REPLY);
        reply.extend_from_slice(&noise_msg1[..ECHO]);
        reply.extend_from_slice(&self.cookie(from, now_ms / COOKIE_ROTATION_MS));
        reply.extend_from_slice(&self.key.public().0);
        reply
    }

    /// Whether `mac` was made with this period's or the previous period's cookie for `from`.
    fn cookie_valid(&self, from: &SocketAddr, mac: &[u8], noise_msg1: &[u8], now_ms: u64) -> bool {
        let epoch = now_ms / COOKIE_ROTATION_MS;
        let previous = epoch.checked_sub(1);
        [Some(epoch), previous].into_iter().flatten().any(|epoch| {
            let expected = cookie_mac(&self.cookie(from, epoch), noise_msg1);
            bool::from(expected.ct_eq(mac))
        })
    }

    fn initiation(&mut self, from: SocketAddr, noise_msg1: &[u8], now_ms: u64) -> Outcome {
        let mut ephemeral = [0u8; 32];
        ephemeral.copy_from_slice(&noise_msg1[..32]);
        if self.recent_set.contains(&ephemeral) {
            return Outcome::Dropped(Rejected::Replayed);
        }
        let seed = keyed_hash(&self.random, &[b"host ephemeral", &self.made.to_le_bytes()]);
        self.made += 1;
        let mut state = noise(self.key.secret(), None, seed);
        let mut payload = vec![0u8; noise_msg1.len()];
        let Ok(len) = state.read_message(noise_msg1, &mut payload) else {
            return Outcome::Dropped(Rejected::Undecryptable);
        };
        payload.truncate(len);
        let Some(client) = state.get_remote_static().and_then(|key| <[u8; 32]>::try_from(key).ok())
        else {
            return Outcome::Dropped(Rejected::Undecryptable);
        };
        self.remember(now_ms, ephemeral);
        Outcome::Join(JoinRequest {
            from,
            state: Box::new(state),
            payload,
            client: HostPublicKey(client),
        })
    }

    fn remember(&mut self, now_ms: u64, ephemeral: [u8; 32]) {
        if self.recent.len() >= REMEMBERED_MAX {
            if let Some((_, oldest)) = self.recent.pop_front() {
                self.recent_set.remove(&oldest);
            }
        }
        self.recent.push_back((now_ms, ephemeral));
        self.recent_set.insert(ephemeral);
    }

    /// Forgets initiations accepted before `cutoff_ms`: their cookies have expired, so a
    /// replay of them fails the cookie check anyway.
    fn forget_before(&mut self, cutoff_ms: u64) {
        while let Some(&(at, ephemeral)) = self.recent.front() {
            if at >= cutoff_ms {
                break;
            }
            self.recent.pop_front();
            self.recent_set.remove(&ephemeral);
        }
    }

    /// How many accepted initiations are remembered to refuse their replay: the only state the
    /// responder grows, and only for initiations with a valid cookie that decrypted. Bounded by
    /// [`REMEMBERED_MAX`]; each entry is forgotten after two cookie periods.
    pub fn remembered(&self) -> usize {
        self.recent.len()
    }

    /// What this responder answered and dropped.
    pub fn stats(&self) -> ResponderStats {
        self.stats
    }
}

/// A decrypted initiation: who asks, with what payload. The host decides, then
/// [`JoinRequest::accept`]s it (or drops it: nothing is sent, and the client times out).
pub struct JoinRequest {
    from: SocketAddr,
    /// Boxed: snow's state is some 900 bytes.
    state: Box<HandshakeState>,
    payload: Vec<u8>,
    client: HostPublicKey,
}

impl fmt::Debug for JoinRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinRequest")
            .field("from", &self.from)
            .field("payload_len", &self.payload.len())
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl JoinRequest {
    /// The source address of the initiation: the host demultiplexes channels by it.
    pub fn from(&self) -> SocketAddr {
        self.from
    }

    /// The client's handshake payload (its join token and the like), authenticated.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The client's static key for this join (fresh per [`crate::ClientHandshake`]).
    pub fn client_key(&self) -> HostPublicKey {
        self.client
    }

    /// Answers the client with `payload` (at most [`MAX_RESPONSE_PAYLOAD`] bytes, encrypted to
    /// it): the channel to the client and the response packet to send to [`JoinRequest::from`].
    ///
    /// The host has no proof yet that the client holds the keys (a replayed initiation from a
    /// spoofed address would get this far within the cookie's lifetime if it were not
    /// remembered): treat the channel as confirmed once [`Channel::open`] delivers a packet.
    pub fn accept(mut self, payload: &[u8]) -> Result<(Channel, Vec<u8>), HandshakeError> {
        if payload.len() > MAX_RESPONSE_PAYLOAD {
            return Err(HandshakeError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_RESPONSE_PAYLOAD,
            });
        }
        let mut packet = vec![0u8; 1 + NOISE_MSG2 + payload.len()];
        packet[0] = RESPONSE;
        let len = self
            .state
            .write_message(payload, &mut packet[1..])
            .expect("the buffer fits IK's second message and the payload");
        packet.truncate(1 + len);
        let transport =
            (*self.state).into_stateless_transport_mode().expect("IK is done after two messages");
        Ok((Channel::new(transport), packet))
    }
}

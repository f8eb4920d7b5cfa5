//! The links of a peer-to-peer match: a Noise channel to every other member, keyed by the
//! match's roster, opened through NATs by punching holes from both ends.
//!
//! Every member has a static key the roster lists. For each pair the lower player initiates
//! a Noise IK handshake with its own roster key ([`ClientHandshake::with_identity`]) to every
//! address the roster gives for the higher, and the higher sends *punch* packets to every
//! address of the lower's meanwhile, so that each NAT has a mapping for the other before the
//! handshake arrives. The higher accepts an initiation only from a key the roster lists for
//! the player the initiation names, for this match: a member cannot speak for another, and a
//! stranger cannot join. Once open, the channel is bound to the address the other end spoke
//! from; packets from anywhere else are dropped unread.
//!
//! ```text
//! punch:      0x06 match_id:u64le player:u8          (10 bytes, unauthenticated, ignored)
//! initiation payload: match_id:u64le player:u8        (inside the Noise message)
//! ```
//!
//! Sans-IO like the rest of the crate: datagrams and the time in, datagrams out.

mod rendezvous;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::channel::Channel;
use crate::client::{ClientHandshake, Progress};
use crate::handshake::{COOKIE_REPLY, INITIATION, INITIATION_WITH_COOKIE, RESPONSE};
use crate::keys::{keyed_hash, HostKey, HostPublicKey};
use crate::responder::{Outcome, Responder};

pub use rendezvous::{
    Rendezvous, RendezvousStats, ADDRS, HELLO, MATCHES_MAX, MATCH_IDLE_MS, RELAY, RELAYED,
};

/// The first byte of a punch packet.
pub const PUNCH: u8 = 0x06;
/// A link not open this long after the start goes through the rendezvous, if there is one
/// (ms).
pub const RELAY_AFTER_MS: u64 = 3_000;
/// A member says hello to the rendezvous this often until it knows every member's address
/// (ms), then every [`HELLO_KEEP_MS`] (its NAT must keep the rendezvous's mapping open).
pub const HELLO_MS: u64 = 500;
/// See [`HELLO_MS`].
pub const HELLO_KEEP_MS: u64 = 5_000;
/// The most addresses kept for a member (the roster's, and those punches came from).
pub const ADDRS_MAX: usize = 6;
/// A handshake or punch is sent again this often while a link is not open (ms).
pub const RETRY_MS: u64 = 100;
/// A handshake not done after this many sends is started afresh (new ephemeral key): its
/// response may have been lost after the other end accepted, and the other end refuses the
/// same initiation twice.
pub const FRESH_AFTER: u32 = 8;

/// One member of the match, as the roster gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its player number in the match.
    pub player: u8,
    /// Its static key.
    pub key: HostPublicKey,
    /// Where it may be reached: its own address, the one its NAT showed the rendezvous...
    pub addrs: Vec<SocketAddr>,
}

/// Why [`Links::send`] sent nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// No member of the match has this player number.
    Unknown,
    /// The link to it is not open yet.
    NotOpen,
    /// The payload is too large for one packet.
    TooLarge,
}

/// One link's state, as [`Links::links`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// The other member.
    pub player: u8,
    /// The address the channel is bound to, once open.
    pub addr: Option<SocketAddr>,
    /// Whether a packet from it has opened on the channel (it holds the keys).
    pub confirmed: bool,
    /// Handshakes and punches sent so far.
    pub attempts: u32,
    /// Whether it goes through the rendezvous (the pair could not punch through).
    pub relayed: bool,
}

struct MemberLink {
    member: Member,
    channel: Option<Channel>,
    addr: Option<SocketAddr>,
    confirmed: bool,
    handshake: Option<ClientHandshake>,
    next_try_ms: u64,
    attempts: u32,
    relayed: bool,
}

/// Counters of a [`Links`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinksStats {
    /// Packets dropped: from no member's address, not for this match, failed to open.
    pub dropped: u64,
    /// Initiations refused: a key or player the roster does not match, another match.
    pub refused: u64,
    /// Payloads not sent because the link was not open.
    pub not_open: u64,
    /// Packets sent through the rendezvous.
    pub relayed: u64,
}

/// Our end of every link of the match. See the [module docs](self).
pub struct Links {
    me: u8,
    match_id: u64,
    identity: HostKey,
    responder: Responder,
    random: [u8; 32],
    made: u64,
    links: Vec<MemberLink>,
    out: VecDeque<(SocketAddr, Vec<u8>)>,
    stats: LinksStats,
    rendezvous: Option<SocketAddr>,
    hello_next_ms: u64,
    started_ms: Option<u64>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("me", &self.me)
            .field("match_id", &self.match_id)
            .finish_non_exhaustive()
    }
}

impl Links {
    /// Our links in match `match_id`: we are `me`, with the roster key `identity`; `members`
    /// are the others (an entry for `me` is skipped). `random`: 32 bytes from a
    /// cryptographic source, fresh for every match. Call [`handle_timeout`](Self::handle_timeout)
    /// at once to start.
    pub fn new(
        me: u8,
        identity: HostKey,
        members: Vec<Member>,
        match_id: u64,
        random: [u8; 32],
    ) -> Links {
        let responder_random = keyed_hash(&random, &[b"mesh responder"]);
        let responder = Responder::new(identity.clone(), responder_random);
        let mut links: Vec<MemberLink> = members
            .into_iter()
            .filter(|member| member.player != me)
            .map(|member| MemberLink {
                member,
                channel: None,
                addr: None,
                confirmed: false,
                handshake: None,
                next_try_ms: 0,
                attempts: 0,
                relayed: false,
            })
            .collect();
        links.sort_by_key(|link| link.member.player);
        links.dedup_by_key(|link| link.member.player);
        Links {
            me,
            match_id,
            identity,
            responder,
            random,
            made: 0,
            links,
            out: VecDeque::new(),
            stats: LinksStats::default(),
            rendezvous: None,
            hello_next_ms: 0,
            started_ms: None,
        }
    }

    /// Meets the others through the rendezvous at `addr` ([`Rendezvous`]): says hello to it,
    /// learns every member's outside address from it, and sends through it to a member whose
    /// link is not open [`RELAY_AFTER_MS`] after the start.
    pub fn with_rendezvous(mut self, addr: SocketAddr) -> Links {
        self.rendezvous = Some(addr);
        self
    }

    fn index(&self, player: u8) -> Option<usize> {
        self.links.binary_search_by_key(&player, |link| link.member.player).ok()
    }

    /// Whether the link to `player` is open.
    pub fn is_open(&self, player: u8) -> bool {
        self.index(player).is_some_and(|i| self.links[i].channel.is_some())
    }

    /// Every link's state, ascending by player.
    pub fn links(&self) -> Vec<LinkInfo> {
        self.links
            .iter()
            .map(|link| LinkInfo {
                player: link.member.player,
                addr: link.addr,
                confirmed: link.confirmed,
                attempts: link.attempts,
                relayed: link.relayed,
            })
            .collect()
    }

    /// The counters.
    pub fn stats(&self) -> LinksStats {
        self.stats
    }

    /// Seals `payload` for `player` and queues it.
    pub fn send(&mut self, player: u8, payload: &[u8]) -> Result<(), LinkError> {
        let index = self.index(player).ok_or(LinkError::Unknown)?;
        let link = &mut self.links[index];
        let (Some(channel), Some(addr)) = (link.channel.as_mut(), link.addr) else {
            self.stats.not_open += 1;
            return Err(LinkError::NotOpen);
        };
        let packet = channel.seal(payload).map_err(|_| LinkError::TooLarge)?;
        self.out.push_back((addr, packet));
        Ok(())
    }

    /// The next packet to put on the wire.
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        let (dest, packet) = self.out.pop_front()?;
        match (relayed_player(dest), self.rendezvous) {
            (Some(player), Some(rendezvous)) => {
                self.stats.relayed += 1;
                Some((rendezvous, rendezvous::packet(RELAY, self.match_id, player, &packet)))
            }
            _ => Some((dest, packet)),
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) has work: the next handshake or punch.
    pub fn poll_timeout(&self) -> Option<u64> {
        let links = self.links.iter().filter(|link| link.channel.is_none()).map(|l| l.next_try_ms);
        let hello = self.rendezvous.map(|_| self.hello_next_ms);
        links.chain(hello).min()
    }

    /// Sends the handshakes and punches that are due.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let started = *self.started_ms.get_or_insert(now_ms);
        if let Some(rendezvous) = self.rendezvous.filter(|_| now_ms >= self.hello_next_ms) {
            let hello = rendezvous::packet(HELLO, self.match_id, self.me, &[]);
            self.out.push_back((rendezvous, hello));
            let known = self.links.iter().all(|link| !link.member.addrs.is_empty());
            self.hello_next_ms = now_ms + if known { HELLO_KEEP_MS } else { HELLO_MS };
        }
        for link in &mut self.links {
            let stuck = link.channel.is_none() && now_ms >= started + RELAY_AFTER_MS;
            if stuck && !link.relayed && self.rendezvous.is_some() {
                // The pair cannot punch through: talk through the rendezvous, afresh.
                link.relayed = true;
                link.handshake = None;
                link.next_try_ms = now_ms;
            }
        }
        for index in 0..self.links.len() {
            let link = &self.links[index];
            if link.channel.is_some() || link.next_try_ms > now_ms {
                continue;
            }
            let initiate = link.member.player > self.me;
            if initiate && link.attempts > 0 && link.attempts.is_multiple_of(FRESH_AFTER) {
                self.links[index].handshake = None;
            }
            let packet = if initiate { self.initiation(index) } else { self.punch() };
            let link = &mut self.links[index];
            if link.relayed {
                self.out.push_back((relay_addr(link.member.player), packet.clone()));
            }
            for &addr in &link.member.addrs {
                self.out.push_back((addr, packet.clone()));
            }
            link.attempts += 1;
            link.next_try_ms = now_ms + RETRY_MS;
        }
    }

    fn punch(&self) -> Vec<u8> {
        let mut packet = Vec::with_capacity(10);
        packet.push(PUNCH);
        packet.extend_from_slice(&self.match_id.to_le_bytes());
        packet.push(self.me);
        packet
    }

    /// The initiation for `index`'s member: the one in progress, or a new one.
    fn initiation(&mut self, index: usize) -> Vec<u8> {
        if let Some(handshake) = &self.links[index].handshake {
            return handshake.packet().to_vec();
        }
        let random = keyed_hash(&self.random, &[b"mesh initiation", &self.made.to_le_bytes()]);
        self.made += 1;
        let mut payload = self.match_id.to_le_bytes().to_vec();
        payload.push(self.me);
        let key = self.links[index].member.key;
        match ClientHandshake::with_identity(key, &self.identity, &payload, random) {
            Ok((handshake, packet)) => {
                self.links[index].handshake = Some(handshake);
                packet
            }
            Err(_) => Vec::new(),
        }
    }

    /// A packet from `from`: a member's payload when it opens on its channel; handshakes and
    /// punches are handled here. Never panics, whatever the bytes.
    pub fn handle(
        &mut self,
        now_ms: u64,
        from: SocketAddr,
        packet: &[u8],
    ) -> Option<(u8, Vec<u8>)> {
        if Some(from) == self.rendezvous {
            return self.rendezvous_in(now_ms, packet);
        }
        match packet.first() {
            Some(byte) if byte & 0x80 != 0 => self.data(from, packet),
            Some(&(INITIATION | INITIATION_WITH_COOKIE)) => {
                self.initiation_in(now_ms, from, packet);
                None
            }
            Some(&(COOKIE_REPLY | RESPONSE)) => {
                self.answer_in(from, packet);
                None
            }
            Some(&PUNCH) => {
                self.punch_in(from, packet);
                None
            }
            _ => {
                self.stats.dropped += 1;
                None
            }
        }
    }

    /// A punch names its sender: where it came from is where that member's NAT lets us in
    /// (a symmetric NAT's port toward us is not the one the rendezvous saw). Kept as one more
    /// address to try, at most [`ADDRS_MAX`] a member; the handshake still decides who it is.
    fn punch_in(&mut self, from: SocketAddr, packet: &[u8]) {
        if packet.len() != 10 || packet[1..9] != self.match_id.to_le_bytes() {
            self.stats.dropped += 1;
            return;
        }
        if relayed_player(from).is_none() {
            self.add_addr(packet[9], from);
        }
    }

    /// The rendezvous's list of addresses, or a packet another member sent through it.
    fn rendezvous_in(&mut self, now_ms: u64, packet: &[u8]) -> Option<(u8, Vec<u8>)> {
        match (packet.first(), rendezvous::header(packet)) {
            (Some(&ADDRS), _) => {
                match rendezvous::parse_addrs(packet).filter(|(id, _)| *id == self.match_id) {
                    Some((_, list)) => {
                        list.into_iter().for_each(|(p, addr)| self.add_addr(p, addr))
                    }
                    None => self.stats.dropped += 1,
                }
                None
            }
            (Some(&RELAYED), Some((id, from, inner))) if id == self.match_id => {
                // What the rendezvous forwards is another member's own packet: never one of
                // the rendezvous's kinds.
                match inner.first() {
                    Some(&(ADDRS | RELAYED | HELLO | RELAY)) | None => None,
                    _ => self.handle(now_ms, relay_addr(from), inner),
                }
            }
            _ => {
                self.stats.dropped += 1;
                None
            }
        }
    }

    /// One more address to try for `player`'s member, while its link is not open.
    fn add_addr(&mut self, player: u8, addr: SocketAddr) {
        let Some(index) = self.index(player) else { return };
        let link = &mut self.links[index];
        if link.channel.is_none() && !link.member.addrs.contains(&addr) {
            if link.member.addrs.len() >= ADDRS_MAX {
                link.member.addrs.remove(1.min(link.member.addrs.len() - 1));
            }
            link.member.addrs.push(addr);
            link.next_try_ms = 0;
        }
    }

    fn data(&mut self, from: SocketAddr, packet: &[u8]) -> Option<(u8, Vec<u8>)> {
        let Some(link) = self.links.iter_mut().find(|link| link.addr == Some(from)) else {
            self.stats.dropped += 1;
            return None;
        };
        let channel = link.channel.as_mut()?;
        match channel.open(packet) {
            Ok(payload) => {
                link.confirmed = true;
                Some((link.member.player, payload))
            }
            Err(_) => {
                self.stats.dropped += 1;
                None
            }
        }
    }

    fn initiation_in(&mut self, now_ms: u64, from: SocketAddr, packet: &[u8]) {
        match self.responder.handle(from, packet, now_ms) {
            Outcome::Reply(reply) => self.out.push_back((from, reply)),
            Outcome::Join(request) => {
                let payload = request.payload();
                let claimed = (payload.len() == 9).then(|| {
                    let mut id = [0u8; 8];
                    id.copy_from_slice(&payload[..8]);
                    (u64::from_le_bytes(id), payload[8])
                });
                let index = claimed.and_then(|(id, player)| {
                    (id == self.match_id && player < self.me).then(|| self.index(player)).flatten()
                });
                let Some(index) =
                    index.filter(|&i| self.links[i].member.key == request.client_key())
                else {
                    self.stats.refused += 1;
                    return;
                };
                if let Ok((channel, response)) = request.accept(&[]) {
                    let link = &mut self.links[index];
                    link.channel = Some(channel);
                    link.addr = Some(from);
                    link.confirmed = false;
                    self.out.push_back((from, response));
                }
            }
            Outcome::Dropped(_) => self.stats.dropped += 1,
        }
    }

    fn answer_in(&mut self, from: SocketAddr, packet: &[u8]) {
        for link in self.links.iter_mut().filter(|link| link.channel.is_none()) {
            let Some(handshake) = link.handshake.as_mut() else { continue };
            match handshake.handle(packet) {
                Ok(Progress::Resend(again)) => {
                    self.out.push_back((from, again));
                    return;
                }
                Ok(Progress::Established { channel, .. }) => {
                    link.channel = Some(channel);
                    link.addr = Some(from);
                    link.handshake = None;
                    return;
                }
                Ok(Progress::Ignored) | Err(_) => {}
            }
        }
        self.stats.dropped += 1;
    }
}

/// The stand-in address of `player`'s member while its packets go through the rendezvous:
/// `[fd70::<player>]:1`, a unique-local address no packet on the wire comes from.
fn relay_addr(player: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd70, 0, 0, 0, 0, 0, 0, u16::from(player))), 1)
}

/// The player whose stand-in address `addr` is.
fn relayed_player(addr: SocketAddr) -> Option<u8> {
    match addr.ip() {
        IpAddr::V6(ip) if addr.port() == 1 && ip.segments()[..7] == [0xfd70, 0, 0, 0, 0, 0, 0] => {
            u8::try_from(ip.segments()[7]).ok()
        }
        _ => None,
    }
}

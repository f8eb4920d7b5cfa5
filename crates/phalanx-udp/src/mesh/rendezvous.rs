//! The rendezvous: where the members of a match learn each other's outside addresses, and
//! through which a pair that cannot punch through its NATs talks.
//!
//! ```text
//! hello:   0x09 match_id:u64le player:u8                     member → rendezvous
//! addrs:   0x0a match_id:u64le n {player:u8 addr}*n          rendezvous → member
//!          (addr: 4 ip ‖ port:u16be, or 6 ip:16 ‖ port:u16be)
//! relay:   0x07 match_id:u64le to:u8 packet                  member → rendezvous
//! relayed: 0x08 match_id:u64le from:u8 packet                rendezvous → member
//! ```
//!
//! A member says hello every so often; the rendezvous keeps the address each hello came from
//! (its NAT's outside address, as a peer elsewhere will see it, unless the NAT is symmetric)
//! and answers with every address it holds for the match. It forwards a relay packet only
//! between members of one match, naming the sender by the address the packet came from —
//! never by anything in it. What it forwards is the members' own Noise packets: it reads
//! none of it. Its memory is bounded: [`MATCHES_MAX`] matches of at most 64 members, a match
//! forgotten [`MATCH_IDLE_MS`] after its last hello.
//!
//! Anyone who knows a match's id can say hello as any of its players and so divert that
//! player's address; the Noise handshake keeps it from speaking for the player, but not from
//! denying it the match. Keep match ids secret (the lobby's), or authenticate hellos (not
//! done yet).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// A member's hello.
pub const HELLO: u8 = 0x09;
/// The rendezvous's list of addresses.
pub const ADDRS: u8 = 0x0a;
/// A packet for another member, through the rendezvous.
pub const RELAY: u8 = 0x07;
/// A packet from another member, through the rendezvous.
pub const RELAYED: u8 = 0x08;
/// The most matches a rendezvous holds.
pub const MATCHES_MAX: usize = 100_000;
/// A match with no hello for this long is forgotten (ms).
pub const MATCH_IDLE_MS: u64 = 120_000;

/// Counters of a [`Rendezvous`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RendezvousStats {
    /// Hellos taken.
    pub hellos: u64,
    /// Packets forwarded between members.
    pub relayed: u64,
    /// Packets dropped: malformed, from no member, to no member, over the limits.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Match {
    members: BTreeMap<u8, SocketAddr>,
    seen_ms: u64,
}

/// The rendezvous of any number of matches. Sans-IO: packets and the time in, packets out.
#[derive(Debug, Default)]
pub struct Rendezvous {
    matches: BTreeMap<u64, Match>,
    stats: RendezvousStats,
}

pub(crate) fn put_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// Reads one address; the rest of the bytes.
pub(crate) fn read_addr(bytes: &[u8]) -> Option<(SocketAddr, &[u8])> {
    let (&family, rest) = bytes.split_first()?;
    let (ip, rest): (IpAddr, &[u8]) = match family {
        4 if rest.len() >= 6 => {
            let octets: [u8; 4] = rest[..4].try_into().ok()?;
            (IpAddr::from(octets), &rest[4..])
        }
        6 if rest.len() >= 18 => {
            let octets: [u8; 16] = rest[..16].try_into().ok()?;
            (IpAddr::from(octets), &rest[16..])
        }
        _ => return None,
    };
    let port = u16::from_be_bytes([rest[0], rest[1]]);
    Some((SocketAddr::new(ip, port), &rest[2..]))
}

/// A packet's match id and one-byte player, after its kind byte: `(match, player, rest)`.
pub(crate) fn header(packet: &[u8]) -> Option<(u64, u8, &[u8])> {
    if packet.len() < 10 {
        return None;
    }
    let id = u64::from_le_bytes(packet[1..9].try_into().ok()?);
    Some((id, packet[9], &packet[10..]))
}

/// A packet of `kind` for match `id` naming `player`, then `rest`.
pub(crate) fn packet(kind: u8, id: u64, player: u8, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + rest.len());
    out.push(kind);
    out.extend_from_slice(&id.to_le_bytes());
    out.push(player);
    out.extend_from_slice(rest);
    out
}

impl Rendezvous {
    /// An empty rendezvous.
    pub fn new() -> Rendezvous {
        Rendezvous::default()
    }

    /// The counters.
    pub fn stats(&self) -> RendezvousStats {
        self.stats
    }

    /// Matches held.
    pub fn matches(&self) -> usize {
        self.matches.len()
    }

    /// A packet from `from` at `now_ms`: what to send, and where. Never panics, whatever
    /// the bytes.
    pub fn handle(
        &mut self,
        now_ms: u64,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Option<(SocketAddr, Vec<u8>)> {
        let answer = match (bytes.first(), header(bytes)) {
            (Some(&HELLO), Some((id, player, []))) if player < 64 => {
                self.hello(now_ms, from, id, player)
            }
            (Some(&RELAY), Some((id, to, inner))) if !inner.is_empty() => {
                self.relay(from, id, to, inner)
            }
            _ => None,
        };
        match &answer {
            Some(_) => {}
            None => self.stats.dropped += 1,
        }
        answer
    }

    fn hello(
        &mut self,
        now_ms: u64,
        from: SocketAddr,
        id: u64,
        player: u8,
    ) -> Option<(SocketAddr, Vec<u8>)> {
        if !self.matches.contains_key(&id) {
            self.forget_idle(now_ms);
            if self.matches.len() >= MATCHES_MAX {
                return None;
            }
        }
        let game = self.matches.entry(id).or_default();
        game.seen_ms = now_ms;
        game.members.insert(player, from);
        self.stats.hellos += 1;
        let mut list = Vec::with_capacity(10 + 20 * game.members.len());
        list.push(ADDRS);
        list.extend_from_slice(&id.to_le_bytes());
        list.push(game.members.len() as u8);
        for (&member, &addr) in &game.members {
            list.push(member);
            put_addr(&mut list, addr);
        }
        Some((from, list))
    }

    fn relay(
        &mut self,
        from: SocketAddr,
        id: u64,
        to: u8,
        inner: &[u8],
    ) -> Option<(SocketAddr, Vec<u8>)> {
        let game = self.matches.get(&id)?;
        let sender = game.members.iter().find(|(_, &addr)| addr == from).map(|(&p, _)| p)?;
        let dest = *game.members.get(&to)?;
        if sender == to {
            return None;
        }
        self.stats.relayed += 1;
        Some((dest, packet(RELAYED, id, sender, inner)))
    }

    fn forget_idle(&mut self, now_ms: u64) {
        self.matches.retain(|_, game| now_ms < game.seen_ms + MATCH_IDLE_MS);
    }
}

/// An addresses packet: its match and every `(player, address)` in it.
pub(crate) fn parse_addrs(bytes: &[u8]) -> Option<(u64, Vec<(u8, SocketAddr)>)> {
    let (id, count, mut rest) = header(bytes)?;
    let mut list = Vec::with_capacity(usize::from(count).min(64));
    for _ in 0..count.min(64) {
        let (&player, after) = rest.split_first()?;
        let (addr, after) = read_addr(after)?;
        list.push((player, addr));
        rest = after;
    }
    rest.is_empty().then_some((id, list))
}

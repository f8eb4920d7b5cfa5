//! A NAT, as simulators model one: the mapping of inside addresses to outside ports and the
//! filtering of what comes back (RFC 4787's vocabulary), with mappings that expire.
//!
//! | kind | mapping (the outside port for an inside socket) | filtering (who may send in) |
//! |---|---|---|
//! | [`NatKind::FullCone`] | one per inside socket | anyone |
//! | [`NatKind::AddressRestricted`] | one per inside socket | any port of an address it sent to |
//! | [`NatKind::PortRestricted`] | one per inside socket | exactly an address and port it sent to |
//! | [`NatKind::Symmetric`] | one per inside socket *and destination* | exactly that destination |
//!
//! Hole punching works between two NATs unless one is symmetric and the other is symmetric
//! or port-restricted: the symmetric side's port toward its peer is not the one the
//! rendezvous saw, and the other side only lets in the port it sent to.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// How a NAT maps and filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NatKind {
    /// Endpoint-independent mapping and filtering.
    FullCone,
    /// Endpoint-independent mapping, address-dependent filtering.
    AddressRestricted,
    /// Endpoint-independent mapping, address-and-port-dependent filtering.
    PortRestricted,
    /// Address-and-port-dependent mapping and filtering.
    Symmetric,
}

impl NatKind {
    /// Every kind, from the most open.
    pub const ALL: [NatKind; 4] = [
        NatKind::FullCone,
        NatKind::AddressRestricted,
        NatKind::PortRestricted,
        NatKind::Symmetric,
    ];

    /// Whether two peers behind NATs of these kinds can reach each other by hole punching.
    pub fn punchable(self, other: NatKind) -> bool {
        !matches!(
            (self, other),
            (NatKind::Symmetric, NatKind::Symmetric | NatKind::PortRestricted)
                | (NatKind::PortRestricted, NatKind::Symmetric)
        )
    }
}

#[derive(Clone, Debug)]
struct Mapping {
    inside: SocketAddr,
    /// The destination it was made for (a symmetric NAT's; `None` for the others).
    toward: Option<SocketAddr>,
    /// Destinations sent to through it, and when last.
    sent_to: BTreeMap<SocketAddr, u64>,
    used_ms: u64,
}

/// One NAT with a public address. Sans-IO: packets and the time in, addresses out.
#[derive(Clone, Debug)]
pub struct Nat {
    kind: NatKind,
    public: IpAddr,
    next_port: u16,
    /// Outside port → mapping.
    mappings: BTreeMap<u16, Mapping>,
    timeout_ms: u64,
}

impl Nat {
    /// A NAT of `kind` with the address `public`; a mapping unused for `timeout_ms` expires.
    pub fn new(kind: NatKind, public: IpAddr, timeout_ms: u64) -> Nat {
        Nat { kind, public, next_port: 40_000, mappings: BTreeMap::new(), timeout_ms }
    }

    /// Its kind.
    pub fn kind(&self) -> NatKind {
        self.kind
    }

    /// A packet from `inside` to `dest` at `now_ms`: the source address it leaves with.
    pub fn outbound(&mut self, now_ms: u64, inside: SocketAddr, dest: SocketAddr) -> SocketAddr {
        self.expire(now_ms);
        let toward = (self.kind == NatKind::Symmetric).then_some(dest);
        let found = self
            .mappings
            .iter()
            .find(|(_, m)| m.inside == inside && m.toward == toward)
            .map(|(&port, _)| port);
        let port = found.unwrap_or_else(|| {
            let port = self.next_port;
            self.next_port = self.next_port.wrapping_add(1).max(40_000);
            let mapping = Mapping { inside, toward, sent_to: BTreeMap::new(), used_ms: now_ms };
            self.mappings.insert(port, mapping);
            port
        });
        if let Some(mapping) = self.mappings.get_mut(&port) {
            mapping.used_ms = now_ms;
            mapping.sent_to.insert(dest, now_ms);
        }
        SocketAddr::new(self.public, port)
    }

    /// A packet from `from` to our outside `port` at `now_ms`: the inside address it goes
    /// to, or `None` when the NAT drops it.
    pub fn inbound(&mut self, now_ms: u64, port: u16, from: SocketAddr) -> Option<SocketAddr> {
        self.expire(now_ms);
        let mapping = self.mappings.get_mut(&port)?;
        let allowed = match self.kind {
            NatKind::FullCone => true,
            NatKind::AddressRestricted => mapping.sent_to.keys().any(|to| to.ip() == from.ip()),
            NatKind::PortRestricted | NatKind::Symmetric => mapping.sent_to.contains_key(&from),
        };
        if !allowed {
            return None;
        }
        mapping.used_ms = now_ms;
        Some(mapping.inside)
    }

    fn expire(&mut self, now_ms: u64) {
        let timeout = self.timeout_ms;
        self.mappings.retain(|_, mapping| now_ms < mapping.used_ms + timeout);
    }
}

//! NATs in front of a mesh run's machines ([`SimConfig::nats`](crate::SimConfig::nats)),
//! modelled on the sockets: turmoil delivers every datagram to the machine it is for, and the
//! sockets agree, through one [`NatWorld`], on what each NAT would have done to it.
//!
//! A datagram leaving a machine behind a NAT takes the source its NAT maps it to (an address
//! on `198.51.100.0/24`, one per NAT, that no simulated machine has); a datagram sent to such
//! an address goes to the inside machine the mapping names, or nowhere when the NAT filters
//! it (`phalanx_testkit::Nat` decides both). The source address the receiver sees travels in
//! a short envelope in front of the payload, which the receiving socket strips; the trace and
//! the byte counts see the payload only, and faults damage only the payload. A NAT decides a
//! datagram's fate when it is sent rather than when it arrives (a mapping that expires while
//! the datagram is in flight still lets it in). Mappings expire after [`MAPPING_TIMEOUT_MS`]
//! unused.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use phalanx_testkit::{Nat, NatKind};

/// How long a NAT keeps a mapping nothing used (ms): 30 s, the low end of home routers'.
pub(crate) const MAPPING_TIMEOUT_MS: u64 = 30_000;

/// Every NAT of a run, by its public address, and the machine behind each.
#[derive(Debug, Default)]
pub(crate) struct NatWorld {
    /// Public address → (the NAT, the machine's own address).
    by_public: BTreeMap<IpAddr, (Nat, IpAddr)>,
    /// A machine's own address → its NAT's public address.
    by_inside: BTreeMap<IpAddr, IpAddr>,
}

impl NatWorld {
    /// Puts the machine at `inside` behind a NAT of `kind`, the `index`-th of the run.
    pub(crate) fn add(&mut self, index: usize, inside: IpAddr, kind: NatKind) {
        let public = public_address(index);
        self.by_public.insert(public, (Nat::new(kind, public, MAPPING_TIMEOUT_MS), inside));
        self.by_inside.insert(inside, public);
    }

    /// A datagram from the socket at `from` (a machine's own address) to `to` at `now_ms`:
    /// the machine it reaches and the source it appears to come from, or `None` when a NAT
    /// drops it.
    pub(crate) fn route(
        &mut self,
        now_ms: u64,
        from: SocketAddr,
        to: SocketAddr,
    ) -> Option<(SocketAddr, SocketAddr)> {
        let source = match self.by_inside.get(&from.ip()) {
            Some(public) => {
                let (nat, _) = self.by_public.get_mut(public)?;
                nat.outbound(now_ms, from, to)
            }
            None => from,
        };
        let destination = match self.by_public.get_mut(&to.ip()) {
            Some((nat, _)) => nat.inbound(now_ms, to.port(), source)?,
            None => to,
        };
        Some((destination, source))
    }
}

/// The public address of a run's `index`-th NAT.
fn public_address(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1 + (index % 250) as u8))
}

/// Bytes [`envelope`] puts in front of a payload, at most.
pub(crate) const ENVELOPE_MAX: usize = 19;

/// The envelope carrying `source` in front of a payload: 4 or 6 (the IP version), the
/// address, the port (big-endian).
pub(crate) fn envelope(source: SocketAddr, out: &mut Vec<u8>) {
    match source.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&source.port().to_be_bytes());
}

/// The source an envelope carries and the length of the envelope; `None` if `bytes` does not
/// start with one.
pub(crate) fn open_envelope(bytes: &[u8]) -> Option<(SocketAddr, usize)> {
    let (ip, len): (IpAddr, usize) = match bytes.first()? {
        4 => (IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes.get(1..5)?).ok()?)), 5),
        6 => (IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes.get(1..17)?).ok()?)), 17),
        _ => return None,
    };
    let port = u16::from_be_bytes(bytes.get(len..len + 2)?.try_into().ok()?);
    Some((SocketAddr::new(ip, port), len + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("an address")
    }

    /// Envelopes read back as written, for both IP versions; anything else is refused.
    #[test]
    fn envelopes_round_trip() {
        for source in [addr("198.51.100.7:40001"), addr("[fd00::1]:5000")] {
            let mut bytes = Vec::new();
            envelope(source, &mut bytes);
            assert!(bytes.len() <= ENVELOPE_MAX);
            bytes.extend_from_slice(b"payload");
            let (read, len) = open_envelope(&bytes).expect("an envelope");
            assert_eq!((read, &bytes[len..]), (source, &b"payload"[..]));
            assert_eq!(open_envelope(&bytes[..len - 1]), None);
        }
        assert_eq!(open_envelope(&[5, 1, 2, 3, 4, 0, 1]), None);
    }

    /// Two machines behind port-restricted NATs: the first datagram is filtered by the far
    /// NAT, but opens the near one (a punch), so the answer gets in, and from then on both
    /// ways do, from the NATs' public addresses. A public machine reaches a mapping only
    /// while it lives.
    #[test]
    fn routes_through_port_restricted_nats() {
        let (a, b, public) =
            (addr("192.168.0.1:5000"), addr("192.168.0.2:5000"), addr("192.168.0.9:5000"));
        let mut world = NatWorld::default();
        world.add(0, a.ip(), NatKind::PortRestricted);
        world.add(1, b.ip(), NatKind::PortRestricted);
        let (a_out, _) = world.route(0, a, public).expect("out to a public machine");
        let (b_out, _) = world.route(0, b, public).expect("out to a public machine");
        assert_eq!(b_out, public);
        let (_, a_seen) = world.route(1, a, public).expect("the same mapping");
        assert_eq!(a_out, public);
        assert_eq!(a_seen.ip(), public_address(0));
        let (_, b_seen) = world.route(1, b, public).expect("the same mapping");
        // a → b before b sent toward a: b's NAT filters it, but a's now lets b in ...
        assert_eq!(world.route(2, a, b_seen), None);
        assert_eq!(world.route(3, b, a_seen), Some((a, b_seen)));
        // ... and b's lets a in since b sent toward it.
        assert_eq!(world.route(4, a, b_seen), Some((b, a_seen)));
        // The public machine answers a on the port a used toward it.
        assert_eq!(world.route(6, public, a_seen), Some((a, public)));
        // A mapping unused for the timeout is gone.
        assert_eq!(world.route(7 + MAPPING_TIMEOUT_MS, public, a_seen), None);
    }
}

//! The NAT matrix for the links of a peer-to-peer match: two members, each behind a NAT of
//! every kind, given each other's address as a rendezvous saw it. Every pair whose NATs hole
//! punching can get through opens its link and carries payloads both ways; the others do not
//! open (they need a relay).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use phalanx_testkit::{Nat, NatKind};
use phalanx_udp::mesh::{Links, Member};
use phalanx_udp::HostKey;

const RENDEZVOUS: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 9)), 3478);
const ONE_WAY_MS: u64 = 20;

struct Side {
    inside: SocketAddr,
    nat: Nat,
    links: Links,
}

fn public(i: u8) -> IpAddr {
    IpAddr::from([198, 51, 100, i + 1])
}

/// Both members behind NATs of `kinds`; returns whether each opened its link, and whether a
/// payload went each way.
fn meet(kinds: [NatKind; 2]) -> ([bool; 2], [bool; 2]) {
    let keys = [HostKey::from_bytes([1; 32]), HostKey::from_bytes([2; 32])];
    let mut nats: Vec<Nat> = (0..2).map(|i| Nat::new(kinds[i], public(i as u8), 30_000)).collect();
    let insides =
        [SocketAddr::from(([10, 0, 0, 1], 4000)), SocketAddr::from(([10, 0, 1, 1], 4000))];
    // What the rendezvous saw: each member's first packet to it, through its NAT.
    let seen: Vec<SocketAddr> =
        (0..2).map(|i| nats[i].outbound(0, insides[i], RENDEZVOUS)).collect();
    let roster: Vec<Member> = (0..2)
        .map(|i| Member { player: i as u8, key: keys[i].public(), addrs: vec![seen[i]] })
        .collect();
    let mut sides: Vec<Side> = nats
        .drain(..)
        .enumerate()
        .map(|(i, nat)| Side {
            inside: insides[i],
            nat,
            links: Links::new(i as u8, keys[i].clone(), roster.clone(), 9, [i as u8 + 5; 32]),
        })
        .collect();
    let mut wire: VecDeque<Flight> = VecDeque::new();
    let mut got = [false; 2];
    for now in 0..3_000u64 {
        if now == 2_000 {
            for (i, side) in sides.iter_mut().enumerate() {
                let _ = side.links.send(1 - i as u8, b"hello");
            }
        }
        for (i, side) in sides.iter_mut().enumerate() {
            side.links.handle_timeout(now);
            while let Some((dest, packet)) = side.links.poll_transmit() {
                let source = side.nat.outbound(now, side.inside, dest);
                wire.push_back(Flight { at: now + ONE_WAY_MS, to: 1 - i, dest, source, packet });
            }
        }
        while wire.front().is_some_and(|flight| flight.at <= now) {
            let Some(flight) = wire.pop_front() else { break };
            if flight.dest.ip() != public(flight.to as u8) {
                continue; // to an address no member has
            }
            let side = &mut sides[flight.to];
            if side.nat.inbound(now, flight.dest.port(), flight.source).is_none() {
                continue; // the NAT drops it
            }
            if let Some((_, payload)) = side.links.handle(now, flight.source, &flight.packet) {
                got[flight.to] |= payload == b"hello";
            }
        }
    }
    ([sides[0].links.is_open(1), sides[1].links.is_open(0)], got)
}

/// A packet on the simulated wire: to which side, its destination, and the outside address
/// it left its NAT with.
struct Flight {
    at: u64,
    to: usize,
    dest: SocketAddr,
    source: SocketAddr,
    packet: Vec<u8>,
}

#[test]
fn every_pair_of_nat_kinds_that_can_punch_does() {
    for a in NatKind::ALL {
        for b in NatKind::ALL {
            let (open, got) = meet([a, b]);
            let expected = a.punchable(b);
            assert_eq!(open, [expected; 2], "{a:?} ↔ {b:?}: links open {open:?}");
            assert_eq!(got, [expected; 2], "{a:?} ↔ {b:?}: payloads {got:?}");
        }
    }
}

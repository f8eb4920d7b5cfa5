//! The NAT matrix for the links of a peer-to-peer match: two members, each behind a NAT of
//! every kind. Given each other's address as a rendezvous saw it, every pair whose NATs hole
//! punching gets through opens its link and carries payloads both ways, and the others do not
//! open. Meeting through a rendezvous (`Rendezvous`), every pair opens: directly where
//! punching works, through the rendezvous where it cannot.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use phalanx_testkit::{Nat, NatKind};
use phalanx_udp::mesh::{Links, Member, Rendezvous};
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

/// How a run ended: whether each member opened its link, whether a payload went each way,
/// and whether each link goes through the rendezvous.
struct Met {
    open: [bool; 2],
    got: [bool; 2],
    relayed: [bool; 2],
}

/// Both members behind NATs of `kinds`; with `rendezvous`, they learn each other's address
/// from one (and may relay through it), else the roster gives the addresses it saw.
fn meet(kinds: [NatKind; 2], rendezvous: bool) -> Met {
    let mut sides = sides(kinds, rendezvous);
    let mut server = Rendezvous::new();
    let mut wire: VecDeque<Flight> = VecDeque::new();
    let mut got = [false; 2];
    for now in 0..6_000u64 {
        if now == 5_000 {
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
            if flight.dest == RENDEZVOUS {
                if let Some((to, packet)) = server.handle(now, flight.source, &flight.packet) {
                    let side = usize::from(to.ip() == public(1));
                    let flight = Flight {
                        at: now + ONE_WAY_MS,
                        to: side,
                        dest: to,
                        source: RENDEZVOUS,
                        packet,
                    };
                    wire.push_back(flight);
                }
                continue;
            }
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
    let relayed = |i: usize| sides[i].links.links().iter().any(|link| link.relayed);
    Met {
        open: [sides[0].links.is_open(1), sides[1].links.is_open(0)],
        got,
        relayed: [relayed(0), relayed(1)],
    }
}

/// Both members, behind their NATs, with their links.
fn sides(kinds: [NatKind; 2], rendezvous: bool) -> Vec<Side> {
    let keys = [HostKey::from_bytes([1; 32]), HostKey::from_bytes([2; 32])];
    let mut nats: Vec<Nat> = (0..2).map(|i| Nat::new(kinds[i], public(i as u8), 30_000)).collect();
    let insides =
        [SocketAddr::from(([10, 0, 0, 1], 4000)), SocketAddr::from(([10, 0, 1, 1], 4000))];
    // What the rendezvous saw: each member's first packet to it, through its NAT.
    let seen: Vec<SocketAddr> =
        (0..2).map(|i| nats[i].outbound(0, insides[i], RENDEZVOUS)).collect();
    let roster: Vec<Member> = (0..2)
        .map(|i| Member {
            player: i as u8,
            key: keys[i].public(),
            addrs: if rendezvous { Vec::new() } else { vec![seen[i]] },
        })
        .collect();
    nats.drain(..)
        .enumerate()
        .map(|(i, nat)| {
            let links = Links::new(i as u8, keys[i].clone(), roster.clone(), 9, [i as u8 + 5; 32]);
            let links = if rendezvous { links.with_rendezvous(RENDEZVOUS) } else { links };
            Side { inside: insides[i], nat, links }
        })
        .collect()
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
            let met = meet([a, b], false);
            let expected = a.punchable(b);
            assert_eq!(met.open, [expected; 2], "{a:?} ↔ {b:?}: links open {:?}", met.open);
            assert_eq!(met.got, [expected; 2], "{a:?} ↔ {b:?}: payloads {:?}", met.got);
        }
    }
}

#[test]
fn every_pair_meets_through_the_rendezvous_and_relays_only_if_it_must() {
    for a in NatKind::ALL {
        for b in NatKind::ALL {
            let met = meet([a, b], true);
            assert_eq!(met.open, [true; 2], "{a:?} ↔ {b:?}: links open {:?}", met.open);
            assert_eq!(met.got, [true; 2], "{a:?} ↔ {b:?}: payloads {:?}", met.got);
            let relayed = !a.punchable(b);
            assert_eq!(met.relayed, [relayed; 2], "{a:?} ↔ {b:?}: relayed {:?}", met.relayed);
        }
    }
}

//! The rendezvous forwards only between members of one match, names the sender by the
//! address its packet came from, and survives any bytes.

use std::net::SocketAddr;

use phalanx_udp::mesh::{Rendezvous, HELLO, RELAY, RELAYED};

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, i], 5000 + u16::from(i)))
}

fn packet(kind: u8, id: u64, player: u8, rest: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&id.to_le_bytes());
    out.push(player);
    out.extend_from_slice(rest);
    out
}

#[test]
fn relays_between_members_named_by_their_address() {
    let mut server = Rendezvous::new();
    assert!(server.handle(0, addr(1), &packet(HELLO, 7, 0, &[])).is_some());
    assert!(server.handle(0, addr(2), &packet(HELLO, 7, 1, &[])).is_some());
    // Player 0 (by its address) to player 1: forwarded, naming player 0 whatever it claims.
    let (to, out) = server.handle(1, addr(1), &packet(RELAY, 7, 1, b"noise")).expect("forwarded");
    assert_eq!(to, addr(2));
    assert_eq!(out, packet(RELAYED, 7, 0, b"noise"));
    // From an address no member has, to another match, to nobody: dropped.
    assert!(server.handle(1, addr(9), &packet(RELAY, 7, 1, b"x")).is_none());
    assert!(server.handle(1, addr(1), &packet(RELAY, 8, 1, b"x")).is_none());
    assert!(server.handle(1, addr(1), &packet(RELAY, 7, 5, b"x")).is_none());
    assert!(server.handle(1, addr(1), &packet(RELAY, 7, 0, b"x")).is_none(), "to itself");
    assert_eq!(server.stats().relayed, 1);
    assert_eq!(server.stats().dropped, 4);
}

#[test]
fn junk_never_panics() {
    let mut server = Rendezvous::new();
    let mut seed = 7u64;
    for len in 0..500usize {
        let bytes: Vec<u8> = (0..len % 40)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 56) as u8
            })
            .collect();
        let _ = server.handle(len as u64, addr(3), &bytes);
    }
    assert!(server.matches() <= 500);
}

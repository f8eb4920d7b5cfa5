//! The links of a peer-to-peer match: every pair opens a channel, both ends punching; the
//! roster's keys decide who may speak for whom.

use std::net::SocketAddr;

use phalanx_udp::mesh::{Links, Member};
use phalanx_udp::HostKey;

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, i as u8 + 1], 4000))
}

fn key(i: usize) -> HostKey {
    HostKey::from_bytes([i as u8 + 7; 32])
}

fn roster(n: usize) -> Vec<Member> {
    (0..n).map(|i| Member { player: i as u8, key: key(i).public(), addrs: vec![addr(i)] }).collect()
}

/// Runs the links against each other, delivering every packet at once, for `ms` ms; returns
/// what each received.
fn run(links: &mut [Links], ms: u64) -> Vec<Vec<(u8, Vec<u8>)>> {
    let mut received = vec![Vec::new(); links.len()];
    for now in 0..ms {
        for link in links.iter_mut() {
            link.handle_timeout(now);
        }
        let mut moved = true;
        while moved {
            moved = false;
            for from in 0..links.len() {
                while let Some((to, packet)) = links[from].poll_transmit() {
                    moved = true;
                    if let Some(index) = (0..links.len()).find(|&i| addr(i) == to) {
                        if let Some(got) = links[index].handle(now, addr(from), &packet) {
                            received[index].push(got);
                        }
                    }
                }
            }
        }
    }
    received
}

#[test]
fn every_pair_opens_and_carries_payloads() {
    let mut links: Vec<Links> =
        (0..4).map(|i| Links::new(i as u8, key(i), roster(4), 77, [i as u8; 32])).collect();
    run(&mut links, 50);
    for (i, link) in links.iter().enumerate() {
        for j in (0..4).filter(|&j| j != i) {
            assert!(link.is_open(j as u8), "{i} → {j} not open");
        }
    }
    for (i, link) in links.iter_mut().enumerate() {
        for j in (0..4).filter(|&j| j != i) {
            link.send(j as u8, &[i as u8, j as u8]).unwrap();
        }
    }
    let received = run(&mut links, 1);
    for (j, got) in received.iter().enumerate() {
        let mut from: Vec<u8> = got
            .iter()
            .map(|(p, payload)| {
                assert_eq!(payload, &vec![*p, j as u8]);
                *p
            })
            .collect();
        from.sort_unstable();
        let expected: Vec<u8> = (0..4).filter(|&p| p != j).map(|p| p as u8).collect();
        assert_eq!(from, expected);
    }
}

#[test]
fn a_key_the_roster_does_not_list_is_refused() {
    // Player 0 uses the wrong key: player 1 must refuse it.
    let mut links = vec![
        Links::new(0, HostKey::from_bytes([99; 32]), roster(2), 77, [1; 32]),
        Links::new(1, key(1), roster(2), 77, [2; 32]),
    ];
    run(&mut links, 50);
    assert!(!links[1].is_open(0));
    assert!(links[1].stats().refused > 0);
}

#[test]
fn another_match_is_refused() {
    let mut links = vec![
        Links::new(0, key(0), roster(2), 77, [1; 32]),
        Links::new(1, key(1), roster(2), 78, [2; 32]),
    ];
    run(&mut links, 50);
    assert!(!links[1].is_open(0));
    assert!(links[1].stats().refused > 0);
}

#[test]
fn junk_never_panics_and_is_counted() {
    let mut link = Links::new(1, key(1), roster(3), 77, [3; 32]);
    let mut seed = 1u64;
    for len in 0..400usize {
        let packet: Vec<u8> = (0..len % 130)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 56) as u8
            })
            .collect();
        assert!(link.handle(0, addr(0), &packet).is_none());
    }
    assert!(link.stats().dropped > 0);
}

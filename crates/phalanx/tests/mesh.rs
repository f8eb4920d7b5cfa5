//! A peer-to-peer match over real UDP sockets on this machine: four peers open a Noise link
//! to each other, play, one crashes (its session dropped), the master ends the match, and
//! every survivor executed the same turns.
#![cfg(feature = "udp")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use phalanx::mesh::{MeshEnd, MeshMember, MeshOptions, MeshSession};
use phalanx::proto::mesh::{PeerEnd, PeerEvent};
use phalanx::proto::{PlayerId, TypedRecord};
use phalanx::udp::{DatagramSocket, HostKey};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Order {
    player: u8,
    n: u32,
}

fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Binds a socket per peer on this machine, hands out the roster, and starts every session.
fn start_peers(
    runtime: &tokio::runtime::Runtime,
    players: usize,
) -> Vec<Option<MeshSession<Order>>> {
    let keys: Vec<HostKey> = (0..players).map(|i| HostKey::from_bytes([i as u8 + 1; 32])).collect();
    let sockets: Vec<Arc<dyn DatagramSocket>> = (0..players)
        .map(|_| {
            let _guard = runtime.enter();
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.set_nonblocking(true).unwrap();
            Arc::new(tokio::net::UdpSocket::from_std(socket).unwrap()) as Arc<dyn DatagramSocket>
        })
        .collect();
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    let roster: Vec<MeshMember> = (0..players)
        .map(|i| MeshMember {
            player: PlayerId(i as u8),
            key: keys[i].public(),
            addrs: vec![addrs[i]],
        })
        .collect();
    (0..players)
        .map(|i| {
            let mut options =
                MeshOptions::new(PlayerId(i as u8), keys[i].clone(), roster.clone(), 42, addrs[i]);
            options.socket = Some(sockets[i].clone());
            options.seed = Some([i as u8 + 100; 32]);
            options.session.link.idle_timeout_ms = 1_500;
            Some(MeshSession::start(options, Some(runtime.handle().clone())).unwrap())
        })
        .collect()
}

#[test]
fn four_peers_play_lose_one_and_end_together() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let players = 4;
    let mut sessions = start_peers(&runtime, players);
    let mut states = vec![0xcbf2_9ce4_8422_2325u64; players];
    let mut turns = vec![0u32; players];
    let mut sent = vec![0u32; players];
    let mut executed: Vec<Vec<(u8, u32)>> = vec![Vec::new(); players];
    let mut gone_seen = vec![false; players];
    let started = Instant::now();
    let mut ended_at = None;
    while started.elapsed() < Duration::from_secs(20) {
        let elapsed = started.elapsed();
        if elapsed > Duration::from_millis(2_500) && sessions[3].is_some() {
            sessions[3] = None; // peer 3's process dies: no goodbye
        }
        if elapsed > Duration::from_millis(6_500) && ended_at.is_none() {
            if let Some(session) = &sessions[0] {
                ended_at = session.end(7).ok();
            }
        }
        for (i, slot) in sessions.iter_mut().enumerate() {
            let Some(session) = slot else { continue };
            while let Some(turn) = session.try_next_turn() {
                turns[i] += 1;
                for record in &turn.records {
                    let TypedRecord::Command { player, command, .. } = record else { continue };
                    let order = command.as_ref().expect("decodes");
                    assert_eq!(order.player, player.0, "an order runs in its sender's name");
                    executed[i].push((order.player, order.n));
                    states[i] = fnv(states[i], &[order.player]);
                    states[i] = fnv(states[i], &order.n.to_le_bytes());
                }
                states[i] = fnv(states[i], &turn.turn.0.to_le_bytes());
                session.report_state_hash(turn.turn, states[i]);
                if turn.turn.0 % 5 == i as u32 % 5 {
                    sent[i] += 1;
                    let _ = session.submit(&Order { player: i as u8, n: sent[i] });
                }
            }
            while let Some(event) = session.try_event() {
                if let PeerEvent::PeerGone { player, .. } = event {
                    assert_eq!(player, PlayerId(3));
                    gone_seen[i] = true;
                }
                assert!(!matches!(event, PeerEvent::Desync(_)), "peer {i}: {event:?}");
            }
        }
        if sessions.iter().flatten().all(|s| s.is_over()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for i in 0..3 {
        let session = sessions[i].as_ref().unwrap();
        assert_eq!(session.ended(), Some(MeshEnd::Peer(PeerEnd::Finished { code: 7 })), "peer {i}");
        assert!(gone_seen[i], "peer {i} never saw peer 3 go");
        assert_eq!(turns[i], turns[0], "peer {i} executed {} turns, peer 0 {}", turns[i], turns[0]);
        assert_eq!(states[i], states[0], "peer {i} diverged");
        assert_eq!(executed[i], executed[0]);
        let stats = session.stats().unwrap();
        assert!(stats.pairs.iter().filter(|p| p.player.0 < 3).all(|p| p.rtt_ms.is_some()));
    }
    assert!(turns[0] > 40, "{} turns", turns[0]);
    // Every order each survivor gave before the end ran, once.
    for i in 0..3u8 {
        let mine: Vec<u32> = executed[0].iter().filter(|(p, _)| *p == i).map(|(_, n)| *n).collect();
        assert!(mine.windows(2).all(|w| w[1] == w[0] + 1), "player {i}'s orders: {mine:?}");
        assert!(!mine.is_empty());
    }
}

/// Four peers that know only each other's keys meet through a rendezvous: the roster has no
/// address at all, and every link opens from the addresses the rendezvous saw.
#[test]
fn peers_meet_through_a_rendezvous() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = {
        let _guard = runtime.enter();
        phalanx::mesh::RendezvousServer::bind("127.0.0.1:0".parse().unwrap()).unwrap()
    };
    let keys: Vec<HostKey> = (0..4).map(|i| HostKey::from_bytes([i as u8 + 20; 32])).collect();
    let roster: Vec<MeshMember> = (0..4)
        .map(|i| MeshMember { player: PlayerId(i as u8), key: keys[i].public(), addrs: Vec::new() })
        .collect();
    let mut sessions: Vec<MeshSession<Order>> = (0..4)
        .map(|i| {
            let bind = "127.0.0.1:0".parse().unwrap();
            let mut options =
                MeshOptions::new(PlayerId(i as u8), keys[i].clone(), roster.clone(), 43, bind);
            options.rendezvous = Some(server.local_addr());
            MeshSession::start(options, Some(runtime.handle().clone())).unwrap()
        })
        .collect();
    let started = Instant::now();
    let mut turns = [0u32; 4];
    while started.elapsed() < Duration::from_secs(15) && turns.iter().any(|&t| t < 20) {
        for (i, session) in sessions.iter_mut().enumerate() {
            while session.try_next_turn().is_some() {
                turns[i] += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(turns.iter().all(|&t| t >= 20), "turns {turns:?}");
    for session in &sessions {
        assert!(session.links().iter().all(|link| link.addr.is_some() && !link.relayed));
    }
}

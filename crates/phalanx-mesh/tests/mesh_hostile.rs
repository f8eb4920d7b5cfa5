//! A hostile peer in a peer-to-peer match: it forges another's commands, replays old
//! datagrams, floods junk or proposes to depose the master. Each is refused and counted; a
//! repeat offender is dropped by every peer on the same turn; the game never splits.

use bytes::Bytes;
use phalanx_mesh::peers::{PeerNet, PeerNetConfig};
use phalanx_mesh::{ensure, for_each_seed, seeded_test, LinkFaults, Rng};
use phalanx_proto::mesh::PeerEvent;
use phalanx_proto::{testing, CommandSeq, PlayerId, Record};

const SEEDS: u64 = 12;
const FORGER: usize = 3;

fn base(seed: u64) -> PeerNetConfig {
    let mut config = PeerNetConfig::new(seed, 6);
    config.faults =
        LinkFaults { latency_ms: 30, jitter_ms: 10, loss_permille: 10, ..LinkFaults::default() };
    config.end_ms = 12_000;
    config
}

/// A datagram from the forger whose contribution holds a command in player 1's name.
fn forged(net: &PeerNet, to: usize) -> Vec<u8> {
    let turn = net.peers[to].next_exec().saturating_add(3);
    let command = Record::Command {
        player: PlayerId(1),
        seq: CommandSeq(9_999),
        payload: Bytes::from(phalanx_mesh::encode_payload(PlayerId(1), CommandSeq(9_999), 12)),
    };
    testing::mesh_datagram(turn, &[(turn, vec![command])])
}

fn forged_never_ran(net: &PeerNet) -> Result<(), String> {
    for (index, game) in net.games.iter().enumerate() {
        let ran = game.executed.iter().any(|(_, seq, _)| *seq == CommandSeq(9_999));
        ensure(!ran, || format!("peer {index} executed the forged command"))?;
    }
    Ok(())
}

fn spoofed_at(net: &PeerNet, peer: usize, from: usize) -> u64 {
    net.peers[peer]
        .stats()
        .pairs
        .iter()
        .find(|p| p.player.0 as usize == from)
        .map_or(0, |p| p.drops.spoofed)
}

fn dropped_everywhere(net: &PeerNet, gone: usize) -> Result<(), String> {
    for peer in (0..net.peers.len()).filter(|&p| p != gone) {
        let told = net.events.iter().any(|(_, i, e)| {
            *i == peer
                && matches!(e, PeerEvent::PeerGone { player, .. } if player.0 as usize == gone)
        });
        ensure(told, || format!("peer {peer} still plays with offender {gone}"))?;
    }
    Ok(())
}

#[test]
fn one_forged_command_is_refused_and_counted() {
    for_each_seed(seeded_test!("mesh_forge_once"), SEEDS, |seed| {
        let mut net = PeerNet::new(base(seed)).map_err(|e| e.to_string())?;
        net.run_until(3_000).map_err(|e| e.to_string())?;
        for to in (0..6).filter(|&p| p != FORGER) {
            let bytes = forged(&net, to);
            net.inject(FORGER, to, bytes);
        }
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        net.check_exactly_once()?;
        net.check_no_false_drops()?;
        forged_never_ran(&net)?;
        for to in (0..6).filter(|&p| p != FORGER) {
            ensure(spoofed_at(&net, to, FORGER) >= 1, || {
                format!("peer {to} did not count the forgery")
            })?;
        }
        Ok(())
    });
}

#[test]
fn a_forger_that_keeps_on_is_dropped_by_everyone() {
    for_each_seed(seeded_test!("mesh_forge_flood"), SEEDS, |seed| {
        let mut net = PeerNet::new(base(seed)).map_err(|e| e.to_string())?;
        for step in 0..40 {
            net.run_until(3_000 + step * 20).map_err(|e| e.to_string())?;
            for to in (0..6).filter(|&p| p != FORGER) {
                let bytes = forged(&net, to);
                net.inject(FORGER, to, bytes);
            }
        }
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        forged_never_ran(&net)?;
        dropped_everywhere(&net, FORGER)?;
        let turns = net.games[0].digests.len();
        ensure(turns > 80, || format!("the others stopped at {turns} turns"))
    });
}

#[test]
fn replayed_datagrams_change_nothing() {
    for_each_seed(seeded_test!("mesh_replay"), SEEDS, |seed| {
        let mut config = base(seed);
        config.record_from = Some(2);
        let mut net = PeerNet::new(config).map_err(|e| e.to_string())?;
        net.run_until(6_000).map_err(|e| e.to_string())?;
        let log = std::mem::take(&mut net.sent_log);
        let mut rng = Rng::new(seed);
        for (to, bytes) in log.into_iter().filter(|_| rng.chance(300)) {
            net.inject(2, to, bytes);
        }
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        net.check_exactly_once()?;
        net.check_no_false_drops()
    });
}

#[test]
fn a_junk_flood_gets_its_sender_dropped() {
    for_each_seed(seeded_test!("mesh_junk"), SEEDS, |seed| {
        let mut net = PeerNet::new(base(seed)).map_err(|e| e.to_string())?;
        net.run_until(3_000).map_err(|e| e.to_string())?;
        let mut rng = Rng::new(seed);
        for to in (0..6).filter(|&p| p != FORGER) {
            for _ in 0..100 {
                let len = 1 + rng.below(200) as usize;
                let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                net.inject(FORGER, to, junk);
            }
        }
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        dropped_everywhere(&net, FORGER)?;
        let malformed: u64 = net.peers[0].stats().pairs.iter().map(|p| p.drops.malformed).sum();
        ensure(malformed >= 33, || format!("{malformed} junk datagrams counted"))
    });
}

#[test]
fn a_peer_cannot_depose_a_live_master() {
    for_each_seed(seeded_test!("mesh_false_freeze"), SEEDS, |seed| {
        let mut net = PeerNet::new(base(seed)).map_err(|e| e.to_string())?;
        net.run_until(3_000).map_err(|e| e.to_string())?;
        // Player 1, next in line, and player 4 each claim the master is gone.
        for from in [1, 4] {
            for to in (0..6).filter(|&p| p != from) {
                net.inject(from, to, testing::mesh_freeze(50, &[PlayerId(0)]));
            }
        }
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        net.check_exactly_once()?;
        net.check_no_false_drops()?;
        for peer in 0..6 {
            let master = net.peers[peer].master();
            ensure(master == PlayerId(0), || format!("peer {peer} follows {master:?}"))?;
        }
        let turn = net.games[5].digests.len();
        ensure(turn > 100, || format!("only {turn} turns"))?;
        Ok(())
    });
}

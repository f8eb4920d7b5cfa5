//! Peer-to-peer matches at layer L1: every peer executes the same turns, every order once,
//! through loss, jitter, crashes (the master's among them), leaves and cuts.
#![allow(clippy::print_stderr)]

use phalanx_mesh::peers::{percentile, PairCut, PeerNet, PeerNetConfig};
use phalanx_mesh::{for_each_seed, seeded_test, LinkFaults};
use phalanx_proto::mesh::{PeerEnd, PeerEvent};
use phalanx_proto::PlayerId;

fn lossy(seed: u64, players: usize) -> PeerNetConfig {
    let mut config = PeerNetConfig::new(seed, players);
    config.faults =
        LinkFaults { latency_ms: 50, jitter_ms: 20, loss_permille: 20, ..LinkFaults::default() };
    config.session.turns.length_ms = 150;
    config.end_ms = 20_000;
    config
}

#[test]
fn a_clean_match_agrees_and_runs_every_order_once() {
    let mut net = PeerNet::new(PeerNetConfig::new(1, 4)).unwrap();
    net.run().unwrap();
    net.check_agreement().unwrap();
    net.check_exactly_once().unwrap();
    net.check_no_false_drops().unwrap();
    let turns = net.games.iter().map(|g| g.digests.len()).min().unwrap();
    assert!(turns >= 95, "{turns} turns in 10 s of 100 ms turns");
    let orders: usize = net.games.iter().map(|g| g.submitted.len()).sum();
    assert!(orders > 5, "{orders} orders");
}

#[test]
fn eight_lossy_peers_agree() {
    for_each_seed(seeded_test!("peers_lossy"), 6, |seed| {
        let mut net = PeerNet::new(lossy(seed, 8)).map_err(|e| e.to_string())?;
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        net.check_exactly_once()?;
        net.check_no_false_drops()?;
        let latencies = net.latencies_ms();
        let stall: u64 = net.peers.iter().map(|p| p.stats().stall_ms).max().unwrap_or(0);
        let kbit = net.kbit_per_s();
        eprintln!(
            "seed {seed}: turns {} orders {} p50 {:?} p95 {:?} max {:?} stall {stall} ms kbit/s {:.1}",
            net.games[0].digests.len(),
            latencies.len(),
            percentile(&latencies, 50),
            percentile(&latencies, 95),
            percentile(&latencies, 100),
            kbit.iter().cloned().fold(0.0, f64::max),
        );
        Ok(())
    });
}

#[test]
fn the_master_crashes_and_the_game_goes_on() {
    for_each_seed(seeded_test!("peers_master_crash"), 12, |seed| {
        let mut config = lossy(seed, 8);
        let at = 3_000 + seed * 397 % 8_000;
        config.crashes.push((0, at));
        let mut net = PeerNet::new(config).map_err(|e| e.to_string())?;
        net.run().map_err(|e| e.to_string())?;
        net.check_agreement()?;
        net.check_exactly_once()?;
        net.check_no_false_drops()?;
        for &i in &net.survivors() {
            let master = net.peers[i].master();
            phalanx_mesh::ensure(master == PlayerId(1), || format!("peer {i} follows {master:?}"))?;
            let turns = net.games[i].digests.len();
            phalanx_mesh::ensure(turns > 100, || format!("peer {i} executed only {turns} turns"))?;
        }
        Ok(())
    });
}

#[test]
fn a_peer_that_leaves_is_gone_on_the_same_turn_everywhere() {
    let mut config = lossy(3, 4);
    config.leaves.push((2, 4_000));
    let mut net = PeerNet::new(config).unwrap();
    net.run().unwrap();
    net.check_agreement().unwrap();
    net.check_exactly_once().unwrap();
    net.check_no_false_drops().unwrap();
    assert!(net.events.iter().any(|(_, i, e)| *i == 2 && *e == PeerEvent::Ended(PeerEnd::Left)));
    assert!(net.games[0].digests.len() > 100);
}

#[test]
fn a_cut_pair_drops_the_higher_and_the_rest_play_on() {
    let mut config = lossy(5, 5);
    config.cuts.push(PairCut { a: 2, b: 3, from_ms: 4_000, until_ms: u64::MAX });
    let mut net = PeerNet::new(config).unwrap();
    net.run().unwrap();
    net.check_agreement().unwrap();
    let gone: Vec<_> = net
        .events
        .iter()
        .filter_map(|(_, i, e)| match e {
            PeerEvent::PeerGone { player, .. } if *i == 0 => Some(*player),
            _ => None,
        })
        .collect();
    assert_eq!(gone, vec![PlayerId(3)]);
    assert!(net.games[0].digests.len() > 100);
}

#[test]
fn the_master_ends_the_game_for_everyone_on_one_turn() {
    let mut config = lossy(9, 6);
    config.end_game_ms = Some(5_000);
    let mut net = PeerNet::new(config).unwrap();
    net.run().unwrap();
    net.check_agreement().unwrap();
    let lengths: Vec<usize> = net.games.iter().map(|g| g.digests.len()).collect();
    assert!(lengths.windows(2).all(|w| w[0] == w[1]), "{lengths:?}");
    for i in 0..6 {
        assert!(net
            .events
            .iter()
            .any(|(_, p, e)| *p == i && *e == PeerEvent::Ended(PeerEnd::Finished { code: 1 })));
    }
}

#[test]
fn a_slow_machine_lengthens_the_turn_on_every_peer_at_once() {
    let mut config = lossy(11, 5);
    config.session.turns.length_ms = 100;
    config.slow.push((3, 160));
    let mut net = PeerNet::new(config).unwrap();
    net.run().unwrap();
    net.check_agreement().unwrap();
    net.check_exactly_once().unwrap();
    net.check_no_false_drops().unwrap();
    for peer in &net.peers {
        assert!(peer.pace().turn_length_ms >= 200, "{:?}", peer.pace());
    }
    let changes: Vec<_> =
        net.games.iter().map(|g| g.turn_length_ms.iter().position(|&l| l >= 200)).collect();
    assert!(changes.windows(2).all(|w| w[0] == w[1]) && changes[0].is_some(), "{changes:?}");
}

//! A peer-to-peer match under the fault matrix's network faults: burst loss, duplicates and
//! replays, corruption, late timers and a peer cut off from everyone for less than the idle
//! timeout. Every peer executes the same turns, every order once, and nobody is dropped.
//! Burst loss, duplicates and late timers run with both profiles: the default and the modem's
//! (`PeerConfig::modem`, whose lost batches are asked for again).

use phalanx_mesh::peers::{PeerNet, PeerNetConfig};
use phalanx_mesh::{ensure, for_each_seed, seeded_test, Burst, LinkFaults};
use phalanx_proto::mesh::PeerConfig;

const SEEDS: u64 = 24;

fn base(seed: u64) -> PeerNetConfig {
    let mut config = PeerNetConfig::new(seed, 8);
    config.session.turns.length_ms = 150;
    config.end_ms = 12_000;
    config
}

/// Runs `config` with the default profile, then with the modem's; the second run's network.
fn run_both(config: PeerNetConfig) -> Result<PeerNet, String> {
    run(config.clone())?;
    let mut modem = config;
    modem.peer = PeerConfig::modem();
    run(modem)
}

fn run(config: PeerNetConfig) -> Result<PeerNet, String> {
    let mut net = PeerNet::new(config).map_err(|e| e.to_string())?;
    net.run().map_err(|e| e.to_string())?;
    net.check_agreement()?;
    net.check_exactly_once()?;
    net.check_no_false_drops()?;
    let turns = net.games.iter().map(|g| g.digests.len()).min().unwrap_or(0);
    ensure(turns > 60, || format!("only {turns} turns executed"))?;
    Ok(net)
}

#[test]
fn burst_loss() {
    for_each_seed(seeded_test!("mesh_burst"), SEEDS, |seed| {
        let mut config = base(seed);
        config.faults = LinkFaults {
            latency_ms: 50,
            jitter_ms: 20,
            burst: Some(Burst { enter_permille: 20, leave_permille: 300, loss_permille: 600 }),
            ..LinkFaults::default()
        };
        run_both(config).map(drop)
    });
}

#[test]
fn duplicates_replays_and_corruption() {
    for_each_seed(seeded_test!("mesh_dup_corrupt"), SEEDS, |seed| {
        let mut config = base(seed);
        config.faults = LinkFaults {
            latency_ms: 40,
            jitter_ms: 30,
            loss_permille: 20,
            duplicate_permille: 50,
            replay_delay_ms: 2_000,
            corrupt_permille: 5,
            ..LinkFaults::default()
        };
        let net = run_both(config)?;
        let malformed: u64 =
            net.peers.iter().flat_map(|p| p.stats().pairs).map(|pair| pair.drops.malformed).sum();
        ensure(malformed > 0, || "no corrupted datagram was counted".into())
    });
}

#[test]
fn late_timers() {
    for_each_seed(seeded_test!("mesh_late_timers"), SEEDS, |seed| {
        let mut config = base(seed);
        config.faults = LinkFaults {
            latency_ms: 50,
            jitter_ms: 20,
            loss_permille: 20,
            ..LinkFaults::default()
        };
        config.wake_lateness_ms = 16;
        run_both(config).map(drop)
    });
}

#[test]
fn a_short_outage_stalls_everyone_and_drops_nobody() {
    for_each_seed(seeded_test!("mesh_outage"), SEEDS, |seed| {
        let mut config = base(seed);
        config.faults = LinkFaults {
            latency_ms: 50,
            jitter_ms: 20,
            loss_permille: 20,
            ..LinkFaults::default()
        };
        let peer = (seed % 8) as usize;
        config.outages.push((peer, 4_000, 5_200));
        let net = run(config)?;
        let stall = net.peers[(peer + 1) % 8].stats().stall_ms;
        // Turns made final before the cut cover its first lead; the rest waits.
        ensure(stall >= 700, || format!("a 1.2 s outage stalled the others {stall} ms"))
    });
}

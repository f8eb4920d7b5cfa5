//! Link quality on virtual time that behaves like a real machine's: timer wake-ups late by up
//! to 2 ms (as an OS timer or a frame loop is). On a loss-free link nothing that was
//! acknowledged in time is sent again: retransmissions stay at most 1 % of datagrams.

use phalanx_mesh::{ensure, for_each_seed, seeded_test, LinkFaults, Mesh, MeshConfig};

const SEEDS: u64 = 50;

/// Retransmissions and datagrams sent, host and clients together.
fn retransmissions(mesh: &Mesh) -> (u64, u64) {
    let mut retransmits = 0;
    let mut datagrams = 0;
    for (index, client) in mesh.clients.iter().enumerate() {
        let link = client.stats().link;
        retransmits += link.retransmits;
        datagrams += link.datagrams_sent;
        if let Some(peer) = mesh.host.peer_stats(mesh.games[index].player) {
            retransmits += peer.link.retransmits;
            datagrams += peer.link.datagrams_sent;
        }
    }
    (retransmits, datagrams)
}

/// 10 and 20 ms one way, no loss, wake-ups up to 2 ms late: retransmissions ≤ 1 % of
/// datagrams, S1, S2, no false drops.
#[test]
fn late_timers_cause_no_spurious_retransmits() {
    for one_way in [10u64, 20] {
        for_each_seed(seeded_test!(format!("late_timers_{one_way}ms")), SEEDS, |seed| {
            let faults = LinkFaults { latency_ms: one_way, ..LinkFaults::default() };
            let mut config = MeshConfig::new(seed, 4).with_faults(faults);
            config.wake_lateness_ms = 2;
            let mesh = Mesh::run_checked(config)?;
            let (retransmits, datagrams) = retransmissions(&mesh);
            ensure(retransmits * 100 <= datagrams, || {
                format!("{one_way} ms: {retransmits} retransmissions of {datagrams} datagrams")
            })
        });
    }
}

/// The 95th percentile of `latencies` (ms).
fn p95(mut latencies: Vec<u64>) -> u64 {
    latencies.sort_unstable();
    latencies[(latencies.len() * 95 / 100).min(latencies.len() - 1)]
}

/// A listen server at 150 ms one way (±10 ms of jitter, wake-ups up to 2 ms late): the host's
/// own player's commands go into the next turn it seals, as early as the network allows, so
/// its p95 submit → execute latency is no worse than the clients'.
#[test]
fn the_host_player_is_not_later_than_the_clients() {
    for_each_seed(seeded_test!("host_latency_150ms"), SEEDS, |seed| {
        let faults = LinkFaults { latency_ms: 140, jitter_ms: 20, ..LinkFaults::default() };
        let mut config = MeshConfig::new(seed, 3).with_faults(faults);
        config.host_plays = true;
        config.wake_lateness_ms = 2;
        let mesh = Mesh::run_checked(config)?;
        let host = mesh.host_game().ok_or("the host plays")?;
        let host_p95 = p95(host.latencies_ms.iter().map(|&(_, ms)| ms).collect());
        let clients: Vec<u64> = mesh
            .games
            .iter()
            .filter(|game| game.player != host.player)
            .flat_map(|game| game.latencies_ms.iter().map(|&(_, ms)| ms))
            .collect();
        let clients_p95 = p95(clients);
        #[allow(clippy::print_stderr)]
        {
            eprintln!("seed {seed}: host p95 {host_p95} ms, clients p95 {clients_p95} ms");
        }
        ensure(host_p95 <= clients_p95, || {
            format!("host p95 {host_p95} ms > clients' {clients_p95} ms")
        })
    });
}

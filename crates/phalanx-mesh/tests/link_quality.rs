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

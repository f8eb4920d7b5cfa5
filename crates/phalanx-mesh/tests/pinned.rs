//! Behaviour pins: the trace digest and every game's final state of a few seeded runs. A
//! refactor that changes any packet, timer or turn changes a digest and fails here; a change
//! meant to alter behaviour updates the pins in the same commit and says why (the history of
//! each reprint is in git).

use phalanx_mesh::{Burst, Direction, LinkFaults, Mesh, MeshConfig};

/// `(name, trace digest, final state of every game)`.
type Pin = (&'static str, u64, Vec<u64>);

fn run(name: &'static str, config: MeshConfig) -> Pin {
    let mut mesh = Mesh::new(config).expect("valid config");
    mesh.run().expect("bounded run");
    mesh.check_agreement().expect("S1");
    mesh.check_exactly_once().expect("S2");
    (name, mesh.trace_digest, mesh.games.iter().map(|game| game.state).collect())
}

fn scenarios() -> Vec<Pin> {
    let lossy = LinkFaults {
        latency_ms: 50,
        jitter_ms: 30,
        loss_permille: 50,
        burst: Some(Burst { enter_permille: 20, leave_permille: 300, loss_permille: 600 }),
        duplicate_permille: 30,
        ..LinkFaults::default()
    };
    let mut partitioned = MeshConfig::new(7, 4).with_faults(lossy);
    partitioned.cut(1, 6_000, 8_000, Direction::Both);
    partitioned.cut(2, 12_000, 16_000, Direction::Up);
    let mut listen = MeshConfig::new(11, 3).with_faults(LinkFaults {
        latency_ms: 150,
        jitter_ms: 40,
        loss_permille: 20,
        ..LinkFaults::default()
    });
    listen.host_plays = true;
    listen.record_replay = true;
    listen.desync_at = Some((1, 95));
    listen.pause_requests.push((9_000, 0, true));
    listen.pause_requests.push((10_500, 1, false));
    let mut dropped = MeshConfig::new(23, 3).with_faults(lossy);
    dropped.cut(0, 5_000, 20_000, Direction::Both);
    vec![
        run("clean", MeshConfig::new(3, 3)),
        run("partitioned", partitioned),
        run("listen", listen),
        run("dropped", dropped),
    ]
}

#[test]
#[allow(clippy::print_stdout, reason = "prints new pins on request")]
fn seeded_runs_are_unchanged() {
    let pins: Vec<Pin> = vec![
        (
            "clean",
            0x1a06d77009734f24,
            vec![0xb23888f36e4d45b7, 0xb23888f36e4d45b7, 0xb23888f36e4d45b7],
        ),
        (
            "partitioned",
            0x3ca4b06b05c3a09f,
            vec![0x6b5f96d7e496cca5, 0x6b5f96d7e496cca5, 0x59170f3be8088c16, 0x6b5f96d7e496cca5],
        ),
        (
            "listen",
            0x2a11c922bf38c341,
            vec![0x3723b1a3e30b0baf, 0x8236e8df016b1186, 0x3723b1a3e30b0baf, 0x7bad979703183537],
        ),
        (
            "dropped",
            0x53ac162e6ef9c6d9,
            vec![0xf94134170d871c6c, 0xf9065756d7237278, 0xf9065756d7237278],
        ),
    ];
    let actual = scenarios();
    if std::env::var_os("PHALANX_PRINT_PINS").is_some() {
        for (name, digest, states) in &actual {
            println!("(\"{name}\", {digest:#x}, vec!{states:#x?}),");
        }
    }
    assert_eq!(actual, pins, "a seeded run changed (PHALANX_PRINT_PINS=1 prints the new pins)");
}

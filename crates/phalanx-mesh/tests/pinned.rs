//! Behaviour pins: the trace digest and every game's final state of a few seeded runs, taken on
//! main before the structure change (5ce35a4). A refactor that changes any packet, timer or
//! turn changes a digest and fails here; a change meant to alter behaviour updates the pins in
//! the same commit and says why.

use phalanx_mesh::{Burst, Direction, LinkFaults, Mesh, MeshConfig, Partition};

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
    partitioned.partitions.push(Partition {
        client: 1,
        from_ms: 6_000,
        until_ms: 8_000,
        direction: Direction::Both,
    });
    partitioned.partitions.push(Partition {
        client: 2,
        from_ms: 12_000,
        until_ms: 16_000,
        direction: Direction::Up,
    });
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
    dropped.partitions.push(Partition {
        client: 0,
        from_ms: 5_000,
        until_ms: 20_000,
        direction: Direction::Both,
    });
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
            0x45484a0d462c475c,
            vec![0xb23888f36e4d45b7, 0xb23888f36e4d45b7, 0xb23888f36e4d45b7],
        ),
        (
            "partitioned",
            0x38cdb6b432ca95c6,
            vec![0x79a39c039444fe2b, 0x79a39c039444fe2b, 0x435fbd6d664e778, 0x79a39c039444fe2b],
        ),
        (
            "listen",
            0x2c196d70b2832e71,
            vec![0x1d2ec40395942388, 0x13e84fcc1dfd721, 0x1d2ec40395942388, 0xfab2f11507b70337],
        ),
        (
            "dropped",
            0xf1d5ca1f2c96717c,
            vec![0xf94134170d871c6c, 0x9228af997f8f85f6, 0x29a06dd19af33393],
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

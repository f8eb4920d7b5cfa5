//! Behaviour pins at L2: the trace digest and every player's final state hash of a few seeded
//! runs over real quinn. A refactor that changes any datagram's time, size or fate changes a
//! digest and fails here; a change meant to alter behaviour updates the pins in the same commit
//! and says why (the history of each reprint is in git).

use phalanx::PlayerId;
use phalanx_sim::{run_with, ChainGame, LinkFaults, SimConfig, Step};

/// `(name, trace digest, each player's last state hash)`.
type Pin = (&'static str, u64, Vec<Option<u64>>);

fn run(name: &'static str, mut config: SimConfig) -> Pin {
    // The pins are QUIC's traces, whatever PHALANX_TRANSPORT says.
    config.transport = phalanx::Transport::Quic;
    let report = run_with::<ChainGame>(config, 4).expect("the simulation ran");
    report.check_agreement().expect("S1");
    (name, report.trace_digest, report.players.iter().map(|p| p.hashes.last().copied()).collect())
}

fn scenarios() -> Vec<Pin> {
    let mut lossy = SimConfig::new(5, 3);
    lossy.faults = LinkFaults::default();
    lossy.faults.loss_permille = 50;
    lossy.faults.jitter_ms = 40;
    lossy.faults.duplicate_permille = 20;
    lossy.latency_ms = 40;
    lossy.turns = 80;
    lossy.timeline = vec![
        Step::Partition { at_ms: 3_000, player: PlayerId(2) },
        Step::Repair { at_ms: 4_500, player: PlayerId(2) },
    ];
    let mut removed = SimConfig::new(9, 3);
    removed.turns = 80;
    removed.timeline = vec![Step::Partition { at_ms: 2_000, player: PlayerId(0) }];
    vec![run("lossy", lossy), run("removed", removed)]
}

#[test]
#[allow(clippy::print_stdout, reason = "prints new pins on request")]
fn seeded_runs_are_unchanged() {
    let pins: Vec<Pin> = vec![
        (
            "lossy",
            0xb03a0267b921840e,
            vec![Some(0x546bd309287a9829), Some(0x546bd309287a9829), Some(0x546bd309287a9829)],
        ),
        (
            "removed",
            0x2303dbfffc5e67b4,
            vec![Some(0x115794958254fa39), Some(0xa0abdc97d1582995), Some(0xa0abdc97d1582995)],
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

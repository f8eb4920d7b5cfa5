//! Time series for reports (`SimConfig::samples_every_ms`): off by default; when on, one sample
//! per player per interval of simulated time with cumulative counters that never go back,
//! ending at the run's totals, and one latency per command a player submitted.

use phalanx::PlayerId;
use phalanx_sim::{run_with, ChainGame, SimConfig, Step};

#[test]
fn samples_are_off_by_default() {
    let report = run_with::<ChainGame>(SimConfig::new(3, 2), 5).expect("the run");
    assert!(report.players.iter().all(|p| p.samples.is_empty()));
    assert!(report.players.iter().all(|p| p.command_latencies.is_empty()));
}

#[test]
fn samples_follow_the_run() {
    let mut config = SimConfig::new(4, 3);
    config.samples_every_ms = 500;
    config.turns = 200;
    config.latency_ms = 40;
    config.timeline = vec![
        Step::Partition { at_ms: 8_000, player: PlayerId(1) },
        Step::Repair { at_ms: 9_500, player: PlayerId(1) },
    ];
    let report = run_with::<ChainGame>(config, 5).expect("the run");
    report.check_agreement().expect("agreement");
    let turn_ms = u64::from(phalanx::SessionConfig::default().turns.length_ms);
    for player_report in &report.players {
        let (player, samples) = (player_report.name(), &player_report.samples);
        // About one sample per half second of play (none while a player hears nothing).
        let played_ms = 200 * turn_ms;
        assert!(samples.len() as u64 >= played_ms / 500 * 3 / 4, "{player}: {}", samples.len());
        for pair in samples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(b.at_ms / 500 > a.at_ms / 500, "{a:?} {b:?}");
            assert!(b.turn > a.turn, "{a:?} {b:?}");
            assert!(b.wire_bytes.0 >= a.wire_bytes.0 && b.wire_bytes.1 >= a.wire_bytes.1);
            assert!(b.app_bytes.0 >= a.app_bytes.0 && b.stall_ms >= a.stall_ms);
        }
        let last = samples.last().expect("a sample");
        assert!(last.wire_bytes.0 <= player_report.wire_bytes.0);
        assert!(last.app_bytes.1 <= player_report.app_bytes.1);
        assert!(last.turn_length_ms > 0 && last.command_delay_turns > 0);
        let latencies = &player_report.command_latencies;
        assert_eq!(latencies.len() as u64, player_report.submitted, "{player}");
        // A command executes no sooner than one turn after its submit, in execution order.
        assert!(latencies.iter().all(|&(_, ms)| u64::from(ms) >= turn_ms / 2), "{latencies:?}");
        assert!(latencies.windows(2).all(|w| w[0].0 <= w[1].0));
    }
    // The cut-off player stalled, and its samples show it during the cut.
    let cut = &report.player(PlayerId(1)).expect("seat 1 taken").samples;
    let before = cut.iter().rev().find(|s| s.at_ms < 8_000).expect("a sample before the cut");
    let after = cut.iter().find(|s| s.at_ms > 10_000).expect("a sample after the cut");
    assert!(after.stall_ms > before.stall_ms + 500, "{before:?} {after:?}");
}

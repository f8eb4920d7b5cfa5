//! Speculation at L2 (phalanx-sim, the real drivers on turmoil): 8 players through a host, 50 ms
//! one way, 2 % loss, 20 ms of jitter, player 3 cut off for 2 s. Run with every player's game
//! speculating (`SimConfig::speculate`: after each confirmed turn it predicts ahead on its own
//! orders, and the next confirmed turn rolls it back) and without, on the same seed: every
//! player's state hash after every turn, the commands executed and the trace are the same, and
//! the speculating games did predict and roll back. With late seals the cut player's rendered
//! state runs on through its cut (at most 13 turns, 1.3 s of it) and stands behind the schedule
//! less than without, the confirmed game still the same.
//!
//! `PHALANX_SEEDS=<n>` sets the seeds (default 12 for speculation, 24 for late seals).

use phalanx::PlayerId;
use phalanx_sim::{run_with, ChainGame, SimConfig, SimReport, Step};
use phalanx_testkit::{ensure, for_each_seed, seeded_test};

fn scenario(seed: u64, speculate: bool) -> SimConfig {
    scenario_late(seed, speculate, 0)
}

fn scenario_late(seed: u64, speculate: bool, late_seals: u32) -> SimConfig {
    let mut config = SimConfig::new(seed, 8);
    config.latency_ms = 50;
    config.faults.loss_permille = 20;
    config.faults.jitter_ms = 20;
    config.turns = 200;
    config.speculate = speculate;
    config.late_seals = late_seals;
    config.timeline.extend([
        Step::Partition { at_ms: 10_000, player: PlayerId(3) },
        Step::Repair { at_ms: 12_000, player: PlayerId(3) },
    ]);
    config
}

/// `changed` agrees, and its trace and every player's turn hashes and executed commands are
/// `plain`'s.
fn same_confirmed_game(changed: &SimReport, plain: &SimReport, what: &str) -> Result<(), String> {
    changed.check_agreement()?;
    ensure(changed.trace_digest == plain.trace_digest, || {
        format!("traces differ: {:#x} vs {:#x}", changed.trace_digest, plain.trace_digest)
    })?;
    for (a, b) in changed.players.iter().zip(&plain.players) {
        ensure(a.hashes == b.hashes && a.commands == b.commands, || {
            format!("{:?}: the {what} game's turns differ", a.player)
        })?;
    }
    Ok(())
}

#[test]
fn speculation_changes_nothing_confirmed() {
    for_each_seed(seeded_test!("speculation_l2"), 12, |seed| {
        let plain = run_with::<ChainGame>(scenario(seed, false), 4).map_err(|e| e.to_string())?;
        let spec = run_with::<ChainGame>(scenario(seed, true), 4).map_err(|e| e.to_string())?;
        same_confirmed_game(&spec, &plain, "speculating")?;
        let (predicted, rolled_back) = spec
            .players
            .iter()
            .filter_map(|p| p.speculation.as_ref())
            .fold((0u64, 0u64), |(predicted, rolled_back), s| {
                (predicted + s.stats.predicted_turns, rolled_back + s.stats.resimulated_turns)
            });
        ensure(predicted > 0 && rolled_back > 0, || {
            format!("predicted {predicted} turns, rolled back {rolled_back}")
        })
    });
}

/// Late seals (13 turns): the same confirmed game and trace as without; the cut player's
/// rendered state stands behind the schedule for part of its 2 s cut without them, and less
/// with them.
#[test]
fn late_seals_run_the_rendered_state_through_a_cut() {
    for_each_seed(seeded_test!("late_seals_l2"), 24, |seed| {
        let plain =
            run_with::<ChainGame>(scenario_late(seed, true, 0), 4).map_err(|e| e.to_string())?;
        let late =
            run_with::<ChainGame>(scenario_late(seed, true, 13), 4).map_err(|e| e.to_string())?;
        same_confirmed_game(&late, &plain, "late-sealing")?;
        let stood = |report: &SimReport| {
            let cut = report.player(PlayerId(3)).and_then(|p| p.speculation.as_ref());
            cut.map_or(0, |s| s.rendered_stall_us / 1_000)
        };
        let (without, with) = (stood(&plain), stood(&late));
        #[allow(clippy::print_stderr)]
        {
            eprintln!("seed {seed}: the cut player's rendered state behind {without} ms without, {with} ms with");
        }
        ensure(without >= 500 && with < without, || {
            format!("behind the schedule {without} ms without late seals, {with} ms with")
        })
    });
}

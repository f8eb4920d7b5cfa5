//! Fault-matrix row 6 at L2 (real quinn under turmoil): a player cut off for less than the
//! idle timeout is not dropped. Cuts of 0.25, 0.5 and 0.9 times `link.idle_timeout_ms`, both ways and
//! player → host only, on links with 0, 2 and 5 % loss and 0, 20 and 40 ms jitter, in the
//! lobby or in play (the cut starts at 4 s; a lossy join can keep the lobby open past it):
//! every player plays every turn, nobody is timed out, every player holds the same state after
//! every turn (S1), and every command a player submitted executes exactly once, for that
//! player, on every peer (S2). Also the simulation example of `docs/guide/simulate.md`.
//!
//! At 0.9 × the margin is 300 ms for the last datagram before the cut, the first after it and the
//! latency. A link whose peer is silent, or acknowledges nothing new, probes every
//! `link.probe_interval_ms` (50 ms) whatever its retransmit backoff, and quinn's congestion window is
//! fixed (phalanx paces itself), so nothing queues behind a collapsed window when the cut heals.
//! That holds for the CI seeds and for a 1,000-seed sweep of every variant (the bound is in
//! `docs/design/session.md`, "Liveness").
//!
//! `PHALANX_SEEDS=<n>` sets the seeds per variant (default 50); `docs/internals/testing.md` gives
//! the sweep. `PHALANX_VARIANT=<text>` runs only the variants whose name contains it (for example
//! `loss50_jitter40`).

use phalanx::PlayerId;
use phalanx_sim::{run_with, ChainGame, SimConfig, SimReport, Step};
use phalanx_testkit::{for_each_seed, seeded_test, SeededTest};

/// The reference game: a hash chain over every record, a command every 4 turns per player.
const EVERY: u32 = 4;

/// Seeds per variant in CI.
const SEEDS: u64 = 50;

/// How many turns after its stamped turn a command must have executed everywhere: the longest
/// cut (27 turns of 100 ms) and the window (16 turns).
const SETTLE_TURNS: u32 = 27 + 16;

/// Which way a cut goes.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Nothing gets through either way.
    Both,
    /// The player's datagrams do not reach the host; the host's still reach the player.
    Up,
}

/// One variant: the cut's length as a fraction of the idle timeout (in percent), its direction,
/// the loss on every link (‰) and the jitter (ms).
fn scenario(seed: u64, percent: u64, cut: Cut, loss_permille: u32, jitter_ms: u64) -> SimConfig {
    let mut config = SimConfig::new(seed, 4);
    config.faults.loss_permille = loss_permille;
    config.faults.jitter_ms = jitter_ms;
    config.turns = 120;
    let cut_ms = u64::from(config.session.link.idle_timeout_ms) * percent / 100;
    let (from_ms, player) = (4_000, PlayerId(2));
    let partition = match cut {
        Cut::Both => Step::Partition { at_ms: from_ms, player },
        Cut::Up => Step::PartitionUp { at_ms: from_ms, player },
    };
    config.timeline = vec![partition, Step::Repair { at_ms: from_ms + cut_ms, player }];
    config
}

/// Nobody dropped, every player finished, S1 and S2.
fn check(config: SimConfig) -> Result<SimReport, String> {
    let turns = config.turns as usize;
    let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
    report.check_agreement()?;
    if let Some((at, event)) = report.host_events.iter().find(|(_, e)| e.contains("TimedOut")) {
        let seats: Vec<String> = report.players.iter().map(|player| player.name()).collect();
        return Err(format!("{event} at {at} ms (seats: {seats:?})"));
    }
    report.check_everyone_played(turns)?;
    report.check_exactly_once(SETTLE_TURNS)?;
    Ok(report)
}

/// Every loss and jitter of the sweep for one cut; `test` names the calling test.
fn sweep(test: SeededTest, cut: Cut, percent: u64) {
    for loss_permille in [0, 20, 50] {
        for jitter_ms in [0, 20, 40] {
            let name = format!("{}_loss{loss_permille}_jitter{jitter_ms}", test.scenario());
            if std::env::var("PHALANX_VARIANT").is_ok_and(|only| !name.contains(&only)) {
                continue;
            }
            for_each_seed(test.variant(name), SEEDS, |seed| {
                check(scenario(seed, percent, cut, loss_permille, jitter_ms)).map(|_| ())
            });
        }
    }
}

/// A quarter of the idle timeout, both ways.
#[test]
fn quarter_timeout_cut_both_ways() {
    sweep(seeded_test!("quarter_both"), Cut::Both, 25);
}

/// Half the idle timeout, both ways.
#[test]
fn half_timeout_cut_both_ways() {
    sweep(seeded_test!("half_both"), Cut::Both, 50);
}

/// 0.9 of the idle timeout, both ways.
#[test]
fn most_of_the_timeout_cut_both_ways() {
    sweep(seeded_test!("most_both"), Cut::Both, 90);
}

/// A quarter of the idle timeout, player → host only.
#[test]
fn quarter_timeout_cut_one_way() {
    sweep(seeded_test!("quarter_up"), Cut::Up, 25);
}

/// Half the idle timeout, player → host only.
#[test]
fn half_timeout_cut_one_way() {
    sweep(seeded_test!("half_up"), Cut::Up, 50);
}

/// 0.9 of the idle timeout, player → host only.
#[test]
fn most_of_the_timeout_cut_one_way() {
    sweep(seeded_test!("most_up"), Cut::Up, 90);
}

/// The simulation example of `docs/guide/simulate.md` (4 players, 5 % loss, 40 ms jitter, seat 2
/// cut off from 5 s to 7 s) with seeds 1, 2, 3... (`PHALANX_SEEDS`, default 200): nobody is
/// dropped.
#[test]
fn readme_example_keeps_everyone() {
    let test = seeded_test!("readme_example");
    let seeds: Vec<u64> = match std::env::var("PHALANX_SEED") {
        Ok(seed) => vec![seed.parse().expect("PHALANX_SEED is a number")],
        Err(_) => {
            let count = std::env::var("PHALANX_SEEDS")
                .map_or(SEEDS * 4, |count| count.parse().expect("PHALANX_SEEDS is a number"));
            (1..=count).collect()
        }
    };
    for seed in seeds {
        let mut config = SimConfig::new(seed, 4);
        config.faults.loss_permille = 50;
        config.faults.jitter_ms = 40;
        config.timeline = vec![
            Step::Partition { at_ms: 5_000, player: PlayerId(2) },
            Step::Repair { at_ms: 7_000, player: PlayerId(2) },
        ];
        if let Err(failure) = check(config) {
            panic!("seed {seed}: {failure}\nrerun: {}", test.rerun_command(seed));
        }
    }
}

//! How a session ends, at L2 (real quinn under turmoil), 4 players, 20 ms one way: the host
//! ending the game, the host shutting down and a player leaving each reach every peer within
//! one turn plus one round trip (140 ms here), where an idle timeout took 3 s.
//!
//! `PHALANX_SEEDS=<n>` sets the seeds per test (default 24), `PHALANX_SEED=<s>` reruns one;
//! `--nocapture` prints every player's measured delay (here: about 85 ms for the end, 20 ms
//! for a shutdown, 100 ms for a leave).
#![allow(clippy::print_stderr, reason = "prints the measured delays")]

use phalanx::{EndReason, PlayerId};
use phalanx_sim::{run_with, ChainGame, SimConfig, SimReport, Step};
use phalanx_testkit::{ensure, for_each_seed, seeded_test};

const SEEDS: u64 = 24;
const EVERY: u32 = 3;

fn scenario(seed: u64, step: Step) -> SimConfig {
    let mut config = SimConfig::new(seed, 4);
    config.turns = 200;
    config.timeline = vec![step];
    config
}

/// One turn plus one round trip.
fn bound_ms(config: &SimConfig) -> u64 {
    u64::from(config.session.turns.length_ms) + 2 * config.latency_ms
}

fn run(config: SimConfig) -> Result<SimReport, String> {
    let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
    report.check_agreement()?;
    Ok(report)
}

/// The host ends the game at 5 s: every player executes every turn up to the last one `end`
/// returned, ends `Finished` with the host's code, within a turn and a round trip of the call.
#[test]
fn the_end_of_the_game_reaches_everyone() {
    for_each_seed(seeded_test!("end_of_game"), SEEDS, |seed| {
        let config = scenario(seed, Step::EndGame { at_ms: 5_000, code: 7 });
        let bound = bound_ms(&config);
        let report = run(config)?;
        let (at, last) = report.game_ended.ok_or("the host ended the game")?;
        for player in &report.players {
            ensure(player.ended == Some(EndReason::Finished { code: 7 }), || {
                format!("{} ended {:?}", player.name(), player.ended)
            })?;
            ensure(player.hashes.len() == last.0 as usize + 1, || {
                format!(
                    "{} played {} turns, the last is {last}",
                    player.name(),
                    player.hashes.len()
                )
            })?;
            let after = player.finished_ms.unwrap_or(u64::MAX).saturating_sub(at);
            eprintln!("{} ended: {after} ms", player.name());
            ensure(after <= bound, || {
                format!("{} ended {after} ms after the call", player.name())
            })?;
        }
        Ok(())
    });
}

/// The host shuts down at 5 s: every player ends `HostClosed` within a turn and a round trip.
#[test]
fn a_host_shutdown_reaches_everyone() {
    for_each_seed(seeded_test!("host_shutdown"), SEEDS, |seed| {
        let config = scenario(seed, Step::ShutdownHost { at_ms: 5_000 });
        let bound = bound_ms(&config);
        let report = run(config)?;
        let at = report.host_shutdown_ms.ok_or("the host shut down")?;
        for player in &report.players {
            ensure(player.ended == Some(EndReason::HostClosed), || {
                format!("{} ended {:?}", player.name(), player.ended)
            })?;
            let after = player.finished_ms.unwrap_or(u64::MAX).saturating_sub(at);
            eprintln!("{} ended: {after} ms", player.name());
            ensure(after <= bound, || {
                format!("{} ended {after} ms after the close", player.name())
            })?;
        }
        Ok(())
    });
}

/// Player 1 leaves at 5 s: every other player executes its `Left` record within a turn and a
/// round trip of its leaving, and plays on to the end.
#[test]
fn a_leaving_player_is_seen_by_everyone() {
    for_each_seed(seeded_test!("leave"), SEEDS, |seed| {
        let leaver = PlayerId(1);
        let config = scenario(seed, Step::Leave { at_ms: 5_000, player: leaver });
        let (bound, turns) = (bound_ms(&config), config.turns as usize);
        let report = run(config)?;
        let gone = report.player(leaver).ok_or("the leaver joined")?;
        let left_at = gone.finished_ms.ok_or("the leaver left")?;
        for player in report.players.iter().filter(|p| p.player != Some(leaver)) {
            let seen = player.left_seen.iter().find(|&&(who, _)| who == leaver);
            let Some(&(_, at)) = seen else {
                return Err(format!("{} never saw {leaver} leave", player.name()));
            };
            let after = at.saturating_sub(left_at);
            eprintln!("seed {seed}: {} saw it {after} ms after", player.name());
            ensure(after <= bound, || format!("{} saw it {after} ms after", player.name()))?;
            ensure(player.hashes.len() == turns, || {
                format!("{} played {} of {turns} turns", player.name(), player.hashes.len())
            })?;
        }
        Ok(())
    });
}

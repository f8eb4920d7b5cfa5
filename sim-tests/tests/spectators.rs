//! Spectators at L2 (real quinn under turmoil): ten spectators on links far worse than the
//! players' (300 ms one way, 10 % loss), half from the start and half joining mid-game from a
//! snapshot, watch to the last turn and agree with the players at every turn; the players'
//! stalls and command latency are the same, within noise, as without them.

use phalanx_sim::{run_with, ChainGame, SimConfig, SimReport};
use phalanx_testkit::{for_each_seed, seeded_test};

const EVERY: u32 = 4;
const TURNS: u32 = 300;

fn scenario(seed: u64, spectators: usize) -> SimConfig {
    let mut config = SimConfig::new(seed, 4);
    config.turns = TURNS;
    config.latency_ms = 50;
    config.faults.loss_permille = 10;
    config.faults.jitter_ms = 10;
    config.session.catch_up.snapshot_interval_turns = 50;
    config.spectators =
        (0..spectators).map(|i| if i < spectators / 2 { 0 } else { 15_000 }).collect();
    config.spectator_link = (300, 100);
    config
}

/// The players' share of game time in gaps longer than 1.5 turns, and their mean p95
/// command latency.
type Figures = (f64, f64);

/// The [`Figures`] of a run.
fn players(report: &SimReport) -> Figures {
    let (mut gaps, mut span, mut p95, mut counted) = (0u64, 0u64, 0.0f64, 0.0f64);
    for player in &report.players {
        let (in_gaps, total) = player.time_in_gaps(150);
        gaps += in_gaps;
        span += total;
        if let Some((_, latency, _)) = player.latency_ms {
            p95 += f64::from(latency);
            counted += 1.0;
        }
    }
    (gaps as f64 / span.max(1) as f64, p95 / counted.max(1.0))
}

#[test]
fn ten_spectators_on_bad_links_agree_and_the_players_do_not_notice() {
    let figures = std::sync::Mutex::new(Vec::new());
    for_each_seed(seeded_test!("ten_spectators_on_bad_links"), 12, |seed| {
        let alone = run_with::<ChainGame>(scenario(seed, 0), EVERY).map_err(|e| e.to_string())?;
        let watched =
            run_with::<ChainGame>(scenario(seed, 10), EVERY).map_err(|e| e.to_string())?;
        watched.check_agreement()?;
        watched.check_spectators_agree()?;
        for spectator in &watched.spectators {
            if spectator.turns_played() != TURNS as usize {
                return Err(format!(
                    "{} watched to {}",
                    spectator.name(),
                    spectator.turns_played()
                ));
            }
            // Joining at 15 s it starts from a snapshot (one joining at 0 may too, when its
            // handshake over the bad link outlasts the first snapshot turn).
            if spectator.machine >= 5 && spectator.restored.is_none() {
                return Err(format!("{}: restored {:?}", spectator.name(), spectator.restored));
            }
        }
        figures.lock().expect("not poisoned").push((players(&alone), players(&watched)));
        Ok(())
    });
    let figures = figures.into_inner().expect("not poisoned");
    let runs = figures.len() as f64;
    let mean =
        |pick: &dyn Fn(&(Figures, Figures)) -> f64| figures.iter().map(pick).sum::<f64>() / runs;
    let (stall_alone, stall_watched) = (mean(&|f| f.0 .0), mean(&|f| f.1 .0));
    let (p95_alone, p95_watched) = (mean(&|f| f.0 .1), mean(&|f| f.1 .1));
    #[allow(clippy::print_stderr, reason = "the figures docs/measurements/session.md quotes")]
    {
        eprintln!(
            "players without / with 10 spectators: time in gaps {:.2} % / {:.2} %, p95 {:.0} / {:.0} ms",
            stall_alone * 100.0,
            stall_watched * 100.0,
            p95_alone,
            p95_watched
        );
    }
    assert!(stall_watched <= stall_alone + 0.005, "stalls {stall_alone} → {stall_watched}");
    assert!(p95_watched <= p95_alone * 1.1 + 10.0, "p95 {p95_alone} → {p95_watched}");
}

#[test]
fn a_spectator_sending_commands_is_refused_and_dropped_and_the_game_is_untouched() {
    for_each_seed(seeded_test!("a_spectator_sending_commands"), 12, |seed| {
        let mut config = scenario(seed, 2);
        config.spectator_link = (50, 0);
        config.hostile_spectator = true;
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        // Every command a player executed was a player's (never one of the spectator's).
        report.check_exactly_once(40)?;
        let dropped = report.events.iter().any(|(_, event)| {
            matches!(
                event,
                phalanx::Event::SpectatorLeft(id, phalanx::proto::SpectatorGone::Misbehaved)
                    if id.0 == 0
            )
        });
        if !dropped {
            return Err(format!("the hostile spectator stayed: {:?}", report.host_events));
        }
        // The honest spectator watched to the end and agrees.
        let honest = &report.spectators[1];
        if honest.turns_played() != TURNS as usize {
            return Err(format!("{} watched to {}", honest.name(), honest.turns_played()));
        }
        report.check_spectators_agree().or_else(|error| {
            // The dropped one stopped early; only its turns so far are compared.
            if error.contains("spectator 0") {
                Ok(())
            } else {
                Err(error)
            }
        })
    });
}

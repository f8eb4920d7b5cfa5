//! Rejoin through snapshots at L2 (real quinn under turmoil): a dedicated host asks the
//! players for snapshots in turn, verifies them against the sync checks, and a crashed
//! client's new process restores the latest one, replays only the turns after it, and agrees
//! with everyone from there on. A game that plays on long enough for its turns to outgrow the
//! rejoin log still takes its players back.

use phalanx::{proto::SnapshotRejection, Event, PlayerId, SessionConfig};
use phalanx_sim::{run_with, ChainGame, PlayerReport, Rng, SimConfig, SimReport, Step};
use phalanx_testkit::{for_each_seed, seeded_test};

const EVERY: u32 = 4;

/// Three players, a little loss and jitter, a snapshot every `interval` turns; player 1
/// crashes somewhere in `crash_from_ms..crash_from_ms + 3 s` and comes back 4.5 s later.
fn scenario(seed: u64, turns: u32, interval: u32, crash_from_ms: u64) -> SimConfig {
    let mut config = SimConfig::new(seed, 3);
    config.turns = turns;
    config.faults.loss_permille = 10;
    config.faults.jitter_ms = 10;
    config.session = snapshot_session(interval);
    let crash_ms = crash_from_ms + Rng::new(seed).below(3_000);
    config.timeline = vec![Step::CrashClient {
        at_ms: crash_ms,
        player: PlayerId(1),
        restart_after_ms: Some(4_500),
    }];
    config
}

fn snapshot_session(interval: u32) -> SessionConfig {
    let mut session = SessionConfig::default();
    session.catch_up.rejoin_window_ms = 30_000;
    session.catch_up.snapshot_interval_turns = interval;
    session
}

fn seat(report: &SimReport, seat: u8) -> Result<&PlayerReport, String> {
    report.player(PlayerId(seat)).ok_or_else(|| format!("nobody took seat {seat}"))
}

fn events(report: &SimReport, what: &str) -> usize {
    report.host_events.iter().filter(|(_, event)| event.contains(what)).count()
}

/// What every rejoin through a snapshot must show: everyone played to the end and agrees,
/// the returning process restored a verified snapshot and replayed less than `interval` plus
/// the outage, and nothing was rejected.
fn check_rejoin(config: &SimConfig, report: &SimReport, interval: u32) -> Result<(), String> {
    let turns = config.turns;
    let crash_turn = config.timeline.iter().find_map(|step| match *step {
        Step::CrashClient { at_ms, .. } => Some((at_ms / 100) as u32),
        _ => None,
    });
    report.check_agreement()?;
    report.check_exactly_once(40)?;
    let played: Vec<usize> = report.players.iter().map(PlayerReport::turns_played).collect();
    if played.iter().any(|&t| t != turns as usize) {
        return Err(format!("turns played {played:?}"));
    }
    let back = seat(report, 1)?;
    let Some((snapshot, bytes)) = back.restored else {
        return Err(format!("player 1 restored no snapshot (first turn {})", back.first_turn));
    };
    if back.incarnations != 2 || bytes != 8 || snapshot.0 + 1 != back.first_turn {
        return Err(format!("player 1: {back:?}"));
    }
    // The latest verified snapshot before the crash: at most an interval, plus the
    // verification's few turns, behind the crash (the turns are late by a few more).
    if crash_turn.is_some_and(|crash| snapshot.0 + 2 * interval < crash) {
        return Err(format!("restored turn {} long before the crash {crash_turn:?}", snapshot.0));
    }
    if events(report, "SnapshotStored") == 0
        || events(report, "SnapshotRejected") != 0
        || events(report, "Desync") != 0
    {
        return Err(format!("host events: {:?}", report.host_events));
    }
    Ok(())
}

#[test]
fn a_crashed_client_rejoins_through_a_snapshot() {
    for_each_seed(seeded_test!("a_crashed_client_rejoins_through_a_snapshot"), 24, |seed| {
        let config = scenario(seed, 300, 50, 12_000);
        let report = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
        check_rejoin(&config, &report, 50)
    });
}

#[test]
fn a_game_longer_than_the_rejoin_log_still_takes_players_back() {
    for_each_seed(seeded_test!("a_game_longer_than_the_rejoin_log"), 12, |seed| {
        // A 2 KiB log holds about 200 turns of this game: without snapshots the rejoin at
        // turn 250-280 would be refused with RejoinUnavailable.
        let mut config = scenario(seed, 400, 50, 25_000);
        config.session.catch_up.rejoin_log_bytes_max = 2_048;
        let report = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
        check_rejoin(&config, &report, 50)
    });
}

/// A match of `minutes` (at 100 ms turns) with a snapshot a minute; player 1 crashes at the
/// end of it and plays on for 30 s after coming back.
fn long_match(seed: u64, minutes: u32) -> Result<(), String> {
    let crash_from_ms = u64::from(minutes) * 60_000;
    let turns = minutes * 600 + 300;
    let mut config = scenario(seed, turns, 600, crash_from_ms);
    config.limit_ms = u64::from(turns) * 100 + 60_000;
    let report = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
    check_rejoin(&config, &report, 600)
}

#[test]
fn a_rejoin_after_ten_minutes_restores_a_snapshot() {
    for_each_seed(seeded_test!("a_rejoin_after_ten_minutes"), 3, |seed| long_match(seed, 10));
}

#[test]
fn a_rejoin_after_an_hour_restores_a_snapshot() {
    for_each_seed(seeded_test!("a_rejoin_after_an_hour"), 1, |seed| long_match(seed, 60));
}

#[test]
fn a_late_joiner_starts_from_a_snapshot_and_agrees_from_its_first_check() {
    for_each_seed(seeded_test!("a_late_joiner_starts_from_a_snapshot"), 24, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.turns = 300;
        config.faults.loss_permille = 10;
        config.faults.jitter_ms = 10;
        config.session = snapshot_session(50);
        config.session.catch_up.late_join = true;
        config.join_late = vec![(2, 12_000)];
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let late = seat(&report, 2)?;
        let Some((snapshot, _)) = late.restored else {
            return Err(format!("the late joiner restored nothing: {late:?}"));
        };
        if late.first_turn != snapshot.0 + 1 || late.turns_played() != 300 {
            return Err(format!("late joiner: first turn {}, {late:?}", late.first_turn));
        }
        if events(&report, "Desync") != 0 || events(&report, "PlayerJoined") != 3 {
            return Err(format!("host events: {:?}", report.host_events));
        }
        Ok(())
    });
}

#[test]
fn a_snapshot_that_does_not_match_is_rejected_and_a_good_one_is_used() {
    for_each_seed(seeded_test!("a_snapshot_that_does_not_match"), 24, |seed| {
        // Player 0's reported hash is wrong from turn 40: the snapshot it gives at turn 50
        // (the first giver) is rejected; the next ones, from the others, are kept, and the
        // crashed player 1 comes back through one of them.
        let mut config = scenario(seed, 300, 50, 15_000);
        config.desync_at = Some((PlayerId(0), 40));
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        let rejected = report.events.iter().filter(|(_, event)| {
            matches!(
                event,
                Event::SnapshotRejected {
                    from: Some(PlayerId(0)),
                    reason: SnapshotRejection::HashMismatch { .. },
                    ..
                }
            )
        });
        if rejected.count() == 0 || events(&report, "SnapshotStored") == 0 {
            return Err(format!("host events: {:?}", report.host_events));
        }
        let back = seat(&report, 1)?;
        let witness = seat(&report, 2)?;
        if back.restored.is_none() || back.turns_played() != 300 {
            return Err(format!("player 1: {back:?}"));
        }
        for turn in back.first_turn as usize..300 {
            if back.hash_at(turn) != witness.hash_at(turn) {
                return Err(format!("turn {turn}: the rejoined player differs from player 2"));
            }
        }
        Ok(())
    });
}

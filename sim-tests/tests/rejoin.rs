//! Row 10 at L2: a client's process crashes at a random time (seeded) and a new process comes
//! back with the same token. Within the rejoin window it catches up from the rejoin's turns and
//! every state hash matches everyone else's (L3); after the window it stays dropped (as row 7)
//! and its join is refused with a typed error.

use phalanx::{error::JoinRefusal, PlayerId};
use phalanx_sim::{run_with, ChainGame, PlayerReport, Rng, SimConfig, SimReport, Step};
use phalanx_testkit::{for_each_seed, seeded_test};

const EVERY: u32 = 4;
const TURNS: u32 = 150;

/// Three players, a little loss and jitter; player 1 crashes between 3 and 6 s.
fn scenario(seed: u64, window_ms: u32, restart_after_ms: u64) -> SimConfig {
    let mut config = SimConfig::new(seed, 3);
    config.turns = TURNS;
    config.faults.loss_permille = 10;
    config.faults.jitter_ms = 10;
    config.session.catch_up.rejoin_window_ms = window_ms;
    let crash_ms = 3_000 + Rng::new(seed).below(3_000);
    config.timeline = vec![Step::CrashClient {
        at_ms: crash_ms,
        player: PlayerId(1),
        restart_after_ms: Some(restart_after_ms),
    }];
    config
}

/// The report of the player in seat `seat`.
fn seat(report: &SimReport, seat: u8) -> Result<&PlayerReport, String> {
    report.player(PlayerId(seat)).ok_or_else(|| format!("nobody took seat {seat}"))
}

fn events(report: &SimReport, what: &str) -> usize {
    report.host_events.iter().filter(|(_, event)| event.contains(what)).count()
}

#[test]
fn crashed_client_rejoins_within_the_window() {
    for_each_seed(seeded_test!("crashed_client_rejoins_within_the_window"), 8, |seed| {
        // The host notices the silence after the idle timeout (3 s); come back after that.
        let config = scenario(seed, 30_000, 4_500);
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let turns: Vec<usize> = report.players.iter().map(|p| p.hashes.len()).collect();
        if turns.iter().any(|&t| t != TURNS as usize) {
            return Err(format!("turns executed {turns:?} (the rejoined player replays from 0)"));
        }
        let crashed = seat(&report, 1)?;
        if crashed.incarnations != 2 || crashed.refusal.is_some() {
            return Err(format!(
                "player 1: {} processes, refusal {:?}",
                crashed.incarnations, crashed.refusal
            ));
        }
        if events(&report, "PlayerTimedOut") != 1 || events(&report, "PlayerRejoined") != 1 {
            return Err(format!("host events: {:?}", report.host_events));
        }
        let ended: Vec<_> = report.players.iter().map(|p| p.ended).collect();
        if ended.iter().any(Option::is_some) {
            return Err(format!("a session ended early: {ended:?}"));
        }
        // Every player executed the same commands, the rejoined one included.
        let executed: Vec<u64> = report.players.iter().map(|p| p.executed).collect();
        if executed.iter().any(|&e| e != executed[0]) {
            return Err(format!("executed {executed:?}"));
        }
        Ok(())
    });
}

#[test]
fn crashed_client_is_refused_after_the_window() {
    for_each_seed(seeded_test!("crashed_client_is_refused_after_the_window"), 5, |seed| {
        // Timed out after 3 s, window 2 s: back after 6.5 s is too late.
        let config = scenario(seed, 2_000, 6_500);
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        for player in [0, 2] {
            let turns = seat(&report, player)?.hashes.len();
            if turns != TURNS as usize {
                return Err(format!("player {player} did not finish: {turns}"));
            }
        }
        let crashed = seat(&report, 1)?;
        if crashed.refusal != Some(JoinRefusal::RejoinExpired) {
            return Err(format!(
                "player 1's late rejoin: {:?} ({:?})",
                crashed.refusal, crashed.join_error
            ));
        }
        if events(&report, "PlayerTimedOut") != 1 || events(&report, "PlayerRejoined") != 0 {
            return Err(format!("host events: {:?}", report.host_events));
        }
        Ok(())
    });
}

/// A crash is silent on both transports (a dead process sends nothing, not even a QUIC close):
/// the host times the player out, never takes it for a leave, and the process that restarts
/// half a second later waits out the seat (`TokenUsed`), rejoins and plays to the end in
/// agreement.
#[test]
fn a_crash_is_silent_and_a_quick_restart_plays_on_over_both_transports() {
    for transport in [phalanx::Transport::Quic, phalanx::Transport::Udp] {
        let name =
            seeded_test!("a_crash_is_silent_and_a_quick_restart_plays_on_over_both_transports");
        for_each_seed(name, 6, |seed| {
            let mut config = scenario(seed, 30_000, 500);
            config.transport = transport;
            let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
            report.check_agreement()?;
            let crashed = seat(&report, 1)?;
            if crashed.incarnations != 2 || crashed.ended.is_some() || crashed.refusal.is_some() {
                return Err(format!(
                    "{transport:?}: player 1: {} processes, ended {:?}, refusal {:?}",
                    crashed.incarnations, crashed.ended, crashed.refusal
                ));
            }
            // Removed (taken for a leave) before it came back: what a leaked close did. (At the
            // end every player's goodbye removes it, as it should.)
            let host = &report.host_events;
            let back = host.iter().position(|(_, e)| e.contains("PlayerRejoined(PlayerId(1))"));
            let removed = host[..back.unwrap_or(host.len())]
                .iter()
                .filter(|(_, e)| e.contains("PlayerRemoved(PlayerId(1))"))
                .count();
            let timed_out = events(&report, "PlayerTimedOut");
            if timed_out != 1 || removed != 0 || back.is_none() {
                return Err(format!("{transport:?}: host events {:?}", report.host_events));
            }
            let turns: Vec<usize> = report.players.iter().map(|p| p.hashes.len()).collect();
            if turns.iter().any(|&t| t != TURNS as usize) {
                return Err(format!("{transport:?}: turns executed {turns:?}"));
            }
            Ok(())
        });
    }
}

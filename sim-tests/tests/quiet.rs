//! The quiet relay (`SessionConfig::link.heartbeat_ms`) at L2 over the raw-UDP transport
//! (over QUIC, quinn's own ACK-only packets stay: about 9 datagrams a second): 4 players at
//! 150 ms turns, 2 % loss, 20 ms jitter, 100 ms round trip, a playout buffer of one turn more,
//! player 2 cut off for 1.5 s. Against the same seed with the relay off (every turn
//! acknowledged within `link.ack_delay_ms`, the rest equal):
//!
//! - every player holds the same state after every turn (S1), every command executes exactly
//!   once (S2), nobody is dropped;
//! - each player sends at most half the datagrams it sends with the relay off (heartbeats
//!   every 500 ms, commands at once and once more, gaps at once);
//! - no player stalls longer in total than the worst player does with the relay off plus a
//!   second (the buffer hides a single lost turn; what is left is the cut).
//!
//! The demo's profile itself (`SessionConfig::quiet_relay`) on a clean link: its playout
//! buffer takes the extra turn only after a loss, so the command delay is one turn and every
//! player's p95 latency stays within one round trip and a turn (250 ms), on the wire it sends
//! with the extra always there.
//!
//! `PHALANX_SEEDS=<n>` sets the seeds (default 12; 24 for the clean link).

use phalanx::{PlayerId, SessionConfig};
use phalanx_sim::{run_with, ChainGame, SimConfig, SimReport, Step};
use phalanx_testkit::{for_each_seed, seeded_test};

/// A command every 4 turns per player.
const EVERY: u32 = 4;

/// Seeds in CI.
const SEEDS: u64 = 12;

/// The cut (10 turns) and the window (16 turns).
const SETTLE_TURNS: u32 = 10 + 16;

fn scenario(seed: u64, quiet: bool) -> SimConfig {
    let mut config = SimConfig::new(seed, 4);
    config.transport = phalanx::Transport::Udp;
    config.faults.loss_permille = 20;
    config.faults.jitter_ms = 20;
    config.latency_ms = 50;
    config.turns = 200;
    let session = &mut config.session;
    session.turns.length_ms = 150;
    session.playout.buffer_ms_max = 165;
    session.playout.extra_ms = 150;
    session.turns.pace_tolerance_ms = 20;
    if quiet {
        session.link.heartbeat_ms = 500;
    }
    config.timeline = vec![
        Step::Partition { at_ms: 8_000, player: PlayerId(2) },
        Step::Repair { at_ms: 9_500, player: PlayerId(2) },
    ];
    config
}

/// S1, S2, every turn played by everyone.
fn run(config: SimConfig) -> Result<SimReport, String> {
    let turns = config.turns as usize;
    let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
    report.check_agreement()?;
    report.check_everyone_played(turns)?;
    report.check_exactly_once(SETTLE_TURNS)?;
    Ok(report)
}

#[test]
fn the_quiet_relay_halves_the_uplink_and_hides_single_losses() {
    for_each_seed(seeded_test!("quiet_relay"), SEEDS, |seed| {
        let classic = run(scenario(seed, false)).map_err(|e| format!("relay off: {e}"))?;
        let quiet = run(scenario(seed, true)).map_err(|e| format!("quiet relay: {e}"))?;
        let worst_classic_stall = classic.players.iter().map(|p| p.stall_ms).max().unwrap_or(0);
        for (off, on) in classic.players.iter().zip(&quiet.players) {
            let (sent_off, sent_on) = (off.wire_datagrams.0, on.wire_datagrams.0);
            if sent_on * 2 > sent_off {
                return Err(format!(
                    "{} sent {sent_on} datagrams with the quiet relay, {sent_off} without",
                    on.name()
                ));
            }
            if on.stall_ms > worst_classic_stall + 1_000 {
                return Err(format!(
                    "{} stalled {} ms with the quiet relay; the worst without: {} ms",
                    on.name(),
                    on.stall_ms,
                    worst_classic_stall
                ));
            }
        }
        Ok(())
    });
}

/// The quiet relay's own profile, 8 players, 100 ms round trip, no loss, no jitter, no cut.
fn clean(seed: u64, extra_after_loss: bool) -> SimConfig {
    let mut config = SimConfig::new(seed, 8);
    config.transport = phalanx::Transport::Udp;
    config.latency_ms = 50;
    config.turns = 200;
    config.session = SessionConfig::default().quiet_relay();
    config.session.playout.extra_after_loss = extra_after_loss;
    config
}

#[test]
fn on_a_clean_link_the_quiet_relay_keeps_a_turn_of_command_delay() {
    for_each_seed(seeded_test!("quiet_clean"), 24, |seed| {
        let lean = run(clean(seed, true)).map_err(|e| format!("extra after loss: {e}"))?;
        let always = run(clean(seed, false)).map_err(|e| format!("extra always: {e}"))?;
        for (on, off) in lean.players.iter().zip(&always.players) {
            let p95 = |player: &phalanx_sim::PlayerReport| player.latency_ms.map(|l| l.1);
            let (Some(lean_p95), Some(always_p95)) = (p95(on), p95(off)) else {
                return Err(format!("{}: no latency measured", on.name()));
            };
            if lean_p95 > 250 || always_p95 <= 250 {
                return Err(format!(
                    "{}: p95 {lean_p95} ms with the extra after a loss, {always_p95} ms always",
                    on.name()
                ));
            }
            // The same datagrams, give or take a few: the wire is unchanged.
            let (sent, sent_always) =
                (on.wire_bytes.0 + on.wire_bytes.1, off.wire_bytes.0 + off.wire_bytes.1);
            if sent * 100 > sent_always * 105 {
                return Err(format!(
                    "{} sent {sent} B with the extra after a loss, {sent_always} B always",
                    on.name()
                ));
            }
        }
        Ok(())
    });
}

//! Layer L2: real quinn + tokio under turmoil, seeded. Each test states the promise it checks;
//! a failure names the seed (`PHALANX_SEED` reruns one, `PHALANX_SEEDS` sets the count).
//! Row 10 (crash and rejoin) is in `rejoin.rs`.

use phalanx::proto::mesh::PeerConfig;
use phalanx::{PlayerId, Transport};
use phalanx_sim::{
    run_with, ChainGame, LinkFaults, PlayerReport, SimConfig, SimReport, Step, Topology,
};
use phalanx_testkit::{for_each_seed, seeded_test};

/// The reference game: a hash chain over every record, a command every 4 turns per player.
const EVERY: u32 = 4;

/// Turns each player executed, in seat order.
fn turns(report: &SimReport) -> Vec<usize> {
    report.players.iter().map(|player| player.hashes.len()).collect()
}

/// The report of the player in seat `seat`.
fn seat(report: &SimReport, seat: u8) -> Result<&PlayerReport, String> {
    report.player(PlayerId(seat)).ok_or_else(|| format!("nobody took seat {seat}"))
}

/// Every player's state hashes, in seat order.
fn turn_hashes(report: &SimReport) -> Vec<&[u64]> {
    report.players.iter().map(|player| player.hashes.as_slice()).collect()
}

/// A clean network: every player executes the same 100 turns with the same states, and every
/// command submitted is executed by everyone.
#[test]
fn clean_network_agrees() {
    for_each_seed(seeded_test!("clean_network_agrees"), 10, |seed| {
        let report =
            run_with::<ChainGame>(SimConfig::new(seed, 4), EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let turns = turns(&report);
        if turns.iter().any(|&t| t != 100) {
            return Err(format!("turns executed {turns:?}"));
        }
        let submitted: u64 = report.players.iter().map(|player| player.submitted).sum();
        let executed: Vec<u64> = report.players.iter().map(|player| player.executed).collect();
        if executed.iter().any(|&e| e < submitted.saturating_sub(8)) || submitted < 80 {
            return Err(format!("submitted {submitted}, executed {executed:?}"));
        }
        Ok(())
    });
}

/// Determinism: the same seed twice gives the same trace digest and states; another seed gives
/// another trace.
#[test]
fn same_seed_same_trace() {
    for_each_seed(seeded_test!("same_seed_same_trace"), 5, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.faults = LinkFaults::default();
        config.faults.loss_permille = 30;
        config.faults.jitter_ms = 15;
        config.turns = 60;
        let a = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
        let b = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
        config.seed += 1;
        let c = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        if a.trace_digest != b.trace_digest || turn_hashes(&a) != turn_hashes(&b) {
            return Err(format!(
                "same seed, different runs: {:#x} vs {:#x}",
                a.trace_digest, b.trace_digest
            ));
        }
        if a.trace_digest == c.trace_digest {
            return Err("different seeds, same trace".into());
        }
        a.check_agreement()
    });
}

/// Determinism at the scale of the L2 scenarios, on each transport and topology: 8 players
/// through a host over raw UDP and over QUIC, and 8 peers in a mesh, 50 ms one way, 2 % loss,
/// 20 ms of jitter, 30 s of 100 ms turns with the quiet relay's settings; each the same seed
/// twice, the same trace. (`mesh.rs`'s modem test runs the relay twice on 24 seeds too.)
#[test]
fn same_seed_same_trace_on_every_transport_and_topology() {
    for_each_seed(seeded_test!("same_seed_same_trace_everywhere"), 3, |seed| {
        let kinds = [(Transport::Udp, false), (Transport::Quic, false), (Transport::Udp, true)];
        for (transport, mesh) in kinds {
            let mut config = SimConfig::new(seed, 8);
            config.transport = transport;
            config.latency_ms = 50;
            config.faults.loss_permille = 20;
            config.faults.jitter_ms = 20;
            config.turns = 300;
            config.session = config.session.clone().quiet_relay();
            config.session.turns.length_ms = 100;
            if mesh {
                config.topology = Topology::Mesh(PeerConfig::default());
            }
            let a = run_with::<ChainGame>(config.clone(), EVERY).map_err(|e| e.to_string())?;
            let b = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
            if a.trace_digest != b.trace_digest || turn_hashes(&a) != turn_hashes(&b) {
                return Err(format!(
                    "{transport:?}{}: same seed, different runs: {:#x} vs {:#x}",
                    if mesh { " mesh" } else { "" },
                    a.trace_digest,
                    b.trace_digest
                ));
            }
        }
        Ok(())
    });
}

/// Row 1 at L2: 5 % loss each way on every link — agreement holds and every player finishes.
#[test]
fn loss_five_percent_agrees() {
    for_each_seed(seeded_test!("loss_five_percent_agrees"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.loss_permille = 50;
        config.latency_ms = 50;
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let turns = turns(&report);
        if turns.iter().any(|&t| t != 100) {
            return Err(format!("turns executed {turns:?}"));
        }
        Ok(())
    });
}

/// Row 7 at L2: a player cut off longer than the idle timeout is removed; the others play on
/// and agree; the cut-off player's session ends with a typed outcome.
#[test]
fn long_partition_removes_the_player() {
    for_each_seed(seeded_test!("long_partition_removes_the_player"), 10, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.turns = 120;
        config.timeline = vec![
            Step::Partition { at_ms: 3_000, player: PlayerId(1) },
            Step::Repair { at_ms: 9_000, player: PlayerId(1) },
        ];
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        if seat(&report, 0)?.hashes.len() != 120 || seat(&report, 2)?.hashes.len() != 120 {
            return Err(format!("the others did not finish: {:?}", turns(&report)));
        }
        if seat(&report, 1)?.ended.is_none() {
            return Err("the cut-off player has no end reason".into());
        }
        if !report.host_events.iter().any(|(_, e)| e.contains("PlayerTimedOut")) {
            return Err(format!("no timeout event: {:?}", report.host_events));
        }
        Ok(())
    });
}

/// Runs `config` and checks agreement and that the players named in `finishers` executed every
/// turn of the scenario.
fn run_agreeing(config: SimConfig, finishers: &[u8]) -> Result<SimReport, String> {
    let turns = config.turns as usize;
    let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
    report.check_agreement()?;
    for &player in finishers {
        if seat(&report, player)?.hashes.len() != turns {
            let seat = seat(&report, player)?;
            return Err(format!(
                "player {player} did not finish: turns {:?}; it ended {:?} at {:?} ms (join \
                 error {:?}); host events {:?}",
                self::turns(&report),
                seat.ended,
                seat.finished_ms,
                seat.join_error,
                report.host_events
            ));
        }
    }
    Ok(report)
}

/// Row 2 at L2: Gilbert–Elliott bursts on every link — agreement, everyone finishes.
#[test]
fn burst_loss_agrees() {
    for_each_seed(seeded_test!("burst_loss_agrees"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.burst = Some(phalanx_sim::Burst {
            enter_permille: 20,
            leave_permille: 200,
            loss_permille: 800,
        });
        run_agreeing(config, &[0, 1, 2, 3]).map(|_| ())
    });
}

/// Rows 3 and 20 at L2: duplicates, some replayed up to 3 s later — QUIC and phalanx drop
/// them; agreement holds and every command executes once.
#[test]
fn duplicates_and_replays_are_harmless() {
    for_each_seed(seeded_test!("duplicates_and_replays_are_harmless"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.duplicate_permille = 300;
        config.faults.replay_delay_ms = 3_000;
        let report = run_agreeing(config, &[0, 1, 2, 3])?;
        if report.copies <= report.datagrams {
            return Err("no duplicate was sent".into());
        }
        Ok(())
    });
}

/// Row 4 at L2: jitter up to 300 ms per datagram reorders everything — agreement holds.
#[test]
fn reordering_agrees() {
    for_each_seed(seeded_test!("reordering_agrees"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.jitter_ms = 300;
        run_agreeing(config, &[0, 1, 2, 3]).map(|_| ())
    });
}

/// Row 5 at L2: one-way latency 0, 150 and 300 ms — agreement, everyone finishes.
#[test]
fn latency_agrees() {
    for latency in [0u64, 150, 300] {
        for_each_seed(seeded_test!(format!("latency_agrees_{latency}")), 10, |seed| {
            let mut config = SimConfig::new(seed, 4);
            config.latency_ms = latency;
            run_agreeing(config, &[0, 1, 2, 3]).map(|_| ())
        });
    }
}

/// Row 6 at L2: a partition shorter than the idle timeout heals without a drop; the cut-off
/// player catches up and agrees.
#[test]
fn short_partition_heals() {
    for_each_seed(seeded_test!("short_partition_heals"), 20, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.timeline = vec![
            Step::Partition { at_ms: 2_000, player: PlayerId(2) },
            Step::Repair { at_ms: 3_500, player: PlayerId(2) },
        ];
        let report = run_agreeing(config, &[0, 1, 2])?;
        if report.host_events.iter().any(|(_, e)| e.contains("PlayerTimedOut")) {
            return Err("dropped by a short partition".into());
        }
        Ok(())
    });
}

/// Row 11 at L2: the host crashes mid-game — every client ends with the typed `HostLost`
/// within the idle timeout (the simulation would hit its time limit otherwise).
#[test]
fn host_crash_ends_every_client_with_host_lost() {
    for_each_seed(seeded_test!("host_crash_ends_every_client_with_host_lost"), 20, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.timeline = vec![Step::CrashHost { at_ms: 4_000 }];
        config.limit_ms = 20_000;
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        for player in &report.players {
            if player.ended != Some(phalanx::EndReason::HostLost) {
                return Err(format!("{} ended with {:?}", player.name(), player.ended));
            }
        }
        Ok(())
    });
}

/// Row 14 at L2: one player's state diverges after turn 33 — every player's first desync
/// report names check turn 40 and exactly that player.
#[test]
fn desync_is_reported_at_l2() {
    for_each_seed(seeded_test!("desync_is_reported_at_l2"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.desync_at = Some((PlayerId(2), 33));
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        for player in (0..4).map(PlayerId) {
            let first = report.desyncs.iter().find(|(p, _, _)| *p == player);
            let Some((_, turn, diverged)) = first else {
                return Err(format!("{player:?} saw no desync"));
            };
            if *turn != 40 || diverged.len() != 1 {
                return Err(format!("{player:?}: turn {turn}, diverged {diverged:?}"));
            }
        }
        Ok(())
    });
}

/// Row 16: datagrams corrupted below QUIC (a byte flipped) are discarded by QUIC's packet
/// authentication before phalanx sees them; the game is unaffected.
#[test]
fn corruption_below_quic_is_discarded() {
    for_each_seed(seeded_test!("corruption_below_quic_is_discarded"), 20, |seed| {
        let mut config = SimConfig::new(seed, 4);
        config.faults.corrupt_permille = 50;
        run_agreeing(config, &[0, 1, 2, 3]).map(|_| ())
    });
}

/// Row 22: a flood of 1000 joins with bad tokens while a game runs — every one refused, the game
/// unaffected.
#[test]
fn join_flood_is_refused() {
    for_each_seed(seeded_test!("join_flood_is_refused"), 3, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.flood_joins = 1_000;
        config.turns = 150;
        // The flood's 1000 joins go one after another: over UDP each costs a round trip more
        // than over QUIC (the cookie), about 120 ms, so they need more than the default 120 s.
        config.limit_ms = 300_000;
        let report = run_agreeing(config, &[0, 1, 2])?;
        if report.flood_refused != 1_000 {
            return Err(format!("{} of 1000 flood joins refused", report.flood_refused));
        }
        Ok(())
    });
}

/// The swarm: every seed draws its own mix — loss 0–30 %, duplication 0–50 %, jitter,
/// latency, one partition of random length, and in half the seeds one player's process
/// crashing (restarted in time to rejoin, or never). Safety phase: faults on for the first
/// 8 s, agreement throughout. Liveness phase: the links are clean afterwards, and every
/// player that was not dropped — or that rejoined — finishes all its turns.
#[test]
fn swarm() {
    for_each_seed(seeded_test!("swarm"), 40, |seed| {
        let mut rng = phalanx_sim::Rng::new(seed);
        let mut config = SimConfig::new(seed, 4);
        config.faults.loss_permille = rng.below(300) as u32;
        config.faults.duplicate_permille = rng.below(500) as u32;
        config.faults.jitter_ms = rng.below(150);
        config.faults.until_ms = Some(8_000);
        config.latency_ms = rng.below(120);
        config.turns = 160;
        let at_ms = 2_000 + rng.below(4_000);
        let player = rng.below(4) as u8;
        config.timeline = vec![
            Step::Partition { at_ms, player: PlayerId(player) },
            Step::Repair { at_ms: at_ms + rng.below(5_000), player: PlayerId(player) },
        ];
        let crashed = rng.chance(500).then(|| {
            let crashed = (player + 1 + rng.below(3) as u8) % 4;
            let restart = rng.chance(700).then(|| 4_000 + rng.below(3_000));
            let at_ms = 2_000 + rng.below(5_000);
            config.timeline.push(Step::CrashClient {
                at_ms,
                player: PlayerId(crashed),
                restart_after_ms: restart,
            });
            (crashed, restart.is_some())
        });
        let report = run_with::<ChainGame>(config, EVERY).map_err(|e| e.to_string())?;
        report.check_agreement()?;
        let finishers = (0..4).filter(|&p| {
            p != player && crashed.is_none_or(|(who, restarted)| p != who || restarted)
        });
        for other in finishers {
            if seat(&report, other)?.hashes.len() != 160 {
                return Err(format!(
                    "player {other} did not finish (cut player {player}, crashed {crashed:?}): \
                     seats {:?}, turns {:?}, ended {:?}, join errors {:?}, host events {:?}",
                    report.players.iter().map(|p| p.name()).collect::<Vec<_>>(),
                    turns(&report),
                    report.players.iter().map(|p| p.ended).collect::<Vec<_>>(),
                    report.players.iter().map(|p| p.join_error.clone()).collect::<Vec<_>>(),
                    report.host_events
                ));
            }
        }
        Ok(())
    });
}

/// Row 8 at L2: swizzle-clog — players cut one by one and restored in another order, each cut
/// shorter than the idle timeout: nobody is dropped, everyone finishes and agrees.
#[test]
fn swizzle_clog_heals() {
    for_each_seed(seeded_test!("swizzle_clog_heals"), 10, |seed| {
        let mut rng = phalanx_sim::Rng::new(seed);
        let mut config = SimConfig::new(seed, 4);
        let mut steps = Vec::new();
        let mut at = 2_000;
        for player in 0..3 {
            at += rng.below(300);
            steps.push(Step::Partition { at_ms: at, player: PlayerId(player) });
        }
        // Restore in reverse order, all within 1.5 s of the first cut.
        for player in (0..3).rev() {
            at += rng.below(300);
            steps.push(Step::Repair { at_ms: at, player: PlayerId(player) });
        }
        config.timeline = steps;
        let report = run_agreeing(config, &[0, 1, 2, 3])?;
        if report.host_events.iter().any(|(_, e)| e.contains("PlayerTimedOut")) {
            return Err("a short cut dropped a player".into());
        }
        Ok(())
    });
}

/// Row 9 at L2: a half-open connection (the player still hears the host, the host no longer
/// hears it) — the player is removed after the idle timeout, the others finish and agree,
/// and the half-open player's session ends with a typed outcome.
#[test]
fn half_open_player_is_removed() {
    for_each_seed(seeded_test!("half_open_player_is_removed"), 10, |seed| {
        let mut config = SimConfig::new(seed, 3);
        config.turns = 120;
        config.timeline = vec![Step::PartitionUp { at_ms: 3_000, player: PlayerId(1) }];
        let report = run_agreeing(config, &[0, 2])?;
        if !report.host_events.iter().any(|(_, e)| e.contains("PlayerTimedOut")) {
            return Err("the half-open player was not removed".into());
        }
        if seat(&report, 1)?.ended.is_none() {
            return Err("the half-open player's session has no end reason".into());
        }
        Ok(())
    });
}

/// Rows 17 and 19 at L2: an authenticated player that also sends garbage, or datagrams that
/// claim turns the host never sealed, is dropped and counted, then removed as a repeat
/// offender; everyone else finishes and agrees.
#[test]
fn hostile_player_is_removed_and_others_unaffected() {
    for mode in [phalanx_sim::Hostile::Garbage, phalanx_sim::Hostile::SpoofedTurns] {
        for_each_seed(seeded_test!(format!("hostile_{mode:?}")), 5, |seed| {
            let mut config = SimConfig::new(seed, 4);
            config.hostile = Some((PlayerId(3), mode));
            let report = run_agreeing(config, &[0, 1, 2])?;
            if !report.host_events.iter().any(|(_, e)| e.contains("PlayerMisbehaved")) {
                return Err(format!(
                    "{mode:?}: the hostile player was never removed: {:?} {:?}",
                    report.host_events,
                    report.players.iter().map(|p| p.ended).collect::<Vec<_>>()
                ));
            }
            Ok(())
        });
    }
}

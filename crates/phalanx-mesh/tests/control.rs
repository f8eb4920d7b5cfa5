//! Session control at layer L1 (fault-matrix rows 5–9 and 12–15, issue "speed control, sync
//! checks, stalls and drops, pause, replays"): speed control, desync detection (exact bound),
//! lying clients, slow machines, skewed clocks, stall notices, dead-peer drops, pause and
//! resume, and replays — each over many seeds, each run also checking S1 and S2.

use phalanx_mesh::{
    ensure, for_each_seed, seeded_test, Direction, LinkFaults, Mesh, MeshConfig, Rng,
};
use phalanx_proto::{
    verify_replay, ClientEvent, DesyncReference, HostEvent, PauseBy, Record, Replay, ReplayError,
    ReplayGame, SessionConfig, Turn, TurnBundle,
};

const SEEDS: u64 = 200;

/// Every scenario checks S1, S2 and that no idle timeout fired before a real silence.
fn run_checked(config: MeshConfig) -> Result<Mesh, String> {
    Mesh::run_checked(config)
}

/// 8 players on `faults`, 3 commands a second each, 40 s of play with the last 5 s quiet.
fn eight_players_40s(seed: u64, faults: LinkFaults) -> MeshConfig {
    let mut config = MeshConfig::new(seed, 8).with_faults(faults);
    config.command_interval_ms = (250, 416);
    config.end_ms = 40_000;
    config.submit_until_ms = 35_000;
    config.heal_at_ms = 35_000;
    config
}

fn p95(sorted: &[u64]) -> u64 {
    sorted.get(sorted.len() * 95 / 100).copied().unwrap_or(0)
}

fn pace_changes(mesh: &Mesh) -> Vec<(u64, phalanx_proto::Pace)> {
    mesh.host_events
        .iter()
        .filter_map(|(at, event)| match event {
            HostEvent::PaceChanged(pace) => Some((*at, *pace)),
            _ => None,
        })
        .collect()
}

/// Adaptation: at one-way latencies of 10, 50 and 150 ms the pace settles where nothing stalls
/// and command latency is near the floor the network allows: p95 ≤ RTT + 1.5 × the turn length
/// in force, and at 100 ms RTT p95 ≤ 250 ms (AoE's "not even noticed").
#[test]
fn pace_settles_near_the_floor() {
    for one_way in [10u64, 50, 150] {
        for_each_seed(seeded_test!(format!("pace_settles_{one_way}")), SEEDS, |seed| {
            let faults = LinkFaults { latency_ms: one_way, ..LinkFaults::default() };
            let mesh = run_checked(eight_players_40s(seed, faults))?;
            let latencies = mesh.latencies_after_ms(15_000);
            let turn = mesh.host.pace().turn_length_ms as u64;
            let bound = 2 * one_way + turn * 3 / 2;
            ensure(p95(&latencies) <= bound, || {
                format!("{one_way} ms: p95 {} > {bound} ({:?})", p95(&latencies), mesh.host.pace())
            })?;
            if one_way == 50 {
                ensure(p95(&latencies) <= 250, || format!("100 ms RTT: p95 {}", p95(&latencies)))?;
            }
            let late_stalls: Vec<_> = mesh
                .stalls()
                .into_iter()
                .filter(|&(game, turn, _, _)| mesh.games[game].executed_at_ms[turn] > 15_000)
                .collect();
            ensure(late_stalls.is_empty(), || format!("stalls after settling: {late_stalls:?}"))
        });
    }
}

/// 8 players, 100 ms RTT, 5 % loss: p95 ≤ 300 ms and stalls under 1 % of game time (mean
/// over players).
#[test]
fn pace_under_loss() {
    for_each_seed(seeded_test!("pace_under_loss"), SEEDS, |seed| {
        let faults = LinkFaults { latency_ms: 50, loss_permille: 50, ..LinkFaults::default() };
        let mesh = run_checked(eight_players_40s(seed, faults))?;
        let latencies = mesh.latencies_after_ms(15_000);
        ensure(p95(&latencies) <= 300, || format!("p95 {} ms", p95(&latencies)))?;
        // Stall time per game: every gap beyond 1.5 turn lengths counts its excess over one
        // turn. The promise is about the game as a whole: the mean over players.
        let stalls = mesh.stalls();
        let games = mesh.games.len() as u64;
        let total: u64 = stalls.iter().map(|&(_, _, gap, length)| gap - u64::from(length)).sum();
        let mean = total / games;
        ensure(mean * 100 <= mesh.config().end_ms, || {
            format!("mean stall {mean} ms per player in {} ms", mesh.config().end_ms)
        })
    });
}

/// A latency spike raises the pace within a few turns, one step per turn; after it the pace
/// comes down only after `turns.pace_settle_turns`, one step at a time.
#[test]
fn pace_rises_fast_and_settles_slowly() {
    for_each_seed(seeded_test!("pace_spike"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        config.spikes.push((10_000, 20_000, 200));
        config.end_ms = 40_000;
        config.submit_until_ms = 35_000;
        config.heal_at_ms = 35_000;
        let settle = u64::from(config.session.turns.pace_settle_turns);
        let mesh = run_checked(config)?;
        let changes = pace_changes(&mesh);
        let first_rise = changes.iter().find(|(at, _)| *at >= 10_000).map(|(at, _)| *at);
        // The spike is seen one round trip after it starts (the slower acks), then acted on.
        ensure(first_rise.is_some_and(|at| at <= 10_000 + 1_500), || {
            format!("first rise at {first_rise:?}: {changes:?}")
        })?;
        let mut previous = SessionConfig::default();
        let mut last_at = 0u64;
        for &(at, pace) in &changes {
            let delay_step =
                i64::from(pace.command_delay_turns) - i64::from(previous.turns.command_delay_turns);
            ensure(delay_step.abs() <= 1, || format!("delay jumped by {delay_step} at {at}"))?;
            let lower = pace.command_delay_turns < previous.turns.command_delay_turns
                || pace.turn_length_ms < previous.turns.length_ms;
            if lower {
                let waited = at - last_at;
                let turn = u64::from(previous.turns.length_ms);
                ensure(waited >= settle * turn, || {
                    format!("lowered {waited} ms after the previous change: {changes:?}")
                })?;
            }
            previous.turns.command_delay_turns = pace.command_delay_turns;
            previous.turns.length_ms = pace.turn_length_ms;
            last_at = at;
        }
        let peak = changes.iter().map(|(_, p)| p.command_delay_turns).max().unwrap_or(0);
        ensure(mesh.host.pace().command_delay_turns < peak, || "never came back down".into())
    });
}

/// Desync detection, exactly: one bit of one player's state flips after turn T0; every peer
/// gets a desync report naming the first check turn Tc ≥ T0 and exactly that player, while
/// executing a turn no later than Tc + turns.window_turns.
#[test]
fn desync_is_reported_at_the_first_check_turn() {
    for reference in [DesyncReference::Majority, DesyncReference::Host] {
        let name = format!("desync_{reference:?}");
        for_each_seed(seeded_test!(name), SEEDS, |seed| {
            let mut config = MeshConfig::new(seed, 4);
            config.host_plays = reference == DesyncReference::Host;
            config.session.sync.reference = reference;
            let interval = config.session.sync.interval_turns;
            let window = config.session.turns.window_turns;
            let mut rng = Rng::new(seed);
            let t0 = 20 + rng.below(150) as u32;
            let culprit = rng.below(4) as usize;
            config.desync_at = Some((culprit, t0));
            let check = t0.div_ceil(interval) * interval;
            let mesh = run_checked(config)?;
            let player = mesh.games[culprit].player;
            for (index, game) in mesh.games.iter().enumerate() {
                if index == mesh.clients.len() {
                    continue; // the host's own game learns through HostEvent, checked below
                }
                // The states stay apart after T0, so every later check reports too; the first
                // report is the one the bound is about.
                let first = mesh.desyncs_seen.iter().find(|d| d.0 == index);
                let (_, at_turn, report) = first.ok_or_else(|| format!("game {index}: none"))?;
                ensure(report.turn == Turn(check) && report.diverged == [player], || {
                    format!("T0 {t0}: game {index} got {report:?}, expected {check} / {player}")
                })?;
                ensure(at_turn.0 <= check + window, || {
                    format!("reported at {at_turn}, bound {}", check + window)
                })?;
                let _ = game;
            }
            let host_first = mesh.host_events.iter().find_map(|(_, e)| match e {
                HostEvent::Desync(report) => Some(report.clone()),
                _ => None,
            });
            ensure(
                host_first.is_some_and(|r| r.turn == Turn(check) && r.diverged == [player]),
                || "the host's first desync event disagrees".into(),
            )
        });
    }
}

/// A lying client (false hashes) is named at every check; honest players are not blamed and
/// nobody is dropped.
#[test]
fn lying_client_is_named_and_nobody_is_dropped() {
    for_each_seed(seeded_test!("lying_client"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let liar = Rng::new(seed).below(4) as usize;
        config.liar = Some(liar);
        let mesh = run_checked(config)?;
        let liar_player = mesh.games[liar].player;
        ensure(!mesh.desyncs_seen.is_empty(), || "no desync reported".into())?;
        for (_, _, report) in &mesh.desyncs_seen {
            ensure(report.diverged == [liar_player], || format!("blamed {:?}", report.diverged))?;
        }
        ensure(mesh.games.iter().all(|g| g.ended.is_none()), || "someone was dropped".into())
    });
}

/// Row 12: a slow machine (one turn per 180 ms, reporting it) slows the game for everyone:
/// speed control lengthens turns; nobody desyncs; buffers stay within the window.
#[test]
fn slow_machine_slows_everyone_without_desync() {
    for_each_seed(seeded_test!("slow_machine"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        config.slow.push((2, 180));
        let window = config.session.turns.window_turns as usize;
        let mesh = run_checked(config)?;
        ensure(mesh.host.pace().turn_length_ms >= 180, || format!("{:?}", mesh.host.pace()))?;
        ensure(mesh.host.stats().sealed_high_water <= window, || "sealed buffer grew".into())?;
        let buffered = mesh.clients.iter().map(|c| c.stats().bundles_buffered_high_water).max();
        ensure(buffered <= Some(window), || "client buffer grew".into())?;
        ensure(mesh.desyncs_seen.is_empty(), || "desync".into())
    });
}

/// Row 12: a 2 or 3 s CPU stall on one machine (it executes nothing; the host counts the
/// window from what each player has *executed*, so it stops a window ahead and waits, with a
/// notice naming the player once the wait passes the notice time); everyone resumes after,
/// nobody is dropped or desynced, and no buffer outgrows the window.
#[test]
fn cpu_stall_makes_everyone_wait_then_resume() {
    for_each_seed(seeded_test!("cpu_stall"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let mut rng = Rng::new(seed);
        let from_ms = 5_000 + rng.below(10_000);
        // 2 s (the matrix's figure) or 3 s: only a stall longer than the window (1.6 s) plus
        // the notice time (0.5 s) is announced.
        let frozen_ms = if rng.below(2) == 0 { 2_000 } else { 3_000 };
        config.frozen.push((1, from_ms, from_ms + frozen_ms));
        let window = config.session.turns.window_turns as usize;
        let mesh = run_checked(config)?;
        let frozen_player = mesh.games[1].player;
        let waited = mesh.host_events.iter().any(|(at, e)| {
            *at >= from_ms && matches!(e, HostEvent::Waiting(p) if *p == [frozen_player])
        });
        if frozen_ms == 3_000 {
            ensure(waited, || "no waiting notice for the frozen player".into())?;
        }
        ensure(mesh.games.iter().all(|g| g.ended.is_none()), || "someone was dropped".into())?;
        ensure(mesh.desyncs_seen.is_empty(), || "desync".into())?;
        let buffered = mesh.clients.iter().map(|c| c.stats().bundles_buffered_high_water).max();
        ensure(buffered <= Some(window), || format!("buffered {buffered:?} > {window}"))?;
        let spread = mesh.games.iter().map(|g| g.digests.len()).max().unwrap_or(0)
            - mesh.games.iter().map(|g| g.digests.len()).min().unwrap_or(0);
        ensure(spread <= 2, || format!("the frozen game did not catch up ({spread} turns)"))
    });
}

/// Row 13: clocks offset by up to an hour each way and running up to 5 % fast or slow change
/// nothing: same agreement, nothing lost, nobody dropped.
#[test]
fn skewed_clocks_change_nothing() {
    for_each_seed(seeded_test!("skewed_clocks"), SEEDS, |seed| {
        let mut rng = Rng::new(seed);
        let mut config = MeshConfig::new(seed, 4);
        config.clocks = (0..4)
            .map(|_| (rng.below(7_200_001) as i64 - 3_600_000, rng.below(101) as i64 - 50))
            .collect();
        let mesh = run_checked(config)?;
        ensure(mesh.games.iter().all(|g| g.ended.is_none()), || "someone was dropped".into())?;
        ensure(mesh.desyncs_seen.is_empty(), || "desync".into())
    });
}

/// Row 6 / L4: while the host waits for a player longer than `turns.stall_notice_ms`, every peer
/// gets a notice naming exactly that player, and an end-of-stall notice after.
#[test]
fn waiting_notice_names_the_player_holding_the_game() {
    for_each_seed(seeded_test!("waiting_notice"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let from_ms = 5_000 + Rng::new(seed).below(5_000);
        // Up-link only: the host keeps sending; the player's acks stop for 2.6 s (< 3 s).
        config.cut(1, from_ms, from_ms + 2_600, Direction::Up);
        let mesh = run_checked(config)?;
        let held_by = mesh.games[1].player;
        let host_notice = mesh.host_events.iter().find_map(|(at, e)| match e {
            HostEvent::Waiting(players) => Some((*at, players.clone())),
            _ => None,
        });
        ensure(host_notice.as_ref().is_some_and(|(_, p)| *p == [held_by]), || {
            format!("host notice {host_notice:?}")
        })?;
        for client in [0usize, 2, 3] {
            ensure(
                mesh.waiting_seen.iter().any(|(_, c, p)| *c == client && *p == [held_by]),
                || format!("client {client} got no waiting notice"),
            )?;
            let ended = mesh
                .client_events
                .iter()
                .any(|(_, c, e)| *c == client && *e == ClientEvent::StallEnded);
            ensure(ended, || format!("client {client} got no end-of-stall notice"))?;
        }
        ensure(mesh.host_events.iter().any(|(_, e)| *e == HostEvent::StallEnded), || {
            "host got no end-of-stall".into()
        })
    });
}

/// L2: a peer that dies is dropped within the idle timeout + one turn of its last datagram,
/// at one turn every remaining peer agrees on.
#[test]
fn dead_peer_is_dropped_within_timeout_plus_a_turn() {
    for_each_seed(seeded_test!("dead_peer"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let dies_at = 3_000 + Rng::new(seed).below(10_000);
        config.cut(2, dies_at, u64::MAX, Direction::Both);
        config.heal_at_ms = u64::MAX;
        config.submit_until_ms = 25_000;
        let idle = u64::from(config.session.link.idle_timeout_ms);
        let mesh = run_checked(config)?;
        let dead = mesh.games[2].player;
        let timed_out = mesh
            .host_events
            .iter()
            .find(|(_, e)| *e == HostEvent::PlayerTimedOut(dead))
            .map(|(at, _)| *at)
            .ok_or("never dropped")?;
        // The last datagram before the cut left at most a turn (plus latency) before it.
        let turn = u64::from(mesh.host.pace().turn_length_ms);
        ensure(timed_out <= dies_at + idle + turn, || {
            format!("died {dies_at}, dropped {timed_out}")
        })?;
        let drop_turns: Vec<Option<Turn>> = [0usize, 1, 3]
            .iter()
            .map(|&g| {
                mesh.games[g]
                    .membership
                    .iter()
                    .find(|(_, r)| *r == Record::Left(dead))
                    .map(|(t, _)| *t)
            })
            .collect();
        ensure(drop_turns.iter().all(|t| t.is_some() && *t == drop_turns[0]), || {
            format!("drop turns {drop_turns:?}")
        })
    });
}

/// Pause and resume: a player's pause takes effect at one turn on every peer, no turn is
/// executed while paused, and play resumes on request; pauses past the limit are refused.
#[test]
fn pause_and_resume() {
    for_each_seed(seeded_test!("pause_resume"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 3);
        let at = 3_000 + Rng::new(seed).below(5_000);
        config.pause_requests = vec![(at, 0, true), (at + 2_000, 1, false)];
        config.session.turns.pauses_per_player_max = 1;
        // A second pause by the same player is over its limit and must be ignored.
        config.pause_requests.push((at + 6_000, 0, true));
        let mesh = run_checked(config)?;
        let player = mesh.games[0].player;
        let paused_at: Vec<Option<Turn>> = mesh
            .games
            .iter()
            .map(|g| {
                g.membership
                    .iter()
                    .find(|(_, r)| *r == Record::Paused(PauseBy::Player(player)))
                    .map(|(t, _)| *t)
            })
            .collect();
        ensure(paused_at.iter().all(|t| t.is_some() && *t == paused_at[0]), || {
            format!("pause turns {paused_at:?}")
        })?;
        let pauses = mesh.host_events.iter().filter(|(_, e)| matches!(e, HostEvent::Paused(_)));
        ensure(pauses.count() == 1, || "the over-limit pause was granted".into())?;
        // The longest gap in execution covers the pause (≈ 2 s), not more than a second extra.
        let longest =
            mesh.games[2].executed_at_ms.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        ensure((1_800..=3_500).contains(&longest), || format!("longest gap {longest} ms"))?;
        ensure(!mesh.host.is_paused(), || "still paused".into())
    });
}

/// The reference game, for replays: the same hash chain the mesh's games run.
struct ChainGame(u64);

impl ReplayGame for ChainGame {
    fn execute(&mut self, bundle: &TurnBundle) {
        let digest = bundle.digest();
        for byte in digest.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn state_hash(&self) -> u64 {
        self.0
    }
}

/// Replays: record a game on a faulty network, serialize it, play it back, and verify every
/// check turn's state hash; a replay with one changed command fails at the first check after it.
#[test]
fn replay_of_a_faulty_game_verifies() {
    for_each_seed(seeded_test!("replay"), SEEDS, |seed| {
        let faults = LinkFaults {
            latency_ms: 40,
            jitter_ms: 60,
            loss_permille: 50,
            ..LinkFaults::default()
        };
        let mut config = MeshConfig::new(seed, 4).with_faults(faults);
        config.record_replay = true;
        let mesh = run_checked(config)?;
        let replay = mesh.host.replay().ok_or("no recording")?.clone();
        let restored = postcard_roundtrip(&replay)?;
        ensure(restored == replay, || "replay did not survive serialization".into())?;
        let verified = verify_replay(&replay, &mut ChainGame(0xcbf2_9ce4_8422_2325))
            .map_err(|e| e.to_string())?;
        ensure(
            verified.turns as usize == replay.turns.len() && verified.checks_matched > 5,
            || format!("{verified:?}"),
        )?;
        let mut tampered = replay.clone();
        let Some((index, record)) = tampered.turns.iter_mut().enumerate().find_map(|(i, turn)| {
            turn.iter_mut()
                .find(|r| matches!(r, phalanx_proto::ReplayRecord::Command { .. }))
                .map(|r| (i, r))
        }) else {
            return Err("no command recorded".into());
        };
        if let phalanx_proto::ReplayRecord::Command { payload, .. } = record {
            payload.push(0);
        }
        match verify_replay(&tampered, &mut ChainGame(0xcbf2_9ce4_8422_2325)) {
            Err(ReplayError::Mismatch { turn, .. }) => ensure(turn.0 as usize >= index, || {
                format!("mismatch at {turn} before the change at {index}")
            }),
            other => Err(format!("tampered replay gave {other:?}")),
        }
    });
}

/// A postcard round trip of a replay (the encoding the docs suggest for replay files).
fn postcard_roundtrip(replay: &Replay) -> Result<Replay, String> {
    let bytes = postcard::to_allocvec(replay).map_err(|e| e.to_string())?;
    postcard::from_bytes(&bytes).map_err(|e| e.to_string())
}

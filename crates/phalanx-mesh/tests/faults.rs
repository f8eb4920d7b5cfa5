//! Network faults at layer L1 (fault-matrix rows 1–7): real phalanx-proto sessions on the
//! seeded in-memory mesh. Every scenario runs many seeds (`PHALANX_SEEDS`, default 200; or
//! one with `PHALANX_SEED`), and every run asserts S1 (agreement: equal bundle digests per
//! turn on every peer) and S2 (every ticketed command executed exactly once, for its own
//! player, on every peer still in the game), plus the row's own outcome. A failure prints the
//! seed and the command that reruns it.

use phalanx_mesh::{
    ensure, for_each_seed, seeded_test, Burst, Direction, LinkFaults, Mesh, MeshConfig, Rng,
};
use phalanx_proto::{EndReason, HostEvent, Record};

const SEEDS: u64 = 200;

/// Every scenario checks S1, S2 and that no idle timeout fired before a real silence.
fn run_checked(config: MeshConfig) -> Result<Mesh, String> {
    Mesh::run_checked(config)
}

/// Nominal turns in `ms` of play at the session's turn length.
fn nominal_turns(mesh: &Mesh, ms: u64) -> usize {
    (ms / u64::from(mesh.config().session.turns.length_ms)) as usize
}

fn timed_out(mesh: &Mesh) -> bool {
    mesh.host_events.iter().any(|(_, event)| matches!(event, HostEvent::PlayerTimedOut(_)))
}

/// Row 1: independent loss 0–30 % each way at 100 ms RTT. S1, S2 and progress everywhere;
/// at ≤ 5 % the turn rate stays ≥ 90 % of nominal; nobody is dropped.
#[test]
fn row01_independent_loss() {
    for loss_permille in [0u32, 10, 50, 100, 200, 300] {
        for_each_seed(
            seeded_test!(format!("row01_independent_loss_{loss_permille}")),
            SEEDS,
            |seed| {
                let faults = LinkFaults { latency_ms: 50, loss_permille, ..LinkFaults::default() };
                let mesh = run_checked(MeshConfig::new(seed, 4).with_faults(faults))?;
                let turns = mesh.turns_executed_min();
                let nominal = nominal_turns(&mesh, mesh.config().end_ms);
                if loss_permille <= 50 {
                    ensure(turns * 10 >= nominal * 9, || {
                        format!("{loss_permille}‰ loss: {turns} turns of {nominal} nominal")
                    })?;
                }
                ensure(turns * 2 >= nominal, || format!("{loss_permille}‰: only {turns} turns"))?;
                ensure(!timed_out(&mesh), || format!("{loss_permille}‰: a player was dropped"))
            },
        );
    }
}

/// Row 2: Gilbert–Elliott burst loss. S1, S2; stalls during bursts are allowed and progress
/// resumes. A player is dropped exactly when a burst silenced it for the idle timeout: never
/// while every silence was shorter (checked against the silences the mesh measured).
#[test]
fn row02_burst_loss() {
    for_each_seed(seeded_test!("row02_burst_loss"), SEEDS, |seed| {
        let burst = Burst { enter_permille: 20, leave_permille: 150, loss_permille: 900 };
        let faults = LinkFaults { latency_ms: 30, burst: Some(burst), ..LinkFaults::default() };
        let mesh = run_checked(MeshConfig::new(seed, 4).with_faults(faults))?;
        let turns = mesh.turns_executed_min();
        let nominal = nominal_turns(&mesh, mesh.config().end_ms);
        ensure(turns * 10 >= nominal * 7, || format!("{turns} turns of {nominal}"))
    });
}

/// Row 3: duplication up to 50 %, duplicates delayed. Each command applied once (S2) and the
/// duplicate counters rise.
#[test]
fn row03_duplication() {
    for_each_seed(seeded_test!("row03_duplication"), SEEDS, |seed| {
        let duplicate_permille = 100 + (seed % 5) as u32 * 100;
        let faults = LinkFaults {
            latency_ms: 20,
            jitter_ms: 40,
            duplicate_permille,
            ..LinkFaults::default()
        };
        let mesh = run_checked(MeshConfig::new(seed, 4).with_faults(faults))?;
        let host_dups: u64 = mesh
            .games
            .iter()
            .filter_map(|game| mesh.host.peer_stats(game.player))
            .map(|stats| stats.drops.duplicate)
            .sum();
        let client_dups: u64 = mesh.clients.iter().map(|c| c.stats().drops.duplicate).sum();
        ensure(mesh.duplicated > 0 && host_dups > 0 && client_dups > 0, || {
            format!(
                "duplicates injected {}, counted host {host_dups} client {client_dups}",
                mesh.duplicated
            )
        })
    });
}

/// Row 4: reordering — independent jitter up to 1 s per datagram. Execution order does not
/// depend on arrival order (S1), nothing is lost (S2), and data for turns already executed is
/// dropped and counted.
#[test]
fn row04_reordering() {
    for_each_seed(seeded_test!("row04_reordering"), SEEDS, |seed| {
        let jitter_ms = Rng::new(seed).below(1_001);
        let faults = LinkFaults { latency_ms: 10, jitter_ms, ..LinkFaults::default() };
        let mesh = run_checked(MeshConfig::new(seed, 4).with_faults(faults))?;
        if jitter_ms >= 300 {
            let stale: u64 = mesh.clients.iter().map(|c| c.stats().drops.stale).sum();
            ensure(stale > 0, || format!("jitter {jitter_ms} ms but no stale bundle counted"))?;
        }
        ensure(mesh.turns_executed_min() > 0, || "no progress".into())
    });
}

/// Row 5: latency 0 / 50 / 150 / 300 / 1000 ms one way, and asymmetric 50 up / 300 down.
/// Never a desync; while the round trip fits the window the game never stalls (no gap between
/// executed turns beyond 1.5 × the turn length in force — speed control may lengthen turns);
/// at 1 s one way it still progresses.
#[test]
fn row05_latency() {
    let cases = [(0u64, 0u64), (50, 50), (150, 150), (300, 300), (1_000, 1_000), (50, 300)];
    for (up_ms, down_ms) in cases {
        for_each_seed(seeded_test!(format!("row05_latency_{up_ms}_{down_ms}")), SEEDS, |seed| {
            let mut config = MeshConfig::new(seed, 4);
            let up = LinkFaults { latency_ms: up_ms, ..LinkFaults::default() };
            let down = LinkFaults { latency_ms: down_ms, ..LinkFaults::default() };
            config.links = vec![(up, down); 4];
            let mesh = run_checked(config)?;
            let window_ms = u64::from(mesh.config().session.turns.window_turns)
                * u64::from(mesh.config().session.turns.length_ms);
            if up_ms + down_ms + 100 < window_ms {
                let stalls = mesh.stalls();
                ensure(stalls.is_empty(), || {
                    format!("stalls at {up_ms}/{down_ms} ms: {:?}", &stalls[..stalls.len().min(5)])
                })?;
            }
            ensure(
                mesh.turns_executed_min() * 4 >= nominal_turns(&mesh, mesh.config().end_ms),
                || "too little progress".into(),
            )
        });
    }
}

/// Row 6: a short partition heals: nobody is dropped, nothing is lost, and the cut-off player
/// catches up with everyone. "Short" is 0.25× and 0.9× of the partition budget: the idle
/// timeout less the silence a cut adds at its edges (up to one turn since the last datagram
/// before it; a keep-alive interval, the ack delay and the latency until the first after it).
/// Whatever the length, a drop only ever follows a real silence of the whole timeout (checked
/// in every scenario).
#[test]
fn row06_short_partition_heals() {
    for fraction in [25u64, 90] {
        for direction in [Direction::Both, Direction::Up, Direction::Down] {
            let name = format!("row06_short_partition_{fraction}_{direction:?}");
            for_each_seed(seeded_test!(name), SEEDS, |seed| {
                let mut config = MeshConfig::new(seed, 4);
                let session = &config.session;
                // Before the cut: up to a turn since the client's last datagram. After it: the
                // client's next datagram comes within a keep-alive interval (the host may be
                // stalled, sending nothing new), plus the latency.
                let edges = u64::from(session.turns.length_ms)
                    + u64::from(session.link.keep_alive_ms)
                    + u64::from(session.link.ack_delay_ms)
                    + config.links[1].0.latency_ms;
                let budget = u64::from(session.link.idle_timeout_ms) - edges;
                let from_ms = 5_000 + Rng::new(seed).below(5_000);
                let until_ms = from_ms + budget * fraction / 100;
                config.cut(1, from_ms, until_ms, direction);
                let mesh = run_checked(config)?;
                ensure(!timed_out(&mesh), || format!("dropped by a {fraction}% partition"))?;
                let turns: Vec<usize> = mesh.games.iter().map(|g| g.digests.len()).collect();
                let spread = turns.iter().max().unwrap() - turns.iter().min().unwrap();
                ensure(spread <= 2, || format!("partitioned player did not catch up: {turns:?}"))
            });
        }
    }
}

/// Row 7: a partition longer than the idle timeout. The isolated player is removed at one
/// turn every remaining peer agrees on (its `Left` record is in the same bundle everywhere —
/// S1), the rest play on at full rate, and the isolated client ends with the typed `HostLost`.
#[test]
fn row07_long_partition_drops_the_isolated_player() {
    for_each_seed(seeded_test!("row07_long_partition"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let idle = u64::from(config.session.link.idle_timeout_ms);
        let from_ms = 3_000 + Rng::new(seed).below(3_000);
        let until_ms = from_ms + idle + 2_000;
        config.cut(0, from_ms, until_ms, Direction::Both);
        let mesh = run_checked(config)?;
        let isolated = mesh.games[0].player;
        ensure(mesh.games[0].ended == Some(EndReason::HostLost), || {
            format!("isolated client ended with {:?}", mesh.games[0].ended)
        })?;
        let left_turns: Vec<_> = mesh.games[1..]
            .iter()
            .map(|game| {
                game.membership
                    .iter()
                    .find(|(_, record)| *record == Record::Left(isolated))
                    .map(|(turn, _)| *turn)
            })
            .collect();
        ensure(left_turns.iter().all(|turn| turn.is_some() && *turn == left_turns[0]), || {
            format!("remaining peers disagree on the drop turn: {left_turns:?}")
        })?;
        let detected = mesh
            .host_events
            .iter()
            .find(|(_, event)| *event == HostEvent::PlayerTimedOut(isolated))
            .map(|(at, _)| *at);
        ensure(detected.is_some_and(|at| at <= from_ms + idle + 1_000), || {
            format!("cut at {from_ms}, detected at {detected:?}")
        })?;
        let turns = mesh.turns_executed_min();
        let nominal = nominal_turns(&mesh, mesh.config().end_ms);
        ensure(turns * 10 >= nominal * 9, || format!("the rest played {turns} of {nominal} turns"))
    });
}

/// Row 8: swizzle-clog — cut a random subset of players one by one, restore them in a random
/// order. Cuts shorter than the partition budget never drop anyone; longer ones drop only
/// after a real silence of the whole timeout (checked in every scenario); S1 and S2 hold.
#[test]
fn row08_swizzle_clog() {
    for_each_seed(seeded_test!("row08_swizzle_clog"), SEEDS, |seed| {
        let mut rng = Rng::new(seed);
        let mut config = MeshConfig::new(seed, 5);
        let long = rng.below(2) == 1;
        let mut order: Vec<usize> = (0..5).filter(|_| rng.below(2) == 1).collect();
        let mut start = 5_000;
        let mut cuts = Vec::new();
        for &client in &order {
            start += rng.below(400);
            cuts.push((client, start));
        }
        // Restore in a random order, after the last cut.
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut restore = start + if long { 3_500 } else { 500 };
        for &client in &order {
            restore += rng.below(300);
            let from_ms = cuts.iter().find(|(c, _)| *c == client).map_or(start, |&(_, at)| at);
            config.cut(client, from_ms, restore, Direction::Both);
        }
        let mesh = run_checked(config)?;
        let longest = mesh.config().partitions.iter().map(|p| p.until_ms - p.from_ms).max();
        if longest.is_some_and(|ms| ms < 1_500) {
            ensure(!timed_out(&mesh), || format!("dropped after cuts of at most {longest:?} ms"))?;
        }
        Ok(())
    });
}

/// Row 9: a half-open connection — the link is up but one player's side has gone silent (its
/// process hung: nothing comes from it). Keep-alives do not hide it: it is removed at one
/// agreed turn after the idle timeout, and its own client ends with a typed outcome.
#[test]
fn row09_half_open_peer_is_removed() {
    for_each_seed(seeded_test!("row09_half_open"), SEEDS, |seed| {
        let mut config = MeshConfig::new(seed, 4);
        let from_ms = 3_000 + Rng::new(seed).below(5_000);
        config.cut(2, from_ms, u64::MAX, Direction::Up);
        config.heal_at_ms = u64::MAX;
        let mesh = run_checked(config)?;
        let silent = mesh.games[2].player;
        ensure(mesh.left(silent), || "the silent player was not removed".into())?;
        // It ends with a typed outcome: `Removed` if it executed its own `Left` record,
        // `HostLost` if the host stopped sending first (a removed seat gets no more bundles).
        let ended = mesh.games[2].ended;
        ensure(matches!(ended, Some(EndReason::Removed | EndReason::HostLost)), || {
            format!("its client ended with {ended:?}")
        })
    });
}

/// Determinism: the same seed gives the same trace and the same game states; different seeds
/// give different traces.
#[test]
fn same_seed_same_trace() {
    for_each_seed(seeded_test!("same_seed_same_trace"), 20, |seed| {
        let faults = LinkFaults {
            latency_ms: 40,
            jitter_ms: 80,
            loss_permille: 50,
            duplicate_permille: 50,
            ..LinkFaults::default()
        };
        let run = |seed| run_checked(MeshConfig::new(seed, 4).with_faults(faults));
        let (first, second, other) = (run(seed)?, run(seed)?, run(seed + 1)?);
        let states = |mesh: &Mesh| mesh.games.iter().map(|g| g.state).collect::<Vec<_>>();
        ensure(
            first.trace_digest == second.trace_digest && states(&first) == states(&second),
            || "same seed, different runs".into(),
        )?;
        ensure(first.trace_digest != other.trace_digest, || "different seeds, same trace".into())
    });
}

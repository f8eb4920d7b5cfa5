//! A listen server at L2 (`SimConfig::host_plays`: the host's process plays too), the real
//! drivers on turmoil: the host's player and seven clients, 150 ms one way (140 ms and up to
//! 20 ms of jitter), 1 % loss, every player giving an order every 0.4–0.8 s for a minute
//! (100 ms turns). Whatever the fairness, every player holds the same state after every turn
//! (S1), every order executes exactly once at every game (S2), nobody is dropped. The host
//! player's p95 submit → execute latency against the clients' pooled p95:
//!
//! - `Fairness::Fair`: within 10 % of the clients', on every seed (its orders are stamped as
//!   a client's are);
//! - `Fairness::Fast`: under half the clients' (its orders go into the next sealed turn).
//!
//! The same comparison at L1 is `crates/phalanx-mesh/tests/fair_play.rs`. A listen server's
//! run replays exactly, as any run does: same seed, same trace and states.
//!
//! `PHALANX_SEEDS=<n>` sets the seeds (default 24 per mode); `PHALANX_TRANSPORT=udp` runs it
//! over the raw-UDP transport.
#![allow(clippy::print_stderr)]

use phalanx::proto::Fairness;
use phalanx::{PlayerId, Turn, TypedTurn};
use phalanx_sim::{run, ChainGame, Rng, SimConfig, SimGame, SimReport, Topology};
use phalanx_testkit::{ensure, for_each_seed, seeded_test};

/// Seeds in CI, per mode.
const SEEDS: u64 = 24;

/// Turns played: a minute at 100 ms.
const TURNS: u32 = 600;

/// Nobody orders in the last this many turns, so every order executes before the end.
const QUIET_TURNS: u32 = 30;

/// How much later than its stamped turn an order may execute: the window.
const SETTLE_TURNS: u32 = 16;

/// `ChainGame`'s state (a hash chain over every record executed), with a player that orders
/// every 4–8 turns, drawn from its own seeded stream.
struct Orders {
    player: PlayerId,
    chain: ChainGame,
    rng: Rng,
    next_order: u32,
}

impl SimGame for Orders {
    type Command = (u8, u32);
    type Setup = ();

    fn new(player: PlayerId, seed: u64, _: &()) -> Self {
        let mut rng = Rng::new(seed ^ (u64::from(player.0) + 1).wrapping_mul(0x9E37_79B9));
        let next_order = 10 + rng.below(8) as u32;
        // The chain's own orders off (0): this game gives them.
        Orders { player, chain: ChainGame::new(player, seed, &0), rng, next_order }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        self.chain.execute(turn);
    }

    fn state_hash(&self) -> u64 {
        self.chain.state_hash()
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if turn.0 < self.next_order || turn.0 >= TURNS - QUIET_TURNS {
            return Vec::new();
        }
        self.next_order = turn.0 + 4 + self.rng.below(5) as u32;
        vec![(self.player.0, turn.0)]
    }
}

fn scenario(seed: u64, fairness: Fairness) -> SimConfig {
    let mut config = SimConfig::new(seed, 7);
    // A listen server is a `phalanx::Host`, whatever PHALANX_HOST and PHALANX_TOPOLOGY say.
    config.relay_matches = None;
    config.topology = Topology::Star;
    config.host_plays = true;
    config.latency_ms = 140;
    config.faults.jitter_ms = 20;
    config.faults.loss_permille = 10;
    config.turns = TURNS;
    config.samples_every_ms = 1_000;
    config.session.turns.fairness = fairness;
    config
}

/// The 95th percentile of `latencies` (ms), ranked as a client's session ranks its own.
fn p95(mut latencies: Vec<u32>) -> Result<u32, String> {
    latencies.sort_unstable();
    let index = (latencies.len() * 95 / 100).min(latencies.len().saturating_sub(1));
    latencies.get(index).copied().ok_or_else(|| "no latency measured".into())
}

/// What a failure shows besides the two figures: each player's p95 and the changes of the
/// command delay it saw (the pace every player's latency follows).
fn breakdown(report: &SimReport) -> String {
    let mut lines = Vec::new();
    for player in &report.players {
        let p95 = p95(player.command_latencies.iter().map(|&(_, ms)| ms).collect())
            .map_or_else(|_| "no orders".to_owned(), |ms| format!("{ms} ms"));
        let changes: Vec<(u64, u32)> = player
            .samples
            .windows(2)
            .filter(|pair| pair[0].command_delay_turns != pair[1].command_delay_turns)
            .map(|pair| (pair[1].at_ms, pair[1].command_delay_turns))
            .collect();
        lines.push(format!(
            "{}: p95 {p95}; command delay (ms, turns) changes {changes:?}",
            player.name()
        ));
    }
    lines.join("\n")
}

/// S1, S2, every turn played by everyone, every order of everyone executed at its own game;
/// the host player's p95, the clients' pooled p95, and each player's figures.
fn listen_server(seed: u64, fairness: Fairness) -> Result<(u32, u32, String), String> {
    let report: SimReport =
        run::<Orders>(scenario(seed, fairness)).map_err(|e| format!("{fairness:?}: {e}"))?;
    report.check_agreement()?;
    report.check_everyone_played(TURNS as usize)?;
    report.check_exactly_once(SETTLE_TURNS)?;
    ensure(report.players.len() == 8, || format!("{} players", report.players.len()))?;
    for player in &report.players {
        ensure(player.command_latencies.len() as u64 == player.submitted, || {
            format!(
                "{}: {} orders submitted, {} executed",
                player.name(),
                player.submitted,
                player.command_latencies.len()
            )
        })?;
    }
    let host = report.host_player().ok_or("the host plays")?;
    let host_p95 = p95(host.command_latencies.iter().map(|&(_, ms)| ms).collect())?;
    let clients = report.players.iter().filter(|player| !player.host);
    let pooled = clients.flat_map(|player| player.command_latencies.iter().map(|&(_, ms)| ms));
    let clients_p95 = p95(pooled.collect())?;
    eprintln!(
        "seed {seed}, {fairness:?}: host p95 {host_p95} ms ({} orders), clients p95 \
         {clients_p95} ms",
        host.command_latencies.len()
    );
    Ok((host_p95, clients_p95, breakdown(&report)))
}

/// `Fair`: the host player's p95 within 10 % of the clients' on every seed.
#[test]
fn a_fair_listen_host_waits_as_its_clients_do() {
    for_each_seed(seeded_test!("fair_host_l2"), SEEDS, |seed| {
        let (host, clients, players) = listen_server(seed, Fairness::Fair)?;
        ensure(host.abs_diff(clients) * 10 <= clients, || {
            format!(
                "Fair: host p95 {host} ms, clients' {clients} ms: more than 10 % apart\n{players}"
            )
        })
    });
}

/// `Fast` (the default): the host player's orders go into the next sealed turn, p95 under
/// half the clients'.
#[test]
fn a_fast_listen_host_is_served_first() {
    for_each_seed(seeded_test!("fast_host_l2"), SEEDS, |seed| {
        let (host, clients, players) = listen_server(seed, Fairness::Fast)?;
        ensure(host * 2 < clients, || {
            format!(
                "Fast: host p95 {host} ms is not under half the clients' {clients} ms\n{players}"
            )
        })
    });
}

/// The host's game plays inside the host's event loop without costing determinism: the same
/// seed gives the same trace, the same states and the same latencies.
#[test]
fn a_listen_host_run_replays() {
    for_each_seed(seeded_test!("listen_host_replays_l2"), 2, |seed| {
        let runs: Vec<SimReport> = (0..2)
            .map(|_| run::<Orders>(scenario(seed, Fairness::Fair)).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let (first, second) = (&runs[0], &runs[1]);
        ensure(first.trace_digest == second.trace_digest, || {
            format!("traces differ: {:#x} vs {:#x}", first.trace_digest, second.trace_digest)
        })?;
        ensure(first.players == second.players, || "the players' reports differ".into())
    });
}

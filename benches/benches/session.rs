//! The sans-IO session's costs (issue targets for phalanx-proto):
//!
//! - `host_turn/8p`: host CPU per sealed turn in an 8-player session with 3 commands per second
//!   per player — only the host's calls are timed (`handle_datagram` for every client datagram
//!   of the turn, `handle_timeout` that seals, `poll_transmit` until empty); the clients run
//!   outside the timed section.
//! - `host_turn/8p+10s`: the same with 10 spectators watching (their datagrams handled and
//!   theirs sent in the timed section too): host CPU per spectator is the difference / 10.
//! - `mesh/8p_3000turns`: a whole 8-player, 3,000-turn game (10 minutes of play at 200 ms
//!   turns) on the in-memory mesh, clean network, 20 ms one way.
//!
//! Before measuring, it prints the application payload per client per turn (upstream and
//! downstream, our datagrams before any QUIC/UDP/IP overhead) from one such game, and from
//! the same game under the quiet relay (`SessionConfig::link.heartbeat_ms`).
//!
//! Run: `cargo bench -p phalanx-benches --bench session`.

#![allow(clippy::print_stderr)] // figures that criterion does not measure are printed

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use phalanx_mesh::{Mesh, MeshConfig};
use phalanx_proto::{Client, Host, PlayerId, SessionConfig, SpectatorId};

const PLAYERS: usize = 8;
/// 3 commands per second per player.
const COMMAND_INTERVAL_MS: (u64, u64) = (250, 416);

/// The reference session: 200 ms turns, fixed (speed control off), so figures are per
/// 200 ms turn.
fn game_config(seed: u64, turns: u64) -> MeshConfig {
    let mut config = MeshConfig::new(seed, PLAYERS);
    config.session.turns.length_ms = 200;
    config.session.turns.adaptive_pace = false;
    config.command_interval_ms = COMMAND_INTERVAL_MS;
    config.end_ms = turns * 200 + 1_000;
    config.submit_until_ms = turns * 200;
    config.heal_at_ms = 0;
    config
}

/// What one reference game measured.
struct Reference {
    /// Turns every client executed.
    executed: u64,
    /// App bytes per client per turn, up.
    up: f64,
    /// App bytes per client per turn, down.
    down: f64,
    /// Command latency p95, ms.
    p95: u64,
    /// The game's wall time.
    wall: Duration,
}

/// One reference game of `turns` turns (`quiet`: under the quiet relay, a 500 ms heartbeat),
/// checked for S1 and S2.
fn reference_game(turns: u64, quiet: bool) -> Reference {
    let mut config = game_config(1, turns);
    if quiet {
        config.session.link.heartbeat_ms = 500;
    }
    let mut mesh = Mesh::new(config).expect("valid config");
    let started = Instant::now();
    mesh.run().expect("no livelock");
    let wall = started.elapsed();
    mesh.check_agreement().expect("S1");
    mesh.check_exactly_once().expect("S2");
    let executed = mesh.turns_executed_min() as u64;
    let per_client_turn = |bytes: u64| bytes as f64 / (PLAYERS as u64 * executed) as f64;
    let latencies = mesh.latencies_ms();
    let p95 = latencies.get(latencies.len() * 95 / 100).copied().unwrap_or(0);
    let (up, down) = (per_client_turn(mesh.bytes_up), per_client_turn(mesh.bytes_down));
    Reference { executed, up, down, p95, wall }
}

fn print_payload_figures() {
    let Reference { executed, up, down, p95, wall } = reference_game(3_000, false);
    eprintln!(
        "8 players, {executed} turns of 200 ms (fixed pace), 3 commands/s/player, 20 ms one way: \
         app bytes per client per turn: up {up:.1}, down {down:.1}; command latency p95 {p95} ms; \
         one game took {:.0} ms of wall time",
        wall.as_secs_f64() * 1e3,
    );
    // The same reference session under the quiet relay.
    let Reference { up, down, p95, .. } = reference_game(3_000, true);
    eprintln!(
        "the same under the quiet relay (500 ms heartbeat): app bytes per client per turn: \
         up {up:.1}, down {down:.1}; command latency p95 {p95} ms",
    );
    // The default session: 100 ms floor, speed control on.
    for one_way in [20u64, 50, 150] {
        let mut config = MeshConfig::new(3, PLAYERS);
        let link = phalanx_mesh::LinkFaults { latency_ms: one_way, ..Default::default() };
        config.links = vec![(link, link); PLAYERS];
        config.command_interval_ms = COMMAND_INTERVAL_MS;
        config.end_ms = 120_000;
        config.submit_until_ms = 115_000;
        config.heal_at_ms = 0;
        let mut mesh = Mesh::new(config).expect("valid config");
        mesh.run().expect("no livelock");
        let latencies = mesh.latencies_after_ms(20_000);
        let pct = |p: usize| latencies.get(latencies.len() * p / 100).copied().unwrap_or(0);
        let seconds = mesh.now_ms as f64 / 1e3;
        let per_client_s = |bytes: u64| bytes as f64 / (PLAYERS as f64 * seconds);
        eprintln!(
            "default pace, {one_way} ms one way: settled at {:?}; latency p50 {} ms, p95 {} ms; \
             app bytes per client per second: up {:.0}, down {:.0}",
            mesh.host.pace(),
            pct(50),
            pct(95),
            per_client_s(mesh.bytes_up),
            per_client_s(mesh.bytes_down),
        );
    }
}

/// A host with 8 joined clients and `spectators` spectators (the last clients), started at
/// time 0.
fn session(spectators: usize) -> (Host, Vec<Client>) {
    let config = SessionConfig::default();
    let tokens: Vec<u64> = (0..PLAYERS as u64).collect();
    let watchers: Vec<u64> = (0..spectators as u64).map(|i| 1_000 + i).collect();
    let mut host = Host::new(config.clone(), &tokens).expect("valid config");
    host.allow_spectators(&watchers).expect("within catch_up.spectators_max");
    let clients = tokens
        .iter()
        .chain(&watchers)
        .map(|&token| {
            let (mut client, request) = Client::new(config.clone(), token).expect("valid");
            let reply = host.handle_join(0, &request).reply.expect("accepted");
            client.handle_join_reply(0, &reply).expect("joined");
            client
        })
        .collect();
    host.start(0);
    (host, clients)
}

fn host_turn(c: &mut Criterion) {
    for (name, spectators) in [("host_turn/8p", 0), ("host_turn/8p+10s", 10)] {
        c.bench_function(name, |b| b.iter_custom(|turns| host_time(turns, spectators)));
    }
}

/// Host time over `turns` turns of an 8-player session with `spectators` spectators.
fn host_time(turns: u64, spectators: usize) -> Duration {
    let (mut host, mut clients) = session(spectators);
    let mut host_time = Duration::ZERO;
    let mut buf = Vec::with_capacity(1200);
    let mut datagrams = Vec::new();
    let mut command = 0u64;
    for turn in 0..turns {
        let now = (turn + 1) * 200;
        // Players: on average 0.6 commands per turn each (3 per second).
        datagrams.clear();
        for (index, client) in clients.iter_mut().enumerate() {
            command += 1;
            if index < PLAYERS && (command * 7 + index as u64) % 5 < 3 {
                let _ = client.submit(now, &[index as u8; 12]);
            }
            client.handle_timeout(now);
            while client.poll_transmit(now, &mut buf) {
                datagrams.push((index, buf.clone()));
            }
        }
        let started = Instant::now();
        for (index, bytes) in &datagrams {
            match index.checked_sub(PLAYERS) {
                None => host.handle_datagram(now, PlayerId(*index as u8), bytes),
                Some(id) => host.handle_spectator_datagram(now, SpectatorId(id as u8), bytes),
            }
        }
        host.handle_timeout(now);
        let mut sent = Vec::new();
        while let Some(player) = host.poll_transmit(now, &mut buf) {
            sent.push((player.0 as usize, buf.clone()));
        }
        while let Some(id) = host.poll_transmit_spectators(now, &mut buf) {
            sent.push((PLAYERS + id.0 as usize, buf.clone()));
        }
        host_time += started.elapsed();
        for (index, bytes) in sent {
            let client = &mut clients[index];
            client.handle_datagram(now + 20, &bytes);
            while let Some(bundle) = client.next_turn(now + 20) {
                black_box(bundle);
            }
        }
    }
    host_time
}

fn whole_game(c: &mut Criterion) {
    print_payload_figures();
    let mut group = c.benchmark_group("mesh");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function("8p_3000turns", |b| {
        b.iter(|| {
            let mut mesh = Mesh::new(game_config(2, 3_000)).expect("valid config");
            mesh.run().expect("no livelock");
            black_box(mesh.trace_digest)
        })
    });
    group.finish();
}

criterion_group!(benches, host_turn, whole_game);
criterion_main!(benches);

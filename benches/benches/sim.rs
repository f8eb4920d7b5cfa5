//! Real quinn + tokio under turmoil (phalanx-sim): an 8-player, 3,000-turn session — 10 minutes
//! of play at 200 ms turns — with 5 % loss on every link, timed end to end. Target: ≤ 15 s of
//! wall time (≥ 40× real time).
//!
//! Run: `cargo bench -p phalanx-benches --bench sim`.

#![allow(clippy::print_stderr)] // the simulated-time ratio is printed beside criterion's timing

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use phalanx_sim::{run_with, ChainGame, SimConfig};

/// phalanx-sim's reference game, one command every 10 turns (2 s) per player (AoE's rate).
const EVERY: u32 = 10;

fn config(seed: u64) -> SimConfig {
    let mut config = SimConfig::new(seed, 8);
    config.session.turns.length_ms = 200;
    config.session.turns.adaptive_pace = false;
    config.faults.loss_permille = 50;
    config.latency_ms = 40;
    config.turns = 3_000;
    config.limit_ms = 1_200_000;
    config
}

fn sim(c: &mut Criterion) {
    let started = Instant::now();
    let report = run_with::<ChainGame>(config(1), EVERY).expect("the simulation completes");
    let wall = started.elapsed();
    report.check_agreement().expect("agreement");
    eprintln!(
        "8 players × 3000 turns at 5 % loss: {:.1} s simulated in {:.2} s of wall time ({:.0}× real time)",
        report.sim_ms as f64 / 1e3,
        wall.as_secs_f64(),
        report.sim_ms as f64 / 1e3 / wall.as_secs_f64(),
    );
    let mut group = c.benchmark_group("sim");
    group.sample_size(10).measurement_time(Duration::from_secs(60));
    group.bench_function("8p_3000turns_5pct_loss", |b| {
        b.iter(|| run_with::<ChainGame>(config(2), EVERY).expect("completes").trace_digest)
    });
    group.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);

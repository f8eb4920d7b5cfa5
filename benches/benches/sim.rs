//! Real quinn + tokio under turmoil (phalanx-sim): an 8-player, 3,000-turn session — 10 minutes
//! of play at 200 ms turns — with 5 % loss on every link, timed end to end. Target: ≤ 15 s of
//! wall time (≥ 40× real time).
//!
//! Run: `cargo bench -p phalanx-benches --bench sim`.

#![allow(clippy::print_stderr)] // the simulated-time ratio is printed beside criterion's timing

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};
use phalanx_sim::{run, SimConfig, SimGame};

/// A hash chain over every command, issuing one every ~2 s per player (AoE's rate).
struct Chain {
    player: PlayerId,
    state: u64,
}

impl SimGame for Chain {
    type Command = (u8, u32);
    type Setup = ();

    fn new(player: PlayerId, seed: u64, _setup: &()) -> Self {
        Chain { player, state: seed }
    }

    fn execute(&mut self, turn: &TypedTurn<(u8, u32)>) {
        for record in &turn.records {
            if let TypedRecord::Command { command: Ok((p, n)), .. } = record {
                self.state = (self.state ^ (u64::from(*p) << 32 | u64::from(*n)))
                    .wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }

    fn state_hash(&self) -> u64 {
        self.state
    }

    fn commands(&mut self, turn: Turn) -> Vec<(u8, u32)> {
        if (turn.0 + u32::from(self.player.0)).is_multiple_of(10) {
            vec![(self.player.0, turn.0)]
        } else {
            Vec::new()
        }
    }
}

fn config(seed: u64) -> SimConfig {
    let mut config = SimConfig::new(seed, 8);
    config.session.turn_length_ms = 200;
    config.session.adaptive_pace = false;
    config.faults.loss_permille = 50;
    config.latency_ms = 40;
    config.turns = 3_000;
    config.limit_ms = 1_200_000;
    config
}

fn sim(c: &mut Criterion) {
    let started = Instant::now();
    let report = run::<Chain>(config(1)).expect("the simulation completes");
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
        b.iter(|| run::<Chain>(config(2)).expect("completes").trace_digest)
    });
    group.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);

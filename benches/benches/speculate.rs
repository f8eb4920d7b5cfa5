//! Speculation's cost to the archers demo's game (`phalanx::speculate`): the costliest kind of
//! frame, the one that takes a confirmed turn — the world restored from its saved confirmed
//! state, the turn executed, the world saved again, and three turns predicted ahead again
//! (100 ms RTT and a two-turn command delay at 150 ms turns) — at 1,500 and 10,000 archers in
//! the middle of the battle. Frames without a confirmed turn predict one turn or none.
//! Target (1,500 archers): ≤ 4 ms.
//!
//! Run: `cargo bench -p phalanx-benches --bench speculate`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

use archers::world::{Order, World};
use phalanx::speculate::{Rollback, Speculation};
use phalanx::{PlayerId, Turn, TypedTurn};

/// Turns played before the measured frame: the armies have met.
const WARM_TURNS: u32 = 120;
/// Turns predicted past the confirmed one.
const AHEAD: u32 = 3;

fn turn(number: u32) -> TypedTurn<Order> {
    TypedTurn {
        turn: Turn(number),
        records: Vec::new(),
        length_ms: 150,
        restore: None,
        wants_snapshot: false,
        catching_up: false,
        last: false,
        predicted: false,
    }
}

fn frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("speculate");
    for units in [1_500usize, 10_000] {
        let mut world = World::new(8, units, 1);
        for number in 0..WARM_TURNS {
            Rollback::execute(&mut world, &turn(number));
        }
        let warm = Rollback::save(&world);
        group.bench_function(format!("confirmed turn frame, {units} archers"), |b| {
            b.iter_batched(
                || {
                    let mut world = World::load(&warm).expect("a saved world");
                    let mut speculation = Speculation::new(PlayerId(0), &world);
                    let next = Turn(WARM_TURNS);
                    speculation.predict(&mut world, Turn(next.0 + AHEAD - 1));
                    (world, speculation)
                },
                |(mut world, mut speculation)| {
                    speculation.confirm(&mut world, &turn(WARM_TURNS));
                    speculation.predict(&mut world, Turn(WARM_TURNS + AHEAD));
                    (world, speculation)
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, frame);
criterion_main!(benches);

//! One simulation tick of the 1500-archer battle (target: ≤ 2 ms). The world is built and
//! marched into contact outside the timing: every army attack-moves to the centre, then the
//! bench times ticks from the moment the first arrows fly (the densest fighting), a fresh
//! copy of that state for every 50 ticks so the battle measured is always the same one.
#![allow(missing_docs)] // criterion's macros generate undocumented items
#![allow(clippy::print_stderr)] // the state each bench starts from, for the reader

use std::hint::black_box;
use std::time::{Duration, Instant};

use archers::world::{Order, World};
use criterion::{criterion_group, criterion_main, Criterion};
use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};

const PLAYERS: usize = 8;
const UNITS: usize = 1500;
const WINDOW: u64 = 50;

/// The battle `after` ticks past first contact.
fn battle(after: u64) -> World {
    let mut world = World::new(PLAYERS, UNITS, 1);
    let records = (0..PLAYERS as u8)
        .map(|p| {
            let (first, count, _) = world.army(PlayerId(p));
            TypedRecord::Command {
                player: PlayerId(p),
                seq: phalanx::proto::CommandSeq(u32::from(p)),
                command: Ok(Order::AttackMove { first, count, x: 2048, y: 2048 }),
            }
        })
        .collect();
    world.execute(&TypedTurn {
        turn: Turn(0),
        records,
        length_ms: 100,
        restore: None,
        wants_snapshot: false,
        catching_up: false,
        last: false,
        predicted: false,
    });
    while world.events_pending() == 0 {
        world.tick();
    }
    for _ in 0..after {
        world.tick();
    }
    world
}

fn ticks(c: &mut Criterion) {
    let mut group = c.benchmark_group("archers");
    group.sample_size(30).measurement_time(Duration::from_secs(8));
    for (name, after) in [("tick_first_contact", 0), ("tick_full_battle", 60)] {
        let start = battle(after);
        eprintln!(
            "{name}: {} archers standing, {} events pending, tick {}",
            start.living().count(),
            start.events_pending(),
            start.ticks()
        );
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let mut world = battle(after);
                    let n = (iters - done).min(WINDOW);
                    let timer = Instant::now();
                    for _ in 0..n {
                        world.tick();
                    }
                    total += timer.elapsed();
                    black_box(world.state_hash());
                    done += n;
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, ticks);
criterion_main!(benches);

//! Speculation's cost to the archers demo's game (`phalanx::speculate`), at 1,500 and 10,000
//! archers.
//!
//! - **confirmed turn frame**: the costliest usual frame, the one that takes a confirmed turn —
//!   the world restored from its saved confirmed state, the turn executed, the world saved
//!   again, and three turns predicted ahead again (100 ms RTT and a two-turn command delay at
//!   150 ms turns) — in the middle of the battle.
//! - **match frames**: a minute of the demo's match as a 60 Hz frame loop sees it. The
//!   confirmed turns come one per 150 ms turn, 2 % of them a turn late together with the next
//!   (a lost turn repaired), carrying every bot's orders two turns after they were given; the
//!   player's own orders are submitted as its bot gives them and predicted at once. Each
//!   measured iteration is the next frame that has work (frames with none cost nothing);
//!   criterion reports their mean, and the bench prints their median and 99th percentile.
//!   Target (1,500 archers): p99 ≤ 4 ms.
//!
//! Run: `cargo bench -p phalanx-benches --bench speculate`.

#![allow(clippy::print_stderr)] // the percentiles, which criterion does not compute

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

use archers::game::Bot;
use archers::world::{Order, World};
use phalanx::proto::{CommandSeq, SplitMix64, Ticket};
use phalanx::speculate::{Rollback, Speculation};
use phalanx::{PlayerId, Turn, TypedRecord, TypedTurn};

/// Turns played before the measured frame: the armies have met.
const WARM_TURNS: u32 = 120;
/// Turns predicted past the confirmed one.
const AHEAD: u32 = 3;
/// Players (bots) in the match.
const PLAYERS: u8 = 8;
/// The match the frame loop plays: a minute of 150 ms turns.
const MATCH_TURNS: u32 = 400;
/// The turn length and the frame period, microseconds.
const TURN_US: u64 = 150_000;
const FRAME_US: u64 = 16_667;
/// The command delay, turns.
const DELAY: u32 = 2;

fn turn(number: u32, records: Vec<TypedRecord<Order>>) -> TypedTurn<Order> {
    TypedTurn {
        turn: Turn(number),
        records,
        length_ms: 150,
        restore: None,
        wants_snapshot: false,
        catching_up: false,
        last: false,
        predicted: false,
    }
}

fn confirmed_turn_frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("speculate");
    for units in [1_500usize, 10_000] {
        let mut world = World::new(usize::from(PLAYERS), units, 1);
        for number in 0..WARM_TURNS {
            Rollback::execute(&mut world, &turn(number, Vec::new()));
        }
        let warm = Rollback::save(&mut world);
        group.bench_function(format!("confirmed turn frame, {units} archers"), |b| {
            b.iter_batched(
                || {
                    let mut world = World::load(&warm).expect("a saved world");
                    let mut speculation = Speculation::new(PlayerId(0), &mut world);
                    let next = Turn(WARM_TURNS);
                    speculation.predict(&mut world, Turn(next.0 + AHEAD - 1));
                    (world, speculation)
                },
                |(mut world, mut speculation)| {
                    speculation.confirm(&mut world, &turn(WARM_TURNS, Vec::new()));
                    speculation.predict(&mut world, Turn(WARM_TURNS + AHEAD));
                    (world, speculation)
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// The match as it will be confirmed: every turn's records, player 0's own orders (the turn
/// it gave each at, its ticket), and when each turn arrives (µs of the player's clock).
struct Script {
    turns: Vec<TypedTurn<Order>>,
    own: Vec<(u32, Ticket, Order)>,
    arrives_us: Vec<u64>,
}

impl Script {
    /// Plays the match once without speculation to learn every bot's orders.
    fn new(units: usize) -> Script {
        let mut world = World::new(usize::from(PLAYERS), units, 1);
        let mut bots: Vec<Bot> = (0..PLAYERS)
            .map(|p| Bot::new(PlayerId(p), usize::from(PLAYERS), 1, MATCH_TURNS - DELAY))
            .collect();
        let mut records = vec![Vec::new(); (MATCH_TURNS + DELAY) as usize];
        let mut seqs = [0u32; PLAYERS as usize];
        let mut own = Vec::new();
        let mut turns = Vec::new();
        for number in 0..MATCH_TURNS {
            let this = turn(number, std::mem::take(&mut records[number as usize]));
            world.execute(&this);
            turns.push(this);
            for (player, bot) in bots.iter_mut().enumerate() {
                for order in bot.orders(Turn(number), &world) {
                    let seq = CommandSeq(seqs[player]);
                    seqs[player] += 1;
                    let stamped = Turn(number + DELAY);
                    if player == 0 {
                        own.push((number, Ticket { seq, turn: stamped }, order));
                    }
                    let command = Ok(order);
                    let record =
                        TypedRecord::Command { player: PlayerId(player as u8), seq, command };
                    records[stamped.0 as usize].push(record);
                }
            }
        }
        // 2 % of the turns are lost and repaired: they come with the next.
        let mut random = SplitMix64::new(7);
        let mut arrives_us: Vec<u64> =
            (0..u64::from(MATCH_TURNS)).map(|t| (t + 1) * TURN_US).collect();
        for t in 0..arrives_us.len() - 1 {
            if random.next_u64() % 100 < 2 {
                arrives_us[t] = arrives_us[t + 1];
            }
        }
        Script { turns, own, arrives_us }
    }
}

/// Player 0's game in the frame loop, somewhere in the script.
struct Player<'a> {
    script: &'a Script,
    world: World,
    speculation: Speculation<Order, Vec<u8>>,
    frame: u64,
    next_turn: usize,
    next_own: usize,
}

impl<'a> Player<'a> {
    fn new(script: &'a Script, units: usize) -> Player<'a> {
        let mut world = World::new(usize::from(PLAYERS), units, 1);
        let speculation = Speculation::new(PlayerId(0), &mut world);
        Player { script, world, speculation, frame: 0, next_turn: 0, next_own: 0 }
    }

    /// Runs frames until one has work and returns that one's time; `None` at the match's end.
    fn next_busy_frame(&mut self) -> Option<Duration> {
        while self.next_turn < self.script.turns.len() {
            self.frame += 1;
            let now_us = self.frame * FRAME_US;
            let started = Instant::now();
            let mut busy = false;
            while self.script.arrives_us.get(self.next_turn).is_some_and(|&at| at <= now_us) {
                let confirmed = &self.script.turns[self.next_turn];
                self.speculation.confirm(&mut self.world, confirmed);
                while let Some((given, ticket, order)) = self.script.own.get(self.next_own) {
                    if *given != confirmed.turn.0 {
                        break;
                    }
                    self.speculation.submitted(*ticket, *order);
                    self.next_own += 1;
                }
                self.next_turn += 1;
                busy = true;
            }
            if busy {
                let next = self.speculation.next_confirmed();
                self.speculation.predict(&mut self.world, self.speculation.horizon(next));
                return Some(started.elapsed());
            }
        }
        None
    }
}

fn match_frames(c: &mut Criterion) {
    let mut group = c.benchmark_group("speculate");
    group.sample_size(20);
    for units in [1_500usize, 10_000] {
        let script = Script::new(units);
        let mut player = Player::new(&script, units);
        let mut frames: Vec<Duration> = Vec::new();
        group.bench_function(format!("match frames, {units} archers"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let took = match player.next_busy_frame() {
                        Some(took) => took,
                        None => {
                            player = Player::new(&script, units);
                            player.next_busy_frame().expect("a match has frames")
                        }
                    };
                    frames.push(took);
                    total += took;
                }
                total
            });
        });
        frames.sort_unstable();
        let at = |pct: usize| frames[(frames.len() * pct).div_ceil(100).saturating_sub(1)];
        eprintln!(
            "speculate/match frames, {units} archers: p50 {:.3} ms, p99 {:.3} ms over {} frames",
            at(50).as_secs_f64() * 1e3,
            at(99).as_secs_f64() * 1e3,
            frames.len()
        );
    }
    group.finish();
}

criterion_group!(benches, confirmed_turn_frame, match_frames);
criterion_main!(benches);

//! The A/B harness `benches/ab/run` builds: the hashed wheel of a base revision (`wheel_old`)
//! against the working tree's (`phalanx_wheel`), on the wheel bench's workloads and inputs,
//! interleaved repetition by repetition so that both see the same machine.

use std::hint::black_box;
use std::time::Instant;

/// The wheel bench's inputs (`benches/src/wheel_inputs.rs`, copied beside this file).
mod wheel_inputs;

use wheel_inputs::{Inputs, CHURN_PER_TICK, CHURN_TICKS, HORIZON};

/// Cancels and starts in one window of `churn` or `steady`.
const PAIRS: usize = CHURN_PER_TICK * CHURN_TICKS as usize;

macro_rules! harness {
    ($name:ident, $krate:ident) => {
        mod $name {
            use super::*;
            use $krate::{HashedWheel, TimerHandle};

            fn wheel(n: usize, slots: usize) -> HashedWheel<u32> {
                let mut wheel = HashedWheel::new(0, slots).unwrap();
                wheel.reserve(n);
                wheel
            }

            fn filled(deadlines: &[u64]) -> (HashedWheel<u32>, Vec<TimerHandle>) {
                let mut w = wheel(deadlines.len(), HORIZON as usize);
                let handles = deadlines
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| w.insert(d, i as u32).unwrap())
                    .collect();
                (w, handles)
            }

            fn drain_ticks(w: &mut HashedWheel<u32>, last: u64) -> usize {
                let mut fired = 0;
                for tick in 1..=last {
                    w.drain(tick).for_each(|e| {
                        black_box(e.value);
                        fired += 1;
                    });
                }
                fired
            }

            /// A steady state as the bench's `steady` keeps it, warmed up a horizon.
            pub struct Steady {
                w: HashedWheel<u32>,
                handles: Vec<TimerHandle>,
                tick: u64,
                restarts: usize,
                fired: Vec<u32>,
            }

            impl Steady {
                fn new(inputs: &Inputs) -> Self {
                    let (w, handles) = filled(&inputs.far);
                    let mut run = Steady { w, handles, tick: 0, restarts: 0, fired: Vec::new() };
                    for _ in 0..HORIZON / CHURN_TICKS {
                        run.window(inputs);
                    }
                    run
                }

                #[inline(never)]
                fn window(&mut self, inputs: &Inputs) {
                    for pairs in inputs.churn.chunks_exact(CHURN_PER_TICK) {
                        self.tick += 1;
                        for &(victim, ahead) in pairs {
                            self.w.discard(self.handles[victim]);
                            self.handles[victim] =
                                self.w.insert(self.tick + ahead, victim as u32).unwrap();
                        }
                        let fired = &mut self.fired;
                        self.w.drain(self.tick).for_each(|e| fired.push(e.value));
                        for &id in &self.fired {
                            let ahead = inputs.churn[self.restarts % inputs.churn.len()].1;
                            self.restarts += 1;
                            self.handles[id as usize] =
                                self.w.insert(self.tick + ahead, id).unwrap();
                        }
                        self.fired.clear();
                    }
                }
            }

            /// One repetition of `work`: ns per operation (per timer; per pair for `churn`
            /// and `steady`, whose run persists across repetitions in `steady`).
            pub fn run(work: &str, inputs: &Inputs, steady: &mut Option<Steady>) -> f64 {
                let n = inputs.n;
                let per =
                    |began: Instant, ops: usize| began.elapsed().as_nanos() as f64 / ops as f64;
                match work {
                    "start" => {
                        let mut w = wheel(n, HORIZON as usize);
                        let began = Instant::now();
                        for (i, &d) in inputs.deadlines.iter().enumerate() {
                            black_box(w.insert(d, i as u32).unwrap());
                        }
                        per(began, n)
                    }
                    "cancel" | "take" => {
                        let (mut w, handles) = filled(&inputs.deadlines);
                        let began = Instant::now();
                        for &i in &inputs.order {
                            if work == "cancel" {
                                black_box(w.discard(handles[i]));
                            } else {
                                black_box(w.cancel(handles[i]));
                            }
                        }
                        per(began, n)
                    }
                    "fire" => {
                        let (mut w, _) = filled(&inputs.deadlines);
                        let began = Instant::now();
                        assert_eq!(drain_ticks(&mut w, HORIZON), n);
                        per(began, n)
                    }
                    "fill_drain" => {
                        let mut w = wheel(n, HORIZON as usize);
                        let began = Instant::now();
                        for (i, &d) in inputs.deadlines.iter().enumerate() {
                            w.insert(d, i as u32).unwrap();
                        }
                        assert_eq!(drain_ticks(&mut w, HORIZON), n);
                        per(began, n)
                    }
                    "retransmit" => {
                        let mut w = wheel(n, 2_048);
                        let began = Instant::now();
                        let handles: Vec<TimerHandle> = inputs
                            .rto_deadlines
                            .iter()
                            .enumerate()
                            .map(|(i, &d)| w.insert(d, i as u32).unwrap())
                            .collect();
                        for &i in &inputs.order[n / 20..] {
                            w.discard(handles[i]);
                        }
                        assert_eq!(drain_ticks(&mut w, 1_100), n / 20);
                        per(began, n)
                    }
                    "churn" => {
                        let (mut w, mut handles) = filled(&inputs.far);
                        let began = Instant::now();
                        for (tick, pairs) in
                            (1..=CHURN_TICKS).zip(inputs.churn.chunks_exact(CHURN_PER_TICK))
                        {
                            for &(victim, ahead) in pairs {
                                w.discard(handles[victim]);
                                handles[victim] = w.insert(tick + ahead, victim as u32).unwrap();
                            }
                            w.drain(tick).for_each(|e| {
                                black_box(e.value);
                            });
                        }
                        per(began, PAIRS)
                    }
                    "steady" => {
                        let run = steady.get_or_insert_with(|| Steady::new(inputs));
                        let began = Instant::now();
                        // 8,192 ticks: a few sweeps at 1e5.
                        for _ in 0..32 {
                            run.window(inputs);
                        }
                        per(began, 32 * PAIRS)
                    }
                    "burst" => {
                        let mut w = wheel(n, HORIZON as usize);
                        for i in 0..n {
                            w.insert(1_000, i as u32).unwrap();
                        }
                        let began = Instant::now();
                        let mut fired = 0;
                        w.drain(1_000).for_each(|e| {
                            black_box(e.value);
                            fired += 1;
                        });
                        assert_eq!(fired, n);
                        per(began, n)
                    }
                    other => panic!("no workload {other}"),
                }
            }
        }
    };
}

harness!(old, wheel_old);
harness!(new, phalanx_wheel);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).and_then(|r| r.parse().ok()).expect("<reps> <workload/N>...");
    for spec in &args[2..] {
        let (work, n) = spec.split_once('/').expect("workload/N");
        let inputs = Inputs::new(n.parse().expect("N"));
        let (mut steady_old, mut steady_new) = (None, None);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            // Alternate which goes first.
            if rep % 2 == 0 {
                a.push(old::run(work, &inputs, &mut steady_old));
                b.push(new::run(work, &inputs, &mut steady_new));
            } else {
                b.push(new::run(work, &inputs, &mut steady_new));
                a.push(old::run(work, &inputs, &mut steady_old));
            }
        }
        for v in [&mut a, &mut b] {
            v.sort_by(f64::total_cmp);
        }
        let (min_a, min_b, med_a, med_b) = (a[0], b[0], a[a.len() / 2], b[b.len() / 2]);
        println!(
            "{spec:>18}  old min {min_a:8.2} med {med_a:8.2}  new min {min_b:8.2} med {med_b:8.2}  \
             new/old min {:.3} med {:.3}",
            min_b / min_a,
            med_b / med_a
        );
    }
}

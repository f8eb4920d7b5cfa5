//! Timing wheels against the two structures a game would otherwise reach for: a
//! `BinaryHeap` with lazy cancellation (generation tombstones) and a `BTreeMap`.
//!
//! Run: `cargo bench -p phalanx-benches --bench wheel`, then
//! `python3 benches/report.py` for the ns-per-operation table with ratios to the heap.
//! `WHEEL_BENCH_SIZES=1000,100000` limits the sizes (default 1e3, 1e5, 1e6). Benchmarks are
//! named `<workload>/<N>/<structure>`, and the structures of one workload and size run back to
//! back, so a ratio compares runs seconds apart; a criterion filter picks rows, e.g.
//! `cargo bench -p phalanx-benches --bench wheel -- '^steady/100000/(heap|hashed)$'`.
//!
//! Each structure is configured as a user would for the workload: the hashed wheel gets a
//! table as large as the deadline horizon (2^16 slots for deadlines up to 2^16 ticks, 2048
//! for retransmit deadlines of 100–1100 ticks); the hierarchical wheel has no knobs; every
//! structure reserves room for N entries up front, as a warm session would have (the heap a
//! quarter more for its tombstones, as the wheels' `reserve` does for theirs). The wheels
//! fire what is due with `drain(now).for_each(..)`, the heap with a `peek`/`pop` loop.
//!
//! Workloads (each reported per timer):
//! - `start`: insert N deadlines uniform in 1..2^16 into an empty, reserved structure;
//! - `cancel`: cancel those N in random order, dropping the values (the wheels' `discard`;
//!   the heap's lazy cancel, which never reads the value);
//! - `take`: the same, handing back each value (the wheels' `cancel`; the heap reads it from
//!   its value array); the other workloads' cancels drop the value, as `cancel` does;
//! - `fire`: advance one tick at a time through 2^16 ticks, firing all N;
//! - `fill_drain`: start + fire together (the "fill and drain");
//! - `retransmit`: start N deadlines in 100..1100, cancel a random 95 %, fire the rest;
//! - `churn`: N live; per tick cancel 64 random live timers and start 64 (deadlines 2^15..2^16
//!   ahead), for 256 ticks from a fresh fill; per cancel+start pair. Nothing comes due in
//!   those ticks, so no structure fires, visits a slot or pops a tombstone: the first 256
//!   ticks of a steady state, not the state itself (this was `steady` until the seventh round);
//! - `steady`: the steady state itself. N timers that live for ever: per tick 64 random ones
//!   are cancelled and started again 2^15..2^16 ticks ahead, and every timer that fires is
//!   started again as far ahead, so N stay live, about N / 49,000 fire a tick, and every
//!   structure holds the tombstones its cancels leave for as long as it keeps them. One run
//!   per structure and size, warmed up for a whole horizon (2^16 ticks) before it is timed and
//!   then timed 256 ticks at a time, for as long as criterion asks; per cancel+start pair, the
//!   tick's expiries and their restarts included;
//! - `burst`: N timers due on the same tick, all fired.
//!
//! And the real use, `per_link`: a host with 8 links, each with the five timers a phalanx-proto
//! link keeps (retransmit, ack delay, keep-alive, idle, repeat) in a structure of its own, over
//! 1,000 turns of 100 ms in 1 ms ticks, driven the way the host drives them (every wake-up
//! polls every link and asks every link for its next deadline); reported per link per turn.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use phalanx_benches::wheel_inputs::{Inputs, CHURN_PER_TICK, CHURN_TICKS, HORIZON};
use phalanx_wheel::{HashedWheel, HierarchicalWheel, TimerHandle};

/// The four contenders behind one interface.
trait Timers {
    type Handle: Copy;
    const NAME: &'static str;
    /// A structure for `n` timers with deadlines up to `horizon` ticks ahead.
    fn with_capacity(n: usize, horizon: u64) -> Self;
    fn start(&mut self, deadline: u64, value: u32) -> Self::Handle;
    /// Stops a timer, dropping its value (the wheels' `discard`); whether it was pending.
    fn cancel(&mut self, handle: Self::Handle) -> bool;
    /// Stops a timer and hands back its value (the wheels' `cancel`).
    fn take(&mut self, handle: Self::Handle) -> Option<u32>;
    /// Fires everything due by `now`; returns how many fired.
    fn advance(&mut self, now: u64) -> usize;
    /// Fires everything due by `now`, appending the fired timers' values to `fired`.
    fn expire(&mut self, now: u64, fired: &mut Vec<u32>);
}

/// The `Timers` methods of a wrapper around either wheel: both start, cancel and drain alike.
macro_rules! wheel_timers {
    () => {
        type Handle = TimerHandle;
        fn start(&mut self, deadline: u64, value: u32) -> TimerHandle {
            self.0.insert(deadline, value).expect("future deadline")
        }
        fn cancel(&mut self, handle: TimerHandle) -> bool {
            self.0.discard(handle)
        }
        fn take(&mut self, handle: TimerHandle) -> Option<u32> {
            self.0.cancel(handle)
        }
        fn advance(&mut self, now: u64) -> usize {
            // `for_each`, not a `for` loop: the drain hands the due timers out in one loop
            // (its `fold`) rather than a `poll` call each, as the wheels' docs advise.
            let mut fired = 0;
            self.0.drain(now).for_each(|expired| {
                black_box(expired.value);
                fired += 1;
            });
            fired
        }
        fn expire(&mut self, now: u64, fired: &mut Vec<u32>) {
            self.0.drain(now).for_each(|expired| fired.push(expired.value));
        }
    };
}

struct Hashed(HashedWheel<u32>);

impl Timers for Hashed {
    wheel_timers!();
    const NAME: &'static str = "hashed";
    fn with_capacity(n: usize, horizon: u64) -> Self {
        let slots = (horizon as usize).next_power_of_two();
        let mut wheel = HashedWheel::new(0, slots).expect("power of two");
        wheel.reserve(n);
        Hashed(wheel)
    }
}

struct Hierarchical(HierarchicalWheel<u32>);

impl Timers for Hierarchical {
    wheel_timers!();
    const NAME: &'static str = "hierarchical";
    fn with_capacity(n: usize, _horizon: u64) -> Self {
        let mut wheel = HierarchicalWheel::new(0);
        wheel.reserve(n);
        Hierarchical(wheel)
    }
}

/// `BinaryHeap` of `(deadline, seq, slot, generation)` with a generation per slot: cancel
/// bumps the generation, and a popped entry whose generation is stale is skipped.
struct Heap {
    heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
    generations: Vec<u32>,
    values: Vec<u32>,
    free: Vec<u32>,
    seq: u64,
}

/// The heap rebuilds itself without its tombstones when they outnumber its live timers by
/// this many to one (plus `HEAP_SLACK`): the bound the hashed wheel's sweep keeps.
const HEAP_TOMBSTONE_RATIO: usize = 3;
const HEAP_SLACK: usize = 64;

impl Heap {
    fn release(&mut self, slot: u32) {
        self.generations[slot as usize] = self.generations[slot as usize].wrapping_add(1);
        self.free.push(slot);
    }

    /// Drops every tombstone when they outnumber the live timers `HEAP_TOMBSTONE_RATIO` to
    /// one, so that a heap in a steady state of cancels holds a bounded multiple of its live
    /// timers, as the wheels do (a lazy heap that never did would keep every cancelled entry
    /// until its deadline). Checked before each start, as the wheels check before a new node.
    fn bound_tombstones(&mut self) {
        let live = self.generations.len() - self.free.len();
        if self.heap.len() > (HEAP_TOMBSTONE_RATIO + 1) * live + HEAP_SLACK {
            self.compact();
        }
    }

    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        let generations = &self.generations;
        self.heap
            .retain(|&Reverse((_, _, slot, generation))| generations[slot as usize] == generation);
    }

    /// Pops the next live timer due by `now`: its slot, released.
    #[inline]
    fn pop_due(&mut self, now: u64) -> Option<u32> {
        while let Some(&Reverse((deadline, _, slot, generation))) = self.heap.peek() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            if self.generations[slot as usize] == generation {
                self.release(slot);
                return Some(slot);
            }
        }
        None
    }
}

impl Timers for Heap {
    type Handle = (u32, u32);
    const NAME: &'static str = "heap";
    fn with_capacity(n: usize, _horizon: u64) -> Self {
        Heap {
            // Room for a quarter more entries than timers, for its tombstones: the headroom a
            // wheel's `reserve(n)` makes for its own. Without it, `steady` timed the heap's
            // one growth past N (a copy of the whole array in some runs, a `mremap` in others:
            // 156-201 or 983 ns a pair at 1e6 for the same code).
            heap: BinaryHeap::with_capacity(n + n / 4),
            generations: Vec::with_capacity(n),
            values: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            seq: 0,
        }
    }
    fn start(&mut self, deadline: u64, value: u32) -> (u32, u32) {
        self.bound_tombstones();
        let slot = match self.free.pop() {
            Some(slot) => {
                self.values[slot as usize] = value;
                slot
            }
            None => {
                self.generations.push(0);
                self.values.push(value);
                (self.generations.len() - 1) as u32
            }
        };
        let generation = self.generations[slot as usize];
        self.heap.push(Reverse((deadline, self.seq, slot, generation)));
        self.seq += 1;
        (slot, generation)
    }
    fn cancel(&mut self, (slot, generation): (u32, u32)) -> bool {
        if self.generations.get(slot as usize) != Some(&generation) {
            return false;
        }
        self.release(slot);
        true
    }
    fn take(&mut self, (slot, generation): (u32, u32)) -> Option<u32> {
        if self.generations.get(slot as usize) != Some(&generation) {
            return None;
        }
        self.release(slot);
        Some(self.values[slot as usize])
    }
    fn advance(&mut self, now: u64) -> usize {
        let mut fired = 0;
        while let Some(slot) = self.pop_due(now) {
            black_box(self.values[slot as usize]);
            fired += 1;
        }
        fired
    }
    fn expire(&mut self, now: u64, fired: &mut Vec<u32>) {
        while let Some(slot) = self.pop_due(now) {
            fired.push(self.values[slot as usize]);
        }
    }
}

/// `BTreeMap<(deadline, seq), value>`: the ordered map the oracle tests use.
struct Tree {
    map: BTreeMap<(u64, u64), u32>,
    seq: u64,
}

impl Timers for Tree {
    type Handle = (u64, u64);
    const NAME: &'static str = "btree";
    fn with_capacity(_n: usize, _horizon: u64) -> Self {
        Tree { map: BTreeMap::new(), seq: 0 }
    }
    fn start(&mut self, deadline: u64, value: u32) -> (u64, u64) {
        let key = (deadline, self.seq);
        self.seq += 1;
        self.map.insert(key, value);
        key
    }
    fn cancel(&mut self, key: (u64, u64)) -> bool {
        self.map.remove(&key).is_some()
    }
    fn take(&mut self, key: (u64, u64)) -> Option<u32> {
        self.map.remove(&key)
    }
    fn advance(&mut self, now: u64) -> usize {
        let mut fired = 0;
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            black_box(entry.remove());
            fired += 1;
        }
        fired
    }
    fn expire(&mut self, now: u64, fired: &mut Vec<u32>) {
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            fired.push(entry.remove());
        }
    }
}

fn filled<T: Timers>(deadlines: &[u64], horizon: u64) -> (T, Vec<T::Handle>) {
    let mut timers = T::with_capacity(deadlines.len(), horizon);
    let handles = deadlines.iter().enumerate().map(|(i, &d)| timers.start(d, i as u32)).collect();
    (timers, handles)
}

fn drain_ticks<T: Timers>(timers: &mut T, last: u64) -> usize {
    (1..=last).map(|tick| timers.advance(tick)).sum()
}

/// The workloads of [`bench_workload`], in the order they run and are reported.
const WORKLOADS: [&str; 9] =
    ["start", "cancel", "take", "fire", "fill_drain", "retransmit", "churn", "steady", "burst"];

const BURST_TICK: u64 = 1_000;

/// A group of benchmarks: one workload at one size.
type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// One structure's run of one workload, as a function of `group` (whose other functions are
/// the other structures on the same workload, run just before and after it).
fn bench_workload<T: Timers>(group: &mut Group<'_>, workload: &str, inputs: &Inputs) {
    match workload {
        "start" => start::<T>(group, inputs),
        "cancel" => stop_all(group, inputs, T::cancel),
        "take" => stop_all(group, inputs, T::take),
        "fire" => fire::<T>(group, inputs),
        "fill_drain" => fill_drain::<T>(group, inputs),
        "retransmit" => retransmit::<T>(group, inputs),
        "churn" => churn_from_fill::<T>(group, inputs),
        "steady" => steady::<T>(group, inputs),
        "burst" => burst::<T>(group, inputs),
        other => unreachable!("no workload {other}"),
    }
}

/// Inserts the N deadlines into an empty, reserved structure.
fn start<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let (n, deadlines) = (inputs.n, &inputs.deadlines);
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || T::with_capacity(n, HORIZON),
            |timers| {
                for (i, &deadline) in deadlines.iter().enumerate() {
                    black_box(timers.start(deadline, i as u32));
                }
            },
            BatchSize::LargeInput,
        )
    });
}

/// Stops the N timers in random order with `stop`: `Timers::cancel` (dropping the values)
/// for the `cancel` workload, `Timers::take` (handing them back) for `take`.
fn stop_all<T: Timers, R>(
    group: &mut Group<'_>,
    inputs: &Inputs,
    stop: impl Fn(&mut T, T::Handle) -> R,
) {
    let (deadlines, order) = (&inputs.deadlines, &inputs.order);
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || filled::<T>(deadlines, HORIZON),
            |(timers, handles)| {
                for &i in order {
                    black_box(stop(timers, handles[i]));
                }
            },
            BatchSize::LargeInput,
        )
    });
}

/// Advances tick by tick through the horizon, firing all N.
fn fire<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let (n, deadlines) = (inputs.n, &inputs.deadlines);
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || filled::<T>(deadlines, HORIZON).0,
            |timers| assert_eq!(drain_ticks(timers, HORIZON), n),
            BatchSize::LargeInput,
        )
    });
}

/// `start` and `fire` together.
fn fill_drain<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let (n, deadlines) = (inputs.n, &inputs.deadlines);
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || T::with_capacity(n, HORIZON),
            |timers| {
                for (i, &deadline) in deadlines.iter().enumerate() {
                    timers.start(deadline, i as u32);
                }
                assert_eq!(drain_ticks(timers, HORIZON), n);
            },
            BatchSize::LargeInput,
        )
    });
}

/// Starts N deadlines in 100..1100, cancels a random 95 %, fires the rest.
fn retransmit<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let (n, rto_deadlines, order) = (inputs.n, &inputs.rto_deadlines, &inputs.order);
    group.bench_function(T::NAME, |b| {
        let survivors = n / 20;
        b.iter_batched_ref(
            || T::with_capacity(n, 2_048),
            |timers| {
                let handles: Vec<T::Handle> = rto_deadlines
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| timers.start(d, i as u32))
                    .collect();
                for &i in &order[survivors..] {
                    timers.cancel(handles[i]);
                }
                assert_eq!(drain_ticks(timers, 1_100), survivors);
            },
            BatchSize::LargeInput,
        )
    });
}

/// N live; per tick, cancels 64 random live timers and starts 64 far-off ones, for 256 ticks
/// from a fresh fill.
fn churn_from_fill<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let (far, churn) = (&inputs.far, &inputs.churn);
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || filled::<T>(far, HORIZON),
            |(timers, handles)| {
                for (tick, pairs) in (1..=CHURN_TICKS).zip(churn.chunks_exact(CHURN_PER_TICK)) {
                    for &(victim, ahead) in pairs {
                        timers.cancel(handles[victim]);
                        handles[victim] = timers.start(tick + ahead, victim as u32);
                    }
                    black_box(timers.advance(tick));
                }
            },
            BatchSize::LargeInput,
        )
    });
}

/// `steady`'s run: N timers, each started again as soon as it is cancelled or fires.
struct SteadyRun<'a, T: Timers> {
    timers: T,
    handles: Vec<T::Handle>,
    tick: u64,
    churn: &'a [(usize, u64)],
    /// How many fired timers have been started again (picks their deadline offsets).
    restarts: usize,
    fired: Vec<u32>,
}

impl<'a, T: Timers> SteadyRun<'a, T> {
    /// N timers due 2^15..2^16 ticks ahead, run for a whole horizon so that every timer of the
    /// fill has fired or been cancelled and the structure holds what it holds in the steady
    /// state (tombstones included).
    fn warmed_up(inputs: &'a Inputs) -> Self {
        let (timers, handles) = filled::<T>(&inputs.far, HORIZON);
        let mut run = SteadyRun {
            timers,
            handles,
            tick: 0,
            churn: &inputs.churn,
            restarts: 0,
            fired: Vec::new(),
        };
        for _ in 0..HORIZON / CHURN_TICKS {
            run.window();
        }
        run
    }

    /// 256 ticks: each cancels and restarts 64 timers, then fires what is due and restarts it.
    fn window(&mut self) {
        for pairs in self.churn.chunks_exact(CHURN_PER_TICK) {
            self.tick += 1;
            for &(victim, ahead) in pairs {
                self.timers.cancel(self.handles[victim]);
                self.handles[victim] = self.timers.start(self.tick + ahead, victim as u32);
            }
            self.timers.expire(self.tick, &mut self.fired);
            for &id in &self.fired {
                let ahead = self.churn[self.restarts % self.churn.len()].1;
                self.restarts += 1;
                self.handles[id as usize] = self.timers.start(self.tick + ahead, id);
            }
            self.fired.clear();
        }
    }
}

/// The steady state: a [`SteadyRun`] warmed up once (the first time criterion runs it: a
/// filtered-out benchmark costs nothing) and then timed a window at a time.
fn steady<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let mut run: Option<SteadyRun<'_, T>> = None;
    group.bench_function(T::NAME, |b| {
        let run = run.get_or_insert_with(|| SteadyRun::warmed_up(inputs));
        b.iter_custom(|windows| {
            let began = Instant::now();
            for _ in 0..windows {
                run.window();
            }
            began.elapsed()
        })
    });
    if let Some(mut run) = run {
        // Every handle still names a live timer: N stayed live.
        let SteadyRun { timers, handles, .. } = &mut run;
        let live = handles.iter().filter(|&&handle| timers.cancel(handle)).count();
        assert_eq!(live, inputs.n, "{} keeps N timers live", T::NAME);
    }
}

/// Fires N timers due on the same tick.
fn burst<T: Timers>(group: &mut Group<'_>, inputs: &Inputs) {
    let n = inputs.n;
    group.bench_function(T::NAME, |b| {
        b.iter_batched_ref(
            || {
                let mut timers = T::with_capacity(n, HORIZON);
                for i in 0..n {
                    timers.start(BURST_TICK, i as u32);
                }
                timers
            },
            |timers| assert_eq!(timers.advance(BURST_TICK), n),
            BatchSize::LargeInput,
        )
    });
}

/// Every workload at size `n`: one criterion group per workload (`<workload>/<n>`), each
/// structure a function of it, so that the structures compared are measured seconds apart
/// rather than minutes (the machine's speed drifts between the two).
fn bench_size(c: &mut Criterion, n: usize) {
    let inputs = Inputs::new(n);
    for workload in WORKLOADS {
        let mut group = c.benchmark_group(format!("{workload}/{n}"));
        group.sample_size(10).warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(if n >= 1_000_000 { 6 } else { 2 }));
        let elements = match workload {
            "churn" | "steady" => CHURN_PER_TICK as u64 * CHURN_TICKS,
            _ => n as u64,
        };
        group.throughput(Throughput::Elements(elements));
        bench_workload::<Heap>(&mut group, workload, &inputs);
        bench_workload::<Hashed>(&mut group, workload, &inputs);
        bench_workload::<Hierarchical>(&mut group, workload, &inputs);
        bench_workload::<Tree>(&mut group, workload, &inputs);
        group.finish();
    }
}

/// The five timers of a phalanx-proto link (`crates/phalanx-proto/src/link.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkTimer {
    Retransmit,
    AckDelay,
    KeepAlive,
    Idle,
    Repeat,
}

const LINK_TIMERS: [LinkTimer; 5] = [
    LinkTimer::Retransmit,
    LinkTimer::AckDelay,
    LinkTimer::KeepAlive,
    LinkTimer::Idle,
    LinkTimer::Repeat,
];

/// One link's timers, as `Link` uses them: arm (re-arming an armed timer), disarm, fire
/// what is due, and say when the next one is due.
trait LinkTimers {
    const NAME: &'static str;
    fn new(now: u64) -> Self;
    fn arm(&mut self, timer: LinkTimer, deadline: u64);
    fn disarm(&mut self, timer: LinkTimer);
    fn is_armed(&self, timer: LinkTimer) -> bool;
    /// The next timer due by `now`, disarmed.
    fn poll(&mut self, now: u64) -> Option<LinkTimer>;
    fn next_deadline(&mut self) -> Option<u64>;
}

/// A link's timers in a wheel, exactly as `Link` keeps them: a handle per timer, re-armed
/// with `reset`.
macro_rules! wheel_link {
    ($name:ident, $wheel:ty, $label:literal, $new:expr) => {
        struct $name {
            wheel: $wheel,
            handles: [Option<TimerHandle>; 5],
        }

        impl LinkTimers for $name {
            const NAME: &'static str = $label;
            fn new(now: u64) -> Self {
                $name { wheel: $new(now), handles: [None; 5] }
            }
            fn arm(&mut self, timer: LinkTimer, deadline: u64) {
                if let Some(handle) = self.handles[timer as usize] {
                    if self.wheel.reset(handle, deadline).is_ok() {
                        return;
                    }
                }
                self.handles[timer as usize] = self.wheel.insert(deadline, timer).ok();
            }
            fn disarm(&mut self, timer: LinkTimer) {
                if let Some(handle) = self.handles[timer as usize].take() {
                    self.wheel.discard(handle);
                }
            }
            fn is_armed(&self, timer: LinkTimer) -> bool {
                self.handles[timer as usize].is_some()
            }
            fn poll(&mut self, now: u64) -> Option<LinkTimer> {
                let expired = self.wheel.poll(now)?;
                self.handles[expired.value as usize] = None;
                Some(expired.value)
            }
            fn next_deadline(&mut self) -> Option<u64> {
                self.wheel.next_deadline()
            }
        }
    };
}

wheel_link!(HashedLink, HashedWheel<LinkTimer>, "hashed", |now| HashedWheel::new(now, 1024)
    .expect("power of two"));
wheel_link!(HierarchicalLink, HierarchicalWheel<LinkTimer>, "hierarchical", HierarchicalWheel::new);

/// A link's timers in a `BinaryHeap` with generation tombstones, as for the other workloads:
/// re-arming or disarming bumps the timer's generation, and stale entries are skipped when
/// they reach the top.
struct HeapLink {
    heap: BinaryHeap<Reverse<(u64, u64, u8, u32)>>,
    generations: [u32; 5],
    armed: [bool; 5],
    seq: u64,
}

impl HeapLink {
    fn is_stale(&self, (_, _, timer, generation): (u64, u64, u8, u32)) -> bool {
        !self.armed[timer as usize] || self.generations[timer as usize] != generation
    }
}

impl LinkTimers for HeapLink {
    const NAME: &'static str = "heap";
    fn new(_now: u64) -> Self {
        HeapLink { heap: BinaryHeap::new(), generations: [0; 5], armed: [false; 5], seq: 0 }
    }
    fn arm(&mut self, timer: LinkTimer, deadline: u64) {
        let i = timer as usize;
        self.generations[i] = self.generations[i].wrapping_add(1);
        self.armed[i] = true;
        self.heap.push(Reverse((deadline, self.seq, i as u8, self.generations[i])));
        self.seq += 1;
    }
    fn disarm(&mut self, timer: LinkTimer) {
        self.armed[timer as usize] = false;
    }
    fn is_armed(&self, timer: LinkTimer) -> bool {
        self.armed[timer as usize]
    }
    fn poll(&mut self, now: u64) -> Option<LinkTimer> {
        while let Some(&Reverse(top)) = self.heap.peek() {
            if self.is_stale(top) {
                self.heap.pop();
                continue;
            }
            if top.0 > now {
                return None;
            }
            self.heap.pop();
            self.armed[top.2 as usize] = false;
            return Some(LINK_TIMERS[top.2 as usize]);
        }
        None
    }
    fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse(top)) = self.heap.peek() {
            if !self.is_stale(top) {
                return Some(top.0);
            }
            self.heap.pop();
        }
        None
    }
}

const LINKS: usize = 8;
const TURN_MS: u64 = 100;
const LINK_TURNS: u64 = 1_000;

/// What a link's fired timers ask of the next packet (as `Link`'s `Due`).
#[derive(Clone, Copy, Default)]
struct Due {
    retransmit: bool,
    ack: bool,
    other: bool,
}

/// A host with `LINKS` links over `turns` turns, driven as `Host` drives its links: every
/// wake-up fires what is due on every link, handles arrivals and sends, then asks every link
/// for its next deadline to find the next wake-up. The client at link `i` answers each data
/// packet after `30 + 7 i` ms; one in ten of its answers is lost (so the retransmit timer
/// fires); odd links count as lossy and repeat new data a quarter turn later. Session
/// defaults: ack delay 25 ms, keep-alive 100 ms, idle 3 s, retransmit timeout 250 ms.
/// Returns how many timers fired.
fn run_links<L: LinkTimers>(turns: u64) -> u64 {
    let mut links: Vec<L> = (0..LINKS).map(|_| L::new(0)).collect();
    for link in &mut links {
        link.arm(LinkTimer::Idle, 3_000);
        link.arm(LinkTimer::KeepAlive, 100);
    }
    let mut due = [Due::default(); LINKS];
    let mut arrival: [Option<u64>; LINKS] = [None; LINKS];
    let (mut now, mut next_seal, mut fired) = (0, 0, 0);
    let end = turns * TURN_MS;
    while now < end {
        for (i, link) in links.iter_mut().enumerate() {
            while let Some(timer) = link.poll(now) {
                fired += 1;
                match timer {
                    LinkTimer::Retransmit => due[i].retransmit = true,
                    LinkTimer::AckDelay => due[i].ack = true,
                    _ => due[i].other = true,
                }
            }
            if arrival[i] == Some(now) {
                arrival[i] = None;
                link.arm(LinkTimer::Idle, now + 3_000);
                link.disarm(LinkTimer::Retransmit);
                if !link.is_armed(LinkTimer::AckDelay) && !due[i].ack {
                    link.arm(LinkTimer::AckDelay, now + 25);
                }
            }
            let seal = now == next_seal;
            let d = due[i];
            if seal || d.retransmit || d.ack || d.other {
                let data = seal || d.retransmit;
                link.disarm(LinkTimer::AckDelay);
                link.arm(LinkTimer::KeepAlive, now + 100);
                if data && (d.retransmit || !link.is_armed(LinkTimer::Retransmit)) {
                    link.arm(LinkTimer::Retransmit, now + 250);
                }
                if seal && i % 2 == 1 {
                    link.arm(LinkTimer::Repeat, now + TURN_MS / 4);
                }
                let lost = seal && (now / TURN_MS) % 10 == i as u64;
                if data && !lost && arrival[i].is_none() {
                    arrival[i] = Some(now + 30 + 7 * i as u64);
                }
                due[i] = Due::default();
            }
        }
        if now == next_seal {
            next_seal += TURN_MS;
        }
        let mut wake = next_seal;
        for (i, link) in links.iter_mut().enumerate() {
            wake = wake.min(link.next_deadline().unwrap_or(u64::MAX));
            wake = wake.min(arrival[i].unwrap_or(u64::MAX));
        }
        now = wake.max(now + 1);
    }
    fired
}

fn bench_links<L: LinkTimers>(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_link");
    group.sample_size(20).warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(LINKS as u64 * LINK_TURNS));
    group.bench_function(L::NAME, |b| b.iter(|| black_box(run_links::<L>(LINK_TURNS))));
    group.finish();
}

fn sizes() -> Vec<usize> {
    std::env::var("WHEEL_BENCH_SIZES")
        .ok()
        .map(|list| list.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 100_000, 1_000_000])
}

fn wheels(c: &mut Criterion) {
    // Every structure fires the same timers.
    let fired = run_links::<HeapLink>(LINK_TURNS);
    assert_eq!(run_links::<HashedLink>(LINK_TURNS), fired);
    assert_eq!(run_links::<HierarchicalLink>(LINK_TURNS), fired);
    bench_links::<HeapLink>(c);
    bench_links::<HashedLink>(c);
    bench_links::<HierarchicalLink>(c);
    for n in sizes() {
        bench_size(c, n);
    }
}

criterion_group!(benches, wheels);
criterion_main!(benches);

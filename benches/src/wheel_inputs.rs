//! The wheel bench's inputs: the same deadlines, orders and churn for every structure it
//! compares, drawn from `phalanx_proto::SplitMix64` with fixed seeds. The A/B harness
//! (`benches/ab/run`) copies this file, so that it runs the bench's workloads on exactly the
//! bench's inputs.

use phalanx_proto::SplitMix64;

/// Deadlines of most workloads are drawn up to this many ticks ahead.
pub const HORIZON: u64 = 1 << 16;
/// `churn` and `steady`: timers cancelled (and started again) a tick.
pub const CHURN_PER_TICK: usize = 64;
/// `churn` and `steady`: ticks of churn drawn up front (`steady` goes round them again).
pub const CHURN_TICKS: u64 = 256;

/// What every structure is given for one size N.
pub struct Inputs {
    /// N.
    pub n: usize,
    /// N deadlines uniform in `1..HORIZON`.
    pub deadlines: Vec<u64>,
    /// `0..N` shuffled: the order timers are cancelled in.
    pub order: Vec<usize>,
    /// N retransmit deadlines uniform in `100..1100`.
    pub rto_deadlines: Vec<u64>,
    /// N far deadlines, uniform in `HORIZON / 2..HORIZON`.
    pub far: Vec<u64>,
    /// `churn`'s and `steady`'s cancels, per cancel and start: the victim's index and how far
    /// ahead its new deadline is.
    pub churn: Vec<(usize, u64)>,
}

impl Inputs {
    /// The inputs for `n` timers.
    pub fn new(n: usize) -> Self {
        let mut order: Vec<usize> = (0..n).collect();
        shuffle(&mut SplitMix64::new(11), &mut order);
        Inputs {
            n,
            deadlines: uniform_deadlines(n, 1, HORIZON, 7),
            order,
            rto_deadlines: uniform_deadlines(n, 100, 1_100, 13),
            far: uniform_deadlines(n, HORIZON / 2, HORIZON, 17),
            churn: churn(n),
        }
    }
}

/// `n` deadlines in `low..high` from `seed`.
fn uniform_deadlines(n: usize, low: u64, high: u64, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| low + rng.below(high - low)).collect()
}

/// Fisher–Yates.
fn shuffle<T>(rng: &mut SplitMix64, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// The victims and deadline offsets of `CHURN_TICKS` ticks of churn among `n` live timers.
fn churn(n: usize) -> Vec<(usize, u64)> {
    let mut rng = SplitMix64::new(23);
    let pairs = CHURN_TICKS as usize * CHURN_PER_TICK;
    (0..pairs)
        .map(|_| (rng.below(n as u64) as usize, HORIZON / 2 + rng.below(HORIZON / 2)))
        .collect()
}

//! The fault model of one direction of one simulated link.
//!
//! The structs are plain data with public fields, written as struct literals over
//! `..LinkFaults::default()` (every default is "no fault"); each simulator documents how it
//! applies them.

use crate::Rng;

/// Gilbert–Elliott burst loss: a two-state chain (good, bad), stepped once per datagram; in
/// the bad state a datagram is lost with `loss_permille`. Runs of loss come from staying bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// Chance per datagram of going from the good state to the bad one.
    pub enter_permille: u32,
    /// Chance per datagram of leaving the bad state.
    pub leave_permille: u32,
    /// Loss while in the bad state.
    pub loss_permille: u32,
}

/// The state of one link's [`Burst`] chain (it starts good).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstState {
    bad: bool,
}

impl BurstState {
    /// Steps the chain for one datagram and says whether the bad state loses it. Draws one
    /// chance (the state change), then, in the bad state, a second (the loss): simulators that
    /// pin their traces rely on this order.
    pub fn lose(&mut self, burst: &Burst, rng: &mut Rng) -> bool {
        let change = if self.bad { burst.leave_permille } else { burst.enter_permille };
        if rng.chance(change) {
            self.bad = !self.bad;
        }
        self.bad && rng.chance(burst.loss_permille)
    }

    /// Whether the chain is in the bad state.
    pub fn is_bad(&self) -> bool {
        self.bad
    }
}

/// Faults of one direction of one link. `LinkFaults::default()` is a perfect link.
///
/// Not `#[non_exhaustive]`, so that scenarios read as struct literals; a new kind of fault is a
/// new field whose default is "none".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkFaults {
    /// One-way latency added to every datagram (phalanx-sim: on top of
    /// `SimConfig::latency_ms`, which every link has).
    pub latency_ms: u64,
    /// Extra delay, uniform in `0..=jitter_ms`, drawn per datagram: reorders.
    pub jitter_ms: u64,
    /// Independent loss.
    pub loss_permille: u32,
    /// Burst loss on top of the independent loss.
    pub burst: Option<Burst>,
    /// Chance a datagram is delivered twice (the copy later than the original).
    pub duplicate_permille: u32,
    /// Duplicates arrive up to this much later again (a replay).
    pub replay_delay_ms: u64,
    /// Chance a datagram is damaged on the way. phalanx-mesh makes it malformed (truncated,
    /// given trailing bytes, or replaced by random bytes under a wrong version byte: a buggy or
    /// hostile *authenticated* peer, which the decoder must reject); phalanx-sim flips one byte
    /// below QUIC, whose authentication must discard it.
    pub corrupt_permille: u32,
    /// Datagrams larger than this are dropped (`None`: no cap).
    pub mtu_bytes: Option<usize>,
    /// The faults stop at this simulated time and the link is clean afterwards (`None`:
    /// never): a safety phase with faults, then a liveness phase without. Latency stays.
    pub until_ms: Option<u64>,
}

impl LinkFaults {
    /// Whether the faults are still in force at `now_ms` (see [`LinkFaults::until_ms`]).
    pub fn active_at(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until_ms| now_ms < until_ms)
    }

    /// Whether a datagram of `len` bytes is over the MTU cap.
    pub fn over_mtu(&self, len: usize) -> bool {
        self.mtu_bytes.is_some_and(|mtu_bytes| len > mtu_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain that never leaves the bad state loses at exactly its loss rate; one that never
    /// enters it loses nothing and draws one number per datagram.
    #[test]
    fn burst_chain_edges() {
        let always = Burst { enter_permille: 1_000, leave_permille: 0, loss_permille: 1_000 };
        let (mut rng, mut chain) = (Rng::new(1), BurstState::default());
        assert!((0..100).all(|_| chain.lose(&always, &mut rng)));
        assert!(chain.is_bad());

        let never = Burst { enter_permille: 0, leave_permille: 1_000, loss_permille: 1_000 };
        let (mut rng, mut twin, mut chain) = (Rng::new(2), Rng::new(2), BurstState::default());
        assert!((0..100).all(|_| !chain.lose(&never, &mut rng)));
        for _ in 0..100 {
            twin.next_u64();
        }
        assert_eq!(rng.next_u64(), twin.next_u64(), "one draw per datagram while good");
    }

    /// The MTU cap passes `mtu_bytes` and drops one byte more; `until_ms` is exclusive.
    #[test]
    fn mtu_and_until_boundaries() {
        let faults =
            LinkFaults { mtu_bytes: Some(1_200), until_ms: Some(5_000), ..LinkFaults::default() };
        assert!(!faults.over_mtu(1_200));
        assert!(faults.over_mtu(1_201));
        assert!(faults.active_at(4_999));
        assert!(!faults.active_at(5_000));
        assert!(LinkFaults::default().active_at(u64::MAX));
        assert!(!LinkFaults::default().over_mtu(usize::MAX));
    }
}

//! The vocabulary phalanx's simulators share: one fault model for a link, and one way to run a
//! scenario over many seeds.
//!
//! - [`LinkFaults`] describes what the network does to one direction of one link (latency,
//!   jitter, independent loss, [`Burst`] loss, duplication and replays, corruption, an MTU cap,
//!   and when the faults stop). [`BurstState`] is the Gilbert–Elliott chain behind burst loss
//!   (Gilbert, *Capacity of a burst-noise channel*, 1960; Elliott, 1963), stepped once per
//!   datagram. Each simulator applies the model with its own draws from its own seeded
//!   [`Rng`]: phalanx-mesh (layer L1, sans-IO) and phalanx-sim (layer L2, real quinn under
//!   turmoil) share the vocabulary, not a draw order, so each keeps its seeded runs.
//! - [`Nat`] models a NAT's mapping and filtering ([`NatKind`]: full cone, address- and
//!   port-restricted, symmetric) with expiring mappings, for hole-punching tests.
//! - [`seeds`], [`for_each_seed`] and [`ensure`] run a scenario over a seed list derived from its
//!   name; a failure panics with the seed and the exact `cargo test` command that reruns it,
//!   captured by [`seeded_test!`] where the test is written.
//!
//! ```
//! use phalanx_testkit::{ensure, for_each_seed, seeded_test, Burst, BurstState, LinkFaults, Rng};
//!
//! let faults = LinkFaults {
//!     loss_permille: 20,
//!     burst: Some(Burst { enter_permille: 10, leave_permille: 300, loss_permille: 600 }),
//!     ..LinkFaults::default()
//! };
//! for_each_seed(seeded_test!("burst_loss_is_bounded"), 3, |seed| {
//!     let (mut rng, mut chain) = (Rng::new(seed), BurstState::default());
//!     let burst = faults.burst.expect("set above");
//!     let lost = (0..1_000).filter(|_| chain.lose(&burst, &mut rng)).count();
//!     ensure(lost < 1_000, || format!("{lost} of 1000 datagrams lost"))
//! });
//! ```
#![forbid(unsafe_code)]

mod faults;
mod nat;
mod seeds;

pub use faults::{Burst, BurstState, LinkFaults};
pub use nat::{Nat, NatKind};
pub use seeds::{ensure, for_each_seed, seeds, SeededTest};

/// The seeded generator of every fault draw (re-exported from phalanx-proto).
pub use phalanx_proto::SplitMix64 as Rng;

//! Deterministic network-fault simulation for phalanx games: a host and N clients running
//! **phalanx's real drivers and tokio** — over QUIC (quinn) or the raw-UDP transport
//! ([`SimConfig::transport`]) — under [turmoil]'s simulated network and clock, with a seeded fault
//! layer (loss, Gilbert–Elliott bursts, duplication, jitter/reordering, an MTU cap) and a timeline
//! of partitions, repairs and crashes. Games plug in through [`SimGame`]; a run returns a
//! [`SimReport`] with one [`PlayerReport`] per player — its per-turn state hashes and counters —
//! and a digest of the packet trace.
//!
//! Same seed, same report: turmoil is seeded, quinn's randomness and connection ids are seeded
//! (`phalanx::quic::HostConfig::seed`, `phalanx::udp::HostConfig::seed`), certificates are Ed25519 (fixed-size signatures, so
//! packet sizes never vary), and every fault draw comes from the seed. TLS still draws fresh
//! key material, so the *bytes* differ between runs; the trace digest therefore covers each
//! datagram's time, endpoints, size and fate — everything the network sees but the ciphertext.
//!
//! ```no_run
//! use phalanx_sim::{run, SimConfig, SimGame, Step};
//! use phalanx::PlayerId;
//! # use phalanx::{Turn, TypedTurn};
//! # struct MyGame;
//! # impl SimGame for MyGame {
//! #     type Command = u32;
//! #     type Setup = ();
//! #     fn new(_: PlayerId, _: u64, _: &()) -> Self { MyGame }
//! #     fn execute(&mut self, _: &TypedTurn<u32>) {}
//! #     fn state_hash(&self) -> u64 { 0 }
//! #     fn commands(&mut self, _: Turn) -> Vec<u32> { Vec::new() }
//! # }
//! let mut config = SimConfig::new(42, 4);
//! config.timeline = vec![
//!     Step::Partition { at_ms: 5_000, player: PlayerId(2) }, // the seat the host gave
//!     Step::Repair { at_ms: 7_000, player: PlayerId(2) },
//! ];
//! let report = run::<MyGame>(config).expect("the simulation ran");
//! report.check_agreement().expect("every player reached the same states");
//! println!("rerun with seed 42; trace digest {:#x}", report.trace_digest);
//! ```
//!
//! Players are named as reports name them, by [`PlayerId`](phalanx::PlayerId): the seat the
//! host gave each client in the order the joins arrived. The client machines are `p0`, `p1`...
//! in the order they start ([`PlayerReport::machine`]); on a lossy network `p1` may hold seat
//! 0. A timeline [`Step`] names a seat and is resolved, at its time, to the machine holding it.
//!
//! The fault model ([`LinkFaults`], [`Burst`]) and the seeded [`Rng`] come from
//! phalanx-testkit, shared with the L1 simulator phalanx-mesh; seed lists and rerun messages
//! for tests are there too.
//!
//! Layout: `config` (the scenario and its timeline), `game` (the [`SimGame`] trait and
//! [`ChainGame`]), `run` (the run as named steps: network, host node, stepping loop), `player` (a
//! player's machine: join, play, crash and restart, report), `listen` (the host's own player's
//! game, when the host plays), `spectator` (a spectator's machine),
//! `director` (the timeline's partitions, and the join flood), `socket` (quinn over turmoil UDP
//! with the fault layer), `trace` (the packet digest), `sampler` (counters over time) and `report`.
#![forbid(unsafe_code)]

mod config;
mod director;
mod game;
mod listen;
mod mesh;
mod nat;
mod player;
#[cfg(feature = "relay")]
mod relay;
mod report;
mod run;
mod sampler;
mod socket;
mod spectator;
mod speculating;
mod trace;

pub use config::{Hostile, SimConfig, Step, Topology};
pub use game::{ChainGame, SimGame};
pub use report::{
    CrowdReport, PlayerReport, Sample, SimError, SimReport, SpeculationReport, FRAME_US,
};
pub use run::{run, run_with};
pub use socket::SimSocket;

/// The fault model, shared with phalanx-mesh (re-exported from phalanx-testkit). Here a
/// node's [`LinkFaults`] apply to everything it sends, on top of [`SimConfig::latency_ms`].
pub use phalanx_testkit::{Burst, LinkFaults, NatKind, Rng};

//! Shared helpers for the phalanx benchmarks. Most live in the bench files themselves; the
//! wheel bench's inputs are here because the A/B harness (`benches/ab/run`) builds the same
//! inputs outside the workspace.

pub mod wheel_inputs;

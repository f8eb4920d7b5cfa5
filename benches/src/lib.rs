//! Shared helpers for the phalanx benchmarks live in the bench files themselves.

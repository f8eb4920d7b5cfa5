//! phalanx's fault-matrix scenarios at layer L2 (real quinn under turmoil, through
//! phalanx-sim) live in `tests/`; this library is empty. Their seeds and rerun messages come
//! from phalanx-testkit: `PHALANX_SEED=<n>` reruns one seed, `PHALANX_SEEDS=<n>` sets how many
//! seeds each scenario runs, and a failure prints the exact `cargo test` command.

//! Shared helpers of the L2 scenarios in `tests/`: seed lists and the failure message that
//! names the seed and the command to rerun it.
//!
//! `PHALANX_SEED=<n>` reruns one seed; `PHALANX_SEEDS=<n>` sets how many seeds each scenario
//! runs (its default otherwise).

/// The seeds of scenario `name`: `PHALANX_SEED` alone if set, else `PHALANX_SEEDS` (or
/// `default`) seeds derived from the name, so scenarios do not share seeds.
pub fn seeds(name: &str, default: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("PHALANX_SEED").ok().and_then(|v| v.parse().ok()) {
        return vec![seed];
    }
    let count = std::env::var("PHALANX_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let base = name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (0..count).map(|i| (base % 1_000_000) * 1_000 + i).collect()
}

/// Runs `check` for every seed of `test` (the test function's name, in test binary `binary`);
/// the first failure panics with the seed and the command that reruns it.
pub fn for_each_seed(
    binary: &str,
    test: &str,
    count: u64,
    check: impl Fn(u64) -> Result<(), String>,
) {
    for seed in seeds(test, count) {
        if let Err(failure) = check(seed) {
            panic!(
                "{test} failed for seed {seed}: {failure}\n\
                 rerun: PHALANX_SEED={seed} cargo test -p sim-tests --test {binary} -- {test}"
            );
        }
    }
}

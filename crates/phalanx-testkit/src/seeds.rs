//! Seed lists and the failure message that names the seed and the command to rerun it.
//!
//! `PHALANX_SEED=<n>` reruns one seed; `PHALANX_SEEDS=<n>` sets how many seeds each scenario
//! runs (its default otherwise). A scenario's seeds derive from its name (FNV-1a), so two
//! scenarios do not share seeds and adding one does not move another's.

/// `Ok(())` if `condition` holds, else the message: the assertion of seeded scenarios, which
/// return their failure so [`for_each_seed`] can print the seed with it.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// The seeds of scenario `scenario`: `PHALANX_SEED` alone if set, else `PHALANX_SEEDS` (or
/// `default_count`) consecutive seeds from a base derived from the name.
///
/// # Panics
///
/// If either variable is set but is not a number (a typo must not silently run the defaults).
pub fn seeds(scenario: &str, default_count: u64) -> Vec<u64> {
    if let Some(seed) = number_from_env("PHALANX_SEED") {
        return vec![seed];
    }
    let count = number_from_env("PHALANX_SEEDS").unwrap_or(default_count);
    let base = fnv1a(scenario.as_bytes()) & 0xFFFF_FFFF;
    (0..count).map(|i| base * 1_000 + i).collect()
}

fn number_from_env(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(number) => Some(number),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A seeded scenario and where its test lives: what `cargo test` needs to rerun exactly it.
/// Made by [`seeded_test!`](crate::seeded_test), inside the test function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeededTest {
    package: &'static str,
    /// The integration-test binary (`None`: the library's unit tests).
    binary: Option<&'static str>,
    test: String,
    scenario: String,
}

impl SeededTest {
    /// The scenario `scenario` (which names its seeds), run by the test whose function has the
    /// type path `function_path` (`crate::module::test::marker`, as
    /// [`std::any::type_name_of_val`] gives it for a marker function declared inside the
    /// test) in integration-test binary `binary` (`None`: the library's unit tests) of package
    /// `package`. [`seeded_test!`](crate::seeded_test) fills all of it in.
    pub fn new(
        package: &'static str,
        binary: Option<&'static str>,
        function_path: &str,
        scenario: impl Into<String>,
    ) -> SeededTest {
        // `binary::tests::name::{{closure}}::marker` → `tests::name`: what `--exact` matches.
        let mut segments: Vec<&str> =
            function_path.split("::").filter(|segment| !segment.starts_with("{{")).collect();
        segments.pop();
        if segments.len() > 1 {
            segments.remove(0);
        }
        SeededTest { package, binary, test: segments.join("::"), scenario: scenario.into() }
    }

    /// The same test running scenario `scenario` instead: for a helper that runs several
    /// variants of one test function, each with seeds of its own.
    pub fn variant(&self, scenario: impl Into<String>) -> SeededTest {
        SeededTest { scenario: scenario.into(), test: self.test.clone(), ..*self }
    }

    /// The scenario name its seeds derive from.
    pub fn scenario(&self) -> &str {
        &self.scenario
    }

    /// The test function's path inside its binary, as `cargo test -- <path> --exact` takes it.
    pub fn test(&self) -> &str {
        &self.test
    }

    /// The command that reruns this test with `seed` alone.
    pub fn rerun_command(&self, seed: u64) -> String {
        let target = match self.binary {
            Some(binary) => format!("--test {binary}"),
            None => "--lib".to_owned(),
        };
        format!(
            "PHALANX_SEED={seed} cargo test -p {} {target} -- {} --exact",
            self.package, self.test
        )
    }
}

/// The [`SeededTest`] for the enclosing test function, running scenario `$scenario` (a
/// `&str` or `String`; one test may loop over several scenarios).
#[macro_export]
macro_rules! seeded_test {
    ($scenario:expr) => {{
        fn marker() {}
        $crate::SeededTest::new(
            env!("CARGO_PKG_NAME"),
            // Cargo sets CARGO_TARGET_TMPDIR for integration tests and benches only.
            match option_env!("CARGO_TARGET_TMPDIR") {
                Some(_) => Some(env!("CARGO_CRATE_NAME")),
                None => None,
            },
            ::std::any::type_name_of_val(&marker),
            $scenario,
        )
    }};
}

/// Runs `check` for every seed of `test`'s scenario ([`seeds`]); the first failure panics with
/// the seed and the command that reruns exactly that seed.
pub fn for_each_seed(
    test: SeededTest,
    default_count: u64,
    check: impl Fn(u64) -> Result<(), String>,
) {
    for seed in seeds(test.scenario(), default_count) {
        if let Err(failure) = check(seed) {
            panic!(
                "{} failed for seed {seed}: {failure}\nrerun: {}",
                test.scenario(),
                test.rerun_command(seed)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds are the ones phalanx-mesh's scenarios always ran: FNV-1a of the name, low 32
    /// bits, times 1000, plus the index.
    #[test]
    fn seed_base_is_fnv1a_of_the_name() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        if std::env::var_os("PHALANX_SEED").is_none() && std::env::var_os("PHALANX_SEEDS").is_none()
        {
            let base = (0xaf63_dc4c_8601_ec8c_u64 & 0xFFFF_FFFF) * 1_000;
            assert_eq!(seeds("a", 3), vec![base, base + 1, base + 2]);
        }
    }

    /// The macro names this very test, so `--exact` finds it.
    #[test]
    fn seeded_test_names_the_enclosing_function() {
        let test = crate::seeded_test!("a scenario");
        assert_eq!(test.test(), "seeds::tests::seeded_test_names_the_enclosing_function");
        assert_eq!(test.scenario(), "a scenario");
        assert_eq!(
            test.rerun_command(7),
            "PHALANX_SEED=7 cargo test -p phalanx-testkit --lib -- \
             seeds::tests::seeded_test_names_the_enclosing_function --exact"
        );
        let in_closure = || crate::seeded_test!(String::from("x"));
        assert_eq!(in_closure().test(), test.test());
    }
}

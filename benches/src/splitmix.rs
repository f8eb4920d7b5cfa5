//! SplitMix64: a tiny seeded generator, so that every structure a benchmark compares sees the
//! same inputs. Also compiled into the A/B harness (`benches/ab/run` copies this file), so it
//! depends on nothing.

/// A SplitMix64 stream from a seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `bound` (not quite uniform: a modulo, as the benchmarks have always
    /// drawn, so their inputs stay the same).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    /// Shuffles `items` (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

//! The `--json` lines: each mode's summary is a `#[derive(Serialize)]` struct written with
//! serde_json as one line, the last of stdout. Hashes are hex strings (`0x` and 16 digits);
//! rates keep the few decimals the text summary shows.

use serde::{Serialize, Serializer};

/// One desync report as the JSON lines list it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct Desync {
    /// The check turn whose hashes differed.
    pub(crate) turn: u32,
    /// The players whose state diverged from the majority.
    pub(crate) players: Vec<u8>,
    /// The first turn after which a diverged player's state differed (null when it was not
    /// pinned: a later check of the same divergence, or a game that reports no per-turn
    /// hashes).
    pub(crate) first_turn: Option<u32>,
    /// The parts of the state that differed after that turn, as the game names them (e.g.
    /// `unit 12 hp`; null when the host got no states).
    pub(crate) diff: Option<Vec<String>>,
}

/// What a player's game saw, as every mode's summary reports it (flattened into its line).
#[derive(Debug, Serialize)]
pub(crate) struct Play {
    /// The state hash after the last turn.
    #[serde(serialize_with = "hex")]
    pub(crate) final_state_hash: u64,
    /// Desync reports, each once.
    pub(crate) desyncs: Vec<Desync>,
    /// Commands submitted.
    pub(crate) commands_submitted: u64,
    /// Commands executed.
    pub(crate) commands_executed: u64,
    /// Submit → execute latency: median, 95th percentile, maximum; `None` (null) when none
    /// was measured.
    pub(crate) latency_ms_p50: Option<u32>,
    /// See `latency_ms_p50`.
    pub(crate) latency_ms_p95: Option<u32>,
    /// See `latency_ms_p50`.
    pub(crate) latency_ms_max: Option<u32>,
    /// Time the game waited for turns beyond their length; `None` (null) when never measured.
    pub(crate) stall_ms: Option<u64>,
}

impl Play {
    /// The latency figures in words: `p50 … ms, p95 … ms, max … ms`, or that none was measured.
    pub(crate) fn latency_words(&self) -> String {
        match (self.latency_ms_p50, self.latency_ms_p95, self.latency_ms_max) {
            (Some(p50), Some(p95), Some(max)) => {
                format!("p50 {p50} ms, p95 {p95} ms, max {max} ms")
            }
            _ => "none measured".into(),
        }
    }

    /// The stall figure in words: `… ms`, or that it was never measured.
    pub(crate) fn stall_words(&self) -> String {
        self.stall_ms.map_or_else(|| "never measured".into(), |ms| format!("{ms} ms"))
    }
}

/// Prints `value` as one JSON line on stdout.
pub(crate) fn print_line(value: &impl Serialize) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        // The summaries are plain structs of numbers and strings: this cannot fail.
        Err(error) => eprintln!("error: cannot write the JSON summary: {error}"),
    }
}

/// A 64-bit hash as `"0x"` and 16 hex digits.
pub(crate) fn hex<S: Serializer>(hash: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{hash:#018x}"))
}

/// `value` rounded to `PLACES` decimals as `format!` rounds it (so the JSON shows the value
/// the text summary shows).
pub(crate) fn decimals<const PLACES: usize, S: Serializer>(
    value: &f64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let rounded = format!("{value:.PLACES$}").parse().unwrap_or(*value);
    serializer.serialize_f64(rounded)
}

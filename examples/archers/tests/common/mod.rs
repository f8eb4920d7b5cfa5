//! What the demo's tests share: reading the `--json` summary the demo prints as its last line,
//! and a match's length in turns of the demo session.

use serde_json::Value;

/// The turns a match of `ms` plays at the demo session's turn length (as `--minutes` counts).
#[allow(dead_code, reason = "not every test binary counts turns")]
pub(crate) fn turns_in(ms: u64) -> u64 {
    ms / u64::from(archers::net::demo_session().turns.length_ms)
}

/// The JSON object on `line`, or a panic quoting the line.
pub(crate) fn json(line: &str) -> Value {
    let value: Value =
        serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
    assert!(value.is_object(), "not a JSON object: {line}");
    value
}

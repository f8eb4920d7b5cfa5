//! What the demo's tests share: reading the `--json` summary the demo prints as its last line.

use serde_json::Value;

/// The JSON object on `line`, or a panic quoting the line.
pub(crate) fn json(line: &str) -> Value {
    let value: Value =
        serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
    assert!(value.is_object(), "not a JSON object: {line}");
    value
}

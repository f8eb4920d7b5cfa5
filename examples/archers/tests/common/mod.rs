//! What the demo's tests share: reading the `--json` summary the demo prints as its last line,
//! and a match's length in turns of the demo session.

use std::path::PathBuf;

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

/// The `--json` lines of every player of one match over real sockets: `players` distinct
/// players, each of which played the whole match (`ms` long), ended `finished` (`ended_by`
/// names who ends it, for a failure's message), saw no desync and holds the same final state;
/// every command submitted was executed by all.
#[allow(dead_code, reason = "only the real-socket tests play a match across processes")]
pub(crate) fn check_one_match(lines: &[Value], players: u64, ms: u64, ended_by: &str) {
    let mut seen: Vec<u64> = lines.iter().map(|l| l["player"].as_u64().unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..players).collect::<Vec<_>>(), "{players} distinct players");
    for line in lines {
        assert_eq!(line["turns"], turns_in(ms), "{line}");
        assert_eq!(line["ended"], "finished", "{ended_by} ends the match: {line}");
        assert_eq!(line["desyncs"], serde_json::json!([]), "{line}");
        assert_eq!(line["final_state_hash"], lines[0]["final_state_hash"]);
    }
    let executed: Vec<u64> =
        lines.iter().map(|l| l["commands_executed"].as_u64().unwrap()).collect();
    assert!(executed.iter().all(|e| *e == executed[0]), "{executed:?}");
    let submitted: u64 = lines.iter().map(|l| l["commands_submitted"].as_u64().unwrap()).sum();
    assert!(submitted > 0 && executed[0] == submitted, "{lines:?}");
}

/// Chromium's path: `PHALANX_CHROMIUM`, or the first of its usual names on `PATH`.
#[allow(dead_code, reason = "only the browser tests open a page")]
pub(crate) fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PHALANX_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

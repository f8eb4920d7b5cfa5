//! The example as a user runs it: both roles end with every game agreeing, every player
//! `finished`, and the end reaching every player within a round trip plus two turns (loopback:
//! 200 ms). Short matches (`--seconds 3`) to keep the suite quick.

use std::process::Command;

fn run(role: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_frame-loop"))
        .args(["--role", role, "--seconds", "3", "--json"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        output.status.success(),
        "{role}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(last).expect("the last line is JSON")
}

fn check(report: &serde_json::Value, role: &str, players: u64) {
    assert_eq!(report["role"], role);
    assert_eq!(report["players"], players);
    assert_eq!(report["hashes_agree"], true, "{report}");
    let ended = report["ended"].as_array().expect("a list");
    assert_eq!(ended.len() as u64, players);
    assert!(ended.iter().all(|end| end == "finished"), "{report}");
    // Three seconds of 100 ms turns, give or take the start and the end.
    let turns = report["turns"].as_u64().expect("a number");
    assert!((25..=40).contains(&turns), "{report}");
    let latency = report["end_latency_ms_max"].as_u64().expect("a number");
    assert!(latency <= 200, "{report}");
}

#[test]
fn a_listen_server_and_three_clients() {
    check(&run("listen"), "listen", 4);
}

#[test]
fn a_dedicated_host_and_four_clients() {
    check(&run("dedicated"), "dedicated", 4);
}

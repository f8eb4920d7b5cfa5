//! The demo binary end to end: a short match through the simulated bad network reaches the
//! same state on every player, executes every order, and the same seed gives the same final
//! state and packet-trace digest while another seed does not. Bounded by the simulation's own
//! time limit.

use std::process::Command;

fn run(seed: u64) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_archers"))
        .args(["--minutes", "0.4", "--units", "600", "--partition", "0", "--json"])
        .args(["--seed", &seed.to_string()])
        .output()
        .expect("the demo runs");
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    stdout.lines().last().expect("a JSON line").to_owned()
}

fn field<'a>(json: &'a str, name: &str) -> &'a str {
    let key = format!("\"{name}\":");
    let start = json.find(&key).unwrap_or_else(|| panic!("{name} in {json}")) + key.len();
    let rest = &json[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim_matches('"')
}

#[test]
fn demo_is_deterministic_and_agrees() {
    let first = run(7);
    let again = run(7);
    let other = run(8);
    assert_eq!(field(&first, "hashes_agree"), "true", "{first}");
    assert_eq!(field(&first, "commands_submitted"), field(&first, "commands_executed"), "{first}");
    assert!(field(&first, "commands_submitted").parse::<u64>().unwrap() > 20, "{first}");
    assert_eq!(field(&first, "final_state_hash"), field(&again, "final_state_hash"));
    assert_eq!(field(&first, "trace_digest"), field(&again, "trace_digest"));
    assert_ne!(field(&first, "trace_digest"), field(&other, "trace_digest"));
}

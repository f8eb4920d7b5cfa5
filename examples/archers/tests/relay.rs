//! The README's relay walk-through, run as written: a `phalanx-relay` process, a 2-player match
//! of the demo created with the README's `curl` command, and two `archers client` processes
//! joining it with the README's client command (the ticket's pin and codes filled in). Both
//! play to the end and finish; the relay then holds no match and exits 0 on SIGTERM.
//!
//! The commands are read from README.md, so the README cannot drift from what works. Only
//! the addresses change (free ports instead of 7777 and 7780).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "common/node.rs"]
mod node;

use node::Node;

/// The relay binary beside the demo's, built first if it is not there yet.
fn relay_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_archers")).with_file_name("phalanx-relay");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo).args(["build", "-p", "phalanx-relay"]).status();
        assert!(status.is_ok_and(|s| s.success()), "cargo build -p phalanx-relay");
    }
    path
}

/// The README's line that starts with `prefix`.
fn readme_line(prefix: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let line = readme.lines().find(|line| line.starts_with(prefix));
    line.unwrap_or_else(|| panic!("README.md has a line starting with {prefix:?}")).to_owned()
}

#[test]
fn the_readme_creates_a_match_with_curl_and_two_demo_clients_finish_it() {
    let deadline = Instant::now() + Duration::from_secs(120);
    // The README's relay command, on free ports.
    let start = readme_line("cargo run --release -p phalanx-relay --");
    let flags: Vec<&str> = start.split_whitespace().skip(6).collect();
    let mut relay = std::process::Command::new(relay_binary());
    relay.args(&flags).args(["--udp", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    let relay = Node::from_command(relay);
    let udp = relay.line("UDP ", deadline).expect("the relay prints its UDP address");
    let admin = relay.line("ADMIN ", deadline).expect("the relay prints its admin address");

    let curl = readme_line("curl ").replace("127.0.0.1:7780", &admin);
    let output = Command::new("sh").args(["-c", &curl]).stderr(Stdio::inherit()).output();
    let output = output.expect("curl runs");
    let ticket: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("a ticket: {}", String::from_utf8_lossy(&output.stdout)));
    assert_eq!(ticket["address"].as_str(), Some(udp.as_str()));
    let pin = ticket["pin"].as_str().expect("the ticket's pin").to_owned();

    let client = readme_line("cargo run --release -p archers -- client");
    let seats = ticket["seats"].as_array().expect("seats");
    assert_eq!(seats.len(), 2);
    let clients: Vec<Node> = seats
        .iter()
        .map(|seat| {
            let code = seat["code"].as_str().expect("a code");
            let line = client
                .replace("127.0.0.1:7777", &udp)
                .replace("<pin>", &pin)
                .replace("<code>", code);
            let mut args: Vec<&str> = line.split_whitespace().skip(6).collect();
            args.push("--json");
            Node::spawn(&args)
        })
        .collect();
    for client in clients {
        let summary =
            client.line("{\"player\":", deadline).map(|rest| format!("{{\"player\":{rest}"));
        let (ok, stderr) = client.finish(deadline);
        let summary: Value = serde_json::from_str(&summary.unwrap_or_default())
            .unwrap_or_else(|_| panic!("a client's JSON summary; stderr:\n{stderr}"));
        assert_eq!(summary["ended"], "finished", "{summary}\n{stderr}");
        assert!(ok, "the client exits 0:\n{stderr}");
    }
    // The finished match is freed: the relay lists none.
    let list = format!("curl -s -H 'Authorization: Bearer secret' http://{admin}/v1/matches");
    let mut listed = String::new();
    for _ in 0..50 {
        let output = Command::new("sh").args(["-c", &list]).output().expect("curl runs");
        listed = String::from_utf8_lossy(&output.stdout).into_owned();
        if listed == "[]" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(listed, "[]");
    let _ = Command::new("kill").arg("-TERM").arg(relay.child.id().to_string()).status();
    let (ok, stderr) = relay.finish(deadline);
    assert!(ok, "the relay exits 0 on SIGTERM:\n{stderr}");
}

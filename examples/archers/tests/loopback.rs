//! The demo over real sockets on 127.0.0.1, one process per node, over QUIC and over raw UDP:
//! `archers host` prints its address, the pin (certificate fingerprint or static key) and
//! seat tokens; a client pinning a wrong fingerprint is
//! refused (naming both fingerprints), and one started with another seed is refused (naming
//! the match flags that must agree); three `archers client` processes pin the right one, play the match to its last
//! turn and must print the same final state hash. Bounded: every child is killed after 120 s.

use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/node.rs"]
mod node;

use node::Node;

const PLAYERS: usize = 3;
/// How a client's `--json` line starts (the player comes first).
const CLIENT_JSON: &str = "{\"player\":";
const MATCH: [&str; 8] = ["--players", "3", "--units", "300", "--minutes", "0.15", "--seed", "5"];

#[test]
fn host_and_three_client_processes_agree_over_loopback() {
    agree_over(&[], "--fingerprint");
}

/// The same over the raw-UDP transport: clients pin the host's static key.
#[test]
fn host_and_three_client_processes_agree_over_raw_udp() {
    agree_over(&["--transport", "udp"], "--udp-key");
}

/// The host with `transport` flags; clients pin what it printed with `pin_flag`.
fn agree_over(transport: &[&str], pin_flag: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut host_args = vec!["host", "--bind", "127.0.0.1:0"];
    host_args.extend(transport);
    host_args.extend(MATCH);
    let host = Node::spawn(&host_args);
    let listening = host.line("LISTENING ", deadline).expect("the host announces itself");
    let (addr, fingerprint) = listening.split_once(' ').expect("address and fingerprint");
    let tokens: Vec<String> = (0..PLAYERS)
        .map(|seat| {
            let line = host.line("SEAT ", deadline).expect("a seat token");
            let (index, token) = line.split_once(' ').expect("seat and token");
            assert_eq!(index, seat.to_string());
            token.to_owned()
        })
        .collect();

    // A wrong fingerprint (one bit changed) is refused before any seat is taken.
    let mut wrong = fingerprint.as_bytes().to_vec();
    wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
    let wrong = String::from_utf8(wrong).unwrap();
    let mut args = vec!["client", "--connect", addr, pin_flag, &wrong, "--token", &tokens[0]];
    args.extend(MATCH);
    let (ok, stderr) = Node::spawn(&args).finish(Instant::now() + Duration::from_secs(30));
    assert!(!ok, "a client pinning the wrong fingerprint joined");
    assert!(stderr.contains("cannot join"), "{stderr}");
    assert!(stderr.contains(fingerprint) && stderr.contains(&wrong), "both fingerprints: {stderr}");

    // Other match flags (another seed): refused, and told which flags must match.
    let mut args = vec!["client", "--connect", addr, pin_flag, fingerprint, "--token", &tokens[0]];
    args.extend(&MATCH[..6]);
    args.extend(["--seed", "6"]);
    let (ok, stderr) = Node::spawn(&args).finish(Instant::now() + Duration::from_secs(30));
    assert!(!ok, "a client with another seed joined");
    assert!(stderr.contains("game data mismatch"), "{stderr}");
    assert!(stderr.contains("--seed") && stderr.contains("seed 6"), "{stderr}");

    let clients: Vec<Node> = tokens
        .iter()
        .map(|token| {
            let mut args =
                vec!["client", "--connect", addr, pin_flag, fingerprint, "--token", token];
            args.extend(MATCH);
            args.push("--json");
            Node::spawn(&args)
        })
        .collect();
    let results: Vec<Option<String>> =
        clients.iter().map(|client| client.line(CLIENT_JSON, deadline)).collect();
    let outcomes: Vec<(bool, String)> = clients.into_iter().map(|c| c.finish(deadline)).collect();
    let (host_ok, host_stderr) = host.finish(deadline);
    for (result, (ok, stderr)) in results.iter().zip(&outcomes) {
        assert!(*ok && result.is_some(), "a client failed: {result:?}\n{stderr}");
    }
    assert!(host_ok, "the host failed:\n{host_stderr}");
    let lines: Vec<Value> = results
        .iter()
        .flatten()
        .map(|rest| common::json(&format!("{CLIENT_JSON}{rest}")))
        .collect();
    common::check_one_match(&lines, PLAYERS as u64, 9_000, "the host");
}

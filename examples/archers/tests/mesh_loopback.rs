//! The demo peer to peer over real sockets on 127.0.0.1, one process per player:
//! `archers rendezvous` prints its address and each seat's `archers peer` command line; four
//! peers meet through it, play the match with no host to its last turn (player 0 ends it),
//! and must print the same final state hash, every order executed by all. Bounded: every
//! child is killed after 120 s. (A peer with another seat's key is refused:
//! `crates/phalanx-udp/tests/mesh.rs`.)

use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/node.rs"]
mod node;

use node::Node;

/// How a peer's `--json` line starts (the player comes first).
const PEER_JSON: &str = "{\"player\":";
const MATCH: [&str; 8] = ["--players", "4", "--units", "300", "--minutes", "0.15", "--seed", "5"];

/// The rendezvous, and each seat's command line (without the leading `archers`).
fn rendezvous(deadline: Instant) -> (Node, Vec<Vec<String>>) {
    let mut args = vec!["rendezvous", "--bind", "127.0.0.1:0"];
    args.extend(MATCH);
    let node = Node::spawn(&args);
    node.line("LISTENING ", deadline).expect("the rendezvous announces itself");
    let commands = (0..4)
        .map(|seat| {
            let line = node.line("PEER ", deadline).expect("a seat's command line");
            let (index, command) = line.split_once(' ').expect("seat and command");
            assert_eq!(index, seat.to_string());
            let words: Vec<String> = command.split(' ').map(str::to_owned).collect();
            assert_eq!(words[0], "archers");
            words[1..].to_vec()
        })
        .collect();
    (node, commands)
}

fn spawn(words: &[String]) -> Node {
    let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
    args.push("--json");
    Node::spawn(&args)
}

#[test]
fn four_peer_processes_agree_over_loopback() {
    let deadline = Instant::now() + Duration::from_secs(120);
    let (_rendezvous, commands) = rendezvous(deadline);
    let peers: Vec<Node> = commands.iter().map(|words| spawn(words)).collect();
    let results: Vec<Option<String>> =
        peers.iter().map(|peer| peer.line(PEER_JSON, deadline)).collect();
    let outcomes: Vec<(bool, String)> = peers.into_iter().map(|p| p.finish(deadline)).collect();
    for (result, (ok, stderr)) in results.iter().zip(&outcomes) {
        assert!(*ok && result.is_some(), "a peer failed: {result:?}\n{stderr}");
    }
    let lines: Vec<Value> =
        results.iter().flatten().map(|rest| common::json(&format!("{PEER_JSON}{rest}"))).collect();
    common::check_one_match(&lines, 4, 9_000, "player 0");
}

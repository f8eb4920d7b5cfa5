//! Over real sockets on 127.0.0.1: a client process stopped (SIGSTOP) for twice the idle
//! timeout is removed. When it runs again it says it was removed, gives its own figures as
//! measured before the cut (not zeros), and prints the command that rejoins; that command,
//! run again, catches up and finishes with the others' final state hash. The host and the
//! client that stayed say, as it happens, that they waited and who left and came back.
//! Bounded: every child is killed after 120 s.
#![cfg(unix)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/node.rs"]
mod node;

use node::Node;

/// How a client's `--json` line starts (the player comes first).
const CLIENT_JSON: &str = "{\"player\":";
/// 24 s of turns: long enough to cut one client off and rejoin before the end.
const MATCH: [&str; 8] = ["--players", "2", "--units", "300", "--minutes", "0.4", "--seed", "6"];

fn signal(node: &Node, signal: &str) {
    let pid = node.child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status().expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// A client's JSON line, or a panic naming the client's stderr.
fn summary(client: &Node, deadline: Instant) -> Value {
    let line = client.line(CLIENT_JSON, deadline).expect("a client's JSON line");
    common::json(&format!("{CLIENT_JSON}{line}"))
}

#[test]
fn a_client_cut_off_past_the_idle_timeout_is_told_it_was_removed_and_rejoins() {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut host_args = vec!["host", "--bind", "127.0.0.1:0"];
    host_args.extend(MATCH);
    let host = Node::spawn(&host_args);
    let listening = host.line("LISTENING ", deadline).expect("the host announces itself");
    let (addr, fingerprint) = listening.split_once(' ').expect("address and fingerprint");
    let tokens: Vec<String> = (0..2)
        .map(|_| host.line("SEAT ", deadline).expect("a seat").split_once(' ').unwrap().1.into())
        .collect();
    let args = |token: &str| {
        let mut args = vec!["client", "--connect", addr, "--fingerprint", fingerprint];
        args.extend(["--token", token]);
        args.extend(MATCH);
        args.push("--json");
        args.into_iter().map(str::to_owned).collect::<Vec<String>>()
    };
    let spawn = |args: &[String]| Node::spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stays = spawn(&args(&tokens[0]));
    let cut_args = args(&tokens[1]);
    let cut = spawn(&cut_args);

    // Into the match, then silent for twice the 3 s idle timeout.
    let idle =
        Duration::from_millis(u64::from(phalanx::SessionConfig::default().link.idle_timeout_ms));
    std::thread::sleep(Duration::from_secs(4));
    signal(&cut, "-STOP");
    std::thread::sleep(idle * 2);
    signal(&cut, "-CONT");

    let gone = summary(&cut, deadline);
    let (ok, stderr) = cut.finish(deadline);
    assert!(!ok, "a removed client does not succeed: {gone}\n{stderr}");
    let player = gone["player"].as_u64().expect("its player");
    let ended = gone["ended"].as_str().expect("how it ended");
    assert!(ended == "host_lost" || ended == "removed", "{gone}");
    let turns = gone["turns"].as_u64().expect("turns");
    let match_turns = common::turns_in(24_000);
    assert!(turns > 0 && turns < match_turns, "{gone}");
    // Its figures were read after its last turn, before the session ended.
    assert_eq!(gone["measured_at_turn"].as_u64(), Some(turns - 1), "{gone}");
    assert!(gone["latency_ms_p50"].as_u64().is_some_and(|ms| ms > 0), "{gone}");
    assert!(gone["stall_ms"].as_u64().is_some(), "{gone}");
    assert!(stderr.contains("REMOVED from the match after turn"), "{stderr}");
    assert!(stderr.contains("to rejoin, run the same command again"), "{stderr}");
    let rejoin = gone["rejoin"].as_str().expect("the rejoin command");
    let words: Vec<&str> = rejoin.split(' ').collect();
    assert_eq!(words[1..], cut_args.iter().map(String::as_str).collect::<Vec<_>>(), "{rejoin}");
    assert!(stderr.contains(rejoin), "the command is printed: {stderr}");

    // The same command again: it catches up from turn 0 and plays to the end.
    let back = spawn(&cut_args);
    let back_line = summary(&back, deadline);
    let stayed = summary(&stays, deadline);
    let (back_ok, back_stderr) = back.finish(deadline);
    let (stays_ok, stays_stderr) = stays.finish(deadline);
    let (host_ok, host_stderr) = host.finish(deadline);
    assert!(back_ok, "the rejoined client failed: {back_line}\n{back_stderr}");
    assert!(stays_ok, "the client that stayed failed: {stayed}\n{stays_stderr}");
    assert!(host_ok, "the host failed:\n{host_stderr}");
    for line in [&back_line, &stayed] {
        assert_eq!(line["turns"], match_turns, "{line}");
        assert_eq!(line["ended"], "finished", "{line}");
        assert_eq!(line["final_state_hash"], stayed["final_state_hash"], "{line}");
    }

    // Told as it happened, by the client that stayed and by the host.
    let told = |stderr: &str, text: &str| assert!(stderr.contains(text), "{text:?} in:\n{stderr}");
    told(&stays_stderr, &format!("player {player} left the match"));
    told(&stays_stderr, &format!("player {player} rejoined"));
    told(&host_stderr, &format!("player {player} timed out"));
    told(&host_stderr, &format!("player {player} rejoined"));
    // The demo's window (20 turns of 150 ms) is as long as the idle timeout, so whether the
    // host stops to wait before the removal depends on when the cut player's last heartbeat
    // came. A wait that was told is told over too, to the players and by the host.
    let waiting = format!("the host is waiting for player(s) [{player}]");
    if stays_stderr.contains(&waiting) {
        told(&stays_stderr, "the wait is over");
    }
    if host_stderr.contains(&format!("waiting for player(s) [{player}]")) {
        told(&host_stderr, "the wait is over after");
    }
}

//! A real-socket match that runs to its end ends well for everyone: `archers host` and its
//! `archers client` processes on 127.0.0.1, over QUIC and raw UDP, no faults. Every client
//! executes the last turn, reports `"ended": "finished"` and exits 0; the host exits 0 and
//! prints its admission and drop counters; no player is reported as having left. The host shuts
//! down as soon as every player holds the last turn, so a client may hear the host close before
//! it has executed that turn: it must still play it out.
//!
//! Each transport runs `PHALANX_MATCH_END_RUNS` matches (default 2) of `PHALANX_MATCH_END_MINUTES`
//! (default 0.5), run `i` with `PHALANX_MATCH_END_PLAYERS + i` players (default 2: 2, then 3).
//! The documented sweep (`examples/archers/sweep-match-end.sh`, docs/internals/testing.md) runs
//! 100 per transport, 8 at a time.

use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/node.rs"]
mod node;

use node::Node;

/// How a client's `--json` line starts (the player comes first).
const CLIENT_JSON: &str = "{\"player\":";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// One match over `transport` (`quic` or `udp`): the clients' JSON lines and every process's
/// stderr, or a failure naming what went wrong.
fn one_match(transport: &str, players: usize, minutes: &str) -> Result<(), String> {
    let deadline = Instant::now()
        + Duration::from_secs(60 + (minutes.parse::<f64>().unwrap() * 60.0) as u64 * 2);
    let game = ["--players", &players.to_string(), "--minutes", minutes];
    let mut args = vec!["host", "--bind", "127.0.0.1:0", "--transport", transport];
    args.extend(game.iter().copied());
    let host = Node::spawn(&args);
    let listening = host.line("LISTENING ", deadline).ok_or("the host announces itself")?;
    let (addr, pin) = listening.split_once(' ').ok_or("address and pin")?;
    let pin_flag = if transport == "udp" { "--udp-key" } else { "--fingerprint" };
    let tokens: Vec<String> = (0..players)
        .map(|_| {
            host.line("SEAT ", deadline).and_then(|l| l.split_once(' ').map(|(_, t)| t.to_owned()))
        })
        .collect::<Option<_>>()
        .ok_or("seat tokens")?;
    let clients: Vec<Node> = tokens
        .iter()
        .map(|token| {
            let mut args = vec!["client", "--connect", addr, pin_flag, pin, "--token", token];
            args.extend(game.iter().copied());
            args.push("--json");
            Node::spawn(&args)
        })
        .collect();
    let lines: Vec<Option<String>> =
        clients.iter().map(|c| c.line(CLIENT_JSON, deadline)).collect();
    let outcomes: Vec<(bool, String)> = clients.into_iter().map(|c| c.finish(deadline)).collect();
    let (host_ok, host_stderr) = host.finish(deadline);
    if !host_ok {
        return Err(format!("the host failed:\n{host_stderr}"));
    }
    if !host_stderr.contains("host: admission: ") {
        return Err(format!("the host printed no admission summary:\n{host_stderr}"));
    }
    if host_stderr.contains("left: removed") {
        return Err(format!("a player was reported leaving at a normal end:\n{host_stderr}"));
    }
    let mut hashes = Vec::new();
    for (line, (ok, stderr)) in lines.iter().zip(&outcomes) {
        let Some(rest) = line else { return Err(format!("a client printed no result:\n{stderr}")) };
        let json: Value = common::json(&format!("{CLIENT_JSON}{rest}"));
        if json["ended"] != "finished" || !ok {
            return Err(format!(
                "a client ended {} (exit ok: {ok}): {json}\n{stderr}",
                json["ended"]
            ));
        }
        hashes.push(json["final_state_hash"].clone());
    }
    if hashes.iter().any(|hash| *hash != hashes[0]) {
        return Err(format!("final hashes differ: {hashes:?}"));
    }
    Ok(())
}

fn runs_over(transport: &str) {
    let runs: usize = env_or("PHALANX_MATCH_END_RUNS", 2);
    let minutes: String = env_or("PHALANX_MATCH_END_MINUTES", "0.5".to_owned());
    let players: usize = env_or("PHALANX_MATCH_END_PLAYERS", 2);
    let failures: Vec<String> = (0..runs)
        .filter_map(|run| {
            one_match(transport, players + run, &minutes).err().map(|e| format!("run {run}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{transport}: {} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_finished_match_over_quic_ends_finished_for_every_client() {
    runs_over("quic");
}

#[test]
fn a_finished_match_over_udp_ends_finished_for_every_client() {
    runs_over("udp");
}

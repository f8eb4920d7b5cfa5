//! `host-baseline`: N matches hosted the way a game hosts one today, for `relay-load` to
//! measure against the relay: each match a `phalanx::Host` of its own (its own UDP socket,
//! endpoint task and driver task; a dedicated host, over the raw-UDP transport), all in this
//! one process on one thread (a current-thread runtime). That is cheaper than a process per
//! match, so the baseline it gives is a generous one.
//!
//! Prints `MATCH <address> <udp key hex> <token>...` per match on stdout, then `READY`;
//! starts each match once its players are in; ends every match and exits when stdin closes.
//!
//! `host-baseline --matches 100 --players 8 --turn-ms 150`
#![allow(clippy::print_stdout)] // the protocol with relay-load

use std::time::Duration;

use phalanx::udp::{HostConfig, HostKey};
use phalanx::{Event, Host, HostOptions, SessionConfig};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name);
    at.and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let matches = arg("--matches", 10);
    let players = arg("--players", 8) as u8;
    let turn_ms = arg("--turn-ms", 150) as u32;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let mut tasks = Vec::new();
        for m in 0..matches {
            let mut session = SessionConfig::default().quiet_relay();
            session.turns.length_ms = turn_ms;
            session.turns.players_max = players;
            let tokens: Vec<u64> = (0..u64::from(players)).map(|s| (m + 1) * 1_000 + s).collect();
            let mut secret = [0u8; 32];
            secret[..8].copy_from_slice(&(m + 1).to_le_bytes());
            let key = HostKey::from_bytes(secret);
            let public = key.public();
            let mut options = HostOptions::new(
                HostConfig::new(key),
                "127.0.0.1:0".parse().unwrap(),
                tokens.clone(),
            );
            options.session = session;
            let host: Host<Vec<u8>> = Host::bind(options).await.expect("a host binds");
            let tokens: Vec<String> = tokens.iter().map(u64::to_string).collect();
            println!("MATCH {} {public} {}", host.local_addr().unwrap(), tokens.join(" "));
            tasks.push(tokio::spawn(run(host, usize::from(players))));
        }
        println!("READY");
        // Until stdin closes (relay-load is done).
        let _ = tokio::task::spawn_blocking(|| {
            std::io::copy(&mut std::io::stdin(), &mut std::io::sink())
        })
        .await;
        for task in tasks {
            task.abort();
        }
    });
}

/// Starts the match once its players are in; then lets it run.
async fn run(mut host: Host<Vec<u8>>, players: usize) {
    let mut joined = 0;
    while let Some(event) = host.next_event().await {
        if matches!(event, Event::PlayerJoined(_)) {
            joined += 1;
            if joined == players {
                let _ = host.start().await;
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(3_600)).await;
}

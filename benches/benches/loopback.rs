//! Host CPU on real loopback sockets: what one host costs per client per turn, QUIC, TLS
//! records, UDP syscalls and all, and how many 8-player sessions one core could carry.
//!
//! Not a criterion benchmark: a session runs at its turn pace (wall time), while the figure
//! wanted is the host's CPU time, which criterion's iteration model would scale into hours of
//! wall time. Instead the host runs alone on its own thread (a current-thread tokio runtime
//! that also drives its quinn endpoint), the clients on another, and the host thread's own CPU
//! time is read from `/proc/thread-self/schedstat` (nanoseconds on CPU) over the measured
//! turns. Each configuration runs `LOOPBACK_RUNS` times (default 3); the median is reported.
//!
//! `cargo bench -p phalanx-benches --bench loopback` (about a minute).
#![allow(clippy::print_stdout)] // a benchmark report

use std::sync::mpsc;
use std::time::Duration;

use phalanx::quic::HostIdentity;
use phalanx::{Client, ClientOptions, Host, HostOptions, SessionConfig};

/// Turns before measuring (joins, handshakes, pace settling) and turns measured.
const WARM_TURNS: u32 = 20;
const MEASURED_TURNS: u32 = 150;

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    // A short turn keeps the run short; per-turn work does not depend on the length.
    session.turns.length_ms = 40;
    session.turns.adaptive_pace = false;
    session
}

/// Nanoseconds this thread has spent on a CPU.
fn thread_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// One session with `clients` players; returns the host thread's CPU ns per sealed turn over
/// the measured stretch.
fn run(clients: usize) -> u64 {
    let tokens: Vec<u64> = (1..=clients as u64).collect();
    let (addr_tx, addr_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let host_tokens = tokens.clone();
    let host_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let identity = HostIdentity::generate_self_signed("bench").unwrap();
            let mut options =
                HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), host_tokens);
            options.session = session();
            let mut host: Host<(u8, u32)> = Host::bind(options).await.unwrap();
            addr_tx.send((host.local_addr().unwrap(), host.pin())).unwrap();
            let mut joined = 0;
            while joined < clients {
                while let Some(event) = host.try_event() {
                    joined += usize::from(matches!(event, phalanx::Event::PlayerJoined(_)));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            host.start().await.unwrap();
            while sealed(&host).await < u64::from(WARM_TURNS) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // One sleep over the measured turns, so that measuring adds nothing per turn.
            let first = sealed(&host).await;
            let start = thread_cpu_ns();
            let turn_ms = u64::from(session().turns.length_ms);
            tokio::time::sleep(Duration::from_millis(turn_ms * u64::from(MEASURED_TURNS))).await;
            let used = thread_cpu_ns() - start;
            let turns = sealed(&host).await - first;
            let _ = done_rx.recv_timeout(Duration::from_secs(30));
            host.shutdown().await;
            (used, turns)
        })
    });
    let (addr, pin) = addr_rx.recv().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let mut players = Vec::new();
        for token in tokens {
            let mut options = ClientOptions::new(token, pin);
            options.session = session();
            let client: Client<(u8, u32)> = Client::connect(addr, options).await.unwrap();
            players.push(client);
        }
        let mut tasks = Vec::new();
        for mut client in players {
            tasks.push(tokio::spawn(async move {
                let me = client.player().expect("a player token").0;
                // One order every 4 turns per player: AoE's rate at 200 ms turns, roughly.
                while let Some(turn) = client.next_turn().await {
                    if turn.turn.0 >= WARM_TURNS + MEASURED_TURNS + 10 {
                        break;
                    }
                    if (turn.turn.0 + u32::from(me)).is_multiple_of(4) {
                        let _ = client.submit(&(me, turn.turn.0)).await;
                    }
                }
                client.shutdown().await;
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
    let _ = done_tx.send(());
    let (used, turns) = host_thread.join().unwrap();
    used / turns.max(1)
}

async fn sealed(host: &Host<(u8, u32)>) -> u64 {
    host.stats().await.map(|(stats, _)| stats.turns_sealed).unwrap_or(0)
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs: usize = std::env::var("LOOPBACK_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    println!("host CPU on 127.0.0.1 (quinn + rustls-ring), {MEASURED_TURNS} turns measured, median of {runs}");
    println!("{:>8} {:>16} {:>22}", "clients", "host µs / turn", "µs / client / turn");
    let mut per_turn = Vec::new();
    for clients in [1usize, 4, 8] {
        let ns = median((0..runs).map(|_| run(clients)).collect());
        let turn_us = ns as f64 / 1e3;
        per_turn.push((clients, turn_us));
        println!("{clients:>8} {turn_us:>16.1} {:>22.1}", turn_us / clients as f64);
    }
    let (_, eight) = per_turn[2];
    // At 200 ms turns (AoE) a session seals 5 turns a second.
    let per_second_us = eight * 5.0;
    println!(
        "8-player session at 200 ms turns: {per_second_us:.0} µs of host CPU per second -> about {:.0} sessions per core",
        1e6 / per_second_us
    );
}

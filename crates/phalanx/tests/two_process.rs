//! A two-process game on 127.0.0.1: the test binary re-runs itself as a host process and two
//! client processes (the `#[ignore]`d `loopback_node` test, selected by an environment
//! variable); the clients pin the pin the host printed (QUIC, or `PHALANX_TRANSPORT`), play
//! 60 turns, and must end with the same state. Bounded: every child is killed after 60 s.

#![allow(clippy::print_stdout)] // the child processes report to the parent on stdout

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use phalanx::{Client, ClientOptions, Host, HostOptions, SessionConfig, TypedRecord};

type Order = (u8, u32);

const TURNS: u32 = 60;

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

fn spawn(role: &str, extra: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--ignored", "--exact", "loopback_node", "--nocapture", "--test-threads=1"])
        .env("PHALANX_LOOPBACK_ROLE", role)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (key, value) in extra {
        command.env(key, value);
    }
    command.spawn().expect("spawn a child process")
}

/// Waits until the child prints a line containing `prefix` and returns what follows it, or
/// `None` at the deadline or when the child exits. A reader thread does the blocking reads,
/// so a silent child cannot hang the test.
fn read_line(child: &mut Child, prefix: &str, deadline: Instant) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (lines, found) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let line = found.recv_timeout(left).ok()?;
        // The test harness prints "test loopback_node ... " on the same line first.
        if let Some(start) = line.find(prefix) {
            return Some(line[start + prefix.len()..].trim().to_owned());
        }
    }
}

#[test]
fn two_process_loopback_game() {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut host = spawn("host", &[]);
    let announced =
        read_line(&mut host, "LISTENING ", deadline).expect("the host announces itself");
    let (addr, pin) = announced.split_once(' ').expect("address and pin");
    let mut clients: Vec<Child> = (0..2u64)
        .map(|token| {
            spawn(
                "client",
                &[
                    ("PHALANX_LOOPBACK_ADDR", addr.to_owned()),
                    ("PHALANX_LOOPBACK_PIN", pin.to_owned()),
                    ("PHALANX_LOOPBACK_TOKEN", token.to_string()),
                ],
            )
        })
        .collect();
    let states: Vec<Option<String>> =
        clients.iter_mut().map(|client| read_line(client, "STATE ", deadline)).collect();
    for mut child in clients.into_iter().chain([host]) {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(states.iter().all(Option::is_some), "every client finished: {states:?}");
    assert_eq!(states[0], states[1], "both processes reached the same state");
}

/// The child side of `two_process_loopback_game`: does nothing unless the parent set a role.
#[test]
#[ignore = "run by two_process_loopback_game as a child process"]
fn loopback_node() {
    let Ok(role) = std::env::var("PHALANX_LOOPBACK_ROLE") else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        if role == "host" {
            let identity = common::host_transport(common::transport());
            let mut options =
                HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![0, 1]);
            options.session = session();
            let mut host: Host<Order> = Host::bind(options).await.unwrap();
            println!("LISTENING {} {}", host.local_addr().unwrap(), host.pin());
            let mut joined = 0;
            while joined < 2 {
                while let Some(event) = host.try_event() {
                    if matches!(event, phalanx::Event::PlayerJoined(_)) {
                        joined += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            host.start().await.unwrap();
            // Serve until the parent kills this process.
            tokio::time::sleep(Duration::from_secs(60)).await;
        } else {
            let addr = std::env::var("PHALANX_LOOPBACK_ADDR").unwrap().parse().unwrap();
            let pin: phalanx::Pin = std::env::var("PHALANX_LOOPBACK_PIN").unwrap().parse().unwrap();
            let token: u64 = std::env::var("PHALANX_LOOPBACK_TOKEN").unwrap().parse().unwrap();
            let mut options = ClientOptions::new(token, pin);
            options.session = session();
            let mut client: Client<Order> = Client::connect(addr, options).await.unwrap();
            let mut state = 0xcbf2_9ce4_8422_2325u64;
            while let Some(turn) = client.next_turn().await {
                for record in &turn.records {
                    if let TypedRecord::Command { command: Ok((p, n)), .. } = record {
                        state = (state ^ (u64::from(*p) << 32 | u64::from(*n)))
                            .wrapping_mul(0x0000_0100_0000_01b3);
                    }
                }
                state = (state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
                if turn.turn.0 + 1 == TURNS {
                    break;
                }
                if turn.turn.0 % 7 == token as u32 {
                    client.submit(&(token as u8, turn.turn.0)).await.unwrap();
                }
            }
            println!("STATE {state:016x}");
            client.shutdown().await;
        }
    });
}

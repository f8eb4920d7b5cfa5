//! A flood against a host in another process while a real match runs (issue: hardening).
//!
//! The test binary re-runs itself as the host (the `#[ignore]`d `flood_host` test, selected
//! by an environment variable), so the host's memory is its own process's resident set. The
//! parent then attempts 2,000 QUIC connections from 40 loopback addresses (127.0.0.2–41) that
//! finish their handshake and never send a join request, and sends 20,000 garbage datagrams,
//! while two real players join and play. It checks that:
//!
//! - each real player's join completes within 1 s, during the flood;
//! - the host's resident memory grows by at most 10 MB from its cold start over two floods
//!   (admission control bounds what a flood can hold), and the second flood leaves it within
//!   2 MB of where the first left it. The allocator keeps the pages a flood touched for reuse
//!   rather than returning them to the system (about 6 MB cold, 11–14 MB after a first flood
//!   here), so the steady bound is the first flood's high-water mark: what the test holds the
//!   host to is that it does not grow flood after flood. The baseline is therefore read after a
//!   warm-up flood as large as the measured one;
//! - the match ends with both players in the same state;
//! - the host's admission counters account for the flood (refusals, evictions, timeouts) and
//!   never held more than `pending_max` connections at once.
//!
//! Bounded: every phase has a deadline and the child is killed at the end. Linux only (the
//! memory figure is read from `/proc`).

#![cfg(feature = "quic")]
#![cfg(target_os = "linux")]
#![allow(clippy::print_stdout)] // the child reports to the parent on stdout

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::attacker_config;
use phalanx::{
    session::Admission, Client, ClientOptions, EndReason, Event, Host, HostOptions, SessionConfig,
    TypedRecord,
};

type Order = (u8, u32);

/// Connection attempts of the flood, from this many source addresses.
const ATTEMPTS: usize = 2_000;
const ADDRESSES: usize = 40;
/// Attempts in flight per source address.
const LANES: usize = 5;
/// Attempts of the warm-up flood before the baseline is read: a whole flood, so that the
/// baseline holds what the allocator keeps of one (see the module docs).
const WARM_UP_ATTEMPTS: usize = ATTEMPTS;

const MB: u64 = 1024 * 1024;

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 50;
    session
}

/// The child host's resident set size, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kb * 1024
}

/// The child's stdout as a channel of lines (a reader thread does the blocking reads).
fn lines(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for a line containing `prefix`; returns what follows it.
fn expect_line(lines: &Receiver<String>, prefix: &str, deadline: Instant) -> String {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| panic!("no {prefix:?} line"));
        if let Some(start) = line.find(prefix) {
            return line[start + prefix.len()..].trim().to_owned();
        }
    }
}

/// What the flood's attempts met.
#[derive(Default)]
struct FloodCounts {
    handshakes: AtomicU64,
    refused: AtomicU64,
    other: AtomicU64,
}

#[test]
fn a_flood_of_unjoined_connections_during_a_match() {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--ignored", "--exact", "flood_host", "--nocapture", "--test-threads=1"])
        .env("PHALANX_FLOOD_HOST", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the host process");
    let (pid, mut stdin) = (child.id(), child.stdin.take().expect("piped stdin"));
    let output = lines(&mut child);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(flood_during_a_match(pid, &mut stdin, &output))
    }));
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

async fn flood_during_a_match(pid: u32, stdin: &mut ChildStdin, output: &Receiver<String>) {
    let deadline = Instant::now() + Duration::from_secs(240);
    let announced = expect_line(output, "LISTENING ", deadline);
    let (addr, pin) = announced.split_once(' ').expect("address and pin");
    let addr: SocketAddr = addr.parse().unwrap();
    let pin: phalanx::Pin = pin.parse().unwrap();
    // A warm-up flood first: the baseline then holds what any host that ever served a few
    // handshakes holds (code pages of the handshake paths, allocator arenas of its threads),
    // and the figures below are what the flood itself adds and leaves behind.
    let cold = rss(pid);
    let warm_up = flood_thread(addr, WARM_UP_ATTEMPTS, Arc::new(FloodCounts::default()));
    tokio::time::timeout(Duration::from_secs(90), warm_up).await.expect("warm-up ends").unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let baseline = rss(pid);

    let counts = Arc::new(FloodCounts::default());
    let peak = Arc::new(AtomicU64::new(baseline));
    let flood = flood_thread(addr, ATTEMPTS, counts.clone());
    let sampler = tokio::spawn(sample_rss(pid, peak.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Two players join during the flood; the host starts when both are in.
    let mut players = Vec::new();
    for token in [1u64, 2] {
        let mut options = ClientOptions::new(token, pin);
        options.session = session();
        let started = Instant::now();
        let client: Client<Order> = Client::connect(addr, options).await.expect("joins");
        let took = started.elapsed();
        println!("player {token} joined in {took:?} during the flood");
        assert!(took <= Duration::from_secs(1), "player {token} took {took:?} to join");
        players.push(tokio::spawn(play(client, token as u8)));
    }

    tokio::time::timeout(Duration::from_secs(90), flood).await.expect("flood ends").expect("done");
    let flood_peak = peak.load(Ordering::Relaxed);
    // Past the join timeout every flood connection is gone; let the host settle.
    tokio::time::sleep(Duration::from_secs(6)).await;
    sampler.abort();
    let after = rss(pid);
    let handshakes = counts.handshakes.load(Ordering::Relaxed);
    let refused = counts.refused.load(Ordering::Relaxed);
    let other = counts.other.load(Ordering::Relaxed);
    println!(
        "flood: {ATTEMPTS} attempts: {handshakes} handshakes, {refused} refused, {other} other; \
         host RSS cold {:.1} MB, baseline (after a warm-up of {WARM_UP_ATTEMPTS}) {:.1} MB, \
         peak {:.1} MB, after {:.1} MB",
        cold as f64 / MB as f64,
        baseline as f64 / MB as f64,
        flood_peak as f64 / MB as f64,
        after as f64 / MB as f64
    );

    writeln!(stdin, "end").expect("tell the host to end");
    let mut states = Vec::new();
    for player in players {
        let (state, ended) = tokio::time::timeout(Duration::from_secs(30), player)
            .await
            .expect("the match ends")
            .unwrap();
        assert_eq!(ended, Some(EndReason::Finished { code: 0 }));
        states.push(state);
    }
    let stats = expect_line(output, "STATS ", deadline);
    println!("host admission: {stats}");
    assert_eq!(states[0], states[1], "both players hold the same state");
    // From the cold start: the warm-up and the flood together.
    assert!(
        flood_peak.saturating_sub(cold) <= 10 * MB,
        "host memory grew {} KB from its cold start",
        flood_peak.saturating_sub(cold) / 1024
    );
    assert!(
        after.saturating_sub(baseline) <= 2 * MB,
        "host memory is {} KB over its baseline after the flood",
        after.saturating_sub(baseline) / 1024
    );
    assert!(handshakes + refused + other >= ATTEMPTS as u64);
    check_admission(&stats);
}

/// The host's admission counters (its `Debug` line) account for the flood and kept it
/// within bounds.
fn check_admission(stats: &str) {
    let field = |name: &str| -> u64 {
        let key = format!("{name}: ");
        let start = stats.find(&key).unwrap_or_else(|| panic!("{name} in {stats}")) + key.len();
        stats[start..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };

    assert!(field("pending_high_water") <= Admission::default().pending_max as u64);
    assert!(field("refused_busy") + field("evicted_idle") + field("join_timeouts") > 0, "{stats}");
    assert_eq!(field("joins_accepted"), 2, "{stats}");
    assert_eq!(field("pending"), 0, "{stats}");
}

/// Runs a flood of `attempts` on a thread and runtime of its own, as an attacker on another
/// machine would (the players' tasks do not queue behind its connections); the receiver
/// hears when it is over.
fn flood_thread(
    addr: SocketAddr,
    attempts: usize,
    counts: Arc<FloodCounts>,
) -> tokio::sync::oneshot::Receiver<()> {
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(flood(addr, attempts, counts));
        let _ = done_tx.send(());
    });
    done_rx
}

/// Plays until the host ends the game: a command every few turns, a hash over every record.
async fn play(mut client: Client<Order>, me: u8) -> (u64, Option<EndReason>) {
    let mut state = 0xcbf2_9ce4_8422_2325u64;
    while let Some(turn) = client.next_turn().await {
        for record in &turn.records {
            if let TypedRecord::Command { command: Ok((p, n)), .. } = record {
                state = (state ^ (u64::from(*p) << 32 | u64::from(*n)))
                    .wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        state = (state ^ u64::from(turn.turn.0)).wrapping_mul(0x0000_0100_0000_01b3);
        if turn.turn.0 % 5 == u32::from(me) {
            let _ = client.submit(&(me, turn.turn.0)).await;
        }
    }
    let ended = client.ended();
    client.shutdown().await;
    (state, ended)
}

/// Samples the host's resident set every 50 ms, keeping the largest.
async fn sample_rss(pid: u32, peak: Arc<AtomicU64>) {
    loop {
        peak.fetch_max(rss(pid), Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The flood: `attempts` connections that handshake and never join, and ten times as many
/// garbage datagrams.
async fn flood(host: SocketAddr, attempts: usize, counts: Arc<FloodCounts>) {
    let config = attacker_config();
    let mut tasks = Vec::new();
    for address in 0..ADDRESSES {
        let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + address as u8));
        let mut endpoint = quinn::Endpoint::client(SocketAddr::new(ip, 0)).expect("a source");
        endpoint.set_default_client_config(config.clone());
        for _ in 0..LANES {
            let (endpoint, counts) = (endpoint.clone(), counts.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..attempts / ADDRESSES / LANES {
                    attempt(&endpoint, host, &counts).await;
                }
            }));
        }
    }
    tasks.push(tokio::spawn(garbage(host, attempts * 10)));
    for task in tasks {
        task.await.unwrap();
    }
}

/// One attempt: connect, hold the connection without joining until the host closes it.
async fn attempt(endpoint: &quinn::Endpoint, host: SocketAddr, counts: &FloodCounts) {
    let Ok(connecting) = endpoint.connect(host, "phalanx") else {
        counts.other.fetch_add(1, Ordering::Relaxed);
        return;
    };
    match tokio::time::timeout(Duration::from_secs(5), connecting).await {
        Ok(Ok(connection)) => {
            counts.handshakes.fetch_add(1, Ordering::Relaxed);
            let _ = tokio::time::timeout(Duration::from_secs(5), connection.closed()).await;
        }
        Ok(Err(quinn::ConnectionError::ConnectionClosed(close)))
            if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED =>
        {
            counts.refused.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            counts.other.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `count` garbage datagrams of every size to the host's port, from one socket.
async fn garbage(host: SocketAddr, count: usize) {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("a socket");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut datagram = vec![0u8; 1_400];
    for sent in 0..count {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let len = 1 + (state >> 33) as usize % datagram.len();
        for (i, byte) in datagram.iter_mut().enumerate().take(len) {
            *byte = (state >> (i % 8 * 8)) as u8 ^ i as u8;
        }
        let _ = socket.send_to(&datagram[..len], host).await;
        if sent % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The child side: a dedicated host with two seats that starts when both players are in,
/// ends the game when the parent writes `end`, and prints its admission counters.
#[test]
#[ignore = "run by a_flood_of_unjoined_connections_during_a_match as a child process"]
fn flood_host() {
    if std::env::var("PHALANX_FLOOD_HOST").is_err() {
        return;
    }
    let (end_tx, mut end_rx) = tokio::sync::mpsc::channel::<()>(1);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if line.trim() == "end" {
                let _ = end_tx.blocking_send(());
            }
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let identity = phalanx::quic::HostIdentity::generate_self_signed("flood").unwrap();
        let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
        options.session = session();
        let mut host: Host<Order> = Host::bind(options).await.unwrap();
        println!("LISTENING {} {}", host.local_addr().unwrap(), host.pin());
        let mut joined = 0;
        while joined < 2 {
            if let Some(Event::PlayerJoined(_)) = host.next_event().await {
                joined += 1;
            }
        }
        host.start().await.unwrap();
        end_rx.recv().await;
        host.end(0).await.unwrap();
        while !matches!(host.next_event().await, Some(Event::Ended(_)) | None) {}
        println!("STATS {:?}", host.admission_stats());
        // Serve until the parent kills this process: the players still execute the last turn.
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
}

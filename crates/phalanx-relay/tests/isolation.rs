#![allow(clippy::print_stderr)] // the figures, for the log
//! One match's trouble stays in it: while a flood of garbage hits the relay's socket and a
//! hostile player in match B sends malformed datagrams until it is removed, match A's seal
//! lateness p99 rises by at most 5 ms over a calm stretch before.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bot, request, serve};
use phalanx_proto::SplitMix64;
use phalanx_relay::load::run_bot;
use phalanx_relay::metrics::Lateness;
use phalanx_relay::Limits;

const STRETCH: Duration = Duration::from_secs(4);
/// Garbage datagrams a second.
const FLOOD_RATE: u64 = 20_000;

fn lateness(admin: std::net::SocketAddr, id: &str) -> Lateness {
    let (status, info) = request(admin, "GET", &format!("/v1/matches/{id}"), "");
    assert_eq!(status, 200, "{info}");
    serde_json::from_value(info["seal_lateness"].clone()).expect("a histogram")
}

/// Sends random datagrams (some looking like data packets, some like handshakes) to `to` at
/// `FLOOD_RATE` until `stop`; returns how many.
fn flood(to: std::net::SocketAddr, stop: Arc<AtomicBool>) -> u64 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut random = SplitMix64::new(7);
    let (start, mut sent) = (Instant::now(), 0u64);
    let mut packet = [0u8; 1_200];
    while !stop.load(Ordering::Relaxed) {
        let len = 1 + (random.next_u64() % 1_200) as usize;
        packet.iter_mut().take(len).for_each(|b| *b = random.next_u64() as u8);
        packet[0] = [0x80, 0x01, 0x02, 0xff][sent as usize % 4];
        let _ = socket.send_to(&packet[..len], to);
        sent += 1;
        let due = Duration::from_secs_f64(sent as f64 / FLOOD_RATE as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    sent
}

#[test]
fn a_flood_and_a_hostile_player_in_one_match_barely_touch_another() {
    let served = serve(Limits::default());
    let admin = served.admin;
    let session = phalanx_proto::SessionConfig::default();
    let (_, a) = request(admin, "POST", "/v1/matches", r#"{"players": 8}"#);
    let (_, b) = request(admin, "POST", "/v1/matches", r#"{"players": 8}"#);
    let (a_id, b_id) = (a["id"].as_str().unwrap().to_owned(), b["id"].as_str().unwrap().to_owned());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut bots = Vec::new();
    for seat in 0..8 {
        bots.push(runtime.spawn(run_bot(bot(&a, seat, &session), stop.clone())));
        let mut config = bot(&b, seat, &session);
        config.hostile = seat == 7;
        bots.push(runtime.spawn(run_bot(config, stop.clone())));
    }
    // The bots run on this thread's runtime while it waits.
    runtime.block_on(async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let calm_start = lateness(admin, &a_id);
        tokio::time::sleep(STRETCH).await;
        let calm = lateness(admin, &a_id).since(&calm_start);

        let stop_flood = Arc::new(AtomicBool::new(false));
        let target = a["address"].as_str().unwrap().parse().unwrap();
        let flooder = { let stop = stop_flood.clone(); std::thread::spawn(move || flood(target, stop)) };
        let trouble_start = lateness(admin, &a_id);
        tokio::time::sleep(STRETCH).await;
        let trouble = lateness(admin, &a_id).since(&trouble_start);
        stop_flood.store(true, Ordering::Relaxed);
        let sent = flooder.join().unwrap();

        let (p99_calm, p99_trouble) = (calm.quantile(0.99).unwrap(), trouble.quantile(0.99).unwrap());
        eprintln!("match A: p99 {p99_calm} ms calm ({} turns), {p99_trouble} ms under a flood of {sent} datagrams and a hostile player in B ({} turns)", calm.count(), trouble.count());
        assert!(calm.count() >= 30 && trouble.count() >= 30, "A sealed its turns");
        assert!(p99_trouble <= p99_calm + 5, "A's p99 rose from {p99_calm} to {p99_trouble} ms");

        let (_, info) = request(admin, "GET", &format!("/v1/matches/{b_id}"), "");
        assert_eq!(info["connected"], serde_json::json!([0, 1, 2, 3, 4, 5, 6]), "the hostile player was removed: {info}");
        let (_, metrics) = request(admin, "GET", "/v1/metrics", "");
        let drops = &metrics["drops"];
        let counted = drops["malformed"].as_u64().unwrap() + drops["handshake_refused"].as_u64().unwrap();
        assert!(counted >= sent / 2, "garbage counted: {drops} of {sent} sent");
        let _ = stop_tx.send(true);
    });
    for bot in bots {
        let _ = runtime.block_on(bot);
    }
}

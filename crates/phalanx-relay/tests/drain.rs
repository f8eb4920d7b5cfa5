//! SIGTERM drains the relay process: `/readyz` says so at once, no new match is accepted, the
//! running match plays on until the drain's deadline and then ends with `END_DRAIN` (its players
//! finish), a match nobody joined goes too, and the process exits 0.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bot, TOKEN};
use phalanx_relay::load::{admin_request, run_bot};

const DRAIN_MS: u64 = 1_500;

#[test]
fn sigterm_drains_running_matches_and_exits_zero() {
    let mut relay = Command::new(env!("CARGO_BIN_EXE_phalanx-relay"))
        .args(["--udp", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--admin-token", TOKEN])
        .args(["--drain-timeout-ms", &DRAIN_MS.to_string(), "--log", "warn"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the relay starts");
    let mut lines = BufReader::new(relay.stdout.take().unwrap()).lines();
    let mut admin = None;
    while admin.is_none() {
        let line = lines.next().expect("the relay prints its addresses").unwrap();
        admin = line.strip_prefix("ADMIN ").map(|a| a.parse::<std::net::SocketAddr>().unwrap());
    }
    let admin = admin.unwrap();
    let create = |body: &str| admin_request(admin, TOKEN, "POST", "/v1/matches", body).unwrap();
    let (status, ticket) = create(r#"{"players": 2, "turn_ms": 50}"#);
    assert_eq!(status, 201, "{ticket}");
    let ticket: serde_json::Value = serde_json::from_str(&ticket).unwrap();
    let (status, _) = create(r#"{"players": 4}"#); // nobody will join this one
    assert_eq!(status, 201);

    let mut session = phalanx_proto::SessionConfig::default();
    session.turns.length_ms = 50;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let bots: Vec<_> = (0..2)
        .map(|seat| runtime.spawn(run_bot(bot(&ticket, seat, &session), stop.clone())))
        .collect();
    std::thread::sleep(Duration::from_secs(1));

    let sigterm = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &relay.id().to_string()])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(admin_request(admin, "", "GET", "/readyz", "").unwrap().0, 503);
    let (status, body) = create(r#"{"players": 2}"#);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"draining\""), "{body}");

    for bot in bots {
        let report = runtime.block_on(bot).unwrap();
        assert!(report.joined);
        assert_eq!(report.end_code, Some(phalanx_relay::END_DRAIN), "{report:?}");
    }
    let ended_after = sigterm.elapsed();
    assert!(
        ended_after >= Duration::from_millis(DRAIN_MS - 100),
        "played on until the deadline: {ended_after:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = relay.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the relay exits after its drain");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
}

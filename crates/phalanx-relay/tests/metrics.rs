//! `/metrics` is Prometheus text: scraped while a match plays and read with a Prometheus
//! text-format parser (`prometheus-parse`), not by matching strings. `/healthz` and `/readyz`
//! answer.

mod common;

use std::time::Duration;

use common::{bot, request, serve};
use phalanx_relay::load::{admin_request, run_bot};
use phalanx_relay::Limits;
use prometheus_parse::{Scrape, Value};

fn scrape(admin: std::net::SocketAddr) -> Scrape {
    // `/metrics` needs no token (a scraper on the same machine).
    let (status, body) = admin_request(admin, "", "GET", "/metrics", "").expect("scraped");
    assert_eq!(status, 200);
    Scrape::parse(body.lines().map(|line| Ok(line.to_owned()))).expect("Prometheus text")
}

fn value(scrape: &Scrape, name: &str, label: Option<(&str, &str)>) -> Value {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)));
    sample.unwrap_or_else(|| panic!("{name} {label:?} is scraped")).value.clone()
}

fn number(value: Value) -> f64 {
    match value {
        Value::Counter(n) | Value::Gauge(n) | Value::Untyped(n) => n,
        other => panic!("a number, not {other:?}"),
    }
}

#[test]
fn metrics_parse_as_prometheus_text_while_a_match_plays() {
    let served = serve(Limits::default());
    let admin = served.admin;
    assert_eq!(admin_request(admin, "", "GET", "/healthz", "").unwrap().0, 200);
    assert_eq!(admin_request(admin, "", "GET", "/readyz", "").unwrap().0, 200);
    let idle = scrape(admin);
    assert_eq!(number(value(&idle, "phalanx_relay_matches", None)), 0.0);

    let (status, ticket) =
        request(admin, "POST", "/v1/matches", r#"{"players": 2, "turn_ms": 50}"#);
    assert_eq!(status, 201);
    let mut session = phalanx_proto::SessionConfig::default();
    session.turns.length_ms = 50;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let bots: Vec<_> = (0..2)
        .map(|seat| runtime.spawn(run_bot(bot(&ticket, seat, &session), stop.clone())))
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));

    let playing = scrape(admin);
    assert_eq!(number(value(&playing, "phalanx_relay_matches", None)), 1.0);
    assert_eq!(number(value(&playing, "phalanx_relay_players", None)), 2.0);
    assert_eq!(number(value(&playing, "phalanx_relay_joins_total", None)), 2.0);
    assert!(number(value(&playing, "phalanx_relay_datagrams_received_total", None)) > 20.0);
    assert!(number(value(&playing, "phalanx_relay_bytes_sent_total", None)) > 1_000.0);
    let malformed = ("reason", "malformed");
    assert_eq!(
        number(value(&playing, "phalanx_relay_dropped_datagrams_total", Some(malformed))),
        0.0
    );
    assert!(number(value(&playing, "process_resident_memory_bytes", None)) > 1e6);
    assert!(number(value(&playing, "process_cpu_seconds_total", None)) >= 0.0);
    match value(&playing, "phalanx_relay_seal_lateness_seconds", None) {
        Value::Histogram(buckets) => {
            let all = buckets.iter().find(|b| b.less_than == f64::INFINITY).expect("+Inf bucket");
            assert!(all.count >= 10.0, "turns sealed: {buckets:?}");
            assert!(
                buckets.windows(2).all(|w| w[0].count <= w[1].count),
                "cumulative: {buckets:?}"
            );
        }
        other => panic!("a histogram, not {other:?}"),
    }

    // A garbage datagram is counted by reason.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.send_to(&[0x80; 40], ticket["address"].as_str().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let after = scrape(admin);
    assert_eq!(
        number(value(&after, "phalanx_relay_dropped_datagrams_total", Some(malformed))),
        1.0
    );

    let _ = stop_tx.send(true);
    for bot in bots {
        let _ = runtime.block_on(bot);
    }
}

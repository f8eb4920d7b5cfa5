//! Browser players over WebTransport, on real loopback sockets: a host listening for QUIC
//! clients and, beside them, for browsers; two native clients and one "browser" — the
//! sans-IO client over wtransport's client, pinning the certificate hash, driven as a page's
//! glue drives it — play to the same state after every turn, with commands from everyone.
//! A page pinning another hash, or asking another path, does not get in. A renewal clock that
//! jumps past the certificate's end and the 14-day limit mid-match renews the certificate: the
//! match goes on, a page pinning the old hash no longer gets in and one pinning the new hash
//! does. Bounded in time.

#![cfg(feature = "webtransport")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use phalanx::proto::{Client as SansIoClient, CommandCodec, DefaultCodec, TypedTurn};
use phalanx::web::{BrowserConfig, BrowserIdentity, CertificateHash, RenewalClock};
use phalanx::{Client, ClientOptions, Host, HostOptions, SessionConfig, TypedRecord};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
enum Order {
    Move { unit: u32, x: i32 },
}

/// Turns every player plays.
const TURNS: usize = 80;

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session
}

async fn host(tokens: Vec<u64>) -> Host<Order> {
    host_with(tokens, RenewalClock::default()).await
}

/// A host whose browser certificate (13 days) is renewed a day before it runs out by `clock`.
async fn host_with(tokens: Vec<u64>, clock: RenewalClock) -> Host<Order> {
    let identity = phalanx::quic::HostIdentity::generate_self_signed("localhost").unwrap();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), tokens);
    options.session = session();
    let browsers = BrowserIdentity::generate(&["localhost", "127.0.0.1"], 13).unwrap();
    let mut browsers = BrowserConfig::new(browsers, "127.0.0.1:0".parse().unwrap());
    browsers.clock = clock;
    options.browsers = Some(browsers);
    Host::bind(options).await.unwrap()
}

/// A hash chain over every record executed: equal chains mean equal games.
fn fold(state: u64, turn: u32, records: &[TypedRecord<Order>]) -> u64 {
    let text = format!("{turn}:{records:?}");
    text.bytes().fold(state, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The order a player gives after executing `turn`, if any.
fn order(index: u32, turn: u32) -> Option<Order> {
    (turn % 5 == index && turn < 60).then_some(Order::Move { unit: index, x: turn as i32 })
}

/// A native client's chain of states.
async fn native(mut client: Client<Order>, index: u32, turns: usize) -> Vec<u64> {
    let mut state = 0xcbf2_9ce4_8422_2325u64;
    let mut chain = Vec::new();
    while let Some(turn) = client.next_turn().await {
        state = fold(state, turn.turn.0, &turn.records);
        chain.push(state);
        if let Some(order) = order(index, turn.turn.0) {
            client.submit(&order).await.expect("within budget");
        }
        if chain.len() == turns {
            break;
        }
    }
    client.shutdown().await;
    chain
}

/// wtransport's client pinning `hash`, connected to the host's browser port at `path`.
async fn connect(
    addr: SocketAddr,
    hash: CertificateHash,
    path: &str,
) -> Result<wtransport::Connection, wtransport::error::ConnectingError> {
    let digest = wtransport::tls::Sha256Digest::new(hash.0);
    let config = wtransport::ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([digest])
        .build();
    let endpoint = wtransport::Endpoint::client(config).expect("a client endpoint");
    endpoint.connect(format!("https://127.0.0.1:{}{path}", addr.port())).await
}

/// What a page does: the join request on a bidirectional stream, the reply read to its end,
/// then datagrams both ways and the sans-IO client's timers; its chain of states.
async fn browser(conn: wtransport::Connection, token: u64, index: u32, turns: usize) -> Vec<u64> {
    let start = Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let (mut client, request) = SansIoClient::new(session(), token).expect("a valid config");
    let (mut send, mut recv) = conn.open_bi().await.unwrap().await.unwrap();
    send.write_all(&request).await.unwrap();
    send.finish().await.unwrap();
    let reply = recv.quic_stream_mut().read_to_end(64 * 1024).await.unwrap();
    client.handle_join_reply(now(), &reply).expect("joined");
    let (mut state, mut chain, mut buf) = (0xcbf2_9ce4_8422_2325u64, Vec::new(), Vec::new());
    while chain.len() < turns {
        while let Some(bundle) = client.next_turn(now()) {
            let turn = TypedTurn::<Order>::decode::<DefaultCodec>(bundle);
            state = fold(state, turn.turn.0, &turn.records);
            chain.push(state);
            if let Some(order) = order(index, turn.turn.0) {
                let payload = DefaultCodec::encode(&order).unwrap();
                client.submit(now(), &payload).expect("within budget");
            }
        }
        while client.poll_transmit(now(), &mut buf) {
            let _ = conn.send_datagram(buf.clone());
        }
        let wake = client.poll_timeout().map_or(10, |at| at.saturating_sub(now()).min(10));
        tokio::select! {
            datagram = conn.receive_datagram() => {
                client.handle_datagram(now(), &datagram.expect("the host is there").payload());
            }
            () = tokio::time::sleep(Duration::from_millis(wake)) => client.handle_timeout(now()),
        }
    }
    client.leave();
    while client.poll_transmit(now(), &mut buf) {
        let _ = conn.send_datagram(buf.clone());
    }
    chain
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_and_native_clients_reach_the_same_state() {
    let test = async {
        let host = host(vec![1, 2, 3]).await;
        let addr = host.local_addr().unwrap();
        let (browser_addr, hash) = host.control().browsers().expect("a browser listener");
        let mut tasks = Vec::new();
        for token in [1u64, 2] {
            let mut options = ClientOptions::new(token, host.pin());
            options.session = session();
            let client: Client<Order> = Client::connect(addr, options).await.expect("joins");
            tasks.push(tokio::spawn(native(client, token as u32 - 1, TURNS)));
        }
        let conn = connect(browser_addr, hash, "/phalanx").await.expect("the page connects");
        tasks.push(tokio::spawn(browser(conn, 3, 2, TURNS)));
        // The browser's join is in once its seat is taken.
        while host.stats().await.unwrap().1.len() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        host.start().await.unwrap();
        let mut chains = Vec::new();
        for task in tasks {
            chains.push(task.await.unwrap());
        }
        host.shutdown().await;
        chains
    };
    let chains = tokio::time::timeout(Duration::from_secs(60), test).await.expect("bounded");
    assert_eq!(chains[0].len(), TURNS);
    assert_eq!(chains[1], chains[0], "the two native clients");
    assert_eq!(chains[2], chains[0], "the browser and the native clients");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_pinning_another_hash_or_path_does_not_get_in() {
    let test = async {
        let host = host(vec![1]).await;
        let (browser_addr, hash) = host.control().browsers().expect("a browser listener");
        let other = BrowserIdentity::generate(&["localhost"], 1).unwrap().certificate_hash();
        let wrong_hash = connect(browser_addr, other, "/phalanx").await;
        let wrong_path = connect(browser_addr, hash, "/elsewhere").await;
        host.shutdown().await;
        (wrong_hash.is_err(), wrong_path.err().map(|e| e.to_string()))
    };
    let (refused, path) =
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("bounded");
    assert!(refused, "another certificate's hash is refused");
    assert!(path.is_some(), "another path is refused");
}

#[test]
fn a_browser_certificate_is_valid_at_most_fourteen_days() {
    assert!(BrowserIdentity::generate(&["localhost"], 14).is_ok());
    for days in [0, 15, 365] {
        assert_eq!(
            BrowserIdentity::generate(&["localhost"], days).unwrap_err(),
            phalanx::web::BrowserIdentityError::Validity(days)
        );
    }
    let identity = BrowserIdentity::generate(&["localhost"], 13).unwrap();
    let left = identity.not_after().duration_since(std::time::SystemTime::now()).unwrap();
    assert!(
        left > Duration::from_secs(13 * 86_400 - 60) && left <= Duration::from_secs(13 * 86_400)
    );
    assert_eq!(identity.certificate_hash().to_hex().len(), 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_keeps_the_match_and_greets_new_pages() {
    const LONG: usize = 300;
    let ahead = Arc::new(AtomicU64::new(0));
    let clock = {
        let ahead = ahead.clone();
        RenewalClock(Arc::new(move || {
            SystemTime::now() + Duration::from_secs(ahead.load(Ordering::Relaxed))
        }))
    };
    let test = async {
        let host = host_with(vec![1, 2, 3], clock).await;
        let (browser_addr, old) = host.control().browsers().expect("a browser listener");
        let mut options = ClientOptions::new(1, host.pin());
        options.session = session();
        let client: Client<Order> =
            Client::connect(host.local_addr().unwrap(), options).await.unwrap();
        let conn = connect(browser_addr, old, "/phalanx").await.expect("the page connects");
        let tasks =
            [tokio::spawn(native(client, 0, LONG)), tokio::spawn(browser(conn, 2, 1, LONG))];
        while host.stats().await.unwrap().1.len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        host.start().await.unwrap();
        // Fourteen and a half days later by the renewal clock, mid-match: past the end of the
        // old certificate (13 days) and past the browsers' 14-day limit.
        tokio::time::sleep(Duration::from_millis(300)).await;
        ahead.store(14 * 86_400 + 43_200, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(5);
        let new = loop {
            let (_, hash) = host.control().browsers().unwrap();
            if hash != old || Instant::now() > deadline {
                break hash;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let old_page = connect(browser_addr, old, "/phalanx").await.is_ok();
        let new_page = connect(browser_addr, new, "/phalanx").await.is_ok();
        let mut chains = Vec::new();
        for task in tasks {
            chains.push(task.await.unwrap());
        }
        host.shutdown().await;
        (old, new, old_page, new_page, chains)
    };
    let (old, new, old_page, new_page, chains) =
        tokio::time::timeout(Duration::from_secs(60), test).await.expect("bounded");
    assert_ne!(new, old, "renewed");
    assert!(!old_page, "a page pinning the old hash does not get in");
    assert!(new_page, "a page pinning the new hash does");
    assert_eq!(chains[0].len(), LONG, "the match under way went on");
    assert_eq!(chains[1], chains[0], "and the browser in it");
}

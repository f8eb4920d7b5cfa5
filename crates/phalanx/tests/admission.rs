//! Admission control and join outcomes, from outside: what a foreign or hostile client meets
//! (a typed refusal for a malformed or oversized join request), what a real client meets at a
//! host over its limits (`ConnectError::HostBusy`, after trying again), how an idle connection
//! makes room, and the host's counters for each.

#![cfg(feature = "quic")]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use phalanx::{
    error::JoinRefusal, session::Admission, Client, ClientOptions, ConnectError, Host, HostOptions,
};

type Order = u32;

async fn host(admission: Admission) -> Host<Order> {
    let identity = phalanx::quic::HostIdentity::generate_self_signed("admission").unwrap();
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
    options.admission = admission;
    Host::bind(options).await.unwrap()
}

/// A raw QUIC connection that completes its handshake and sends nothing.
async fn raw_connection(host: SocketAddr) -> (quinn::Endpoint, quinn::Connection) {
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(common::attacker_config());
    let connection = endpoint.connect(host, "phalanx").unwrap().await.expect("a handshake");
    (endpoint, connection)
}

/// Sends `request` as a join request on a raw connection and returns the host's reply.
async fn join_with(host: SocketAddr, request: &[u8]) -> Result<JoinRefusal, String> {
    let (_endpoint, connection) = raw_connection(host).await;
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    // An oversized request may be cut off by the host's answer: that is fine.
    let _ = send.write_all(request).await;
    let _ = send.finish();
    let reply = recv.read_to_end(4_096).await.map_err(|e| e.to_string())?;
    match phalanx_proto::decode_join_reply(&reply).map_err(|e| e.to_string())? {
        Err(refusal) => Ok(refusal),
        Ok(accept) => Err(format!("accepted: {accept:?}")),
    }
}

fn client_options(token: u64, host: &Host<Order>, join_timeout: Duration) -> ClientOptions {
    let mut options = ClientOptions::new(token, host.pin());
    options.join_timeout = join_timeout;
    options
}

#[tokio::test]
async fn malformed_and_oversized_joins_get_a_typed_refusal() {
    let host = host(Admission::default()).await;
    let addr = host.local_addr().unwrap();
    // Our version byte, then nonsense.
    let garbage = join_with(addr, &[phalanx_proto::PROTOCOL_VERSION, 0xff, 1, 2, 3]).await;
    assert_eq!(garbage, Ok(JoinRefusal::Malformed));
    // Another version's request (or text): the version is read first, so the refusal says
    // which versions differ.
    let text = join_with(addr, b"this is not a join request").await;
    assert_eq!(
        text,
        Ok(JoinRefusal::VersionMismatch { host: phalanx_proto::PROTOCOL_VERSION, client: b't' })
    );
    let oversized = join_with(addr, &[0u8; 64 * 1024]).await;
    assert_eq!(oversized, Ok(JoinRefusal::TooLarge { max: 1_024 }));
    let stats = host.admission_stats();
    assert_eq!((stats.joins_malformed, stats.joins_oversized), (1, 1), "{stats:?}");
    assert_eq!(stats.joins_refused, 1, "{stats:?}");
    assert_eq!(stats.joins_accepted, 0);
    // A real player still gets in.
    let options = client_options(1, &host, Duration::from_secs(5));
    let client = Client::<Order>::connect(addr, options).await.expect("joins");
    assert_eq!(host.admission_stats().joins_accepted, 1);
    client.shutdown().await;
    host.shutdown().await;
}

#[tokio::test]
async fn a_host_over_its_limit_refuses_with_host_busy() {
    // One pending connection at most, never evicted: a silent one holds the host's only slot.
    let mut admission = Admission::default();
    admission.pending_max = 1;
    admission.idle_evict_after = Duration::from_secs(60);
    admission.join_timeout = Duration::from_secs(60);
    let host = host(admission).await;
    let addr = host.local_addr().unwrap();
    let (_endpoint, _silent) = raw_connection(addr).await;
    let options = client_options(1, &host, Duration::from_millis(700));
    let refused = Client::<Order>::connect(addr, options).await.err();
    assert!(matches!(refused, Some(ConnectError::HostBusy)), "{refused:?}");
    let stats = host.admission_stats();
    // The client tried again several times before it gave up.
    assert!(stats.refused_busy >= 3, "{stats:?}");
    assert_eq!((stats.pending, stats.pending_high_water), (1, 1), "{stats:?}");
    host.shutdown().await;
}

#[tokio::test]
async fn an_idle_connection_makes_room_for_a_player() {
    let mut admission = Admission::default();
    admission.pending_max = 1;
    admission.idle_evict_after = Duration::from_millis(100);
    admission.join_timeout = Duration::from_secs(60);
    let host = host(admission).await;
    let addr = host.local_addr().unwrap();
    let (_endpoint, silent) = raw_connection(addr).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let options = client_options(1, &host, Duration::from_secs(5));
    let client = Client::<Order>::connect(addr, options).await.expect("joins in its place");
    let closed = tokio::time::timeout(Duration::from_secs(5), silent.closed()).await;
    assert!(closed.is_ok(), "the idle connection was closed");
    let stats = host.admission_stats();
    assert_eq!((stats.evicted_idle, stats.joins_accepted), (1, 1), "{stats:?}");
    client.shutdown().await;
    host.shutdown().await;
}

#[tokio::test]
async fn one_address_holds_at_most_its_share() {
    let mut admission = Admission::default();
    admission.per_address_max = 2;
    admission.idle_evict_after = Duration::from_secs(60);
    admission.join_timeout = Duration::from_secs(60);
    let host = host(admission).await;
    let addr = host.local_addr().unwrap();
    let _held = [raw_connection(addr).await, raw_connection(addr).await];
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(common::attacker_config());
    let third = endpoint.connect(addr, "phalanx").unwrap().await.err();
    assert!(
        matches!(
            &third,
            Some(quinn::ConnectionError::ConnectionClosed(close))
                if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED
        ),
        "{third:?}"
    );
    let stats = host.admission_stats();
    assert_eq!((stats.refused_address, stats.pending), (1, 2), "{stats:?}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_silent_connection_is_closed_at_the_join_timeout() {
    let mut admission = Admission::default();
    admission.join_timeout = Duration::from_millis(300);
    let host = host(admission).await;
    let (_endpoint, silent) = raw_connection(host.local_addr().unwrap()).await;
    let closed = tokio::time::timeout(Duration::from_secs(5), silent.closed()).await;
    let reason = closed.expect("closed by the host").to_string();
    assert!(reason.contains("no join request in time"), "{reason}");
    let stats = host.admission_stats();
    assert_eq!((stats.join_timeouts, stats.pending), (1, 0), "{stats:?}");
    host.shutdown().await;
}

//! A client pointed at a host of the other transport is told so at once
//! (`ConnectError::TransportMismatch`), not after its join timeout: a QUIC client at a raw-UDP
//! host, and a raw-UDP client at a QUIC host, on real loopback sockets. The failed attempt
//! takes no seat: the right transport joins straight after.

#![cfg(all(feature = "quic", feature = "udp"))]

use std::time::Duration;

use phalanx::quic::{HostIdentity, HostVerification};
use phalanx::{udp, Client, ClientOptions, ConnectError, Host, HostOptions};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

/// Joins `host` with `options`, with a join timeout far longer than the answer should take.
async fn join(
    host: &Host<Order>,
    mut options: ClientOptions,
) -> Result<Client<Order>, ConnectError> {
    options.join_timeout = Duration::from_secs(8);
    Client::connect(host.local_addr().unwrap(), options).await
}

#[tokio::test]
async fn a_quic_client_at_a_udp_host_is_told_at_once() {
    let test = async {
        let host = udp::HostConfig::generate();
        let pin = host.public_key();
        let host: Host<Order> =
            Host::bind(HostOptions::new(host, "127.0.0.1:0".parse().unwrap(), vec![1]))
                .await
                .unwrap();
        let stranger = HostIdentity::generate_self_signed("other").unwrap().fingerprint();
        let wrong = join(&host, ClientOptions::new(1, HostVerification::Pinned(stranger))).await;
        let answered = host.admission_stats().udp.quic_clients_answered;
        let right = join(&host, ClientOptions::new(1, pin)).await;
        host.shutdown().await;
        (wrong.err(), answered, right.is_ok())
    };
    let (wrong, answered, right) =
        tokio::time::timeout(Duration::from_secs(20), test).await.expect("bounded");
    assert!(matches!(wrong, Some(ConnectError::TransportMismatch)), "{wrong:?}");
    assert_eq!(answered, 1, "the UDP host answered the QUIC client once");
    assert!(right, "the right transport joins: the failed attempt took no seat");
}

#[tokio::test]
async fn a_udp_client_at_a_quic_host_is_told_at_once() {
    let test = async {
        let identity = HostIdentity::generate_self_signed("quic").unwrap();
        let host: Host<Order> =
            Host::bind(HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), vec![1]))
                .await
                .unwrap();
        let stranger = udp::HostConfig::generate().public_key();
        let wrong = join(&host, ClientOptions::new(1, stranger)).await;
        let right = join(&host, ClientOptions::new(1, host.pin())).await;
        host.shutdown().await;
        (wrong.err(), right.is_ok())
    };
    let (wrong, right) =
        tokio::time::timeout(Duration::from_secs(20), test).await.expect("bounded");
    assert!(matches!(wrong, Some(ConnectError::TransportMismatch)), "{wrong:?}");
    assert!(right, "the right transport joins: the failed attempt took no seat");
}

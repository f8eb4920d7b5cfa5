//! The raw-UDP transport (`phalanx::udp`) over loopback, as the session will use it: a host
//! accepts a client that pinned its key; datagrams and reliable messages flow both ways; a
//! wrong key fails at once; closing and going idle end the other side; the handshake and
//! messages survive heavy loss (a socket wrapper drops a seeded share of what it sends).

#![cfg(feature = "udp")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use phalanx::udp::{
    connect, CloseReason, DatagramSocket, HostKey, UdpConnectError, UdpHost, UdpOptions,
};
use tokio::net::UdpSocket;

async fn socket() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").await.expect("binds")
}

/// A socket that loses `loss_percent` of what it sends (seeded), or everything once cut.
struct Lossy {
    inner: UdpSocket,
    loss_percent: u64,
    state: AtomicU64,
    cut: Arc<AtomicBool>,
}

impl Lossy {
    async fn new(loss_percent: u64, seed: u64, cut: Arc<AtomicBool>) -> Lossy {
        Lossy { inner: socket().await, loss_percent, state: AtomicU64::new(seed), cut }
    }

    fn lose(&self) -> bool {
        let mut z = self.state.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.cut.load(Ordering::Relaxed) || (z ^ (z >> 31)) % 100 < self.loss_percent
    }
}

impl DatagramSocket for Lossy {
    fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> std::io::Result<usize> {
        if self.lose() {
            return Ok(buf.len());
        }
        DatagramSocket::try_send_to(&self.inner, buf, target)
    }

    fn poll_recv_from(
        &self,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<(usize, SocketAddr)>> {
        DatagramSocket::poll_recv_from(&self.inner, cx, buf)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

fn host_key(seed: u8) -> HostKey {
    HostKey::from_bytes([seed; 32])
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what}: timed out"))
}

#[tokio::test]
async fn datagrams_and_messages_flow_both_ways() {
    let mut host = UdpHost::bind(socket().await, host_key(1), UdpOptions::default()).unwrap();
    let addr = host.local_addr();
    let (client, mut from_host) =
        connect(socket().await, addr, host.public_key(), UdpOptions::default()).await.unwrap();
    let (to_client, mut from_client) = within("accept", host.accept()).await.unwrap();
    assert_eq!(client.remote_address(), addr);
    assert!(to_client.remote_address().ip().is_loopback());

    client.send_datagram(b"ping").unwrap();
    assert_eq!(within("datagram", from_client.datagram()).await.unwrap(), b"ping");
    to_client.send_datagram(b"pong").unwrap();
    assert_eq!(within("datagram", from_host.datagram()).await.unwrap(), b"pong");

    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
    client.send_message(b"join, please").unwrap();
    client.send_message(&big).unwrap();
    to_client.send_message(&big[..50_000]).unwrap();
    assert_eq!(within("message", from_client.message()).await.unwrap(), b"join, please");
    assert_eq!(within("message", from_client.message()).await.unwrap(), big);
    assert_eq!(within("message", from_host.message()).await.unwrap(), &big[..50_000]);

    let stats = client.stats();
    assert_eq!(stats.channel.tampered + stats.channel.replayed + stats.channel.malformed, 0);
    assert!(stats.stream.segments_sent >= 183, "200 kB in 1,100-byte segments");
    // Every packet is its payload plus 19 bytes: a kind byte, 2 of packet number, the tag.
    assert!(stats.bytes_sent >= 200_000 + 19 * stats.packets_sent);
}

#[tokio::test]
async fn a_wrong_pinned_key_fails_at_once_with_both_keys() {
    let host = UdpHost::bind(socket().await, host_key(1), UdpOptions::default()).unwrap();
    let wrong = host_key(2).public();
    let started = tokio::time::Instant::now();
    let result = connect(socket().await, host.local_addr(), wrong, UdpOptions::default()).await;
    match result {
        Err(UdpConnectError::WrongHostKey { pinned, host: announced }) => {
            assert_eq!(pinned, wrong);
            assert_eq!(announced, host.public_key());
        }
        other => panic!("expected WrongHostKey, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5), "not a timeout");
}

#[tokio::test]
async fn nobody_there_times_out() {
    let silent = socket().await; // bound, never answers
    let options =
        UdpOptions { handshake_timeout: Duration::from_millis(600), ..Default::default() };
    let result =
        connect(socket().await, silent.local_addr().unwrap(), host_key(3).public(), options);
    assert!(matches!(result.await, Err(UdpConnectError::TimedOut)));
}

#[tokio::test]
async fn closing_ends_the_other_side_with_the_code() {
    let mut host = UdpHost::bind(socket().await, host_key(1), UdpOptions::default()).unwrap();
    let (client, _from_host) =
        connect(socket().await, host.local_addr(), host.public_key(), UdpOptions::default())
            .await
            .unwrap();
    let (_to_client, mut from_client) = within("accept", host.accept()).await.unwrap();
    client.send_datagram(b"hello").unwrap();
    assert_eq!(within("datagram", from_client.datagram()).await.unwrap(), b"hello");
    client.close(7);
    assert!(client.send_datagram(b"late").is_err());
    assert_eq!(within("end", from_client.datagram()).await, None);
    assert_eq!(from_client.close_reason(), Some(CloseReason::Peer(7)));
}

#[tokio::test]
async fn a_peer_gone_silent_ends_after_the_idle_timeout() {
    let cut = Arc::new(AtomicBool::new(false));
    let options = UdpOptions { idle_timeout: Duration::from_millis(500), ..Default::default() };
    let host_socket = Lossy::new(0, 1, cut.clone()).await;
    let mut host = UdpHost::bind(host_socket, host_key(1), options).unwrap();
    let client_socket = Lossy::new(0, 2, cut.clone()).await;
    let (client, mut from_host) =
        connect(client_socket, host.local_addr(), host.public_key(), options).await.unwrap();
    let (_to_client, mut from_client) = within("accept", host.accept()).await.unwrap();
    client.send_datagram(b"before the cut").unwrap();
    assert_eq!(within("datagram", from_client.datagram()).await.unwrap(), b"before the cut");
    cut.store(true, Ordering::Relaxed);
    assert_eq!(within("host side ends", from_client.datagram()).await, None);
    assert_eq!(from_client.close_reason(), Some(CloseReason::Idle));
    assert_eq!(within("client side ends", from_host.datagram()).await, None);
    assert_eq!(from_host.close_reason(), Some(CloseReason::Idle));
}

/// 30 % of every packet each way lost, the handshake's included: the client still joins (the
/// cookie reply or the response lost means a resend), and reliable messages arrive whole.
#[tokio::test]
async fn the_handshake_and_messages_survive_heavy_loss() {
    for seed in 1..=5u64 {
        let cut = Arc::new(AtomicBool::new(false));
        let host_socket = Lossy::new(30, seed, cut.clone()).await;
        let mut host = UdpHost::bind(host_socket, host_key(1), UdpOptions::default()).unwrap();
        let client_socket = Lossy::new(30, seed << 32, cut).await;
        let connected =
            connect(client_socket, host.local_addr(), host.public_key(), Default::default());
        let (client, mut from_host) = within("connect", connected).await.unwrap();
        let (to_client, mut from_client) = within("accept", host.accept()).await.unwrap();
        let message: Vec<u8> = (0..30_000u32).map(|i| (i ^ seed as u32) as u8).collect();
        client.send_message(&message).unwrap();
        to_client.send_message(b"welcome").unwrap();
        assert_eq!(within("message", from_client.message()).await.unwrap(), message, "seed {seed}");
        assert_eq!(within("reply", from_host.message()).await.unwrap(), b"welcome", "seed {seed}");
        assert!(client.stats().stream.retransmits > 0, "seed {seed}: losses were repaired");
    }
}

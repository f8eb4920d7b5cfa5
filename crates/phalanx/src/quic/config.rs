//! quinn configured for a lockstep game rather than bulk transfer: every transport limit is
//! set explicitly from the session config. quinn's defaults suit file transfer (receive window
//! `VarInt::MAX`, 100 + 100 streams, 1 MiB datagram buffers); a game needs one stream for the
//! join and small, bounded datagram buffers.

use std::sync::Arc;
use std::time::Duration;

use phalanx_proto::SessionConfig;
use quinn::{IdleTimeout, TransportConfig, VarInt};

use crate::conn::JOIN_BYTES_MAX;

/// The join stream's receive window on a client: a rejoin's reply carries a snapshot and the
/// turns after it (or every sealed turn), which should not crawl through a tiny window.
pub(crate) const CLIENT_STREAM_WINDOW: u32 = 64 * 1024;

/// The join stream's receive window on the host: requests are tiny.
pub(crate) const HOST_STREAM_WINDOW: u32 = JOIN_BYTES_MAX as u32 * 4;

/// The host's stream receive window when it takes snapshot uploads from players: a snapshot
/// should not crawl through the join stream's tiny window. (Each stream's reader stops at
/// its own limit, so a peer holds at most this much in a stream's buffer.)
pub(crate) const UPLOAD_STREAM_WINDOW: u32 = 64 * 1024;

/// The largest datagram quinn carries at QUIC's initial 1200-byte MTU (phalanx's default
/// `link.datagram_bytes_max`).
pub(crate) const DATAGRAM_BYTES_AT_INITIAL_MTU: u16 = 1_162;

/// Which end a transport config is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Host,
    Client,
}

/// Transport settings for a session at `end`, shared.
pub(crate) fn transport_config(session: &SessionConfig, end: End) -> Arc<TransportConfig> {
    Arc::new(transport(session, end))
}

/// Transport settings for a session at `end` (WebTransport adds HTTP/3's streams to them).
pub(crate) fn transport(session: &SessionConfig, end: End) -> TransportConfig {
    let snapshots = session.catch_up.snapshot_interval_turns != 0;
    // A player asked for a snapshot uploads it on a stream of its own, one at a time; without
    // a snapshot interval only a requested one comes, through the join stream's small window
    // (what an unjoined connection may park unread stays small).
    let (stream_window, uni_streams) = match end {
        End::Client => (CLIENT_STREAM_WINDOW, 0),
        End::Host if snapshots => (UPLOAD_STREAM_WINDOW, 1),
        End::Host => (HOST_STREAM_WINDOW, 1),
    };
    let mut transport = TransportConfig::default();
    // QUIC's own idle timeout sits behind ours, so the session ends with phalanx's typed
    // outcome (HostLost / PlayerTimedOut) rather than a bare connection error.
    let idle_ms = u64::from(session.link.idle_timeout_ms) + 2_000;
    transport.max_idle_timeout(Some(
        IdleTimeout::try_from(Duration::from_millis(idle_ms)).expect("a few seconds fit"),
    ));
    // phalanx sends its own keep-alives inside datagrams.
    transport.keep_alive_interval(None);
    transport.max_concurrent_bidi_streams(VarInt::from_u32(1));
    transport.max_concurrent_uni_streams(VarInt::from_u32(uni_streams));
    transport.stream_receive_window(VarInt::from_u32(stream_window));
    transport.receive_window(VarInt::from_u32(64 * 1024));
    transport.send_window(64 * 1024);
    // Room for a window's worth of full datagrams each way; past that quinn drops the oldest.
    let datagrams =
        usize::from(session.link.datagram_bytes_max) * session.turns.window_turns as usize * 2;
    transport.datagram_receive_buffer_size(Some(datagrams));
    transport.datagram_send_buffer_size(datagrams);
    transport.congestion_controller_factory(Arc::new(FixedWindow::new(
        (datagrams + CLIENT_STREAM_WINDOW as usize) as u64,
    )));
    // Ask the peer to hold its QUIC ACKs for up to two turns or ten packets, so they ride on
    // the next turn's datagram instead of costing a packet each: phalanx acknowledges and
    // repeats its own data, so QUIC's loss detection only matters for the join stream. quinn
    // clamps the delay to the path RTT (at least 25 ms). Reordering does not hurry an ACK.
    let mut ack = quinn::AckFrequencyConfig::default();
    ack.ack_eliciting_threshold(VarInt::from_u32(10));
    ack.max_ack_delay(Some(Duration::from_millis(u64::from(session.turns.length_ms) * 2)));
    ack.reordering_threshold(VarInt::from_u32(0));
    transport.ack_frequency_config(Some(ack));
    // No path MTU probes (1.3–1.45 kB each at the start and every 600 s on real sockets)
    // while every datagram fits the MTU QUIC guarantees from the handshake on: they would be
    // the largest packets of a modem-sized session. A session with larger datagrams keeps
    // discovery, which its datagrams need.
    if session.link.datagram_bytes_max <= DATAGRAM_BYTES_AT_INITIAL_MTU {
        transport.mtu_discovery_config(None);
    }
    transport
}

/// A congestion window that never shrinks, for a game's traffic.
///
/// phalanx's datagrams are small and paced by the session (a few per turn per player, each bounded
/// by `link.datagram_bytes_max`), and phalanx acknowledges, repeats and retransmits its own data. A
/// loss-based controller (quinn's default, Cubic) answers an outage by collapsing its window while
/// the packets sent into the outage still count as in flight: when the link heals, the game's
/// datagrams wait behind congestion control, and a player cut off for less than the idle timeout
/// was dropped 3–4 s after the repair (found by the L2 sweeps of `sim-tests/tests/short_cuts.rs`:
/// with Cubic, a 0.5 × timeout cut and the simulation guide's example each dropped a player within
/// their seeds; with this window, every seed passes). The join stream stays bounded by this window
/// and by its own flow control.
#[derive(Clone, Debug)]
pub(crate) struct FixedWindow {
    window_bytes: u64,
}

impl FixedWindow {
    /// A window of `window_bytes`.
    pub(crate) fn new(window_bytes: u64) -> Self {
        FixedWindow { window_bytes }
    }
}

impl quinn::congestion::ControllerFactory for FixedWindow {
    fn build(
        self: Arc<Self>,
        _now: std::time::Instant,
        _current_mtu: u16,
    ) -> Box<dyn quinn::congestion::Controller> {
        Box::new((*self).clone())
    }
}

impl quinn::congestion::Controller for FixedWindow {
    fn on_congestion_event(
        &mut self,
        _now: std::time::Instant,
        _sent: std::time::Instant,
        _is_persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
    }

    fn on_mtu_update(&mut self, _new_mtu: u16) {}

    fn window(&self) -> u64 {
        self.window_bytes
    }

    fn clone_box(&self) -> Box<dyn quinn::congestion::Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.window_bytes
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quic::tls::{client_tls, HostIdentity, HostVerification};

    /// Path MTU probes a client sends in its first second over loopback with `transport`.
    async fn probes_in_a_second(transport: Arc<TransportConfig>) -> u64 {
        let identity = HostIdentity::generate_self_signed("host").unwrap();
        let tls = identity.server_tls().unwrap();
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(transport.clone());
        let host = quinn::Endpoint::server(server, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = host.local_addr().unwrap();
        let accept = tokio::spawn(async move { host.accept().await.unwrap().await.unwrap() });
        let verification = HostVerification::Pinned(identity.fingerprint());
        let tls = client_tls(&verification, &Default::default()).unwrap();
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport);
        let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        client.set_default_client_config(config);
        let conn = client.connect(addr, "host").unwrap().await.unwrap();
        let _host_side = accept.await.unwrap();
        for _ in 0..10 {
            conn.send_datagram(bytes::Bytes::from_static(b"turn")).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        conn.stats().path.sent_plpmtud_probes
    }

    /// At the default datagram size quinn sends no MTU probe; with discovery on (quinn's
    /// default) it does, over the same loopback socket.
    #[tokio::test]
    async fn no_mtu_probes_at_the_default_datagram_size() {
        let session = SessionConfig::default();
        assert_eq!(probes_in_a_second(transport_config(&session, End::Client)).await, 0);
        let mut probing = TransportConfig::default();
        probing.datagram_receive_buffer_size(Some(64 * 1024));
        assert!(probes_in_a_second(Arc::new(probing)).await > 0, "the control probes");
    }
}

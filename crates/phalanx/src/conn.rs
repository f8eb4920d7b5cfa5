//! A connection between host and client over any transport, as the drivers use it: QUIC
//! (quinn), raw UDP ([`crate::udp`]) or a browser's WebTransport ([`crate::web`]); and what
//! the transports share.

pub use phalanx_proto::{CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN};

/// The most bytes of a join request, or of a join reply besides a rejoin's turns (both are
/// under 64 bytes).
pub(crate) const JOIN_BYTES_MAX: usize = 1_024;

/// Which transport a session runs over, for configs and command lines that choose one (a
/// host's or client's options carry the transport itself: [`HostTransport`](crate::HostTransport),
/// [`ClientTransport`](crate::ClientTransport)). Each variant exists with its cargo feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// QUIC (quinn, TLS 1.3): datagrams for turns and commands, streams for the join and
    /// uploads. Clients pin the certificate's fingerprint. The default when built.
    #[cfg(feature = "quic")]
    Quic,
    /// Raw UDP with a Noise IK handshake ([`crate::udp`]): no packet the session did not ask
    /// for (no ACK-only packets, no MTU probes). Clients pin the host's static key.
    /// phalanx-sim runs it too (`SimConfig::transport`).
    #[cfg(feature = "udp")]
    Udp,
}

impl Default for Transport {
    /// QUIC when it is built, else raw UDP.
    fn default() -> Transport {
        #[cfg(feature = "quic")]
        return Transport::Quic;
        #[cfg(not(feature = "quic"))]
        Transport::Udp
    }
}

/// Ids for UDP connections (quinn gives its own): unique within the process.
#[cfg(feature = "udp")]
static NEXT_UDP_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// One connection as a driver sends on it.
#[derive(Clone, Debug)]
pub(crate) enum Conn {
    #[cfg(feature = "quic")]
    Quic(quinn::Connection),
    #[cfg(feature = "udp")]
    Udp(crate::udp::UdpConnection<crate::udp::SharedSocket>, usize),
    /// A browser's WebTransport session ([`crate::web`]).
    #[cfg(feature = "webtransport")]
    Web(wtransport::Connection),
}

impl Conn {
    /// A UDP connection with a fresh id.
    #[cfg(feature = "udp")]
    pub(crate) fn udp(connection: crate::udp::UdpConnection<crate::udp::SharedSocket>) -> Conn {
        let id = NEXT_UDP_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Conn::Udp(connection, id)
    }

    /// Tells this connection from another to the same peer (a rejoin's old one).
    pub(crate) fn stable_id(&self) -> usize {
        match self {
            #[cfg(feature = "quic")]
            Conn::Quic(connection) => connection.stable_id(),
            #[cfg(feature = "udp")]
            Conn::Udp(_, id) => *id,
            #[cfg(feature = "webtransport")]
            Conn::Web(connection) => connection.stable_id(),
        }
    }

    /// Sends a datagram; `false` if the connection refused it (closed, or too large). A
    /// full buffer drops it silently (loss, which the session repairs).
    pub(crate) fn send_datagram(&self, bytes: &[u8]) -> bool {
        match self {
            #[cfg(feature = "quic")]
            Conn::Quic(connection) => {
                connection.send_datagram(bytes::Bytes::copy_from_slice(bytes)).is_ok()
            }
            #[cfg(feature = "udp")]
            Conn::Udp(connection, _) => connection.send_datagram(bytes).is_ok(),
            #[cfg(feature = "webtransport")]
            Conn::Web(connection) => connection.send_datagram(bytes).is_ok(),
        }
    }

    /// Sends an upload (a snapshot, a desync's hashes or state) reliably: over QUIC a stream
    /// of its own, over UDP a reliable message. A failure is logged (the session asks again
    /// or goes on without it).
    pub(crate) fn upload(&self, bytes: Vec<u8>) {
        match self {
            #[cfg(feature = "quic")]
            Conn::Quic(connection) => crate::quic::client::upload(connection, bytes),
            #[cfg(feature = "udp")]
            Conn::Udp(connection, _) => {
                if let Err(error) = connection.send_message(&bytes) {
                    tracing::warn!(target: "phalanx", %error, "upload failed");
                }
            }
            #[cfg(feature = "webtransport")]
            Conn::Web(connection) => crate::web::host::upload(connection, bytes),
        }
    }

    /// Closes with an application code.
    pub(crate) fn close(&self, code: u32, reason: &[u8]) {
        match self {
            #[cfg(feature = "quic")]
            Conn::Quic(connection) => connection.close(quinn::VarInt::from_u32(code), reason),
            #[cfg(feature = "udp")]
            Conn::Udp(connection, _) => {
                let _ = reason;
                connection.close(code);
            }
            #[cfg(feature = "webtransport")]
            Conn::Web(connection) => connection.close(wtransport::VarInt::from_u32(code), reason),
        }
    }
}

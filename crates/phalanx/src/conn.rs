//! A connection between host and client over either transport, as the drivers use it: QUIC
//! (quinn) or raw UDP ([`crate::udp`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use crate::udp::{QuinnSocket, UdpConnection};

/// Which transport a session runs over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// QUIC (quinn, TLS 1.3): datagrams for turns and commands, streams for the join and
    /// uploads. Clients pin the certificate's fingerprint. The default.
    #[default]
    Quic,
    /// Raw UDP with a Noise IK handshake ([`crate::udp`]): no packet the session did not ask
    /// for (no ACK-only packets, no MTU probes). Clients pin the host's static key
    /// ([`HostIdentity::udp_public_key`](crate::HostIdentity::udp_public_key)) with
    /// [`HostVerification::UdpKey`](crate::HostVerification::UdpKey). phalanx-sim runs it too
    /// (`SimConfig::transport`).
    Udp,
}

/// Ids for UDP connections (quinn gives its own): unique within the process.
static NEXT_UDP_ID: AtomicUsize = AtomicUsize::new(1);

/// One connection as a driver sends on it.
#[derive(Clone, Debug)]
pub(crate) enum Conn {
    Quic(quinn::Connection),
    Udp(UdpConnection<QuinnSocket>, usize),
}

impl Conn {
    /// A UDP connection with a fresh id.
    pub(crate) fn udp(connection: UdpConnection<QuinnSocket>) -> Conn {
        Conn::Udp(connection, NEXT_UDP_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// Tells this connection from another to the same peer (a rejoin's old one).
    pub(crate) fn stable_id(&self) -> usize {
        match self {
            Conn::Quic(connection) => connection.stable_id(),
            Conn::Udp(_, id) => *id,
        }
    }

    /// Sends a datagram; `false` if the connection refused it (closed, or too large). A
    /// full buffer drops it silently (loss, which the session repairs).
    pub(crate) fn send_datagram(&self, bytes: &[u8]) -> bool {
        match self {
            Conn::Quic(connection) => {
                connection.send_datagram(Bytes::copy_from_slice(bytes)).is_ok()
            }
            Conn::Udp(connection, _) => connection.send_datagram(bytes).is_ok(),
        }
    }

    /// Closes with an application code.
    pub(crate) fn close(&self, code: u32, reason: &[u8]) {
        match self {
            Conn::Quic(connection) => connection.close(quinn::VarInt::from_u32(code), reason),
            Conn::Udp(connection, _) => connection.close(code),
        }
    }
}

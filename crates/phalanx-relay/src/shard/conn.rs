//! One connection as a shard keeps it: its secure channel, its reliable stream, and where it
//! is in its life (joining, seated in a match, being refused).

use std::net::SocketAddr;

use phalanx_proto::Joined;
use phalanx_udp::{Channel, Stream, KIND_CLOSE, KIND_DATAGRAM};
use phalanx_wheel::TimerHandle;

use super::slab::Key;
use super::Outbox;
use crate::metrics::Metrics;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Phase {
    /// The handshake completed; the join request must come by `deadline`.
    Joining { deadline: u64 },
    /// Seated in `game` as `joined`; `delivered` once the client holds the whole join reply.
    Seated { game: Key, joined: Joined, delivered: bool },
    /// Refused: the refusal goes out on the stream, then the connection closes (at the latest
    /// at `deadline`).
    Refusing { deadline: u64 },
}

pub(crate) struct Conn {
    pub(crate) addr: SocketAddr,
    pub(crate) channel: Channel,
    pub(crate) stream: Stream,
    /// The handshake response, sent again while the client repeats its initiation (it was
    /// lost), until its first data packet.
    pub(crate) response: Option<Vec<u8>>,
    pub(crate) phase: Phase,
    pub(crate) timer: Option<(TimerHandle, u64)>,
}

impl Conn {
    /// When this connection next needs its timer: its stream's, and its phase's deadline.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        let phase = match self.phase {
            Phase::Joining { deadline } | Phase::Refusing { deadline } => Some(deadline),
            Phase::Seated { .. } => None,
        };
        [self.stream.poll_timeout(), phase].into_iter().flatten().min()
    }
}

/// The shard's buffers for sealing: one payload and one packet, reused (no allocation per
/// datagram once warm).
#[derive(Default)]
pub(crate) struct Wire {
    plain: Vec<u8>,
    packet: Vec<u8>,
}

impl Wire {
    /// Seals `kind ‖ payload` for `conn` and sends it.
    pub(crate) fn send(
        &mut self,
        conn: &mut Conn,
        kind: u8,
        payload: &[u8],
        out: &mut dyn Outbox,
        metrics: &mut Metrics,
    ) {
        self.plain.clear();
        self.plain.push(kind);
        self.plain.extend_from_slice(payload);
        self.send_plain(conn, out, metrics);
    }

    /// A session datagram.
    pub(crate) fn datagram(
        &mut self,
        conn: &mut Conn,
        payload: &[u8],
        out: &mut dyn Outbox,
        metrics: &mut Metrics,
    ) {
        self.send(conn, KIND_DATAGRAM, payload, out, metrics);
    }

    /// Sends what the connection's stream has due (segments, acks: they carry their own kind
    /// byte).
    pub(crate) fn pump(
        &mut self,
        now: u64,
        conn: &mut Conn,
        out: &mut dyn Outbox,
        metrics: &mut Metrics,
    ) {
        conn.stream.handle_timeout(now);
        while let Some(packet) = conn.stream.poll_transmit(now) {
            self.plain.clear();
            self.plain.extend_from_slice(&packet);
            self.send_plain(conn, out, metrics);
        }
    }

    /// The close, three times (the peer's idle timeout covers their loss).
    pub(crate) fn close(
        &mut self,
        conn: &mut Conn,
        code: u32,
        out: &mut dyn Outbox,
        metrics: &mut Metrics,
    ) {
        for _ in 0..3 {
            self.send(conn, KIND_CLOSE, &code.to_le_bytes(), out, metrics);
        }
    }

    fn send_plain(&mut self, conn: &mut Conn, out: &mut dyn Outbox, metrics: &mut Metrics) {
        // Only a payload over the packet size fails, which nothing here makes; a channel
        // that ran out of packet numbers (2^63) sends nothing more.
        if conn.channel.seal_into(&self.plain, &mut self.packet).is_err() {
            return;
        }
        if out.send(conn.addr, &self.packet) {
            metrics.datagrams_out += 1;
            metrics.bytes_out += self.packet.len() as u64;
        } else {
            metrics.drops.send_failed += 1;
        }
    }
}

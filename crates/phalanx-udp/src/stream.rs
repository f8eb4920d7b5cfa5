//! Reliable, ordered messages over the channel's unreliable packets: what QUIC's streams do
//! for phalanx (the join request and reply, snapshots, desync uploads), sans-IO.
//!
//! A message is cut into segments of at most [`StreamConfig::segment_bytes`]; each segment
//! travels in its own packet and is acknowledged with a cumulative number and a bitmap of the
//! 32 segments after it. At most [`StreamConfig::window`] segments are in flight; a segment
//! not acknowledged within the retransmit timeout (an RTT estimate, RFC 6298 style, with
//! exponential backoff) is sent again. The receiver delivers whole messages, in order, each
//! exactly once, and keeps at most a window of segments out of order.
//!
//! Packets (the payload the caller seals in a [`crate::Channel`] packet):
//!
//! | packet | layout | bytes |
//! |---|---|---|
//! | segment | [`SEGMENT`] ‖ sequence u32 LE ‖ flags u8 (bit 0: a message's last) ‖ data | 6 + data |
//! | ack | [`ACK`] ‖ next expected sequence u32 LE ‖ received-after bitmap u32 LE | 9 |
//!
//! The first byte tells the caller's demultiplexer a stream packet from anything else it
//! sends on the channel (it must keep [`SEGMENT`] and [`ACK`] for the stream).
//!
//! There is no congestion control beyond the fixed window: `window × segment_bytes` should
//! fit the link's bandwidth-delay product, or the first retransmit timeouts fire before the
//! queue drains (Karn's rule and the backoff then settle it, at the cost of repeats). The
//! default (16 × 1,100 bytes) suits broadband; on a 28.8 kbit/s modem, use a window of 2
//! (2.2 kB, about 0.6 s of the line).
//!
//! Every queue is bounded: [`Stream::send`] refuses a message that does not fit
//! [`StreamConfig::message_bytes_max`] or the send buffer; a peer whose message grows past the
//! limit, or whose segments are malformed, is counted and its data dropped
//! ([`StreamError`] says what happened; the caller decides to disconnect).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// The first byte of a segment packet.
pub const SEGMENT: u8 = 0x01;
/// The first byte of an ack packet.
pub const ACK: u8 = 0x02;
/// Bytes a segment adds to its data.
pub const SEGMENT_OVERHEAD: usize = 6;
/// Bytes of an ack packet.
pub const ACK_BYTES: usize = 9;
/// Segments after the cumulative ack that an ack's bitmap covers.
const SACK_BITS: u32 = 32;
const LAST: u8 = 0x01;

/// A stream's limits and timers. The defaults suit a join and snapshots of up to 4 MiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamConfig {
    /// Data bytes per segment (the packet is [`SEGMENT_OVERHEAD`] more). 1..=1176, so that a
    /// segment fits a channel packet.
    pub segment_bytes: usize,
    /// Segments in flight at most, and segments held out of order at most (1..=32).
    pub window: u32,
    /// The largest message sent or received.
    pub message_bytes_max: usize,
    /// Bytes queued for sending at most (messages not yet fully acknowledged).
    pub send_bytes_max: usize,
    /// Retransmit timeout before any round trip was measured, milliseconds.
    pub rto_initial_ms: u64,
    /// Lower bound of the retransmit timeout.
    pub rto_min_ms: u64,
    /// Upper bound of the retransmit timeout, backoff included.
    pub rto_max_ms: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            segment_bytes: 1_100,
            window: 16,
            message_bytes_max: 4 << 20,
            send_bytes_max: 8 << 20,
            rto_initial_ms: 500,
            rto_min_ms: 50,
            rto_max_ms: 4_000,
        }
    }
}

/// Why [`Stream::send`] refused a message. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// Longer than [`StreamConfig::message_bytes_max`].
    TooLarge {
        /// The message's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The send buffer ([`StreamConfig::send_bytes_max`]) has no room for it yet.
    Full {
        /// The message's length.
        len: usize,
        /// Bytes still queued.
        queued: usize,
    },
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::TooLarge { len, max } => {
                write!(f, "message of {len} bytes is over the stream's {max}")
            }
            SendError::Full { len, queued } => {
                write!(f, "no room for {len} bytes: {queued} still queued")
            }
        }
    }
}

impl std::error::Error for SendError {}

/// Why [`Stream::handle`] dropped a packet; each is counted in [`StreamStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// Not a stream packet, or a segment or ack of the wrong shape.
    Malformed,
    /// An ack for a segment never sent.
    Spoofed,
    /// A segment beyond the receive window.
    OutOfWindow,
    /// The peer's message grew past [`StreamConfig::message_bytes_max`]; it is dropped
    /// whole, and the stream can no longer stay in step with the peer.
    MessageTooLarge,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamError::Malformed => "malformed stream packet",
            StreamError::Spoofed => "ack for a segment never sent",
            StreamError::OutOfWindow => "segment beyond the receive window",
            StreamError::MessageTooLarge => "peer's message over the limit",
        })
    }
}

impl std::error::Error for StreamError {}

/// What a stream sent, received and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Segments sent for the first time.
    pub segments_sent: u64,
    /// Segments sent again after a timeout.
    pub retransmits: u64,
    /// Ack packets sent.
    pub acks_sent: u64,
    /// Messages delivered to the caller.
    pub messages_received: u64,
    /// Segments received again (already delivered or already held).
    pub duplicates: u64,
    /// Packets dropped as [`StreamError::Malformed`].
    pub malformed: u64,
    /// Packets dropped as [`StreamError::Spoofed`].
    pub spoofed: u64,
    /// Packets dropped as [`StreamError::OutOfWindow`].
    pub out_of_window: u64,
    /// Messages dropped as [`StreamError::MessageTooLarge`].
    pub too_large: u64,
    /// The smoothed round trip, milliseconds (0 before the first sample).
    pub rtt_ms: u64,
}

/// A segment waiting for its ack.
#[derive(Debug)]
struct Outgoing {
    seq: u32,
    last: bool,
    data: Vec<u8>,
    /// When it was last sent; `None`: to be sent (first time, or again after a timeout).
    sent_ms: Option<u64>,
    /// Times sent (more than once: its ack gives no RTT sample, Karn's rule).
    sends: u32,
    acked: bool,
}

/// One end of a reliable message stream. Sans-IO: the caller passes packets from the peer to
/// [`handle`](Self::handle), sends what [`poll_transmit`](Self::poll_transmit) returns,
/// calls [`handle_timeout`](Self::handle_timeout) at [`poll_timeout`](Self::poll_timeout),
/// and takes messages from [`poll_message`](Self::poll_message).
#[derive(Debug)]
pub struct Stream {
    config: StreamConfig,
    /// Segments not yet acknowledged, in sequence order (sent or not).
    outgoing: VecDeque<Outgoing>,
    queued_bytes: usize,
    next_seq: u32,
    /// One past the highest segment ever sent.
    sent_end: u32,
    srtt_ms: Option<u64>,
    rttvar_ms: u64,
    backoff: u32,
    /// The next segment expected, and those held after it.
    expected: u32,
    held: BTreeMap<u32, (bool, Vec<u8>)>,
    partial: Vec<u8>,
    /// Dropping the rest of an oversize message until its last segment.
    discarding: bool,
    delivered: VecDeque<Vec<u8>>,
    ack_due: bool,
    stats: StreamStats,
}

impl Stream {
    /// A stream with `config` (its values clamped to their ranges).
    pub fn new(config: StreamConfig) -> Stream {
        let mut config = config;
        config.segment_bytes =
            config.segment_bytes.clamp(1, crate::MAX_DATA_PAYLOAD - SEGMENT_OVERHEAD);
        config.window = config.window.clamp(1, SACK_BITS);
        config.rto_min_ms = config.rto_min_ms.max(1);
        config.rto_max_ms = config.rto_max_ms.max(config.rto_min_ms);
        Stream {
            config,
            outgoing: VecDeque::new(),
            queued_bytes: 0,
            next_seq: 0,
            sent_end: 0,
            srtt_ms: None,
            rttvar_ms: 0,
            backoff: 0,
            expected: 0,
            held: BTreeMap::new(),
            partial: Vec::new(),
            discarding: false,
            delivered: VecDeque::new(),
            ack_due: false,
            stats: StreamStats::default(),
        }
    }

    /// Queues a message; it goes out in segments as the window allows.
    pub fn send(&mut self, message: &[u8]) -> Result<(), SendError> {
        let (len, max) = (message.len(), self.config.message_bytes_max);
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        if self.queued_bytes + len > self.config.send_bytes_max {
            return Err(SendError::Full { len, queued: self.queued_bytes });
        }
        let chunks: Vec<&[u8]> = if message.is_empty() {
            vec![&[][..]]
        } else {
            message.chunks(self.config.segment_bytes).collect()
        };
        let count = chunks.len();
        for (index, chunk) in chunks.into_iter().enumerate() {
            self.outgoing.push_back(Outgoing {
                seq: self.next_seq,
                last: index + 1 == count,
                data: chunk.to_vec(),
                sent_ms: None,
                sends: 0,
                acked: false,
            });
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        self.queued_bytes += len;
        Ok(())
    }

    /// Bytes of messages not yet fully acknowledged.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Whether everything sent was acknowledged.
    pub fn is_idle(&self) -> bool {
        self.outgoing.is_empty()
    }

    /// The next whole message from the peer, in order.
    pub fn poll_message(&mut self) -> Option<Vec<u8>> {
        self.delivered.pop_front()
    }

    /// What the stream counted.
    pub fn stats(&self) -> StreamStats {
        StreamStats { rtt_ms: self.srtt_ms.unwrap_or(0), ..self.stats }
    }

    /// The retransmit timeout now, backoff included.
    fn rto_ms(&self) -> u64 {
        let base = match self.srtt_ms {
            Some(srtt) => srtt + (4 * self.rttvar_ms).max(self.config.rto_min_ms),
            None => self.config.rto_initial_ms,
        };
        let backed_off = base.saturating_mul(1 << self.backoff.min(16));
        backed_off.clamp(self.config.rto_min_ms, self.config.rto_max_ms)
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next needed: the oldest unacknowledged
    /// segment's retransmit time.
    pub fn poll_timeout(&self) -> Option<u64> {
        let rto = self.rto_ms();
        self.in_flight().filter_map(|segment| segment.sent_ms).min().map(|sent| sent + rto)
    }

    /// Marks the segments whose retransmit time passed for sending again (and backs off).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let rto = self.rto_ms();
        let mut expired = false;
        for segment in self.outgoing.iter_mut().filter(|segment| !segment.acked) {
            if segment.sent_ms.is_some_and(|sent| sent + rto <= now_ms) {
                segment.sent_ms = None;
                expired = true;
            }
        }
        if expired {
            self.backoff = self.backoff.saturating_add(1);
        }
    }

    /// Segments sent and not acknowledged.
    fn in_flight(&self) -> impl Iterator<Item = &Outgoing> {
        let window = self.config.window as usize;
        self.outgoing.iter().take(window).filter(|segment| !segment.acked)
    }

    /// The next packet to send, if any: an ack first, then a segment due (a timed-out one, or
    /// a new one the window allows).
    pub fn poll_transmit(&mut self, now_ms: u64) -> Option<Vec<u8>> {
        if self.ack_due {
            self.ack_due = false;
            self.stats.acks_sent += 1;
            return Some(self.ack_packet());
        }
        let window = self.config.window as usize;
        let segment = self
            .outgoing
            .iter_mut()
            .take(window)
            .find(|segment| !segment.acked && segment.sent_ms.is_none())?;
        segment.sent_ms = Some(now_ms);
        segment.sends += 1;
        if segment.sends > 1 {
            self.stats.retransmits += 1;
        } else {
            self.stats.segments_sent += 1;
            self.sent_end = segment.seq.wrapping_add(1);
        }
        let mut packet = Vec::with_capacity(SEGMENT_OVERHEAD + segment.data.len());
        packet.push(SEGMENT);
        packet.extend_from_slice(&segment.seq.to_le_bytes());
        packet.push(if segment.last { LAST } else { 0 });
        packet.extend_from_slice(&segment.data);
        Some(packet)
    }

    fn ack_packet(&self) -> Vec<u8> {
        let mut bitmap = 0u32;
        for &seq in self.held.keys() {
            let offset = seq.wrapping_sub(self.expected);
            if (1..=SACK_BITS).contains(&offset) {
                bitmap |= 1 << (offset - 1);
            }
        }
        let mut packet = Vec::with_capacity(ACK_BYTES);
        packet.push(ACK);
        packet.extend_from_slice(&self.expected.to_le_bytes());
        packet.extend_from_slice(&bitmap.to_le_bytes());
        packet
    }

    /// A stream packet from the peer. A dropped one is counted and its reason returned.
    pub fn handle(&mut self, now_ms: u64, packet: &[u8]) -> Result<(), StreamError> {
        let result = match packet.first() {
            Some(&SEGMENT) if packet.len() >= SEGMENT_OVERHEAD => self.on_segment(packet),
            Some(&ACK) if packet.len() == ACK_BYTES => self.on_ack(now_ms, packet),
            _ => Err(StreamError::Malformed),
        };
        if let Err(error) = result {
            let counter = match error {
                StreamError::Malformed => &mut self.stats.malformed,
                StreamError::Spoofed => &mut self.stats.spoofed,
                StreamError::OutOfWindow => &mut self.stats.out_of_window,
                StreamError::MessageTooLarge => &mut self.stats.too_large,
            };
            *counter += 1;
        }
        result
    }

    fn on_segment(&mut self, packet: &[u8]) -> Result<(), StreamError> {
        let seq = u32::from_le_bytes([packet[1], packet[2], packet[3], packet[4]]);
        let flags = packet[5];
        if flags & !LAST != 0 || packet.len() - SEGMENT_OVERHEAD > self.config.segment_bytes {
            return Err(StreamError::Malformed);
        }
        let offset = seq.wrapping_sub(self.expected);
        // Anything at or after the expected one within the window is new (or held already);
        // anything else is a repeat of what was delivered (re-acknowledge it) or beyond.
        if offset >= self.config.window {
            if offset > u32::MAX / 2 {
                self.stats.duplicates += 1;
                self.ack_due = true;
                return Ok(());
            }
            return Err(StreamError::OutOfWindow);
        }
        self.ack_due = true;
        if self.held.contains_key(&seq) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        self.held.insert(seq, (flags & LAST != 0, packet[SEGMENT_OVERHEAD..].to_vec()));
        self.deliver_in_order()
    }

    /// Moves the held segments that now follow in order into messages.
    fn deliver_in_order(&mut self) -> Result<(), StreamError> {
        let mut result = Ok(());
        while let Some((last, data)) = self.held.remove(&self.expected) {
            self.expected = self.expected.wrapping_add(1);
            if !self.discarding && self.partial.len() + data.len() > self.config.message_bytes_max {
                self.discarding = true;
                self.partial = Vec::new();
                result = Err(StreamError::MessageTooLarge);
            }
            if !self.discarding {
                self.partial.extend_from_slice(&data);
            }
            if last {
                if !self.discarding {
                    self.delivered.push_back(std::mem::take(&mut self.partial));
                    self.stats.messages_received += 1;
                }
                self.discarding = false;
            }
        }
        result
    }

    fn on_ack(&mut self, now_ms: u64, packet: &[u8]) -> Result<(), StreamError> {
        let cumulative = u32::from_le_bytes([packet[1], packet[2], packet[3], packet[4]]);
        let bitmap = u32::from_le_bytes([packet[5], packet[6], packet[7], packet[8]]);
        let first = self.outgoing.front().map_or(self.next_seq, |segment| segment.seq);
        // Sequence numbers relative to the oldest unacknowledged segment: an ack may not pass
        // what was sent; one from before `first` is an older ack, reordered (nothing to do).
        let (acked_to, sent_to) =
            (cumulative.wrapping_sub(first), self.sent_end.wrapping_sub(first));
        if acked_to > sent_to {
            return if acked_to > u32::MAX / 2 { Ok(()) } else { Err(StreamError::Spoofed) };
        }
        let mut sample = None;
        for segment in self.outgoing.iter_mut().filter(|segment| segment.sends > 0) {
            let before = segment.seq.wrapping_sub(first) < acked_to;
            let offset = segment.seq.wrapping_sub(cumulative);
            let selected = (1..=SACK_BITS).contains(&offset) && bitmap & (1 << (offset - 1)) != 0;
            if (before || selected) && !segment.acked {
                segment.acked = true;
                if segment.sends == 1 {
                    sample = segment.sent_ms.map(|sent| now_ms.saturating_sub(sent));
                }
            }
        }
        if let Some(rtt) = sample {
            self.on_rtt_sample(rtt);
        }
        while let Some(segment) = self.outgoing.pop_front() {
            if !segment.acked {
                self.outgoing.push_front(segment);
                break;
            }
            self.queued_bytes -= segment.data.len();
        }
        Ok(())
    }

    fn on_rtt_sample(&mut self, rtt: u64) {
        self.backoff = 0;
        match self.srtt_ms {
            None => {
                self.srtt_ms = Some(rtt);
                self.rttvar_ms = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar_ms = (3 * self.rttvar_ms + srtt.abs_diff(rtt)) / 4;
                self.srtt_ms = Some((7 * srtt + rtt) / 8);
            }
        }
    }
}

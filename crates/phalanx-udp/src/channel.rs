//! The established channel: one AEAD packet per datagram, the packet number as the nonce, a
//! 15-bit truncated packet number on the wire and a sliding replay window.

use std::fmt;

use snow::StatelessTransportState;

use crate::{DATA_HEADER, MAX_DATA_PAYLOAD, MAX_PACKET, TAG};

/// Bits of the packet number carried on the wire.
const PN_BITS: u32 = 15;
/// The span of truncated packet numbers.
const PN_SPAN: u64 = 1 << PN_BITS;
/// Packet numbers stop here (a channel this old must be replaced by a new handshake). Far
/// below `u64::MAX`, so reconstruction arithmetic never overflows.
const PN_LIMIT: u64 = 1 << 62;
/// How far behind the highest accepted packet number a packet may be and still be accepted.
pub const REPLAY_WINDOW: u64 = 1024;
/// Bitmap words: a window of 1024 bits spans at most 17 aligned 64-bit words.
const WORDS: usize = (REPLAY_WINDOW / 64) as usize + 1;

/// Why [`Channel::open`] refused a packet. Each is also counted in [`ChannelStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Not a data packet: too short for a header and tag, over the size limit, or not of the
    /// data type.
    Malformed,
    /// The tag did not verify: corrupted, forged, or for another channel.
    Tampered,
    /// Authentic, but a packet with this number was already delivered.
    Replayed,
    /// Authentic, but older than the replay window ([`REPLAY_WINDOW`] packets behind the
    /// highest delivered), so whether it was delivered is no longer known.
    TooOld,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Dropped::Malformed => "malformed packet",
            Dropped::Tampered => "packet failed authentication",
            Dropped::Replayed => "replayed packet",
            Dropped::TooOld => "packet older than the replay window",
        };
        f.write_str(text)
    }
}

impl std::error::Error for Dropped {}

/// Why [`Channel::seal`] made no packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealError {
    /// The payload does not fit in one packet of at most [`MAX_PACKET`] bytes.
    TooLarge {
        /// The payload's length.
        len: usize,
        /// The largest payload a packet carries, [`MAX_DATA_PAYLOAD`].
        max: usize,
    },
    /// The channel sent 2^62 packets; a new handshake is needed.
    Exhausted,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::TooLarge { len, max } => {
                write!(f, "payload of {len} bytes is over the {max} a packet carries")
            }
            SealError::Exhausted => write!(f, "packet numbers exhausted: handshake again"),
        }
    }
}

impl std::error::Error for SealError {}

/// What a channel sealed, delivered and dropped (by reason).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Packets sealed.
    pub sealed: u64,
    /// Packets opened and delivered.
    pub delivered: u64,
    /// Dropped as [`Dropped::Malformed`] (truncated, oversize, wrong type).
    pub malformed: u64,
    /// Dropped as [`Dropped::Tampered`].
    pub tampered: u64,
    /// Dropped as [`Dropped::Replayed`].
    pub replayed: u64,
    /// Dropped as [`Dropped::TooOld`].
    pub too_old: u64,
}

/// An established secure channel to one peer: seals outgoing payloads, opens incoming packets.
///
/// Made by [`crate::ClientHandshake::handle`] on the client and [`crate::JoinRequest::accept`]
/// on the host. Sans-IO: it never touches a socket; the caller sends what [`Channel::seal`]
/// returns and passes every datagram from the peer to [`Channel::open`].
pub struct Channel {
    /// Boxed: snow's state is some 350 bytes, and a channel moves through enums.
    transport: Box<StatelessTransportState>,
    next: u64,
    /// Boxed too (136 bytes of bitmap), so a channel in a `Progress` stays small.
    window: Box<ReplayWindow>,
    stats: ChannelStats,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("next", &self.next)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Channel {
    pub(crate) fn new(transport: StatelessTransportState) -> Channel {
        Channel {
            transport: Box::new(transport),
            next: 0,
            window: Box::default(),
            stats: ChannelStats::default(),
        }
    }

    /// One packet carrying `payload`: [`crate::DATA_OVERHEAD`] bytes longer than it.
    pub fn seal(&mut self, payload: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut packet = Vec::new();
        self.seal_into(payload, &mut packet)?;
        Ok(packet)
    }

    /// [`seal`](Self::seal) into `packet` (cleared first): a driver that keeps one buffer
    /// allocates nothing per packet.
    pub fn seal_into(&mut self, payload: &[u8], packet: &mut Vec<u8>) -> Result<(), SealError> {
        packet.clear();
        if payload.len() > MAX_DATA_PAYLOAD {
            return Err(SealError::TooLarge { len: payload.len(), max: MAX_DATA_PAYLOAD });
        }
        if self.next >= PN_LIMIT {
            return Err(SealError::Exhausted);
        }
        let pn = self.next;
        packet.resize(DATA_HEADER + payload.len() + TAG, 0);
        packet[0] = 0x80 | ((pn >> 8) & 0x7f) as u8;
        packet[1] = pn as u8;
        // snow refuses only buffers that are too small or messages over 64 KiB: sized above.
        let written = self
            .transport
            .write_message(pn, payload, &mut packet[DATA_HEADER..])
            .map_err(|_| SealError::TooLarge { len: payload.len(), max: MAX_DATA_PAYLOAD })?;
        packet.truncate(DATA_HEADER + written);
        self.next += 1;
        self.stats.sealed += 1;
        Ok(())
    }

    /// The payload of `packet` if it is authentic and new; each packet number is delivered at
    /// most once, in whatever order packets arrive within the replay window.
    ///
    /// Authentication is checked first, so anything altered in transit counts as
    /// [`Dropped::Tampered`] whatever its packet number.
    pub fn open(&mut self, packet: &[u8]) -> Result<Vec<u8>, Dropped> {
        let mut payload = Vec::new();
        self.open_into(packet, &mut payload)?;
        Ok(payload)
    }

    /// [`open`](Self::open) into `payload` (cleared first; left empty when the packet is
    /// dropped): a driver that keeps one buffer allocates nothing per packet.
    pub fn open_into(&mut self, packet: &[u8], payload: &mut Vec<u8>) -> Result<(), Dropped> {
        payload.clear();
        let result = self.open_inner(packet, payload);
        if result.is_err() {
            payload.clear();
        }
        let counter = match result {
            Ok(()) => &mut self.stats.delivered,
            Err(Dropped::Malformed) => &mut self.stats.malformed,
            Err(Dropped::Tampered) => &mut self.stats.tampered,
            Err(Dropped::Replayed) => &mut self.stats.replayed,
            Err(Dropped::TooOld) => &mut self.stats.too_old,
        };
        *counter += 1;
        result
    }

    fn open_inner(&mut self, packet: &[u8], payload: &mut Vec<u8>) -> Result<(), Dropped> {
        if packet.len() > MAX_PACKET || packet.len() < DATA_HEADER + TAG || packet[0] & 0x80 == 0 {
            return Err(Dropped::Malformed);
        }
        let truncated = (u64::from(packet[0] & 0x7f) << 8) | u64::from(packet[1]);
        let pn = reconstruct(self.window.expected(), truncated);
        let sealed = &packet[DATA_HEADER..];
        payload.resize(sealed.len(), 0);
        let len =
            self.transport.read_message(pn, sealed, payload).map_err(|_| Dropped::Tampered)?;
        payload.truncate(len);
        self.window.check(pn)?;
        self.window.mark(pn);
        Ok(())
    }

    /// What this channel sealed, delivered and dropped.
    pub fn stats(&self) -> ChannelStats {
        self.stats
    }
}

/// The full packet number nearest to `expected` whose low [`PN_BITS`] bits are `truncated`
/// (QUIC's packet number decoding, RFC 9000 appendix A.3).
fn reconstruct(expected: u64, truncated: u64) -> u64 {
    let half = PN_SPAN / 2;
    let candidate = (expected & !(PN_SPAN - 1)) | truncated;
    if candidate + half <= expected && candidate < PN_LIMIT {
        candidate + PN_SPAN
    } else if candidate > expected + half && candidate >= PN_SPAN {
        candidate - PN_SPAN
    } else {
        candidate
    }
}

/// Which of the last [`REPLAY_WINDOW`] packet numbers were delivered: a ring of bitmap words
/// (RFC 6479), advanced as higher numbers arrive.
#[derive(Default)]
struct ReplayWindow {
    words: [u64; WORDS],
    /// The highest delivered packet number, if any was.
    highest: Option<u64>,
}

impl ReplayWindow {
    fn expected(&self) -> u64 {
        self.highest.map_or(0, |highest| highest + 1)
    }

    fn check(&self, pn: u64) -> Result<(), Dropped> {
        let Some(highest) = self.highest else { return Ok(()) };
        if pn > highest {
            return Ok(());
        }
        if highest - pn >= REPLAY_WINDOW {
            return Err(Dropped::TooOld);
        }
        let (word, bit) = Self::slot(pn);
        if self.words[word] & bit != 0 {
            return Err(Dropped::Replayed);
        }
        Ok(())
    }

    /// Records `pn` as delivered; `check(pn)` must have passed.
    fn mark(&mut self, pn: u64) {
        match self.highest {
            Some(highest) if pn <= highest => {}
            Some(highest) => {
                let (from, to) = (highest / 64, pn / 64);
                for block in (from + 1)..=to.min(from + WORDS as u64) {
                    self.words[(block % WORDS as u64) as usize] = 0;
                }
                self.highest = Some(pn);
            }
            None => self.highest = Some(pn),
        }
        let (word, bit) = Self::slot(pn);
        self.words[word] |= bit;
    }

    fn slot(pn: u64) -> (usize, u64) {
        (((pn / 64) % WORDS as u64) as usize, 1 << (pn % 64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconstruct_follows_the_expected_number() {
        assert_eq!(reconstruct(0, 5), 5);
        assert_eq!(reconstruct(PN_SPAN + 10, 3), PN_SPAN + 3);
        assert_eq!(reconstruct(PN_SPAN + 10, PN_SPAN - 1), PN_SPAN - 1);
        assert_eq!(reconstruct(PN_SPAN - 2, 1), PN_SPAN + 1);
        assert_eq!(reconstruct(0, PN_SPAN - 1), PN_SPAN - 1);
    }

    #[test]
    fn window_accepts_once_and_forgets_old() {
        let mut window = ReplayWindow::default();
        for pn in [3u64, 1, 2, 0, 1000, 5000] {
            assert_eq!(window.check(pn), Ok(()));
            window.mark(pn);
            assert_eq!(window.check(pn), Err(Dropped::Replayed));
        }
        assert_eq!(window.check(5000 - REPLAY_WINDOW), Err(Dropped::TooOld));
        assert_eq!(window.check(5000 - REPLAY_WINDOW + 1), Ok(()));
        assert_eq!(window.check(1000), Err(Dropped::TooOld));
        // Bits from words the window advanced past were cleared.
        assert_eq!(window.check(4999), Ok(()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 64,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_0001),
            ..proptest::test_runner::Config::default()
        })]

        /// The bitmap agrees with a model that remembers every delivered number, over random
        /// walks of small and large steps back and forth.
        #[test]
        fn window_matches_a_model(
            start in 0u64..100_000,
            steps in proptest::collection::vec(-1500i64..1500, 1..400),
        ) {
            let mut window = ReplayWindow::default();
            let mut delivered = std::collections::BTreeSet::new();
            let mut highest: Option<u64> = None;
            let mut pn = start;
            for step in steps {
                pn = pn.saturating_add_signed(step);
                let expected = match highest {
                    Some(top) if pn + REPLAY_WINDOW <= top => Err(Dropped::TooOld),
                    _ if delivered.contains(&pn) => Err(Dropped::Replayed),
                    _ => Ok(()),
                };
                proptest::prop_assert_eq!(window.check(pn), expected, "pn {}", pn);
                if expected.is_ok() {
                    window.mark(pn);
                    delivered.insert(pn);
                    highest = highest.max(Some(pn));
                }
            }
        }
    }
}

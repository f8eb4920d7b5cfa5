//! Packet-number bookkeeping for one direction of a link: which packets arrived (to build ack
//! frames), which we sent and which of those the peer acknowledged (for RTT and loss), and
//! the RTT estimator with its retransmit timeout (RFC 6298: RTO = SRTT + 4·RTTVAR, backed off
//! exponentially on expiry).
//!
//! Packet numbers are `u64` and never reused, so an acknowledgement always names exactly one
//! transmission: the ambiguity Karn's rule exists for cannot arise. We still follow the rule
//! in spirit: a packet sent because the retransmit timer fired yields no RTT sample, and a
//! backed-off RTO stays backed off until a sample from an ordinary packet arrives.

use std::collections::VecDeque;

use crate::wire::AckFrame;

/// What became of an arriving packet number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// First time seen: process it.
    New,
    /// Seen before, or too old to tell (more than 64 behind the largest): drop it.
    Duplicate,
}

/// A 64-bit history below a largest number (bit `i`: `largest − 1 − i`), after the largest
/// rose by `shift` (≥ 1): the old largest becomes bit `shift − 1`, everything else moves up.
pub(crate) fn slide(history: u64, shift: u64) -> u64 {
    match shift {
        1..=63 => (history << shift) | (1u64 << (shift - 1)),
        64 => 1u64 << 63,
        _ => 0,
    }
}

/// Received packet numbers, as the largest plus a 64-bit history below it.
#[derive(Debug, Default)]
pub(crate) struct Received {
    largest: Option<u64>,
    /// Bit `i`: packet `largest − 1 − i` arrived.
    history: u64,
    largest_at_ms: u64,
}

impl Received {
    pub(crate) fn on_packet(&mut self, pn: u64, now_ms: u64) -> Arrival {
        let Some(largest) = self.largest else {
            self.largest = Some(pn);
            self.history = 0;
            self.largest_at_ms = now_ms;
            return Arrival::New;
        };
        if pn > largest {
            self.history = slide(self.history, pn - largest);
            self.largest = Some(pn);
            self.largest_at_ms = now_ms;
            return Arrival::New;
        }
        if pn == largest {
            return Arrival::Duplicate;
        }
        let behind = largest - pn - 1;
        if behind >= 64 {
            return Arrival::Duplicate;
        }
        let bit = 1u64 << behind;
        if self.history & bit != 0 {
            return Arrival::Duplicate;
        }
        self.history |= bit;
        Arrival::New
    }

    /// The ack frame to send now, if anything was received.
    pub(crate) fn ack_frame(&self, now_ms: u64) -> Option<AckFrame> {
        let largest = self.largest?;
        // Below packet 0 nothing can be missing.
        let exists = if largest >= 64 { u64::MAX } else { (1u64 << largest) - 1 };
        Some(AckFrame {
            largest,
            missing: !self.history & exists,
            delay_ms: now_ms.saturating_sub(self.largest_at_ms).min(u64::from(u32::MAX)) as u32,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct SentPacket {
    pn: u64,
    sent_at_ms: u64,
    /// Sent by the retransmit timer: no RTT sample from it.
    retransmission: bool,
    acked: bool,
}

/// How many sent packets we remember for ack matching. Older ones count as lost if unacked.
const SENT_LOG_LEN: usize = 256;
/// A packet this many numbers below the largest acknowledged one, still unacknowledged, is
/// declared lost (packet reordering threshold, as in QUIC).
const REORDER_THRESHOLD: u64 = 3;

/// What an incoming ack frame told us.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AckOutcome {
    pub(crate) newly_acked: u32,
    pub(crate) newly_lost: u32,
    pub(crate) rtt_sample_ms: Option<u64>,
}

/// Packets we sent, for RTT samples and the loss estimate.
#[derive(Debug, Default)]
pub(crate) struct SentLog {
    packets: VecDeque<SentPacket>,
    largest_acked: Option<u64>,
}

impl SentLog {
    /// The largest packet number acknowledged, if any.
    pub(crate) fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    pub(crate) fn on_sent(&mut self, pn: u64, now_ms: u64, retransmission: bool) -> u32 {
        let mut lost = 0;
        if self.packets.len() == SENT_LOG_LEN {
            if let Some(oldest) = self.packets.pop_front() {
                lost += u32::from(!oldest.acked);
            }
        }
        self.packets.push_back(SentPacket { pn, sent_at_ms: now_ms, retransmission, acked: false });
        lost
    }

    /// Applies an ack frame. The caller has checked `ack.largest` is a packet number we sent.
    pub(crate) fn on_ack(&mut self, ack: AckFrame, now_ms: u64) -> AckOutcome {
        let mut outcome = AckOutcome::default();
        let newly_largest = self.largest_acked.is_none_or(|largest| ack.largest > largest);
        for packet in self.packets.iter_mut() {
            if packet.acked || packet.pn > ack.largest {
                continue;
            }
            let acked = if packet.pn == ack.largest {
                true
            } else {
                let behind = ack.largest - packet.pn - 1;
                behind < 64 && ack.missing & (1u64 << behind) == 0
            };
            if acked {
                packet.acked = true;
                outcome.newly_acked += 1;
                if packet.pn == ack.largest && newly_largest && !packet.retransmission {
                    let elapsed = now_ms.saturating_sub(packet.sent_at_ms);
                    // Subtract the peer's ack delay unless that would go below zero.
                    let sample = elapsed.saturating_sub(u64::from(ack.delay_ms));
                    outcome.rtt_sample_ms = Some(if sample == 0 { elapsed } else { sample });
                }
            }
        }
        if newly_largest {
            self.largest_acked = Some(ack.largest);
        }
        // Declare lost what the reordering threshold has passed, and forget it.
        let largest = self.largest_acked.unwrap_or(0);
        while let Some(front) = self.packets.front() {
            if front.acked {
                self.packets.pop_front();
            } else if front.pn + REORDER_THRESHOLD <= largest {
                outcome.newly_lost += 1;
                self.packets.pop_front();
            } else {
                break;
            }
        }
        outcome
    }
}

/// Smoothed RTT and the retransmit timeout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rtt {
    pub(crate) smoothed_ms: Option<u64>,
    pub(crate) variance_ms: u64,
    pub(crate) min_ms: Option<u64>,
    pub(crate) latest_ms: Option<u64>,
    /// Consecutive retransmit timeouts without a fresh sample: the RTO is doubled this often.
    backoff: u32,
    initial_ms: u64,
    floor_ms: u64,
    ceiling_ms: u64,
    /// The longest the peer may hold an ack back: an RTO shorter than RTT plus this would fire
    /// on every quiet exchange (QUIC's PTO adds `max_ack_delay` for the same reason).
    peer_ack_delay_ms: u64,
    /// How late a timer may fire, ours or the peer's (RFC 9002's timer granularity): the
    /// peer's ack-delay timer fires up to this late, and a steady link's RTTVAR of nearly 0
    /// must not leave less slack than this.
    granularity_ms: u64,
}

impl Rtt {
    pub(crate) fn new(
        initial_ms: u32,
        floor_ms: u32,
        ceiling_ms: u32,
        peer_ack_delay_ms: u32,
        granularity_ms: u32,
    ) -> Self {
        Rtt {
            smoothed_ms: None,
            variance_ms: 0,
            min_ms: None,
            latest_ms: None,
            backoff: 0,
            initial_ms: initial_ms.into(),
            floor_ms: floor_ms.into(),
            ceiling_ms: ceiling_ms.into(),
            peer_ack_delay_ms: peer_ack_delay_ms.into(),
            granularity_ms: granularity_ms.into(),
        }
    }

    /// RFC 6298 §2: the first sample sets SRTT = R, RTTVAR = R/2; later ones blend with
    /// gains 1/8 and 1/4.
    pub(crate) fn on_sample(&mut self, sample_ms: u64) {
        self.latest_ms = Some(sample_ms);
        self.min_ms = Some(self.min_ms.map_or(sample_ms, |min| min.min(sample_ms)));
        match self.smoothed_ms {
            None => {
                self.smoothed_ms = Some(sample_ms);
                self.variance_ms = sample_ms / 2;
            }
            Some(smoothed) => {
                self.variance_ms = (3 * self.variance_ms + smoothed.abs_diff(sample_ms)) / 4;
                self.smoothed_ms = Some((7 * smoothed + sample_ms) / 8);
            }
        }
        self.backoff = 0;
    }

    /// How long a round trip may take before it is overdue, without the retransmit timeout's
    /// allowances (peer ack delay, floor, backoff): SRTT + max(4·RTTVAR, granularity); `None`
    /// before the first sample.
    pub(crate) fn bound_ms(&self) -> Option<u64> {
        let spread = (4 * self.variance_ms).max(self.granularity_ms.max(1));
        self.smoothed_ms.map(|smoothed| smoothed + spread)
    }

    /// The retransmit timer fired: double the timeout (up to the ceiling).
    pub(crate) fn on_timeout(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(16);
    }

    /// The current retransmit timeout: SRTT + max(4·RTTVAR, granularity) + the peer's ack
    /// delay, which its own late timer can stretch by the granularity (RFC 9002 §6.2.1, with
    /// the granularity of real timers rather than 1 ms).
    pub(crate) fn rto_ms(&self) -> u64 {
        let base = match self.bound_ms() {
            None => self.initial_ms,
            Some(bound) => bound + self.peer_ack_delay_ms + self.granularity_ms,
        };
        let backed_off = base.max(self.floor_ms).saturating_mul(1u64 << self.backoff);
        backed_off.clamp(self.floor_ms, self.ceiling_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_history_tracks_every_packet_within_64() {
        let mut received = Received::default();
        assert_eq!(received.ack_frame(0), None);
        for pn in [0u64, 1, 2, 5, 4, 70] {
            assert_eq!(received.on_packet(pn, 10), Arrival::New, "pn {pn}");
        }
        for pn in [0u64, 1, 2, 5, 4, 70, 5] {
            assert_eq!(received.on_packet(pn, 10), Arrival::Duplicate, "pn {pn}");
        }
        let ack = received.ack_frame(15).expect("something received");
        assert_eq!(ack.largest, 70);
        assert_eq!(ack.delay_ms, 5);
        // 69 is bit 0 (missing), 6..=69 missing, 5 is bit 64 — outside the window.
        assert_eq!(ack.missing & 1, 1);
        // A late packet inside the window fills its bit.
        assert_eq!(received.on_packet(69, 20), Arrival::New);
        assert_eq!(received.ack_frame(20).unwrap().missing & 1, 0);
    }

    /// Shifts at the edges of the 64-bit history: 63, 64 and 65 ahead.
    #[test]
    fn received_shift_boundaries() {
        for jump in [1u64, 63, 64, 65, u64::MAX - 1] {
            let mut received = Received::default();
            received.on_packet(0, 0);
            assert_eq!(received.on_packet(jump, 0), Arrival::New);
            let ack = received.ack_frame(0).unwrap();
            assert_eq!(ack.largest, jump);
            let behind = jump - 1;
            if behind < 64 {
                assert_eq!(ack.missing & (1u64 << behind), 0, "packet 0 acked after {jump}");
            }
            assert_eq!(received.on_packet(0, 0), Arrival::Duplicate);
        }
    }

    #[test]
    fn ack_frame_never_reports_packets_below_zero_missing() {
        let mut received = Received::default();
        received.on_packet(2, 0);
        let ack = received.ack_frame(0).unwrap();
        assert_eq!(ack.missing, 0b11, "0 and 1 are missing, nothing below them exists");
    }

    #[test]
    fn rtt_samples_skip_retransmissions_and_subtract_ack_delay() {
        let mut log = SentLog::default();
        log.on_sent(0, 100, false);
        log.on_sent(1, 110, true);
        let outcome = log.on_ack(AckFrame { largest: 1, missing: 0, delay_ms: 0 }, 200);
        assert_eq!(outcome.newly_acked, 2);
        assert_eq!(outcome.rtt_sample_ms, None, "largest was a retransmission");
        log.on_sent(2, 300, false);
        let outcome = log.on_ack(AckFrame { largest: 2, missing: 0, delay_ms: 20 }, 400);
        assert_eq!(outcome.rtt_sample_ms, Some(80));
    }

    #[test]
    fn unacked_packets_past_the_reorder_threshold_are_lost() {
        let mut log = SentLog::default();
        for pn in 0..6 {
            log.on_sent(pn, pn, false);
        }
        // Ack 5; of the 64 below it only 3 arrived (bit i = packet 4 − i missing).
        let missing = 0b11101;
        let outcome = log.on_ack(AckFrame { largest: 5, missing, delay_ms: 0 }, 10);
        assert_eq!(outcome.newly_acked, 2);
        assert_eq!(outcome.newly_lost, 3);
    }

    #[test]
    fn rto_follows_rfc6298_and_backs_off() {
        let mut rtt = Rtt::new(300, 40, 2_000, 0, 0);
        assert_eq!(rtt.rto_ms(), 300);
        rtt.on_sample(100);
        assert_eq!(rtt.rto_ms(), 100 + 4 * 50);
        let mut delayed = Rtt::new(300, 40, 2_000, 25, 0);
        delayed.on_sample(40);
        delayed.on_sample(40);
        delayed.on_sample(40);
        assert!(delayed.rto_ms() > 40 + 25, "the peer's ack delay is covered");
        rtt.on_timeout();
        assert_eq!(rtt.rto_ms(), 600);
        for _ in 0..10 {
            rtt.on_timeout();
        }
        assert_eq!(rtt.rto_ms(), 2_000, "capped");
        rtt.on_sample(100);
        assert!(rtt.rto_ms() < 600, "a fresh sample ends the backoff");
        assert_eq!(rtt.min_ms, Some(100));
    }

    /// A steady link (RTTVAR falls to 0) keeps the granularity as slack twice: once for the
    /// measurement, once for the peer's late ack-delay timer.
    #[test]
    fn rto_keeps_the_timer_granularity_on_a_steady_link() {
        let mut rtt = Rtt::new(300, 1, 2_000, 25, 10);
        for _ in 0..64 {
            rtt.on_sample(20);
        }
        assert_eq!(rtt.variance_ms, 0);
        assert_eq!(rtt.rto_ms(), 20 + 10 + 25 + 10);
        let exact = Rtt { granularity_ms: 0, ..rtt };
        assert_eq!(exact.rto_ms(), 20 + 1 + 25, "granularity 0: the old formula");
    }
}

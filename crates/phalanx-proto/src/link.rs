//! One end of a connection's datagram reliability: packet numbers, acks, RTT, and the four
//! timers, all in the connection's own `HashedWheel` (local time, milliseconds).
//!
//! The link knows nothing about turns or commands. Its owner (the host's view of a client, or
//! the client) decides what a packet carries; the link says *when* something must go out
//! (an ack is due, data waited a retransmit timeout, the line has been quiet) and keeps the
//! counters.

use phalanx_wheel::{HashedWheel, TimerHandle};

use crate::config::SessionConfig;
use crate::recovery::{Arrival, Received, Rtt, SentLog};
use crate::stats::LinkStats;
use crate::wire::AckFrame;

/// A connection's timers. Each fires at most once per arming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Data the peer has not acknowledged waited one retransmit timeout: send it again.
    Retransmit,
    /// An ack-eliciting packet arrived `ack_delay_ms` ago and no packet has carried its ack.
    AckDelay,
    /// Nothing was sent for `keep_alive_ms`: send something so the peer's idle timer resets.
    KeepAlive,
    /// Nothing was received for `idle_timeout_ms`: the peer is gone.
    Idle,
    /// New data went out on a lossy link a quarter turn ago: send it once more, so a single loss
    /// does not cost a whole turn.
    Repeat,
}

const TIMERS: usize = 5;

/// New data is sent twice while a loss was seen within this many acknowledged packets
/// (about the last 25 s of a 100 ms turn): a link that loses at all keeps its repeats.
const REPEAT_MEMORY_PACKETS: u32 = 256;

impl Timer {
    fn index(self) -> usize {
        self as usize
    }
}

/// Slots of a link's wheel: 1 ms ticks, 4096 slots cover every timer up to 4 s in one
/// revolution (longer ones are still exact, just revisited once per revolution).
const LINK_WHEEL_SLOTS: usize = 4096;

#[derive(Debug)]
pub(crate) struct Link {
    wheel: HashedWheel<Timer>,
    handles: [Option<TimerHandle>; TIMERS],
    next_pn: u64,
    received: Received,
    sent: SentLog,
    pub(crate) rtt: Rtt,
    /// Set by timers, cleared when a packet goes out.
    pub(crate) retransmit_due: bool,
    pub(crate) ack_due: bool,
    pub(crate) keep_alive_due: bool,
    /// The repeat timer fired: send the unacknowledged data again.
    pub(crate) repeat_due: bool,
    /// Packets acknowledged since the last one declared lost (saturating).
    acked_since_loss: u32,
    /// Repeats only while the loss estimate is at least this (‰; 1000: never).
    pub(crate) repeat_loss_permille: u32,
    /// The idle timer fired: the connection is dead.
    pub(crate) timed_out: bool,
    ack_delay_ms: u64,
    keep_alive_ms: u64,
    idle_timeout_ms: u64,
    pub(crate) stats: LinkStats,
}

impl Link {
    /// A link whose clock reads `now_ms`. `peer_ack_delay_ms` is the longest the peer may
    /// hold an acknowledgement back; the retransmit timeout covers it.
    pub(crate) fn new(now_ms: u64, config: &SessionConfig, peer_ack_delay_ms: u32) -> Self {
        let wheel = HashedWheel::new(now_ms, LINK_WHEEL_SLOTS).expect("power of two");
        let mut link = Link {
            wheel,
            handles: [None; TIMERS],
            next_pn: 0,
            received: Received::default(),
            sent: SentLog::default(),
            rtt: Rtt::new(
                config.rto_initial_ms,
                config.rto_min_ms,
                config.rto_max_ms,
                peer_ack_delay_ms,
            ),
            retransmit_due: false,
            ack_due: false,
            keep_alive_due: false,
            repeat_due: false,
            acked_since_loss: REPEAT_MEMORY_PACKETS,
            repeat_loss_permille: config.repeat_loss_permille,
            timed_out: false,
            ack_delay_ms: config.ack_delay_ms.into(),
            keep_alive_ms: config.keep_alive_ms.into(),
            idle_timeout_ms: config.idle_timeout_ms.into(),
            stats: LinkStats::default(),
        };
        link.arm(Timer::Idle, now_ms + link.idle_timeout_ms);
        link.arm(Timer::KeepAlive, now_ms + link.keep_alive_ms);
        link
    }

    /// Gives a peer not heard from yet until `deadline` before the idle timeout applies; the
    /// first datagram received restores the usual idle timer.
    pub(crate) fn await_first_datagram(&mut self, deadline: u64) {
        self.arm(Timer::Idle, deadline);
    }

    /// The peer holds our join reply: if it has not been heard yet, the idle timeout runs from
    /// now (it should start sending at once) instead of the rest of the join grace.
    pub(crate) fn on_reply_delivered(&mut self, now_ms: u64) {
        if self.stats.datagrams_received == 0 {
            self.arm(Timer::Idle, now_ms + self.idle_timeout_ms);
        }
    }

    /// Arms (or re-arms) `timer` for `deadline`, never before the wheel's clock.
    fn arm(&mut self, timer: Timer, deadline: u64) {
        let deadline = deadline.max(self.wheel.now());
        if let Some(handle) = self.handles[timer.index()] {
            if self.wheel.reset(handle, deadline).is_ok() {
                return;
            }
        }
        // Deadline is >= now() and the wheel holds at most four timers: insert cannot fail.
        self.handles[timer.index()] = self.wheel.insert(deadline, timer).ok();
    }

    fn disarm(&mut self, timer: Timer) {
        if let Some(handle) = self.handles[timer.index()].take() {
            self.wheel.cancel(handle);
        }
    }

    fn is_armed(&self, timer: Timer) -> bool {
        self.handles[timer.index()].is_some()
    }

    /// The earliest armed timer.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        self.wheel.next_deadline()
    }

    /// Fires every timer due by `now_ms`. Early calls are harmless no-ops.
    pub(crate) fn handle_timeout(&mut self, now_ms: u64) {
        while let Some(expired) = self.wheel.poll(now_ms) {
            self.handles[expired.value.index()] = None;
            match expired.value {
                Timer::Retransmit => {
                    self.rtt.on_timeout();
                    self.retransmit_due = true;
                }
                Timer::AckDelay => self.ack_due = true,
                Timer::KeepAlive => self.keep_alive_due = true,
                Timer::Idle => self.timed_out = true,
                Timer::Repeat => self.repeat_due = true,
            }
        }
    }

    /// Registers an arriving packet; a duplicate must be dropped by the caller.
    pub(crate) fn on_received(&mut self, now_ms: u64, pn: u64, len: usize) -> Arrival {
        let arrival = self.received.on_packet(pn, now_ms);
        if arrival == Arrival::New {
            self.stats.datagrams_received += 1;
            self.stats.bytes_received += len as u64;
            self.arm(Timer::Idle, now_ms + self.idle_timeout_ms);
        }
        arrival
    }

    /// The peer sent something it wants acknowledged: make sure an ack goes out within the
    /// ack delay even if nothing else does.
    pub(crate) fn on_ack_eliciting(&mut self, now_ms: u64) {
        if !self.is_armed(Timer::AckDelay) && !self.ack_due {
            self.arm(Timer::AckDelay, now_ms + self.ack_delay_ms);
        }
    }

    /// Applies the peer's ack frame. `Err` if it acknowledges a packet never sent.
    pub(crate) fn on_ack(&mut self, now_ms: u64, ack: AckFrame) -> Result<(), ()> {
        if ack.largest >= self.next_pn {
            return Err(());
        }
        let outcome = self.sent.on_ack(ack, now_ms);
        self.stats.packets_acked += u64::from(outcome.newly_acked);
        self.stats.packets_lost += u64::from(outcome.newly_lost);
        self.update_loss(outcome.newly_acked, outcome.newly_lost);
        self.acked_since_loss = if outcome.newly_lost > 0 {
            0
        } else {
            self.acked_since_loss.saturating_add(outcome.newly_acked)
        };
        if let Some(sample) = outcome.rtt_sample_ms {
            self.rtt.on_sample(sample);
        }
        self.stats.rtt_smoothed_ms = self.rtt.smoothed_ms;
        self.stats.rtt_min_ms = self.rtt.min_ms;
        self.stats.rto_ms = self.rtt.rto_ms();
        Ok(())
    }

    /// Exponentially weighted loss estimate in parts per thousand (gain 1/16 per packet).
    fn update_loss(&mut self, acked: u32, lost: u32) {
        let mut estimate = u64::from(self.stats.loss_permille);
        for _ in 0..acked.min(64) {
            estimate = estimate * 15 / 16;
        }
        for _ in 0..lost.min(64) {
            estimate = (estimate * 15 + 1000) / 16;
        }
        self.stats.loss_permille = estimate as u32;
    }

    /// The peer acknowledged data: all of it (`outstanding == false`) stops the retransmit
    /// timer; some of it restarts the timer from now.
    pub(crate) fn on_data_acked(&mut self, now_ms: u64, outstanding: bool) {
        if outstanding {
            let rto = self.rtt.rto_ms();
            self.arm(Timer::Retransmit, now_ms + rto);
        } else {
            self.disarm(Timer::Retransmit);
            self.retransmit_due = false;
        }
    }

    /// The number and ack frame for the next packet.
    pub(crate) fn next_packet(&mut self, now_ms: u64) -> (u64, Option<AckFrame>) {
        let pn = self.next_pn;
        self.next_pn += 1;
        (pn, self.received.ack_frame(now_ms))
    }

    /// A packet went out. `carries_data`: it holds data the peer must acknowledge;
    /// `repeat_after_ms`: when it carried *new* data, send that again this much later if the
    /// link is lossy (the owner passes a quarter turn).
    pub(crate) fn on_sent(
        &mut self,
        now_ms: u64,
        pn: u64,
        len: usize,
        carries_data: bool,
        repeat_after_ms: Option<u64>,
    ) {
        let retransmission = self.retransmit_due;
        if retransmission {
            self.stats.retransmits += 1;
        }
        let lost = self.sent.on_sent(pn, now_ms, retransmission);
        self.stats.packets_lost += u64::from(lost);
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.ack_due = false;
        self.disarm(Timer::AckDelay);
        self.keep_alive_due = false;
        self.arm(Timer::KeepAlive, now_ms + self.keep_alive_ms);
        if carries_data && (retransmission || !self.is_armed(Timer::Retransmit)) {
            let rto = self.rtt.rto_ms();
            self.arm(Timer::Retransmit, now_ms + rto);
        }
        self.retransmit_due = false;
        self.repeat_due = false;
        if let Some(delay) = repeat_after_ms {
            let lossy = self.acked_since_loss < REPEAT_MEMORY_PACKETS
                && self.stats.loss_permille >= self.repeat_loss_permille
                && self.repeat_loss_permille < 1_000;
            if lossy {
                self.stats.repeats += 1;
                self.arm(Timer::Repeat, now_ms + delay.max(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::AckFrame;

    /// Sends 40 data packets, 1 ms apart, each acknowledged at once except every `lose_every`-th
    /// (never acknowledged, so declared lost); returns how many repeats were armed.
    fn repeats(repeat_loss_permille: u32, lose_every: u64) -> u64 {
        let config = SessionConfig { repeat_loss_permille, ..SessionConfig::default() };
        let mut link = Link::new(0, &config, 25);
        let mut missing = 0u64;
        for pn in 0..40u64 {
            let (sent, _) = link.next_packet(pn);
            assert_eq!(sent, pn);
            link.on_sent(pn, pn, 40, true, Some(25));
            missing <<= 1;
            if pn % lose_every == lose_every - 1 {
                missing |= 1;
                continue;
            }
            // Bit i of `missing` is packet `pn - 1 - i`; the frame's bits exclude `pn` itself.
            let ack = AckFrame { largest: pn, missing: missing >> 1, delay_ms: 0 };
            link.on_ack(pn, ack).unwrap();
        }
        link.stats.repeats
    }

    #[test]
    fn repeats_follow_the_loss_threshold() {
        // No loss: never repeats, whatever the threshold.
        assert_eq!(repeats(0, u64::MAX), 0);
        // Any loss, threshold 0: repeats from the first detected loss on.
        let eager = repeats(0, 10);
        assert!(eager > 20, "eager repeats {eager}");
        // A threshold above a 10 % link's estimate most of the time: fewer repeats.
        let picky = repeats(150, 10);
        assert!(picky < eager, "picky {picky} vs eager {eager}");
        // 1000: off.
        assert_eq!(repeats(1_000, 10), 0);
        // A 1-in-3 link stays above 150 ‰: repeats nearly as often as eager.
        assert!(repeats(150, 3) > 20);
    }
}

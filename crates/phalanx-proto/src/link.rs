//! One end of a connection's datagram reliability: packet numbers, acks, RTT, the six
//! timers in the connection's own `HashedWheel` (local time, milliseconds) — retransmit, ack
//! delay, keep-alive, idle, repeat, and the owner's turn deadline — the intake of arriving
//! datagrams and the peer's offences.
//!
//! The link knows nothing about turns or commands. Its owner (the host's view of a client, or
//! the client) decides what a packet carries; the link says *when* something must go out
//! (an ack is due, data waited a retransmit timeout, the line has been quiet), drops what
//! must be dropped on arrival (malformed, duplicate, acknowledging a packet never sent) and
//! keeps the counters. A timer acts only through the link's own state, as quinn-proto's
//! connection timers do: the owner asks [`Link::is_due`], never reads a flag.

use phalanx_wheel::{HashedWheel, TimerHandle};

use crate::config::SessionConfig;
use crate::recovery::{Arrival, Received, Rtt, SentLog};
use crate::stats::{DropCounters, LinkStats};
use crate::wire::{AckFrame, DecodeError};

/// A connection's timers. Each fires at most once per arming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    /// Data the peer has not acknowledged waited one retransmit timeout: send it again.
    Retransmit,
    /// An ack-eliciting packet arrived `link.ack_delay_ms` ago and no packet has carried its ack.
    AckDelay,
    /// Nothing was sent for `link.keep_alive_ms` (`link.probe_interval_ms` while the peer is silent):
    /// send something so the peer's idle timer resets.
    KeepAlive,
    /// Nothing was received for `link.idle_timeout_ms`: the peer is gone.
    Idle,
    /// New data went out on a lossy link a quarter turn ago: send it once more, so a single loss
    /// does not cost a whole turn.
    Repeat,
    /// The owner's next turn is due (a client's playout schedule): the owner wakes and looks.
    Turn,
}

const TIMERS: usize = 6;

/// When a link sends new data a second time, a repeat delay after the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Never (`link.repeat_loss_permille` 1000).
    Never,
    /// While a loss was seen within the last `REPEAT_MEMORY_PACKETS` acknowledged packets and
    /// the loss estimate is at least this (‰): the host's bundles, by `link.repeat_loss_permille`;
    /// a client's commands at 0, any loss (rare, and a late one costs a whole turn).
    AtLoss(u32),
    /// Always, lossy or not: the quiet relay's client sends too few packets to notice a loss
    /// in time, and a late command costs a turn.
    Always,
}

/// New data is sent twice while a loss was seen within this many acknowledged packets
/// (about the last 25 s of a 100 ms turn): a link that loses at all keeps its repeats.
const REPEAT_MEMORY_PACKETS: u32 = 256;

impl Timer {
    fn index(self) -> usize {
        self as usize
    }
}

/// Slots of a link's wheel: 1 ms ticks. The short timers (ack delay, repeat, retransmit,
/// keep-alive) fall within one revolution; the idle timer and the quiet relay's heartbeat are
/// further out, stay exact and are revisited once a revolution. Sized by `benches/session` and
/// the relay's memory (a relay holds eight links a match): 256 slots (1 KiB a link) ran the
/// 8-player mesh game in 97.8 and 97.4 ms against 98.6 ms with 1,024 (measured back to back),
/// while 64 slots cost a third more time, as a wheel whose every timer is past one revolution
/// falls back to scanning for its earliest deadline.
const LINK_WHEEL_SLOTS: usize = 256;

/// What the fired timers ask of the next packet. Cleared when a packet goes out.
#[derive(Clone, Copy, Debug, Default)]
struct Due {
    /// The retransmit timer fired: resend everything unacknowledged.
    retransmit: bool,
    /// An acknowledgement is owed.
    ack: bool,
    /// The line was quiet for the keep-alive interval.
    keep_alive: bool,
    /// The repeat timer fired: send the unacknowledged data again.
    repeat: bool,
    /// The peer probed (it has not heard from us lately): answer at once.
    answer: bool,
    /// The peer reported a gap: resend everything unacknowledged at once, without backoff.
    repair: bool,
}

/// What a datagram from the peer carries that the link itself handles.
pub(crate) trait Packet {
    /// Its packet number.
    fn pn(&self) -> u64;
    /// Its acknowledgement of our packets, if any.
    fn ack(&self) -> Option<AckFrame>;
}

impl Packet for crate::wire::Down {
    fn pn(&self) -> u64 {
        self.pn
    }
    fn ack(&self) -> Option<AckFrame> {
        self.ack
    }
}

impl Packet for crate::wire::Up<'_> {
    fn pn(&self) -> u64 {
        self.pn
    }
    fn ack(&self) -> Option<AckFrame> {
        self.ack
    }
}

/// What [`Link::intake`] decided about an arriving datagram.
#[derive(Debug)]
pub(crate) enum Intake<P> {
    /// New and well-formed: the owner processes it.
    Accept(P),
    /// Dropped and counted (a duplicate, or an offence below the limit).
    Drop,
    /// An offence past `link.misbehaviour_max`: the owner disconnects the peer.
    Disconnect,
}

/// A peer's offence: bytes that cannot come from a correct peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offence {
    /// The datagram did not decode.
    Malformed,
    /// It claims something the peer cannot know or own.
    Spoofed,
    /// A command the game's rule refused ([`Host::set_command_rule`](crate::Host::set_command_rule)).
    Refused,
}

/// A packet that went out, as its owner built it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    /// Its packet number, from [`Link::next_packet`].
    pub(crate) pn: u64,
    /// Its size in bytes.
    pub(crate) len: usize,
    /// It holds data the peer must acknowledge.
    pub(crate) carries_data: bool,
    /// Bytes of it that repeat data sent before.
    pub(crate) redundant_bytes: u64,
    /// It carried *new* data: on a lossy link send that again this much later (the owner
    /// passes a quarter turn, see [`repeat_delay_ms`]).
    pub(crate) repeat_after_ms: Option<u64>,
}

/// How long after new data goes out a lossy link sends it again: a quarter turn.
pub(crate) fn repeat_delay_ms(turn_length_ms: u32) -> u64 {
    u64::from(turn_length_ms) / 4
}

#[derive(Debug)]
pub(crate) struct Link {
    wheel: HashedWheel<Timer>,
    handles: [Option<TimerHandle>; TIMERS],
    next_pn: u64,
    received: Received,
    sent: SentLog,
    rtt: Rtt,
    due: Due,
    /// Packets acknowledged since the last one declared lost (saturating).
    acked_since_loss: u32,
    /// When new data goes out twice.
    repeat: Repeat,
    /// The idle timer fired: the connection is dead.
    timed_out: bool,
    ack_delay_ms: u64,
    keep_alive_ms: u64,
    /// Silence after which a peer seems deaf: `link.keep_alive_ms`, or 1.5 heartbeats.
    deaf_after_ms: u64,
    probe_interval_ms: u64,
    idle_timeout_ms: u64,
    /// When the last new datagram arrived (the link's creation before any).
    last_received_ms: u64,
    /// When the peer last acknowledged a packet of ours it had not acknowledged before (the
    /// link's creation before any).
    last_acked_ms: u64,
    /// Offences so far, and how many are tolerated.
    misbehaviour: u32,
    misbehaviour_max: u32,
    stats: LinkStats,
    drops: DropCounters,
}

impl Link {
    /// A link whose clock reads `now_ms`, holding acks back at most `link.ack_delay_ms`; the
    /// retransmit timeout covers the peer's `peer_ack_delay_ms`.
    pub(crate) fn new(
        now_ms: u64,
        config: &SessionConfig,
        ack_delay_ms: u32,
        peer_ack_delay_ms: u32,
    ) -> Self {
        let wheel = HashedWheel::new(now_ms, LINK_WHEEL_SLOTS).expect("power of two");
        let mut link = Link {
            wheel,
            handles: [None; TIMERS],
            next_pn: 0,
            received: Received::default(),
            sent: SentLog::default(),
            rtt: Rtt::new(
                config.link.rto_ms_initial,
                config.link.rto_ms_min,
                config.link.rto_ms_max,
                peer_ack_delay_ms,
                config.link.timer_granularity_ms,
            ),
            due: Due::default(),
            acked_since_loss: REPEAT_MEMORY_PACKETS,
            repeat: match config.link.repeat_loss_permille {
                1_000.. => Repeat::Never,
                permille => Repeat::AtLoss(permille),
            },
            timed_out: false,
            ack_delay_ms: ack_delay_ms.into(),
            keep_alive_ms: config.keep_alive_period_ms().into(),
            deaf_after_ms: if config.is_quiet() {
                u64::from(config.link.heartbeat_ms) * 3 / 2
            } else {
                config.link.keep_alive_ms.into()
            },
            probe_interval_ms: config.link.probe_interval_ms.into(),
            idle_timeout_ms: config.link.idle_timeout_ms.into(),
            last_received_ms: now_ms,
            last_acked_ms: now_ms,
            misbehaviour: 0,
            misbehaviour_max: config.link.misbehaviour_max,
            stats: LinkStats::default(),
            drops: DropCounters::default(),
        };
        link.arm(Timer::Idle, now_ms + link.idle_timeout_ms);
        link.arm(Timer::KeepAlive, now_ms + link.keep_alive_ms);
        link
    }

    /// Whether a packet was lost within the last `REPEAT_MEMORY_PACKETS` acknowledged ones (a
    /// new link has lost none).
    pub(crate) fn lost_lately(&self) -> bool {
        self.acked_since_loss < REPEAT_MEMORY_PACKETS
    }

    /// Sets when new data goes out twice, whatever `link.repeat_loss_permille` says.
    pub(crate) fn set_repeat(&mut self, repeat: Repeat) {
        self.repeat = repeat;
    }

    /// Sends a packet at the next chance even if nothing else is due (a client's hello).
    pub(crate) fn send_soon(&mut self) {
        self.due.keep_alive = true;
    }

    /// Gives a peer not heard from yet until `deadline` before the idle timeout applies; the
    /// first datagram received restores the usual idle timer.
    pub(crate) fn await_first_datagram(&mut self, deadline: u64) {
        self.arm(Timer::Idle, deadline);
    }

    /// The peer holds our join reply: if it has not been heard yet, the idle timeout runs from
    /// now (it should start sending at once) instead of the rest of the join grace.
    pub(crate) fn on_reply_delivered(&mut self, now_ms: u64) {
        if !self.heard_from() {
            self.arm(Timer::Idle, now_ms + self.idle_timeout_ms);
        }
    }

    /// Sets (or clears) the owner's turn deadline: [`poll_timeout`](Self::poll_timeout) wakes
    /// the driver then.
    pub(crate) fn set_turn_deadline(&mut self, deadline: Option<u64>) {
        match deadline {
            Some(deadline) => self.arm(Timer::Turn, deadline),
            None => self.disarm(Timer::Turn),
        }
    }

    /// Whether any datagram from the peer was accepted.
    pub(crate) fn heard_from(&self) -> bool {
        self.stats.datagrams_received > 0
    }

    /// Arms (or re-arms) `timer` for `deadline`, never before the wheel's clock.
    fn arm(&mut self, timer: Timer, deadline: u64) {
        let deadline = deadline.max(self.wheel.now());
        if let Some(handle) = self.handles[timer.index()] {
            if self.wheel.reset(handle, deadline).is_ok() {
                return;
            }
        }
        // Deadline is >= now() and the wheel holds at most six timers: insert cannot fail.
        self.handles[timer.index()] = self.wheel.insert(deadline, timer).ok();
    }

    fn disarm(&mut self, timer: Timer) {
        if let Some(handle) = self.handles[timer.index()].take() {
            self.wheel.discard(handle);
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
                    self.due.retransmit = true;
                }
                Timer::AckDelay => self.due.ack = true,
                Timer::KeepAlive => self.due.keep_alive = true,
                Timer::Idle => self.timed_out = true,
                Timer::Repeat => self.due.repeat = true,
                // The owner compares its schedule with the clock itself.
                Timer::Turn => {}
            }
        }
    }

    /// How long after a send the next keep-alive is due: `link.keep_alive_ms`, or
    /// `link.probe_interval_ms` while a peer that was heard shows no sign of hearing us — silent for
    /// `link.keep_alive_ms`, or acknowledging nothing new for twice that (a one-way cut: it still
    /// talks, we do not get through) — so the first probe after an outage heals arrives
    /// quickly, whatever the retransmit backoff.
    fn keep_alive_after(&self, now_ms: u64) -> u64 {
        if self.peer_seems_deaf(now_ms) {
            self.probe_interval_ms
        } else {
            self.keep_alive_ms
        }
    }

    /// Whether a peer that was heard shows no sign of hearing us: silent for `link.keep_alive_ms`,
    /// or acknowledging nothing new for twice that.
    fn peer_seems_deaf(&self, now_ms: u64) -> bool {
        let silent = now_ms.saturating_sub(self.last_received_ms) >= self.deaf_after_ms
            || now_ms.saturating_sub(self.last_acked_ms) >= 2 * self.keep_alive_ms;
        silent && self.heard_from()
    }

    /// Whether the next packet should ask the peer to answer at once (the probe flag): a peer
    /// that was heard has missed its keep-alive by half an interval (silent for 1.5 ×
    /// `link.keep_alive_ms`: a quiet lobby, where both sides talk every interval, never probes),
    /// or acknowledged nothing new for twice the interval. Its answer is what the idle timers
    /// on both sides wait for, so it should not wait for the next turn. An answer to the
    /// peer's own probe never probes back, so two probing sides cannot ping-pong.
    pub(crate) fn is_probing(&self, now_ms: u64) -> bool {
        let silent = now_ms.saturating_sub(self.last_received_ms) >= self.keep_alive_ms * 3 / 2
            || now_ms.saturating_sub(self.last_acked_ms) >= 2 * self.keep_alive_ms;
        !self.due.answer && silent && self.heard_from()
    }

    /// An acknowledgement is owed at once (the quiet relay's client found a gap).
    pub(crate) fn ack_now(&mut self) {
        self.due.ack = true;
    }

    /// The peer reported a gap: the next packet carries all it has not acknowledged, at once.
    pub(crate) fn repair_now(&mut self) {
        self.due.repair = true;
    }

    /// The peer's packet carried the probe flag: the next packet goes at once.
    pub(crate) fn on_probe(&mut self) {
        self.due.answer = true;
    }

    /// Whether the idle timer fired: nothing arrived for `link.idle_timeout_ms`.
    pub(crate) fn is_timed_out(&self) -> bool {
        self.timed_out
    }

    /// Whether the timers ask for a packet now. `outstanding`: the owner has data the peer
    /// has not acknowledged (a retransmission or repeat needs something to carry).
    pub(crate) fn is_due(&self, outstanding: bool) -> bool {
        self.resend_due(outstanding) || self.due.ack || self.due.keep_alive || self.due.answer
    }

    /// Whether the next packet should carry unacknowledged data again (the retransmit or
    /// repeat timer fired and there is such data).
    pub(crate) fn resend_due(&self, outstanding: bool) -> bool {
        (self.due.retransmit || self.due.repeat || self.due.repair) && outstanding
    }

    /// Whether to resend all that is unacknowledged (a retransmit timeout, or a gap).
    pub(crate) fn is_retransmitting(&self) -> bool {
        self.due.retransmit || self.due.repair
    }

    /// The largest packet number the peer acknowledged, if any.
    pub(crate) fn largest_acked(&self) -> Option<u64> {
        self.sent.largest_acked()
    }

    /// The smoothed round trip, once measured.
    pub(crate) fn smoothed_rtt_ms(&self) -> Option<u64> {
        self.rtt.smoothed_ms
    }

    /// The smoothed round trip plus four times its variation (at least the timer
    /// granularity): how long an answer may take before it is overdue.
    pub(crate) fn round_trip_bound_ms(&self) -> Option<u64> {
        self.rtt.bound_ms()
    }

    /// The link's counters.
    pub(crate) fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Input dropped from the peer, by cause.
    pub(crate) fn drops(&self) -> &DropCounters {
        &self.drops
    }

    /// The owner's drops of what the link accepted (stale, future, over budget...).
    pub(crate) fn drops_mut(&mut self) -> &mut DropCounters {
        &mut self.drops
    }

    /// Counts an offence of the peer; `true` once there were more than `link.misbehaviour_max`,
    /// when the owner must disconnect it.
    pub(crate) fn offence(&mut self, offence: Offence) -> bool {
        match offence {
            Offence::Malformed => self.drops.malformed += 1,
            Offence::Spoofed => self.drops.spoofed += 1,
            Offence::Refused => self.drops.refused += 1,
        }
        self.misbehaviour += 1;
        self.misbehaviour > self.misbehaviour_max
    }

    /// Takes an arriving datagram of `len` bytes, as decoded: a malformed one is an offence,
    /// a duplicate is dropped, an acknowledgement of a packet never sent is an offence; what
    /// is left is new, its ack applied, for the owner to process.
    pub(crate) fn intake<P: Packet>(
        &mut self,
        now_ms: u64,
        len: usize,
        decoded: Result<P, DecodeError>,
    ) -> Intake<P> {
        let Ok(packet) = decoded else {
            return self.offended(Offence::Malformed);
        };
        if self.received.on_packet(packet.pn(), now_ms) == Arrival::Duplicate {
            self.drops.duplicate += 1;
            return Intake::Drop;
        }
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += len as u64;
        self.last_received_ms = now_ms;
        self.arm(Timer::Idle, now_ms + self.idle_timeout_ms);
        if let Some(ack) = packet.ack() {
            if !self.on_ack(now_ms, ack) {
                return self.offended(Offence::Spoofed);
            }
        }
        Intake::Accept(packet)
    }

    fn offended<P>(&mut self, offence: Offence) -> Intake<P> {
        if self.offence(offence) {
            Intake::Disconnect
        } else {
            Intake::Drop
        }
    }

    /// The peer sent something it wants acknowledged: make sure an ack goes out within the
    /// ack delay even if nothing else does.
    pub(crate) fn on_ack_eliciting(&mut self, now_ms: u64) {
        if !self.is_armed(Timer::AckDelay) && !self.due.ack {
            self.arm(Timer::AckDelay, now_ms + self.ack_delay_ms);
        }
    }

    /// Applies the peer's ack frame; `false` (and nothing applied) if it acknowledges a
    /// packet never sent.
    fn on_ack(&mut self, now_ms: u64, ack: AckFrame) -> bool {
        if ack.largest >= self.next_pn {
            return false;
        }
        let outcome = self.sent.on_ack(ack, now_ms);
        self.stats.packets_acked += u64::from(outcome.newly_acked);
        if outcome.newly_acked > 0 {
            self.last_acked_ms = now_ms;
        }
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
        true
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
            self.due.retransmit = false;
        }
    }

    /// The number and ack frame for the next packet.
    pub(crate) fn next_packet(&mut self, now_ms: u64) -> (u64, Option<AckFrame>) {
        let pn = self.next_pn;
        self.next_pn += 1;
        (pn, self.received.ack_frame(now_ms))
    }

    /// A packet went out: count it, and re-arm the timers it answers.
    pub(crate) fn on_sent(&mut self, now_ms: u64, packet: Sent) {
        let retransmission = self.due.retransmit;
        if retransmission {
            self.stats.retransmits += 1;
        }
        let lost = self.sent.on_sent(packet.pn, now_ms, retransmission);
        self.stats.packets_lost += u64::from(lost);
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += packet.len as u64;
        self.stats.redundant_bytes += packet.redundant_bytes;
        self.disarm(Timer::AckDelay);
        self.arm(Timer::KeepAlive, now_ms + self.keep_alive_after(now_ms));
        if packet.carries_data && (retransmission || !self.is_armed(Timer::Retransmit)) {
            let rto = self.rtt.rto_ms();
            self.arm(Timer::Retransmit, now_ms + rto);
        }
        self.due = Due::default();
        if let Some(delay) = packet.repeat_after_ms {
            let lossy = match self.repeat {
                Repeat::Never => false,
                Repeat::AtLoss(permille) => {
                    self.lost_lately() && self.stats.loss_permille >= permille
                }
                Repeat::Always => true,
            };
            if lossy {
                self.stats.repeats += 1;
                self.arm(Timer::Repeat, now_ms + delay.max(1));
            }
        }
    }
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;

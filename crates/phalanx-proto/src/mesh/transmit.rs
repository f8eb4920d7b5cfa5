//! A peer's datagrams out: which pair is due one, what it carries, and when to wake.

use crate::types::{PlayerId, Turn};
use crate::wire::{MeshDatagram, Report};

use super::pair::Status;
use super::peer::{Peer, State};

/// How late past its time (and twice the round-trip variation) a batch may be before we ask
/// for it again; the lead has room for it (see `Peer::lead_ms`).
pub(crate) const REPAIR_MARGIN_MS: u32 = 30;

/// How often a pair's datagrams carry our stamp, for a round trip (ms) ...
const STAMP_EVERY_MS: u64 = 500;
/// ... once this many round trips are measured: every datagram carries it until then, as the
/// first sample's variance is half of it, and the lead (which counts the variance twice)
/// only comes down as samples come in.
const RTT_SAMPLES_FIRST: u8 = 16;

impl Peer {
    /// The next datagram to send, written into `buf` (cleared first), and who it is for;
    /// `None` when nothing is due. Call it until `None` after every call that takes input.
    pub fn poll_transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> Option<PlayerId> {
        buf.clear();
        self.seal_due(now_ms, true);
        let count = self.pairs.len();
        for step in 0..count {
            let index = (self.cursor + step) % count;
            if self.wants_send(index, now_ms) {
                self.cursor = (index + 1) % count;
                self.write_datagram(index, now_ms, buf);
                return Some(self.pairs[index].player);
            }
        }
        None
    }

    /// Whether a datagram should go to `index`'s peer now.
    fn wants_send(&self, index: usize, now_ms: u64) -> bool {
        let pair = &self.pairs[index];
        // A frozen peer is being dropped: what we send now would let it run ahead alone.
        if pair.status != Status::Live || self.is_closed(now_ms) {
            return false;
        }
        let sent = pair.sent_ms.unwrap_or(0);
        pair.send_due
            || pair.repeat_at.is_some_and(|at| at <= now_ms)
            || pair.sent_ms.is_none()
            || now_ms >= sent + self.heartbeat_ms()
            || (self.owes(index) && now_ms >= sent + self.resend_ms(index))
            || self.repair_at(index).is_some_and(|at| at <= now_ms)
    }

    /// With `ahead_ms`, when we ask `index`'s peer at once for what we lack of its: once the
    /// batch making its next contribution final is overdue, twice `repeat_ms` apart (it
    /// answers twice too), then again each round trip while we still lack it. A batch is
    /// expected as long after the last as its turns are due after the last's (batches go on
    /// the peer's schedule, which is ours), and overdue twice the round-trip variation and
    /// `REPAIR_MARGIN_MS` after that; never later than an answer can still come in time. The lead leaves
    /// room for the answer (see `lead_ms`). Without `ahead_ms`, every turn's datagram goes
    /// several times instead.
    pub(crate) fn repair_at(&self, index: usize) -> Option<u64> {
        let pair = &self.pairs[index];
        if self.mesh.ahead_ms == 0 || self.state != State::Running || pair.status != Status::Live {
            return None;
        }
        let (srtt, trip) = (pair.srtt_ms?, u64::from(pair.trip_ms()?));
        let turn = pair.have.map_or(Turn::ZERO, Turn::next);
        // A peer in step with us makes final no further than we do.
        if !pair.needed_at(turn) || turn >= self.seal_limit() {
            return None;
        }
        let due = self.due_ms(turn);
        let expected = match pair.batch_at {
            Some((first, at)) => {
                at + u64::from(turn.0.saturating_sub(first.0)) * u64::from(self.length_ms)
            }
            None => due.saturating_sub(self.lead_ms().into()) + trip / 2,
        };
        let margin = u64::from(2 * pair.rttvar_ms + REPAIR_MARGIN_MS);
        let last_chance = due.saturating_sub(pair.repair_ms(self.mesh.repeat_ms)?.into());
        let overdue = (expected + margin).min(last_chance);
        Some(match pair.probed {
            None => overdue,
            Some((first, 1)) => overdue.max(first + self.repeat_gap_ms()),
            Some((first, _)) => overdue.max(first + u64::from(srtt)),
        })
    }

    /// How long a pair may go without a datagram from us: the heartbeat, or a tenth of the
    /// idle timeout while the next turn waits on a contribution (the match stands still
    /// and finalises nothing, and on a lossy link a few lost heartbeats in a row must not
    /// read as a departure).
    fn heartbeat_ms(&self) -> u64 {
        let heartbeat = u64::from(self.mesh.heartbeat_ms);
        if self.state == State::Running && !self.ready() {
            heartbeat.min(u64::from(self.config.link.idle_timeout_ms) / 10)
        } else {
            heartbeat
        }
    }

    /// Whether `index`'s peer lacks something of ours: a final turn, or a view message.
    pub(crate) fn owes(&self, index: usize) -> bool {
        self.pairs[index].acked < self.sealed_through() || self.view_pending(index)
    }

    fn write_datagram(&mut self, index: usize, now_ms: u64, buf: &mut Vec<u8>) {
        let view = self.view_message(index);
        let master = self.master;
        let report = (self.pairs[index].player == master).then(|| self.report());
        let repair = self.repair_at(index).is_some_and(|at| at <= now_ms);
        let pair = &self.pairs[index];
        // The schedule to follow is the master's; a round trip is measured now and then.
        let due_in = (master == self.me).then(|| {
            (self.due_ms(self.next_exec) as i64 - now_ms as i64).clamp(-1_000_000, 1_000_000) as i32
        });
        let stamp = (pair.rtt_samples < RTT_SAMPLES_FIRST
            || pair.stamped_ms.is_none_or(|at| now_ms >= at + STAMP_EVERY_MS))
        .then_some(now_ms as u32);
        let echo = pair.echo.filter(|_| pair.echo_owed);
        let mut datagram = MeshDatagram {
            ack: pair.have,
            through: self.sealed_through(),
            next_exec: self.next_exec,
            due_in,
            stamp,
            echo: echo.map(|(stamp, at)| (stamp, now_ms.saturating_sub(at) as u32)),
            entries: Vec::new(),
            hashes: Vec::new(),
            report,
            view,
            // Until a round trip is measured, the schedule cannot follow the master's: ask
            // for an answer at once. And when a batch of its is overdue.
            probe: pair.srtt_ms.is_none() || repair,
        };
        // Only the master compares state hashes.
        if pair.hash_sends > 0 && pair.player == master {
            let from = pair.hash_from;
            datagram.hashes = self.my_hashes.iter().copied().filter(|(t, _)| *t >= from).collect();
        }
        // Our non-empty final contributions it lacks, as many as fit.
        let room = usize::from(self.config.link.datagram_bytes_max).saturating_sub(64);
        let mut used = 0;
        let mut entries = Vec::new();
        let from = pair.acked.map_or(Turn::ZERO, Turn::next);
        for (turn, entry) in self.own.range(from..) {
            let len = crate::wire::entry_len(*turn, entry);
            if used + len > room && !entries.is_empty() {
                datagram.through = turn.0.checked_sub(1).map(Turn);
                break;
            }
            used += len;
            entries.push((*turn, entry));
        }
        datagram.encode(buf, &entries);
        let gap = self.repeat_gap_ms();
        let pair = &mut self.pairs[index];
        pair.hash_sends = pair.hash_sends.saturating_sub(1);
        if pair.hash_sends == 0 {
            // Each report goes `HASH_SENDS` times; the next datagrams carry only newer ones.
            if let Some(&(turn, _)) = datagram.hashes.last() {
                pair.hash_from = turn.next();
            }
        }
        pair.sent_ms = Some(now_ms);
        pair.echo_owed = false;
        if repair {
            pair.probed = match pair.probed {
                Some((first, 1)) => Some((first, 2)),
                _ => Some((now_ms, 1)),
            };
        }
        if stamp.is_some() {
            pair.stamped_ms = Some(now_ms);
        }
        pair.send_due = false;
        if pair.repeat_at.is_some_and(|at| at <= now_ms) {
            pair.repeat_at = (pair.repeats_left > 0).then(|| now_ms + gap);
            pair.repeats_left = pair.repeats_left.saturating_sub(1);
        }
        pair.datagrams_sent += 1;
        pair.bytes_sent += buf.len() as u64;
    }

    /// What we tell the master of our side.
    fn report(&self) -> Report {
        let suspects = self
            .pairs
            .iter()
            .filter(|pair| pair.doubted() && pair.is_in())
            .fold(0u64, |mask, pair| mask | 1 << pair.player.0);
        Report { lead_ms: self.lead_ms(), cost_ms: self.cost_ms, suspects }
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called, in the caller's
    /// clock; `None` once closed. It never names a time already handled: a driver may sleep
    /// until it. (A turn's due time is not in it: the game takes turns when it polls
    /// [`next_turn`](Self::next_turn); [`next_turn_due_ms`](Self::next_turn_due_ms) says when.)
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        let mut next: Option<u64> = None;
        let mut consider = |at: u64| next = Some(next.map_or(at, |n| n.min(at)));
        match self.state {
            State::Ended { linger_until_ms, .. } => consider(linger_until_ms),
            State::Leaving { since_ms, .. } => {
                consider(since_ms + u64::from(self.config.link.idle_timeout_ms));
            }
            State::Running => {
                if self.unsealed < self.seal_limit() {
                    consider(self.next_seal_ms());
                }
                if !self.waiting_told && !self.ready() {
                    let notice = u64::from(self.config.turns.stall_notice_ms);
                    consider(self.due_ms(self.next_exec) + notice);
                }
            }
        }
        let idle = u64::from(self.config.link.idle_timeout_ms);
        for (index, pair) in self.pairs.iter().enumerate() {
            if pair.is_in() && pair.leaves_after.is_none() && !pair.suspected {
                let first = u64::from(self.mesh.first_contact_ms);
                consider(pair.silent_at(idle, self.start_ms, first));
            }
            if pair.status != Status::Live {
                continue;
            }
            let sent = pair.sent_ms.unwrap_or(0);
            consider(sent + self.heartbeat_ms());
            if let Some(at) = pair.repeat_at {
                consider(at);
            }
            if let Some(at) = self.repair_at(index) {
                consider(at);
            }
            if self.owes(index) {
                consider(sent + self.resend_ms(index));
            }
        }
        next
    }

    /// When the next turn is due on our clock, while the match runs: a renderer's time to
    /// the next turn. It may be here already, or late (contributions missing).
    pub fn next_turn_due_ms(&self) -> Option<u64> {
        (self.state == State::Running).then(|| self.due_ms(self.next_exec))
    }
}

//! The client's network side: datagrams from the host in, datagrams to the host out, and the
//! connection's timers. The [`Link`] does the intake, the due-ness and the bookkeeping common
//! to both ends; this file decides what a client's datagram carries and what a host's means.

use crate::bundle::{Record, TurnBundle};
use crate::link::{repeat_delay_ms, Intake, Link, Offence, Sent};
use crate::types::{players_in, CommandSeq, Turn};
use crate::wire::{
    decode_down, put_up_command, put_up_header, put_varint, refused_seqs, up_command_len, Down,
    UpCommand, UpExtras, UP_HEADER_BYTES_MAX,
};

use super::{Client, ClientEvent, EndReason, State, PLAYOUT_REPORT_STEP_MS};

impl Client {
    /// The link while the session runs.
    fn live_link(&mut self) -> Option<&mut Link> {
        match self.state {
            State::Running(_) => self.link.as_deref_mut(),
            _ => None,
        }
    }

    /// The first turn we do not hold: we hold every bundle before it.
    fn turn_ack(&self) -> Turn {
        let held = self.buffered.iter().take_while(|slot| slot.is_some()).count();
        self.next_exec.saturating_add(held as u32)
    }

    /// The first missing turn, when a later one is held (a gap: it was lost, or reordered).
    fn gap(&self) -> Option<Turn> {
        let missing = self.turn_ack();
        let later = missing.since(self.next_exec) as usize;
        self.buffered.iter().skip(later).any(Option::is_some).then_some(missing)
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next needed.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Running(_) => self.link.as_ref()?.poll_timeout(),
            _ => None,
        }
    }

    /// Fires due timers. Early calls are harmless no-ops.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        let Some(link) = self.live_link() else { return };
        link.handle_timeout(now_ms);
        if link.is_timed_out() {
            return self.end(EndReason::HostLost);
        }
        if let Some((missing, _)) = self.overdue().filter(|&(_, at)| at <= now_ms) {
            self.overdue_reported = Some(missing);
            // Not there past its slowest arrival: lost (or later than the buffer covers).
            self.playout.on_loss(missing);
            self.report_gap_now();
        }
        self.schedule_next_turn(now_ms);
    }

    /// Handles a datagram from the host. Bad input is dropped and counted; never panics.
    pub fn handle_datagram(&mut self, now_ms: u64, datagram: &[u8]) {
        let decoded = decode_down(datagram, &self.limits);
        let next_seq = self.next_seq;
        let Some(link) = self.live_link() else { return };
        let down = match link.intake(now_ms, datagram.len(), decoded) {
            Intake::Accept(down) => down,
            Intake::Drop => return,
            Intake::Disconnect => return self.end(EndReason::HostMisbehaved),
        };
        if down.cmd_ack > next_seq {
            if link.offence(Offence::Spoofed) {
                self.end(EndReason::HostMisbehaved);
            }
            return;
        }
        self.on_down(now_ms, down);
    }

    /// A new, plausible datagram from the host: acknowledgements, the waiting notice, bundles.
    fn on_down(&mut self, now_ms: u64, down: Down) {
        if down.extras.probe {
            if let Some(link) = self.link.as_deref_mut() {
                link.on_probe();
            }
        }
        if let Some(turn) = down.extras.snapshot_wanted {
            self.on_snapshot_wanted(turn);
        }
        if let Some(turn) = down.extras.inspect {
            self.on_inspect(turn);
        }
        if let Some(acked) = down.extras.hash_ack {
            while self.hash_reports.front().is_some_and(|&(turn, _)| turn <= acked) {
                self.hash_reports.pop_front();
            }
        }
        if down.extras.waiting != self.waiting {
            let mask = down.extras.waiting & self.limits.player_mask();
            self.waiting = down.extras.waiting;
            self.push_event(if mask == 0 {
                ClientEvent::StallEnded
            } else {
                ClientEvent::Waiting(players_in(mask))
            });
        }
        if let Some((newest, before)) = down.extras.refused {
            self.on_refused(newest, before);
        }
        let mut acked_any = false;
        while self.unacked.front().is_some_and(|command| command.seq < down.cmd_ack) {
            self.unacked.pop_front();
            acked_any = true;
        }
        let outstanding = !self.unacked.is_empty();
        let Some(link) = self.link.as_deref_mut() else { return };
        if acked_any {
            link.on_data_acked(now_ms, outstanding);
        }
        // The quiet relay acknowledges turns in its heartbeat, or at once on a gap.
        if !down.bundles.is_empty() && !self.config.is_quiet() {
            link.on_ack_eliciting(now_ms);
        }
        self.store_bundles(now_ms, down.first_turn, down.bundles);
        if self.config.is_quiet() {
            self.report_gap(now_ms);
        }
        self.stats.commands_unacked = self.unacked.len();
        self.schedule_next_turn(now_ms);
    }

    /// Arms the link's turn timer for the next turn's time on the playout schedule, when it
    /// has arrived and its time is still to come, or for the first missing turn's
    /// [`overdue`](Self::overdue) time if that is sooner.
    pub(super) fn schedule_next_turn(&mut self, now_ms: u64) {
        let due = match self.buffered.front() {
            Some(Some(_)) => self.playout.due_ms(self.next_exec).filter(|&due| due > now_ms),
            _ => None,
        };
        let overdue = self.overdue().map(|(_, at)| at).filter(|&at| at > now_ms);
        if let Some(link) = self.link.as_deref_mut() {
            link.set_turn_deadline([due, overdue].into_iter().flatten().min());
        }
    }

    /// The quiet relay: the first missing turn, not yet reported, and when it is overdue —
    /// the last moment a request for it gets it there by its time on the playout schedule,
    /// one smoothed round trip ahead. A turn lost twice in a row (its datagram and the next,
    /// which carried its copy) then comes a round trip after that, not with the third
    /// datagram a turn later.
    fn overdue(&self) -> Option<(Turn, u64)> {
        if !self.config.is_quiet() {
            return None;
        }
        let missing = self.turn_ack();
        if self.reported_missing().contains(&Some(missing)) {
            return None;
        }
        let round_trip = self.link.as_deref()?.smoothed_rtt_ms()?;
        Some((missing, self.playout.overdue_ms(missing, round_trip)?))
    }

    /// The quiet relay: the missing turns last reported, as a gap and as overdue.
    fn reported_missing(&self) -> [Option<Turn>; 2] {
        [self.gap_reported.map(|(missing, _)| missing), self.overdue_reported]
    }

    /// The quiet relay: when a turn is missing while a later one is held, acknowledge at once
    /// with the gap flag, so the host resends it without waiting for a heartbeat or its
    /// retransmit timer. Once per missing turn, and again while it stays missing as later
    /// turns keep coming, once the repair is overdue (a smoothed round trip plus four times its
    /// variation): a lost report is not left to the host's backed-off retransmit timer. (Not
    /// again before the round trip is measured, nor from a spectator: the host repairs a
    /// spectator on its own timer.)
    fn report_gap(&mut self, now_ms: u64) {
        let Some(missing) = self.gap() else { return };
        if let Some((turn, at)) = self.gap_reported {
            let bound = self.link.as_deref().and_then(Link::round_trip_bound_ms);
            let spectator = self.spectator.is_some();
            if turn == missing && (spectator || bound.is_none_or(|bound| now_ms < at + bound)) {
                return;
            }
        }
        self.gap_reported = Some((missing, now_ms));
        self.report_gap_now();
    }

    /// Acknowledges at once with the gap flag, naming the first missing turn. A report that
    /// the turn is overdue does not stand for the gap's: in an outage both are lost, and the
    /// gap's, as a later turn arrives, is the one that ends it.
    fn report_gap_now(&mut self) {
        self.gap_due = true;
        if let Some(link) = self.link.as_deref_mut() {
            link.ack_now();
        }
    }

    /// The host's notice of our commands it will never seal: each still in flight is
    /// forgotten and told to the game once (a repeat of the notice names none in flight).
    fn on_refused(&mut self, newest: CommandSeq, before: u64) {
        let Some(player) = self.player() else { return };
        for seq in refused_seqs(newest, before) {
            if self.in_flight.remove(&seq).is_some() {
                self.stats.commands_refused += 1;
                self.push_event(ClientEvent::CommandRefused { player, seq });
            }
        }
    }

    /// Buffers the bundles of a datagram from `first_turn` on; stale, future and duplicate
    /// ones are dropped and counted. The newest turn's first arrival feeds the playout schedule.
    fn store_bundles(&mut self, now_ms: u64, first_turn: Turn, bundles: Vec<Vec<Record>>) {
        let window = self.buffered.len();
        let reported = self.reported_missing();
        let Some(link) = self.link.as_deref_mut() else { return };
        let count = bundles.len();
        for (offset, records) in bundles.into_iter().enumerate() {
            let Some(turn) = first_turn.checked_add(offset as u32) else {
                break;
            };
            if turn < self.next_exec {
                link.drops_mut().stale += 1;
                continue;
            }
            let index = turn.since(self.next_exec) as usize;
            if index >= window {
                link.drops_mut().future += 1;
                continue;
            }
            if self.buffered[index].is_some() {
                link.drops_mut().duplicate += 1;
                continue;
            }
            // Its length is the pace in force when it executes (set then).
            self.buffered[index] = Some(TurnBundle { turn, records, length_ms: 0 });
            if self.playout.due_ms(turn).is_some_and(|due| due < now_ms) {
                self.stats.playout_late += 1;
            }
            if offset + 1 == count {
                // The datagram's own turn: the others it carries are copies, and a turn we
                // reported missing comes as a resend, or late (see playout).
                self.playout.on_arrival(turn, now_ms, reported.contains(&Some(turn)));
            } else {
                // Its own datagram did not bring it: it first came as a copy or a resend.
                self.playout.on_loss(turn);
            }
        }
        if let Some(missing) = self.gap() {
            // A later turn came first.
            self.playout.on_loss(missing);
        }
        let held = self.buffered.iter().filter(|slot| slot.is_some()).count();
        self.stats.bundles_buffered_high_water = self.stats.bundles_buffered_high_water.max(held);
    }

    /// Writes the next datagram for the host into `buf` (cleared first); `false` when nothing
    /// is due. After the last turn, one farewell datagram acknowledges it.
    pub fn poll_transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> bool {
        let turn_ack = self.turn_ack();
        let next_exec = self.next_exec;
        let has_new = self.unacked.back().is_some_and(|command| command.seq >= self.send_next);
        let outstanding = !self.unacked.is_empty();
        let pause_due = self.pause_request.is_some();
        let farewell = std::mem::take(&mut self.farewell);
        let link = if farewell { self.link.as_deref_mut() } else { self.live_link() };
        let Some(link) = link else { return false };
        if !(farewell || has_new || link.is_due(outstanding) || pause_due) {
            return false;
        }
        buf.clear();
        let (pn, ack) = link.next_packet(now_ms);
        let probe = link.is_probing(now_ms);
        let extras = self.take_extras(probe);
        let first_seq = self.unacked.front().map_or(self.next_seq, |command| command.seq);
        put_up_header(buf, pn, ack, turn_ack, next_exec, first_seq, &extras);
        let (count, redundant_bytes) = self.put_commands(buf);
        let sent = Sent {
            pn,
            len: buf.len(),
            carries_data: count > 0,
            redundant_bytes,
            repeat_after_ms: has_new.then(|| self.command_repeat_delay_ms()),
        };
        if let Some(link) = self.link.as_deref_mut() {
            link.on_sent(now_ms, sent);
        }
        true
    }

    /// How long after new commands go out a lossy link sends them again: a quarter turn, or a
    /// sixteenth under the quiet relay, whose playout buffer of a turn length leaves a command
    /// less slack before its stamped turn is sealed.
    fn command_repeat_delay_ms(&self) -> u64 {
        let delay = repeat_delay_ms(self.pace.turn_length_ms);
        if self.config.is_quiet() {
            (delay / 4).max(1)
        } else {
            delay
        }
    }

    /// What rides in the next datagram besides commands: the oldest unacknowledged state
    /// hash, a changed turn cost, playout buffer or pause request while it is repeated, and
    /// the probe flag.
    fn take_extras(&mut self, probe: bool) -> UpExtras {
        let buffer = self.playout.buffer_ms() as u32;
        self.playout_report.set(buffer.div_ceil(PLAYOUT_REPORT_STEP_MS) * PLAYOUT_REPORT_STEP_MS);
        let extras = UpExtras {
            hash_report: self.hash_reports.front().copied(),
            cost_ms: self.cost.take(),
            pause: self.pause_request.map(|(seq, kind, _)| (seq, kind)),
            playout_ms: self.playout_report.take(),
            probe,
            gap: std::mem::take(&mut self.gap_due),
        };
        if let Some((seq, kind, left)) = self.pause_request {
            self.pause_request = (left > 1).then_some((seq, kind, left - 1));
        }
        extras
    }

    /// Writes as many unacknowledged commands as fit the datagram, oldest first; returns how
    /// many, and the payload bytes of those sent before.
    fn put_commands(&mut self, buf: &mut Vec<u8>) -> (usize, u64) {
        let budget = usize::from(self.config.link.datagram_bytes_max);
        let mut used = UP_HEADER_BYTES_MAX;
        let mut count = 0;
        let mut redundant = 0u64;
        for command in &self.unacked {
            let len = up_command_len(UpCommand { turn: command.turn, payload: &command.payload });
            if used + len > budget {
                break;
            }
            used += len;
            count += 1;
            if command.seq < self.send_next {
                redundant += command.payload.len() as u64;
            }
        }
        put_varint(buf, count as u64);
        for command in self.unacked.iter().take(count) {
            put_up_command(buf, UpCommand { turn: command.turn, payload: &command.payload });
        }
        if let Some(last) = self.unacked.get(count.wrapping_sub(1)) {
            self.send_next = self.send_next.max(CommandSeq(last.seq.0.wrapping_add(1)));
        }
        (count, redundant)
    }
}

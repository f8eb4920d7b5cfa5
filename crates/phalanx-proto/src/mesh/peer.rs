//! The peer: its public face, its state, and the datagrams in and out.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::bundle::Record;
use crate::config::SessionConfig;
use crate::events::EventQueue;
use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Ticket, Turn};
use crate::window::SortedWindow;
use crate::wire::{decode_mesh, Entry, Limits};
use crate::SubmitError;

use super::pair::{Pair, Status};
use super::types::{PairStats, PeerConfig, PeerEnd, PeerError, PeerEvent, PeerStats};
use super::view::Views;

/// Where the peer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    /// We left at this turn; waiting for every peer to hold it.
    Leaving {
        turn: Turn,
        since_ms: u64,
    },
    /// Over; still answering (so the others get what they lack) until `linger_until_ms`.
    Ended {
        end: PeerEnd,
        linger_until_ms: u64,
    },
}

/// Latency samples kept for the percentiles.
const LATENCY_SAMPLES: usize = 1024;
/// How many datagrams to each peer carry a new state hash.
const HASH_SENDS: u32 = 3;

/// One peer of a peer-to-peer match. See the [module docs](super).
#[derive(Debug)]
pub struct Peer {
    pub(crate) config: SessionConfig,
    pub(crate) mesh: PeerConfig,
    pub(crate) limits: Limits,
    pub(crate) me: PlayerId,
    pub(crate) pairs: Vec<Pair>,
    pub(crate) state: State,
    pub(crate) start_ms: u64,
    // The schedule: turn `anchor_turn` is due at `anchor_ms`, then one every `length_ms`.
    pub(crate) anchor_turn: Turn,
    pub(crate) anchor_ms: u64,
    pub(crate) length_ms: u32,
    pub(crate) next_exec: Turn,
    /// Our first turn not final yet.
    pub(crate) unsealed: Turn,
    /// Our contribution to `unsealed`, so far.
    pub(crate) pending: Entry,
    pub(crate) pending_bytes: usize,
    /// Our non-empty final contributions some peer may still lack.
    pub(crate) own: BTreeMap<Turn, Entry>,
    pub(crate) next_seq: CommandSeq,
    pub(crate) in_flight: BTreeMap<CommandSeq, u64>,
    pub(crate) views: Views,
    /// Our state hashes for check turns, newest last.
    pub(crate) my_hashes: VecDeque<(Turn, u64)>,
    /// Every peer's state hashes for check turns not decided yet.
    pub(crate) hashes: BTreeMap<Turn, Vec<(PlayerId, u64)>>,
    /// Check turns below this are decided (by us, as master).
    pub(crate) hashes_decided_below: Turn,
    pub(crate) cost_ms: u32,
    pub(crate) master: PlayerId,
    pub(crate) waiting_since: Option<u64>,
    pub(crate) waiting_told: bool,
    pub(crate) last_exec_ms: Option<u64>,
    pub(crate) events: EventQueue<PeerEvent>,
    pub(crate) latencies: SortedWindow<u32>,
    pub(crate) stall_ms: u64,
    pub(crate) turns_executed: u64,
    /// Our schedule has followed a master's at least once (see `follow_master`).
    pub(crate) synced: bool,
    pub(crate) unknown_sender: u64,
    pub(crate) controls_refused: u64,
    pub(crate) cursor: usize,
    /// The master's speed control (only while we are the master).
    pub(crate) pace_control: Option<crate::pace::PaceControl>,
    /// Ended and done lingering: nothing more to do.
    pub(crate) closed: bool,
}

impl Peer {
    /// Peer `me` of a match among `roster` (every player, `me` included; ids below
    /// `turns.players_max`, at most 64 of them), whose turn 0 is due at `start_ms` on the
    /// caller's clock. Every peer must be given the same config and roster (a rendezvous
    /// hands them out) and should start at about the same moment.
    pub fn new(
        config: SessionConfig,
        mesh: PeerConfig,
        roster: &[PlayerId],
        me: PlayerId,
        start_ms: u64,
    ) -> Result<Peer, PeerError> {
        config.validate().map_err(PeerError::Config)?;
        let mut players = roster.to_vec();
        players.sort_unstable();
        players.dedup();
        if players.len() != roster.len() {
            return Err(PeerError::Roster("a player is listed twice"));
        }
        if !players.contains(&me) {
            return Err(PeerError::Roster("`me` is not in the roster"));
        }
        if players.iter().any(|p| p.0 >= config.turns.players_max.min(64)) {
            return Err(PeerError::Roster("a player id is not below turns.players_max"));
        }
        if mesh.lead_ms > config.turns.length_ms.saturating_mul(config.turns.window_turns / 2) {
            return Err(PeerError::Setting("lead_ms is more than half the window"));
        }
        if mesh.heartbeat_ms == 0 || mesh.heartbeat_ms >= config.link.idle_timeout_ms {
            return Err(PeerError::Setting("heartbeat_ms must be in 1..link.idle_timeout_ms"));
        }
        let pairs = players.iter().filter(|&&p| p != me).map(|&p| Pair::new(p)).collect();
        let length_ms = config.turns.length_ms;
        let mut peer = Peer {
            limits: Limits::new(&config),
            config,
            mesh,
            me,
            pairs,
            state: State::Running,
            start_ms,
            anchor_turn: Turn::ZERO,
            anchor_ms: start_ms,
            length_ms,
            next_exec: Turn::ZERO,
            unsealed: Turn::ZERO,
            pending: Vec::new(),
            pending_bytes: 0,
            own: BTreeMap::new(),
            next_seq: CommandSeq(0),
            in_flight: BTreeMap::new(),
            views: Views::default(),
            my_hashes: VecDeque::new(),
            hashes: BTreeMap::new(),
            hashes_decided_below: Turn::ZERO,
            cost_ms: 0,
            master: players[0],
            waiting_since: None,
            waiting_told: false,
            last_exec_ms: None,
            events: EventQueue::new(),
            latencies: SortedWindow::new(LATENCY_SAMPLES),
            stall_ms: 0,
            turns_executed: 0,
            synced: false,
            unknown_sender: 0,
            controls_refused: 0,
            cursor: 0,
            pace_control: None,
            closed: false,
        };
        peer.seal_due(start_ms, false);
        Ok(peer)
    }

    /// Our player, while the match is on (`None` once it ended).
    pub fn player(&self) -> Option<PlayerId> {
        match self.state {
            State::Ended { .. } => None,
            _ => Some(self.me),
        }
    }

    /// How the match ended for us, once it has.
    pub fn ended(&self) -> Option<PeerEnd> {
        match self.state {
            State::Ended { end, .. } => Some(end),
            _ => None,
        }
    }

    /// Whether the peer has nothing more to do: ended, and done answering the others. The
    /// driver may then drop it.
    pub fn is_closed(&self, now_ms: u64) -> bool {
        matches!(self.state, State::Ended { linger_until_ms, .. } if now_ms >= linger_until_ms)
    }

    /// The next turn to execute.
    pub fn next_exec(&self) -> Turn {
        self.next_exec
    }

    /// The master as this peer sees it: the lowest player still in the match.
    pub fn master(&self) -> PlayerId {
        self.master
    }

    /// The pace in force: the turn length, and the command delay a command given as a turn
    /// executes gets (in turns).
    pub fn pace(&self) -> Pace {
        self.pace_at(self.length_ms)
    }

    /// The pace with turns of `length_ms`: a command given as a turn executes waits our lead,
    /// rounded up to whole turns past the next.
    pub(crate) fn pace_at(&self, length_ms: u32) -> Pace {
        let delay = self.lead_ms() / length_ms.max(1) + 1;
        Pace { turn_length_ms: length_ms, command_delay_turns: delay }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<PeerEvent> {
        self.events.pop()
    }

    /// Submits a command for our player. It goes into our first turn not final yet (named by
    /// the ticket) and leaves with the next [`poll_transmit`](Self::poll_transmit): give a
    /// frame's commands, then transmit, and they share a turn. Refused, with nothing queued,
    /// when too large, over that turn's budget, or when we are not playing.
    pub fn submit(&mut self, now_ms: u64, payload: &[u8]) -> Result<Ticket, SubmitError> {
        if self.state != State::Running {
            return Err(SubmitError::NotRunning);
        }
        let max = usize::from(self.config.budget.command_bytes_max);
        if payload.len() > max {
            return Err(SubmitError::TooLarge { len: payload.len(), max });
        }
        self.seal_due(now_ms, false);
        let commands = self.pending.iter().filter(|r| matches!(r, Record::Command { .. })).count();
        if commands >= usize::from(self.config.budget.commands_per_turn_max)
            || self.pending_bytes + payload.len()
                > usize::from(self.config.budget.turn_bytes_per_player_max)
        {
            return Err(SubmitError::OverBudget { turn: self.unsealed });
        }
        let seq = self.next_seq;
        self.next_seq = CommandSeq(seq.0.wrapping_add(1));
        self.pending.push(Record::Command {
            player: self.me,
            seq,
            payload: Bytes::copy_from_slice(payload),
        });
        self.pending_bytes += payload.len();
        self.in_flight.insert(seq, now_ms);
        Ok(Ticket { seq, turn: self.unsealed })
    }

    /// Reports the game's state hash after executing check turn `turn` (a multiple of
    /// `sync.interval_turns`; other turns are ignored). It goes to every peer; the master
    /// compares them and puts a desync report in the match's turns when they differ.
    pub fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        if !crate::sync::is_check_turn(turn, self.config.sync.interval_turns)
            || self.my_hashes.iter().any(|(t, _)| *t == turn)
        {
            return;
        }
        if self.my_hashes.len() == crate::wire::HASHES_MAX {
            self.my_hashes.pop_front();
        }
        self.my_hashes.push_back((turn, hash));
        let me = self.me;
        self.note_hash(me, turn, hash);
        for pair in &mut self.pairs {
            pair.hash_sends = HASH_SENDS;
        }
    }

    /// Reports how long the game took to simulate its last turn (ms); the master reads it.
    pub fn report_turn_cost(&mut self, cost_ms: u32) {
        self.cost_ms = cost_ms;
    }

    /// The peer's counters.
    pub fn stats(&self) -> PeerStats {
        PeerStats {
            pairs: self
                .pairs
                .iter()
                .map(|pair| PairStats {
                    player: pair.player,
                    rtt_ms: pair.srtt_ms,
                    datagrams_sent: pair.datagrams_sent,
                    datagrams_received: pair.datagrams_received,
                    bytes_sent: pair.bytes_sent,
                    bytes_received: pair.bytes_received,
                    drops: pair.drops.clone(),
                    in_match: pair.is_in(),
                })
                .collect(),
            turns_executed: self.turns_executed,
            stall_ms: self.stall_ms,
            latency_ms_p50: self.latencies.percentile(50),
            latency_ms_p95: self.latencies.percentile(95),
            latency_ms_max: self.latencies.percentile(100),
            master: self.player().map(|_| self.master),
            lead_ms: self.lead_ms(),
            unknown_sender: self.unknown_sender,
            controls_refused: self.controls_refused,
            events_dropped: self.events.dropped(),
        }
    }

    /// The index of `player`'s pair.
    pub(crate) fn pair_index(&self, player: PlayerId) -> Option<usize> {
        self.pairs.binary_search_by_key(&player, |pair| pair.player).ok()
    }

    /// A datagram from `from` (the transport authenticated it). Malformed or impossible input
    /// is dropped and counted; past `link.misbehaviour_max` offences the peer is treated as
    /// gone.
    pub fn handle_datagram(&mut self, now_ms: u64, from: PlayerId, bytes: &[u8]) {
        let Some(index) = self.pair_index(from) else {
            self.unknown_sender += 1;
            return;
        };
        let entries_max = 2 * self.config.turns.window_turns as usize;
        let datagram = match decode_mesh(bytes, &self.limits, entries_max) {
            Ok(datagram) => datagram,
            Err(_) => {
                self.pairs[index].drops.malformed += 1;
                self.offence(index);
                return;
            }
        };
        let pair = &mut self.pairs[index];
        if matches!(pair.status, Status::Gone { .. }) || pair.offender {
            pair.drops.stale += 1;
            return;
        }
        pair.datagrams_received += 1;
        pair.bytes_received += bytes.len() as u64;
        pair.heard_ms = Some(now_ms);
        pair.suspected = false;
        // Only the newest echo and stamp count: a late duplicate or a replay carries old ones,
        // which would read as a huge round trip.
        if let Some((stamp, hold)) = datagram.echo {
            if pair.echoed.is_none_or(|last| newer(stamp, last)) {
                pair.echoed = Some(stamp);
                let sample = (now_ms as u32).wrapping_sub(stamp).wrapping_sub(hold);
                if sample < 60_000 {
                    pair.on_rtt(sample);
                }
            }
        }
        if let Some(stamp) = datagram.stamp {
            if pair.echo.is_none_or(|(last, _)| newer(stamp, last)) {
                pair.echo = Some((stamp, now_ms));
                pair.echo_owed = true;
            }
        }
        pair.next_exec = pair.next_exec.max(datagram.next_exec);
        let (srtt, next) = (pair.srtt_ms, datagram.next_exec);
        if let (true, Some(due_in)) = (self.pairs[index].player == self.master, datagram.due_in) {
            self.follow_master(now_ms, srtt, next, due_in);
        }
        if datagram.probe {
            self.answer_probe(now_ms, index);
        }
        let pair = &mut self.pairs[index];
        if let Some(report) = datagram.report {
            if report.suspects != pair.report.suspects {
                pair.report_since_ms = now_ms;
            }
            pair.report = report;
        }
        let sealed = self.sealed_through();
        if datagram.ack > sealed {
            self.pairs[index].drops.spoofed += 1;
            self.offence(index);
            return;
        }
        self.pairs[index].acked = self.pairs[index].acked.max(datagram.ack);
        let had = self.pairs[index].have;
        self.take_entries(index, datagram.through, &datagram.entries);
        if self.pairs[index].have > had {
            let first = had.map_or(Turn::ZERO, Turn::next);
            self.pairs[index].batch_at = Some((first, now_ms));
            self.pairs[index].probed = None;
        }
        for &(turn, hash) in &datagram.hashes {
            self.note_hash(from, turn, hash);
        }
        if let Some(view) = datagram.view {
            self.on_view(now_ms, index, view);
        }
    }

    /// `index`'s peer asked for an answer at once: it gets one, and with `ahead_ms` a second
    /// (see `repair_at`).
    fn answer_probe(&mut self, now_ms: u64, index: usize) {
        let repeat = (self.mesh.ahead_ms > 0).then(|| now_ms + u64::from(self.mesh.repeat_ms));
        let pair = &mut self.pairs[index];
        pair.send_due = true;
        if pair.repeat_at.is_none() && repeat.is_some() {
            pair.repeat_at = repeat;
            pair.repeats_left = 0;
        }
    }

    /// Takes `index`'s contributions through `through` from a datagram (or, with a view
    /// change, from a survivor). Entries that break the rules drop them all, counted.
    pub(crate) fn take_entries(
        &mut self,
        index: usize,
        through: Option<Turn>,
        entries: &[(Turn, Entry)],
    ) {
        let horizon = self.next_exec.saturating_add(2 * self.config.turns.window_turns);
        let pair = &self.pairs[index];
        if pair.status != Status::Live || through <= pair.have {
            if through < pair.have {
                self.pairs[index].drops.duplicate += 1;
            }
            return;
        }
        if through.is_some_and(|through| through >= horizon) {
            self.pairs[index].drops.future += 1;
            return;
        }
        if entries.iter().any(|(turn, entry)| Some(*turn) > through || !self.entry_ok(index, entry))
        {
            self.pairs[index].drops.spoofed += 1;
            self.offence(index);
            return;
        }
        let pair = &mut self.pairs[index];
        for (turn, entry) in entries {
            if Some(*turn) > pair.have && !entry.is_empty() {
                if entry.iter().any(|r| matches!(r, Record::Left(p) if *p == pair.player)) {
                    pair.leaves_after = Some(*turn);
                }
                pair.inbox.insert(*turn, entry.clone());
            }
        }
        pair.have = through;
    }

    /// Whether a contribution from `index` keeps the rules: its commands are its own and
    /// within the budget, and its controls are ones a peer may make.
    pub(crate) fn entry_ok(&self, index: usize, entry: &Entry) -> bool {
        let player = self.pairs[index].player;
        let mut commands = 0usize;
        let mut bytes = 0usize;
        for record in entry {
            match record {
                Record::Command { player: who, payload, .. } if *who == player => {
                    commands += 1;
                    bytes += payload.len();
                }
                Record::Left(who) if *who == player => {}
                Record::Pace(_) | Record::Desync(_) | Record::Ended(_) => {}
                _ => return false,
            }
        }
        commands <= usize::from(self.config.budget.commands_per_turn_max)
            && bytes <= usize::from(self.config.budget.turn_bytes_per_player_max)
    }

    /// One more offence by `index`'s peer; past the limit we stop listening to it (the master
    /// drops it as it drops a silent one).
    pub(crate) fn offence(&mut self, index: usize) {
        let pair = &mut self.pairs[index];
        pair.offences += 1;
        if pair.offences > self.config.link.misbehaviour_max {
            pair.offender = true;
        }
    }

    /// Our contributions are final through this turn.
    pub(crate) fn sealed_through(&self) -> Option<Turn> {
        self.unsealed.0.checked_sub(1).map(Turn)
    }

    /// Acts on the time: finalises our due turns, notices silent peers, runs departures and
    /// the master's duties.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.is_closed(now_ms) {
            self.closed = true;
            return;
        }
        self.seal_due(now_ms, false);
        let idle = u64::from(self.config.link.idle_timeout_ms);
        let start = self.start_ms;
        for pair in &mut self.pairs {
            let first = u64::from(self.mesh.first_contact_ms);
            if pair.is_in()
                && pair.leaves_after.is_none()
                && pair.silent(now_ms, idle, start, first)
            {
                pair.suspected = true;
            }
        }
        self.view_tick(now_ms);
        self.master_duties(now_ms);
        self.notice_wait(now_ms);
        self.finish_leaving(now_ms);
    }

    /// Leaves the match: our contribution to our first turn not final carries the leave and
    /// is our last; the others execute up to it and go on without us. Poll transmits until
    /// [`is_closed`](Self::is_closed).
    pub fn leave(&mut self, now_ms: u64) {
        if self.state != State::Running {
            return;
        }
        self.seal_due(now_ms, false);
        let me = self.me;
        self.pending.push(Record::Left(me));
        let turn = self.unsealed;
        self.seal_one();
        for pair in &mut self.pairs {
            pair.send_due = true;
        }
        self.state = State::Leaving { turn, since_ms: now_ms };
    }

    fn finish_leaving(&mut self, now_ms: u64) {
        let State::Leaving { turn, since_ms } = self.state else { return };
        let all_hold =
            self.pairs.iter().filter(|pair| pair.is_in()).all(|pair| pair.acked >= Some(turn));
        if all_hold || now_ms >= since_ms + u64::from(self.config.link.idle_timeout_ms) {
            self.end_with(PeerEnd::Left, now_ms);
        }
    }

    /// Ends the match for us, lingering a while to answer the others.
    pub(crate) fn end_with(&mut self, end: PeerEnd, now_ms: u64) {
        if matches!(self.state, State::Ended { .. }) {
            return;
        }
        let linger = match end {
            PeerEnd::Finished { .. } | PeerEnd::Desync => {
                u64::from(self.config.link.idle_timeout_ms).min(3_000)
            }
            _ => 0,
        };
        self.state = State::Ended { end, linger_until_ms: now_ms + linger };
        self.events.push(PeerEvent::Ended(end));
    }
}

/// Whether stamp `a` is later than `b` on the wrapping 32-bit millisecond clock.
fn newer(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < u32::MAX / 2
}

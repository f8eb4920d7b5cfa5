//! The turn pipeline of a peer: when our contributions become final, when a turn may execute,
//! what its bundle holds, and the master's duties (sync checks, the end).

use super::transmit::REPAIR_MARGIN_MS;
use crate::bundle::{fnv1a, DesyncReport, EndCause, Record, TurnBundle, FNV_OFFSET};
use crate::config::{CommandOrder, DesyncPolicy};
use crate::types::{PlayerId, Turn};

use super::peer::{Peer, State};
use super::types::{PeerEnd, PeerEvent};

/// A schedule within this many ms of the master's is left alone (the jitter's share).
const FOLLOW_TOLERANCE_MS: i64 = 10;

/// Why [`Peer::end`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndError {
    /// Only the master ends a match; this player is the master now.
    NotMaster {
        /// The master.
        master: crate::PlayerId,
    },
    /// The match is not running for us.
    NotRunning,
}

impl std::fmt::Display for EndError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndError::NotMaster { master } => {
                write!(f, "only the master ({master:?}) ends the match")
            }
            EndError::NotRunning => write!(f, "the match is not running"),
        }
    }
}

impl std::error::Error for EndError {}

impl Peer {
    /// When `turn` is due on our clock (a turn already executed: its anchor).
    pub(crate) fn due_ms(&self, turn: Turn) -> u64 {
        let turns = u64::from(turn.0.saturating_sub(self.anchor_turn.0));
        self.anchor_ms + turns * u64::from(self.length_ms)
    }

    /// When our contribution to `turn` becomes final.
    pub(crate) fn seal_ms(&self, turn: Turn) -> u64 {
        self.due_ms(turn).saturating_sub(u64::from(self.lead_ms()))
    }

    /// How long before its turn our contribution becomes final: `lead_ms`, or more when our
    /// worst peer needs it (`Pair::trip_ms`; with `ahead_ms`, `Pair::repair_ms` more and the
    /// margin `repair_at` allows past the trip's own 10 ms, so that a lost batch can be asked
    /// for again in time), at most half the window. Each peer picks its own; nothing needs
    /// agreeing.
    pub(crate) fn lead_ms(&self) -> u32 {
        let repair = self.mesh.ahead_ms > 0;
        let need = self
            .pairs
            .iter()
            .filter(|pair| pair.is_in())
            .filter_map(|pair| {
                let trip = pair.trip_ms()?;
                let repair_ms = pair.repair_ms(self.mesh.repeat_ms)? + REPAIR_MARGIN_MS - 10;
                Some(if repair { trip + repair_ms } else { trip })
            })
            .max()
            .unwrap_or(0);
        let cap = self.length_ms.saturating_mul(self.config.turns.window_turns / 2);
        self.mesh.lead_ms.max(need).min(cap)
    }

    /// The master's speed control, once a turn: the turn lengthens when a peer's machine
    /// needs it (its reported turn cost) or when the leads would need more than
    /// `turns.command_delay_turns_max` turns, and shortens slowly (see `PaceControl`).
    fn steer_pace(&mut self) {
        if self.master != self.me || self.state != State::Running {
            self.pace_control = None;
            return;
        }
        let current = self.pace();
        let live = self.pairs.iter().filter(|pair| pair.is_in() && !pair.doubted());
        let (need, cost) = live.fold((self.lead_ms(), self.cost_ms), |(need, cost), pair| {
            (need.max(pair.report.lead_ms), cost.max(pair.report.cost_ms))
        });
        let config = &self.config;
        let control = self.pace_control.get_or_insert_with(|| {
            let mut control = crate::pace::PaceControl::new(config);
            control.current = current;
            control
        });
        // Only the turn length needs agreeing: each peer's lead is its own business.
        if let Some(pace) = control.on_turn(need.into(), cost) {
            if pace.turn_length_ms != current.turn_length_ms {
                let pace = self.pace_at(pace.turn_length_ms);
                self.pending.push(Record::Pace(pace));
            }
        }
    }

    /// The first turn we may not finalise yet: a turn further ahead of the next one we
    /// execute than the lead (and `ahead_ms`) reaches, plus one turn of slack. In step, that
    /// never holds a turn back; a peer that waits (on a late contribution, a link) stops
    /// finalising, so it cannot pile up final turns ahead that every later command would have
    /// to queue behind, and the others wait for it rather than run away.
    pub(crate) fn seal_limit(&self) -> Turn {
        let reach = u64::from(self.lead_ms()) + u64::from(self.mesh.ahead_ms);
        let turns = reach.div_ceil(u64::from(self.length_ms.max(1))) as u32 + 1;
        self.next_exec.saturating_add(turns.min(self.config.turns.window_turns))
    }

    /// Finalises the turns whose time came (and, with `commands`, the turn holding commands
    /// given since the last call), and marks every pair for a datagram if anything changed.
    /// With `ahead_ms`, turns are finalised in batches: when the first turn not final comes
    /// due, every turn due within `ahead_ms` after it, and commands wait for the next batch
    /// (they would go into its first turn anyway).
    pub(crate) fn seal_due(&mut self, now_ms: u64, commands: bool) {
        if self.state != State::Running {
            return;
        }
        let limit = self.seal_limit();
        let ahead = u64::from(self.mesh.ahead_ms);
        let with_commands =
            commands && ahead == 0 && !self.pending.is_empty() && self.unsealed < limit;
        let mut sealed = false;
        if with_commands {
            self.seal_one();
            sealed = true;
        }
        if self.unsealed < limit && self.seal_ms(self.unsealed) <= now_ms {
            while self.unsealed < limit && self.seal_ms(self.unsealed) < now_ms + ahead.max(1) {
                self.seal_one();
            }
            sealed = true;
        }
        if !sealed {
            return;
        }
        let repeats = self.mesh.copies.saturating_sub(1);
        let repeat = (self.mesh.repeat_ms > 0 && repeats > 0 && ahead == 0)
            .then(|| now_ms + self.repeat_gap_ms());
        for pair in &mut self.pairs {
            pair.send_due = true;
            if repeat.is_some() {
                pair.repeat_at = repeat;
                pair.repeats_left = repeats - 1;
            }
        }
    }

    /// The time between copies of a datagram that makes turns final.
    pub(crate) fn repeat_gap_ms(&self) -> u64 {
        u64::from(self.mesh.repeat_ms)
    }

    /// When the next batch of our turns becomes final.
    pub(crate) fn next_seal_ms(&self) -> u64 {
        self.seal_ms(self.unsealed)
    }

    /// How long a pair waits for an acknowledgement before we send again what it lacks: a
    /// backstop, as every batch of final turns carries everything unacknowledged anyway.
    pub(crate) fn resend_ms(&self, index: usize) -> u64 {
        let rto = self.pairs[index].rto_ms(20);
        if self.view_pending(index) {
            // A departure waits on it: every round trip counts.
            return rto;
        }
        let batch = 2 * u64::from(self.length_ms) + u64::from(self.mesh.ahead_ms);
        rto.max(batch)
    }

    /// Makes our contribution to `unsealed` final.
    pub(crate) fn seal_one(&mut self) {
        let entry = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        if !entry.is_empty() {
            self.own.insert(self.unsealed, entry);
        }
        self.unsealed = self.unsealed.next();
    }

    /// Moves our schedule onto the master's, as its datagram gives it: its `next` turn is
    /// due `due_in` ms after it sent (half a round trip ago). Peers start, and their clocks
    /// run, a little apart; a peer whose schedule ran ahead of the others' would wait on them
    /// every turn, and every command it gives would wait that much longer. Before our first
    /// turn the whole gap is closed at once (nothing has run yet, so nothing stutters); then
    /// half the gap per datagram, and gaps within the jitter are left alone.
    pub(crate) fn follow_master(
        &mut self,
        now_ms: u64,
        srtt: Option<u32>,
        next: Turn,
        due_in: i32,
    ) {
        let Some(srtt) = srtt else { return };
        if self.state != State::Running || self.master == self.me {
            return;
        }
        let length = i64::from(self.length_ms);
        let turns = i64::from(self.next_exec.0) - i64::from(next.0);
        let theirs = now_ms as i64 - i64::from(srtt / 2) + i64::from(due_in) + turns * length;
        let ours = self.due_ms(self.next_exec) as i64;
        self.synced = true;
        if (theirs - ours).abs() <= FOLLOW_TOLERANCE_MS {
            return;
        }
        let step = if self.turns_executed == 0 { theirs - ours } else { (theirs - ours) / 2 };
        self.anchor_turn = self.next_exec;
        self.anchor_ms = (ours + step).max(0) as u64;
    }

    /// Whether every contribution to the next turn is here (ours is final).
    pub(crate) fn ready(&self) -> bool {
        let turn = self.next_exec;
        self.unsealed > turn
            && self.pairs.iter().all(|pair| !pair.needed_at(turn) || pair.holds(turn))
    }

    /// The next turn to execute, in order, each exactly once: `None` until it is due on our
    /// clock and every contribution to it is here. `now_ms` also measures latency and stalls.
    pub fn next_turn(&mut self, now_ms: u64) -> Option<crate::TurnBundle> {
        if self.state != State::Running {
            return None;
        }
        let turn = self.next_exec;
        // Our own schedule until the master's is known: a first turn run on it would make
        // every peer that started early wait out the gap on its second.
        let unsynced = !self.synced && self.master != self.me;
        if self.due_ms(turn) > now_ms || unsynced {
            return None;
        }
        self.seal_due(now_ms, false);
        if !self.ready() {
            return None;
        }
        let bundle = self.bundle(turn);
        self.next_exec = turn.next();
        self.turns_executed += 1;
        if let Some(last) = self.last_exec_ms {
            let gap = now_ms.saturating_sub(last);
            let length = u64::from(self.length_ms);
            if gap > length * 3 / 2 {
                self.stall_ms += gap - length;
            }
        }
        self.last_exec_ms = Some(now_ms);
        if self.waiting_since.take().is_some() && self.waiting_told {
            self.events.push(PeerEvent::StallEnded);
        }
        self.waiting_told = false;
        self.on_executed(&bundle, now_ms);
        self.forget_before(turn);
        self.steer_pace();
        Some(bundle)
    }

    /// The players in the match at `turn`, ascending: us and every peer whose contribution
    /// it needs.
    pub(crate) fn players_at(&self, turn: Turn) -> Vec<PlayerId> {
        let mut players: Vec<PlayerId> =
            self.pairs.iter().filter(|pair| pair.needed_at(turn)).map(|pair| pair.player).collect();
        let at = players.partition_point(|&p| p < self.me);
        players.insert(at, self.me);
        players
    }

    /// The bundle of `turn`: each departure, the master's controls, then every command in
    /// player order. Identical on every peer, as every input is.
    fn bundle(&mut self, turn: Turn) -> TurnBundle {
        let players = self.players_at(turn);
        let master = players[0];
        let mut records = Vec::new();
        for pair in &self.pairs {
            let last = match pair.status {
                super::pair::Status::Gone { last } => last,
                _ => pair.leaves_after,
            };
            let gone_now = match last {
                Some(last) => last.next() == turn,
                None => !pair.is_in() && turn == Turn::ZERO,
            };
            if gone_now {
                records.push(Record::Left(pair.player));
            }
        }
        for pair in &mut self.pairs {
            if pair.leaves_after.is_some_and(|last| last < turn) && pair.is_in() {
                pair.status = super::pair::Status::Gone { last: pair.leaves_after };
            }
        }
        let mut commands = Vec::new();
        for &player in &players {
            let entry = if player == self.me {
                self.own.get(&turn)
            } else {
                self.pair_index(player).and_then(|index| self.pairs[index].inbox.get(&turn))
            };
            for record in entry.into_iter().flatten() {
                match record {
                    Record::Command { .. } => commands.push(record.clone()),
                    Record::Left(_) => {}
                    _ if player == master => records.push(record.clone()),
                    _ => self.controls_refused += 1,
                }
            }
        }
        self.order_commands(turn, &mut commands);
        records.extend(commands);
        TurnBundle { turn, records, length_ms: self.length_ms }
    }

    /// Puts a turn's commands (in player order, each player's in its order) in the order
    /// `turns.order` gives the seats. Shuffled, the key is the salt mixed with a digest of
    /// every command of the turn: the peers share the salt, so without the digest each could
    /// tell in advance the turns in which it comes first; with it, nobody knows the order
    /// before every contribution to the turn is final.
    fn order_commands(&self, turn: Turn, commands: &mut [Record]) {
        let CommandOrder::Shuffled { salt } = self.config.turns.order else { return };
        let mut digest = FNV_OFFSET;
        for record in commands.iter() {
            if let Record::Command { player, seq, payload } = record {
                for word in [u64::from(player.0), u64::from(seq.0), payload.len() as u64] {
                    digest = fnv1a(digest, &word.to_le_bytes());
                }
                digest = fnv1a(digest, payload);
            }
        }
        let ranks = CommandOrder::Shuffled { salt: salt ^ digest }
            .ranks(turn, self.config.turns.players_max);
        // Stable: each player's commands keep their order.
        commands.sort_by_key(|record| match record {
            Record::Command { player, .. } => ranks.get(usize::from(player.0)).copied(),
            _ => None,
        });
    }

    /// What executing `bundle` means for us: our commands' latency, the pace, desyncs, the end.
    fn on_executed(&mut self, bundle: &TurnBundle, now_ms: u64) {
        for record in &bundle.records {
            match record {
                Record::Command { player, seq, .. } if *player == self.me => {
                    if let Some(submitted) = self.in_flight.remove(seq) {
                        let latency = now_ms.saturating_sub(submitted).min(u64::from(u32::MAX));
                        self.latencies.push(latency as u32);
                    }
                }
                Record::Pace(pace) => {
                    // This turn lasts the old length; the next ones the new.
                    self.anchor_ms = self.due_ms(bundle.turn) + u64::from(self.length_ms);
                    self.anchor_turn = bundle.turn.next();
                    self.length_ms = pace.turn_length_ms.max(1);
                    self.events.push(PeerEvent::PaceChanged(*pace));
                }
                Record::Desync(report) => self.events.push(PeerEvent::Desync(report.clone())),
                Record::Ended(EndCause::Desync) => self.end_with(PeerEnd::Desync, now_ms),
                Record::Ended(EndCause::Finished { code }) => {
                    self.end_with(PeerEnd::Finished { code: *code }, now_ms);
                }
                _ => {}
            }
        }
        let master = self.players_at(bundle.turn.next())[0];
        if master != self.master {
            self.master = master;
            self.events.push(PeerEvent::MasterChanged(master));
        }
    }

    /// Forgets what no peer can need any more after executing `turn`: our contributions every
    /// peer holds, the others' a window back, decided hashes.
    fn forget_before(&mut self, turn: Turn) {
        let acked = self
            .pairs
            .iter()
            .filter(|pair| pair.is_in())
            .map(|pair| pair.acked)
            .min()
            .unwrap_or(self.sealed_through());
        while let Some(entry) = self.own.first_entry() {
            if Some(*entry.key()) > acked || *entry.key() > turn {
                break;
            }
            entry.remove();
        }
        let keep_from = Turn(turn.0.saturating_sub(self.config.turns.window_turns));
        for pair in &mut self.pairs {
            pair.prune(keep_from);
        }
    }

    /// Ends the match for everyone with the game's `code`: the master's next final turn
    /// carries the end, and every peer stops after executing it.
    pub fn end(&mut self, code: u32) -> Result<Turn, EndError> {
        if self.state != State::Running {
            return Err(EndError::NotRunning);
        }
        if self.master != self.me {
            return Err(EndError::NotMaster { master: self.master });
        }
        self.pending.push(Record::Ended(EndCause::Finished { code }));
        Ok(self.unsealed)
    }

    /// Keeps `player`'s state hash for check turn `turn`, for the master to compare.
    pub(crate) fn note_hash(&mut self, player: PlayerId, turn: Turn, hash: u64) {
        let window = self.config.turns.window_turns;
        if turn < self.hashes_decided_below
            || turn > self.next_exec.saturating_add(window)
            || !crate::sync::is_check_turn(turn, self.config.sync.interval_turns)
        {
            return;
        }
        let reports = self.hashes.entry(turn).or_default();
        if !reports.iter().any(|(who, _)| *who == player) && reports.len() < 64 {
            reports.push((player, hash));
        }
    }

    /// The master compares the state hashes of each check turn once every player's is in (or
    /// a window later), and puts a report in its next final turn when they differ.
    pub(crate) fn master_duties(&mut self, _now_ms: u64) {
        if self.state != State::Running || self.master != self.me {
            return;
        }
        let window = self.config.turns.window_turns;
        while let Some((&turn, reports)) = self.hashes.first_key_value() {
            let players = self.players_at(turn);
            let complete = players.iter().all(|p| reports.iter().any(|(who, _)| who == p));
            if !complete && self.next_exec <= turn.saturating_add(window) {
                break;
            }
            let mut reports = self.hashes.pop_first().map(|(_, r)| r).unwrap_or_default();
            self.hashes_decided_below = turn.next();
            reports.retain(|(who, _)| players.contains(who));
            reports.sort_unstable();
            if let Some(report) = desync_report(turn, reports) {
                self.pending.push(Record::Desync(report));
                if self.config.sync.policy == DesyncPolicy::End {
                    self.pending.push(Record::Ended(EndCause::Desync));
                }
            }
        }
    }

    /// Tells the game once when the next turn waited `turns.stall_notice_ms` past its time.
    pub(crate) fn notice_wait(&mut self, now_ms: u64) {
        if self.state != State::Running || self.ready() {
            return;
        }
        let due = self.due_ms(self.next_exec);
        if now_ms < due {
            return;
        }
        self.waiting_since.get_or_insert(due);
        if !self.waiting_told && now_ms >= due + u64::from(self.config.turns.stall_notice_ms) {
            self.waiting_told = true;
            let turn = self.next_exec;
            let missing = self
                .pairs
                .iter()
                .filter(|pair| pair.needed_at(turn) && !pair.holds(turn))
                .map(|pair| pair.player)
                .collect();
            self.events.push(PeerEvent::Waiting(missing));
        }
    }
}

/// The report for a check turn whose hashes differ (`None` when they agree). The reference
/// is the hash most players reported; a tie goes to the lowest player's.
fn desync_report(turn: Turn, hashes: Vec<(PlayerId, u64)>) -> Option<DesyncReport> {
    let first = hashes.first()?.1;
    if hashes.iter().all(|(_, hash)| *hash == first) {
        return None;
    }
    let count = |hash: u64| hashes.iter().filter(|(_, h)| *h == hash).count();
    let reference = hashes
        .iter()
        .map(|(_, hash)| *hash)
        .max_by(|a, b| count(*a).cmp(&count(*b)).then(std::cmp::Ordering::Greater))
        .unwrap_or(first);
    let diverged = hashes.iter().filter(|(_, h)| *h != reference).map(|(p, _)| *p).collect();
    Some(DesyncReport { turn, hashes, diverged })
}

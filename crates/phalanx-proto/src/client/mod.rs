//! The client: submits its player's commands and executes the host's sealed turns in order.
//!
//! # Call order (driver loop)
//!
//! 1. [`Client::new`] gives the join request bytes: send them on the reliable stream; hand
//!    the reply to [`Client::handle_join_reply`].
//! 2. [`Client::handle_datagram`] for each datagram from the host.
//! 3. [`Client::handle_timeout`] when [`Client::poll_timeout`] says (early calls are no-ops).
//! 4. Drain [`Client::poll_transmit`] and [`Client::poll_event`].
//! 5. The game calls [`Client::submit`] for its player's commands and executes
//!    [`Client::next_turn`] bundles, in order, each exactly once.
//!
//! This file holds the session state, joining and the game's side (submit, next turn,
//! reports); `link.rs` holds the network side (datagrams in and out, timers).

mod forensics;
mod join;
mod link;
mod outcome;
mod playout;

pub use outcome::{ClientEvent, ClientJoinError, EndReason};

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::budget::Usage;
use crate::bundle::{EndCause, Record, TurnBundle};
use crate::config::{ConfigError, SessionConfig, TURN_COST_MAX_MS};
use crate::events::EventQueue;
use crate::link::Link;
use crate::pace::Pace;
use crate::stats::ClientStats;
use crate::types::{stamp, CommandSeq, PlayerId, SpectatorId, Ticket, Turn};

/// Our commands not yet seen in a bundle that a client keeps (for latency and late notices):
/// far more than the window holds (`budget.commands_per_turn_max` × `turns.window_turns`).
const IN_FLIGHT_MAX: usize = 4_096;
use crate::window::SortedWindow;
use playout::Playout;

use crate::snapshot::Snapshot;
use crate::wire::{JoinRequest, Limits, PauseKind};
use crate::SubmitError;

#[derive(Debug)]
struct Unacked {
    seq: CommandSeq,
    turn: Turn,
    payload: Bytes,
}

#[derive(Debug)]
enum State {
    Joining,
    Running(PlayerId),
    Ended(EndReason),
}

/// The client side of a lockstep session. Sans-IO: see the module docs for the call order.
#[derive(Debug)]
pub struct Client {
    config: SessionConfig,
    limits: Limits,
    state: State,
    /// The connection to the host, from the join reply on (kept after the end for its stats).
    link: Option<Box<Link>>,
    /// The next turn the game executes.
    next_exec: Turn,
    /// `buffered[i]` is turn `next_exec + i`, if received. At most `turns.window_turns`.
    buffered: VecDeque<Option<TurnBundle>>,
    next_seq: CommandSeq,
    /// Submitted commands the host has not acknowledged, oldest first.
    unacked: VecDeque<Unacked>,
    /// The first unacknowledged sequence never sent yet.
    send_next: CommandSeq,
    /// Commands not yet seen in a bundle: seq → (stamped turn, submit time).
    in_flight: BTreeMap<CommandSeq, (Turn, u64)>,
    /// Our budget use per stamped turn.
    usage: BTreeMap<Turn, Usage>,
    events: EventQueue<ClientEvent>,
    stats: ClientStats,
    /// The pace in force (from the join reply, then from `Pace` records).
    pace: Pace,
    /// State hashes reported by the game, oldest first, until the host acknowledges them.
    hash_reports: VecDeque<(Turn, u64)>,
    /// The game's turn cost: the latest value, and the last one sent.
    cost: Report,
    /// The latest pause or resume request: (sequence, kind, datagrams left to repeat it in).
    pause_request: Option<(u8, PauseKind, u8)>,
    pause_seq: u8,
    /// Players the host says it is waiting for.
    waiting: u64,
    /// Submit → execute latencies of our commands, the most recent `LATENCY_SAMPLES` (kept
    /// sorted, so reading percentiles every frame is cheap).
    latencies_ms: SortedWindow<u32>,
    last_exec_ms: Option<u64>,
    /// After a rejoin: the turns before live play, for the game to replay first (bounded by
    /// `catch_up.rejoin_log_bytes_max` through the join reply's size).
    catch_up: VecDeque<TurnBundle>,
    /// When each turn executes: a steady schedule behind a jitter buffer.
    playout: Playout,
    /// The playout buffer as reported to the host (rounded up to `PLAYOUT_REPORT_STEP_MS`).
    playout_report: Report,
    /// The session ended with the last turn: one more datagram acknowledges it.
    farewell: bool,
    /// The quiet relay: the missing turn last reported as a gap and when, and whether the
    /// next datagram carries the gap flag.
    gap_reported: Option<(Turn, u64)>,
    gap_due: bool,
    /// The quiet relay: the missing turn last reported as overdue (see `Client::overdue`).
    overdue_reported: Option<Turn>,
    /// After a rejoin through a snapshot: the state the game restores before the turns after
    /// it ([`take_restore`](Self::take_restore)).
    restore: Option<Snapshot>,
    /// The host asks our game for a snapshot of its state after this turn.
    snapshot_wanted: Option<Turn>,
    /// Uploads for the driver to send, each on a reliable stream of its own: a snapshot, the
    /// turn hashes a desync asks for. At most two.
    uploads: VecDeque<Vec<u8>>,
    /// The game's state hash after each of the latest turns (every turn it reports), for a
    /// desync's forensics: `sync.interval_turns + 2 × turns.window_turns` of them at most.
    turn_hashes: VecDeque<(Turn, u64)>,
    /// Joined as a spectator: this slot, and no player.
    spectator: Option<SpectatorId>,
    /// The game's recent states, for a desync's forensics.
    kept: forensics::Kept,
}

/// A value the client reports to the host in its datagrams' extras (turn cost, playout
/// buffer): each change rides the next `REPORT_REPEATS` datagrams, so one lost datagram does
/// not lose it.
#[derive(Debug, Default)]
struct Report {
    value: Option<u32>,
    repeats_left: u8,
}

/// Datagrams a changed report rides in.
const REPORT_REPEATS: u8 = 4;

impl Report {
    fn set(&mut self, value: u32) {
        if self.value != Some(value) {
            self.value = Some(value);
            self.repeats_left = REPORT_REPEATS;
        }
    }

    /// The value for the next datagram, while it is being repeated.
    fn take(&mut self) -> Option<u32> {
        let value = self.value.filter(|_| self.repeats_left > 0);
        self.repeats_left = self.repeats_left.saturating_sub(1);
        value
    }
}

/// Latency samples kept for the percentiles in [`ClientStats`].
const LATENCY_SAMPLES: usize = 1024;
/// Times a pause or resume request is repeated in consecutive datagrams.
const PAUSE_REPEATS: u8 = 8;
/// The playout buffer is reported to the host in steps of this many ms.
const PLAYOUT_REPORT_STEP_MS: u32 = 10;

impl Client {
    /// A client that will join with `token`, and the join request to send on the reliable
    /// stream. `config` supplies the local settings (timers, datagram size, versions); the
    /// turn pipeline settings come from the host's reply.
    pub fn new(config: SessionConfig, token: u64) -> Result<(Client, Vec<u8>), ConfigError> {
        config.validate()?;
        let request = JoinRequest {
            protocol_version: config.protocol_version,
            game_data_hash: config.game_data_hash,
            token,
            heartbeat_ms: config.link.heartbeat_ms,
        }
        .encode();
        let playout = Playout::configured(&config.playout, config.turns.length_ms);
        let client = Client {
            limits: Limits::new(&config),
            config,
            state: State::Joining,
            link: None,
            next_exec: Turn::ZERO,
            buffered: VecDeque::new(),
            next_seq: CommandSeq(0),
            unacked: VecDeque::new(),
            send_next: CommandSeq(0),
            in_flight: BTreeMap::new(),
            usage: BTreeMap::new(),
            events: EventQueue::new(),
            stats: ClientStats::default(),
            pace: Pace { turn_length_ms: 0, command_delay_turns: 0 },
            hash_reports: VecDeque::new(),
            cost: Report::default(),
            pause_request: None,
            pause_seq: 0,
            waiting: 0,
            latencies_ms: SortedWindow::new(LATENCY_SAMPLES),
            last_exec_ms: None,
            catch_up: VecDeque::new(),
            playout,
            playout_report: Report::default(),
            farewell: false,
            gap_reported: None,
            gap_due: false,
            overdue_reported: None,
            restore: None,
            snapshot_wanted: None,
            uploads: VecDeque::new(),
            turn_hashes: VecDeque::new(),
            spectator: None,
            kept: forensics::Kept::default(),
        };
        Ok((client, request))
    }

    /// The session config in force (the host's pipeline settings once joined).
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Our player, once joined (`None` for a spectator).
    pub fn player(&self) -> Option<PlayerId> {
        match self.state {
            State::Running(player) if self.spectator.is_none() => Some(player),
            _ => None,
        }
    }

    /// Our spectator slot, when we joined as a spectator.
    pub fn spectator(&self) -> Option<SpectatorId> {
        self.spectator
    }

    /// How the session ended, if it has.
    pub fn ended(&self) -> Option<EndReason> {
        match self.state {
            State::Ended(reason) => Some(reason),
            _ => None,
        }
    }

    /// The next turn the game will execute.
    pub fn next_exec(&self) -> Turn {
        self.catch_up.front().map_or(self.next_exec, |bundle| bundle.turn)
    }

    fn push_event(&mut self, event: ClientEvent) {
        self.events.push(event);
    }

    fn end(&mut self, reason: EndReason) {
        if !matches!(self.state, State::Ended(_)) {
            self.state = State::Ended(reason);
            self.push_event(ClientEvent::Ended(reason));
            // The game ran its last turn: acknowledge it once more, so the host need not wait
            // for a timeout to know we hold it.
            self.farewell = matches!(reason, EndReason::Finished { .. } | EndReason::Desync);
        }
    }

    /// The driver saw the host close the connection on purpose (a shutdown): the session ends
    /// at once with [`EndReason::HostClosed`] instead of waiting out the idle timeout — unless
    /// we already hold every turn up to the game's last one (a host that ended the game and
    /// shut down once every player had it): then those turns still play out on their
    /// schedule, and the session ends as the last one says.
    pub fn on_host_closed(&mut self) {
        if !self.holds_the_end() {
            self.end(EndReason::HostClosed);
        }
    }

    /// Whether every turn from the next one to execute up to one that ends the game is held.
    fn holds_the_end(&self) -> bool {
        self.buffered.iter().map_while(Option::as_ref).any(TurnBundle::is_last)
    }

    /// The driver saw the host close the connection because it removed us: the session ends
    /// at once with [`EndReason::Removed`] (the `Left` record can no longer reach us).
    pub fn on_removed(&mut self) {
        self.end(EndReason::Removed);
    }

    /// We leave: the session ends at once with [`EndReason::Left`]. The driver then closes the
    /// connection, which tells the host (phalanx's QUIC host removes the player at its next
    /// sealed turn; a sans-IO host calls [`Host::remove`](crate::Host::remove)).
    pub fn leave(&mut self) {
        self.end(EndReason::Left);
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop()
    }

    /// Submits a command for our player. It is stamped for the turn after the one the game is
    /// executing plus the command delay (counted from the playout schedule's turn when the
    /// game is behind it); the returned ticket names it. Refused, with nothing
    /// queued, when too large, over the stamped turn's budget, or when not running.
    pub fn submit(&mut self, now_ms: u64, payload: &[u8]) -> Result<Ticket, SubmitError> {
        if !matches!(self.state, State::Running(_)) {
            return Err(SubmitError::NotRunning);
        }
        if self.spectator.is_some() {
            return Err(SubmitError::NoPlayer);
        }
        let max = usize::from(self.config.budget.command_bytes_max);
        if payload.len() > max {
            return Err(SubmitError::TooLarge { len: payload.len(), max });
        }
        let stamped = stamp(self.stamp_from(now_ms), self.pace.command_delay_turns);
        // The stamped turn, or with `budget.overflow_turns_max` the first later one with room.
        let turn = (0..=self.config.budget.overflow_turns_max)
            .filter_map(|later| stamped.checked_add(later))
            .find(|turn| {
                self.usage.get(turn).is_none_or(|usage| usage.admits(&self.config, payload.len()))
            })
            .ok_or(SubmitError::OverBudget { turn: stamped })?;
        self.usage.entry(turn).or_default().add(payload.len());
        let seq = self.next_seq;
        self.next_seq = CommandSeq(seq.0.wrapping_add(1));
        self.unacked.push_back(Unacked { seq, turn, payload: Bytes::copy_from_slice(payload) });
        self.in_flight.insert(seq, (turn, now_ms));
        // A command the host dropped (over its budget there, or refused by the game's rule)
        // never executes: forget the oldest rather than grow.
        if self.in_flight.len() > IN_FLIGHT_MAX {
            self.in_flight.pop_first();
        }
        self.stats.commands_unacked = self.unacked.len();
        self.stats.commands_unacked_high_water =
            self.stats.commands_unacked_high_water.max(self.unacked.len());
        Ok(Ticket { seq, turn })
    }

    /// The turn a command submitted now counts its delay from: the next to execute, or,
    /// when the game is behind its playout schedule (catching up after an outage, or stalled
    /// on a late turn), the next on the schedule — the turns between may be sealed already,
    /// and a command stamped for one would miss it. Never past the turn after the newest one
    /// held: in a pause the schedule runs on while the host seals nothing.
    fn stamp_from(&self, now_ms: u64) -> Turn {
        let held = self.buffered.iter().rposition(Option::is_some).map_or(0, |last| last + 1);
        let newest = self.next_exec.saturating_add(held as u32);
        self.playout
            .turn_after(now_ms)
            .map_or(self.next_exec, |turn| turn.clamp(self.next_exec, newest))
    }

    /// When the next turn is due on the playout schedule, in the caller's clock (`None`
    /// before the first turn arrived, or with the buffer off): a renderer's time to the next
    /// turn. It may have arrived already, or not yet (then it is late).
    pub fn next_turn_due_ms(&self) -> Option<u64> {
        if !matches!(self.state, State::Running(_)) {
            return None;
        }
        self.playout.due_ms(self.next_exec)
    }

    /// Whether a rejoin's catch-up is still going on: a snapshot to restore
    /// ([`take_restore`](Self::take_restore)), or past turns still being handed out by
    /// [`next_turn`](Self::next_turn).
    pub fn is_catching_up(&self) -> bool {
        self.restore.is_some() || !self.catch_up.is_empty()
    }

    /// The next sealed turn to execute, in order, each exactly once; `None` until it has
    /// arrived and its time on the playout schedule has come ([`poll_timeout`](Self::poll_timeout)
    /// includes that time; see `SessionConfig::playout.buffer_ms_max`). `now_ms` also measures command
    /// latency and stalls.
    pub fn next_turn(&mut self, now_ms: u64) -> Option<TurnBundle> {
        if self.restore.is_some() {
            // The game must restore the snapshot first: the turns after it build on it.
            return None;
        }
        if let Some(bundle) = self.catch_up.pop_front() {
            // A past turn: the game replays it; its records already had their effects on the
            // session (pace, our own earlier departure), so they are not acted on again.
            self.keep_turn_records(&bundle);
            return Some(bundle);
        }
        if self.playout.due_ms(self.next_exec).is_some_and(|due| due > now_ms) {
            return None;
        }
        let mut bundle = self.buffered.front_mut()?.take()?;
        bundle.length_ms = self.pace.turn_length_ms;
        if let Some(last) = self.last_exec_ms {
            let gap = now_ms.saturating_sub(last);
            let turn = u64::from(self.pace.turn_length_ms);
            if gap > turn * 3 / 2 {
                self.stats.stall_ms += gap - turn;
            }
        }
        self.last_exec_ms = Some(now_ms);
        self.buffered.pop_front();
        self.buffered.push_back(None);
        self.next_exec = self.next_exec.next();
        let next_exec = self.next_exec;
        self.usage.retain(|&turn, _| turn >= next_exec);
        self.on_executed(&bundle, now_ms);
        self.keep_turn_records(&bundle);
        self.schedule_next_turn(now_ms);
        Some(bundle)
    }

    /// What executing `bundle` means for the session: our commands' latency, and the records
    /// that concern every peer (our removal, the pace, desyncs, pauses, the end).
    fn on_executed(&mut self, bundle: &TurnBundle, now_ms: u64) {
        let player = self.player();
        for record in &bundle.records {
            match record {
                Record::Command { player: who, seq, .. } if Some(*who) == player => {
                    self.on_own_command(*seq, bundle.turn, now_ms);
                }
                Record::Left(who) if Some(*who) == player => self.end(EndReason::Removed),
                Record::Pace(pace) => {
                    self.pace = *pace;
                    self.playout.on_pace(bundle.turn.next(), pace.turn_length_ms);
                    self.push_event(ClientEvent::PaceChanged(*pace));
                }
                Record::Desync(report) => {
                    self.send_turn_hashes(report);
                    self.push_event(ClientEvent::Desync(report.clone()));
                }
                Record::Paused(by) => self.push_event(ClientEvent::Paused(*by)),
                Record::Resumed(by) => self.push_event(ClientEvent::Resumed(*by)),
                Record::Ended(EndCause::Desync) => self.end(EndReason::Desync),
                Record::Ended(EndCause::Finished { code }) => {
                    self.end(EndReason::Finished { code: *code });
                }
                _ => {}
            }
        }
    }

    /// One of our commands executed at `turn`: its latency, and whether it was late.
    fn on_own_command(&mut self, seq: CommandSeq, turn: Turn, now_ms: u64) {
        let Some((stamped, submitted)) = self.in_flight.remove(&seq) else { return };
        let latency = now_ms.saturating_sub(submitted).min(u64::from(u32::MAX)) as u32;
        self.latencies_ms.push(latency);
        if turn > stamped {
            self.stats.commands_late += 1;
            self.push_event(ClientEvent::CommandLate { seq, stamped, executed: turn });
        }
    }

    /// The client's counters, the pace, and command latency percentiles over the most recent
    /// 1024 commands.
    pub fn stats(&self) -> ClientStats {
        let mut stats = self.stats.clone();
        if let Some(link) = &self.link {
            stats.link = link.stats().clone();
            stats.drops = link.drops().clone();
        }
        stats.turn_length_ms = self.pace.turn_length_ms;
        stats.playout_ms = self.playout.buffer_ms() as u32;
        stats.events_dropped = self.events.dropped();
        stats.command_delay_turns = self.pace.command_delay_turns;
        stats.latency_ms_p50 = self.latencies_ms.percentile(50);
        stats.latency_ms_p95 = self.latencies_ms.percentile(95);
        stats.latency_ms_max = self.latencies_ms.percentile(100);
        stats
    }

    /// The pace in force.
    pub fn pace(&self) -> Pace {
        self.pace
    }

    /// Reports the game's state hash after executing check turn `turn` (a multiple of
    /// `sync.interval_turns`); other turns are ignored. It rides in our datagrams until the
    /// host acknowledges it. Call it right after executing the turn.
    ///
    /// Report every turn if you can (it is cheap): the client keeps the latest few, and on a
    /// desync sends the host the ones since the previous check turn, so that the host pins
    /// the first turn whose state differed (`HostEvent::DesyncPinned`).
    pub fn report_state_hash(&mut self, turn: Turn, hash: u64) {
        let interval = self.config.sync.interval_turns;
        if turn >= self.next_exec {
            return;
        }
        self.keep_turn_hash(turn, hash);
        if !crate::sync::is_check_turn(turn, interval) {
            return;
        }
        // Bounded: the check turns of two windows at most; the oldest go first.
        let keep = (2 * self.config.turns.window_turns / interval.max(1)).max(2) as usize;
        if self.hash_reports.back().is_some_and(|&(last, _)| last >= turn) {
            return;
        }
        if self.hash_reports.len() >= keep {
            self.hash_reports.pop_front();
        }
        self.hash_reports.push_back((turn, hash));
    }

    /// Reports how long the game takes to simulate a turn (a moving average is best). The host
    /// lengthens turns for everyone when a machine cannot keep up.
    pub fn report_turn_cost(&mut self, cost_ms: u32) {
        self.cost.set(cost_ms.min(TURN_COST_MAX_MS));
    }

    /// Asks the host to pause the game (granted while this player has pauses left).
    pub fn request_pause(&mut self) {
        self.pause_seq = self.pause_seq.wrapping_add(1);
        self.pause_request = Some((self.pause_seq, PauseKind::Pause, PAUSE_REPEATS));
    }

    /// Asks the host to resume a paused game.
    pub fn request_resume(&mut self) {
        self.pause_seq = self.pause_seq.wrapping_add(1);
        self.pause_request = Some((self.pause_seq, PauseKind::Resume, PAUSE_REPEATS));
    }
}

//! [`SessionConfig`]: every limit of a session, named with its unit last, and its validation.
//!
//! The host's config is the session's config: a client takes the values that matter for the
//! turn pipeline (turn length, command delay, window, budgets) from the host's join reply.

use std::fmt;

use crate::wire::{
    bundle_bytes_max, DOWN_HEADER_BYTES_MAX, UP_COMMAND_OVERHEAD_MAX, UP_HEADER_BYTES_MAX,
};

/// The limits and timings of a lockstep session. Start from [`SessionConfig::default`] and
/// change fields; [`SessionConfig::validate`] (called by every constructor that takes one)
/// refuses inconsistent values with a [`ConfigError`] naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// The shortest (and first) turn length. AoE used 200 ms; phalanx defaults to 100 ms and
    /// lets speed control lengthen it for slow machines or long round trips. 10..=2000.
    /// Default: 100 ms.
    pub turn_length_ms: u32,
    /// The longest turn speed control may choose. `turn_length_ms..=5000`. Default: 1,000 ms.
    pub turn_length_max_ms: u32,
    /// The first command delay: a command submitted while the game executes turn `t` is
    /// stamped for `t + command_delay_turns` (AoE: 2). 1..=`command_delay_max_turns`.
    /// Default: 2 turns.
    pub command_delay_turns: u32,
    /// The largest command delay speed control may choose. Below `turns_ahead_max`.
    /// Default: 8 turns.
    pub command_delay_max_turns: u32,
    /// Whether the host adapts the pace (see `pace` in the crate docs). Off: the first pace
    /// holds for the whole session. Default: `true`.
    pub adaptive_pace: bool,
    /// Added to the worst smoothed round trip when choosing the command delay (raise it to
    /// trade latency for fewer commands missing their stamped turn). Default: 0 ms.
    pub pace_margin_ms: u32,
    /// How far the round trip may exceed what the command delay covers before the host raises
    /// the delay (0, the default: not at all). A round trip that brushes the limit for a few
    /// turns then costs a few commands a turn, instead of a turn of latency on every command
    /// for `pace_settle_turns`. The quiet relay's playout buffer of a turn length brings the
    /// demo's round trip within 10–20 ms of two turns. 0..=`turn_length_ms` / 2. Default: 0 ms.
    pub pace_tolerance_ms: u32,
    /// Turns a lower pace must be wanted before the host lowers it (by one step).
    /// Default: 30 turns.
    pub pace_settle_turns: u32,
    /// Every this many turns each player reports a state hash and the host compares them;
    /// 0 turns sync checks off. The check turns are the multiples of it, turn 0 included: a
    /// game reports its hash right after executing one (other turns' reports are ignored).
    /// Default: 10 turns.
    pub sync_interval_turns: u32,
    /// Whose hash is right when they differ. Default: `Majority`.
    pub desync_reference: DesyncReference,
    /// What the host does on a desync. Default: `Warn`.
    pub desync_policy: DesyncPolicy,
    /// How long the host waits for a player before everyone gets a "waiting for" notice.
    /// Default: 500 ms.
    pub stall_notice_ms: u32,
    /// Pauses each player may request in a session. Default: 3.
    pub pauses_per_player_max: u32,
    /// The window: the host never seals a turn more than this many turns after the oldest turn
    /// a client has not acknowledged, and a peer never buffers data further ahead. 2..=256.
    /// Default: 16.
    pub turns_ahead_max: u32,
    /// Seats in the session, host's own player included. 1..=64. Default: 8.
    pub players_max: u8,
    /// Commands one player may have in one turn. 1..=64. Default: 4.
    pub commands_per_turn_max: u16,
    /// Payload bytes one player may have in one turn. At least `command_bytes_max`.
    /// Default: 72 bytes.
    pub turn_bytes_per_player_max: u16,
    /// Turns an over-budget command may spill into (a local setting; 0, the default: it is
    /// refused with `SubmitError::OverBudget` and the game queues it itself). With `k`, a
    /// command that does not fit its stamped turn's budget is stamped for the first of the next
    /// `k` turns that has room, in submission order; the ticket names that turn. At most
    /// `turns_ahead_max − command_delay_max_turns − 1`, so it stays inside the window.
    /// Default: 0 turns (refused).
    pub overflow_turns_max: u32,
    /// Payload bytes of one command. 1..=`turn_bytes_per_player_max`. Larger orders must be
    /// split by the game (or sent as bulk data): they are refused, never truncated.
    /// Default: 72 bytes.
    pub command_bytes_max: u16,
    /// The largest datagram the transport carries (quinn: 1162 bytes at the initial 1200-byte
    /// MTU). A whole turn bundle at full budget must fit in one: validated. Default: 1,162 bytes.
    pub datagram_bytes_max: u16,
    /// A datagram with a new bundle also repeats up to this many earlier bundles the client has
    /// not acknowledged (the retransmit timer covers the rest); under the quiet relay, to a
    /// player only while its link lost a datagram lately (within 256 acked). 0..=`turns_ahead_max`.
    /// Default: 2 turns.
    pub redundant_turns: u32,
    /// The host sends a new turn a second time a quarter turn later while the link's loss
    /// estimate (an average over the last packets, gain 1/16, in ‰) is at least this and a
    /// loss was seen in the last 256 acknowledged packets. 0 (the default): for those 256
    /// packets after any loss — the least stall, at up to twice the datagrams; 1000: never.
    /// (Clients always repeat new commands after a loss: they are rare and a late one costs a
    /// turn.) On the demo's 2 %-loss network 5 — repeats for about 40 packets after a loss —
    /// cut the wire rate by a quarter with p95 latency unchanged; at 5 % loss even 5 breaks
    /// the "stall < 1 %" promise the default keeps. Default: 0 ‰.
    pub repeat_loss_permille: u32,
    /// How long a peer may hold an acknowledgement back hoping to piggyback it. Default: 25 ms.
    pub ack_delay_ms: u32,
    /// Retransmit timeout before any RTT sample. Default: 300 ms.
    pub rto_initial_ms: u32,
    /// Lower bound of the retransmit timeout. Default: 40 ms.
    pub rto_min_ms: u32,
    /// Upper bound of the retransmit timeout, backoff included. Default: 2,000 ms.
    pub rto_max_ms: u32,
    /// How late a timer may fire on either side (RFC 9002's timer granularity): the
    /// retransmit timeout keeps this much slack over the measured round trip and again over
    /// the peer's ack delay, so data acknowledged in time is not sent again when wake-ups are
    /// late. tokio on an idle machine is about 1–2 ms late, and so is a `phalanx::Session`'s
    /// driver (it runs on a runtime of its own: the default fits); a sans-IO session whose
    /// timers are only handled from a frame loop is up to a frame late (set 17 at 60 Hz).
    /// Default: 10 ms.
    pub timer_granularity_ms: u32,
    /// Send a keep-alive after this long without sending anything. During play at 100 ms
    /// turns a datagram goes each way every turn and keep-alives never fire; they keep a quiet
    /// link (the lobby, a pause, longer turns) alive, and they set how long before a cut the
    /// peer last heard us: a cut of 0.9 × `idle_timeout_ms` leaves 300 ms for that, the first
    /// probe after the cut and the latency. At 250 ms, seeded L2 runs of such cuts at 5 % loss
    /// and 40 ms jitter dropped players; at 100 ms none of the CI seeds do. A player is dropped
    /// only when every datagram of an idle timeout is lost (30 of them). Default: 100 ms.
    pub keep_alive_ms: u32,
    /// While the peer has been silent for `keep_alive_ms` or more (a cut, a burst of loss),
    /// keep-alives go out every `probe_interval_ms` instead, whatever the retransmit backoff:
    /// the first one after the link heals reaches the peer within this plus the one-way
    /// latency: a cut shorter than `idle_timeout_ms − probe_interval_ms −` one-way latency `−`
    /// the time since the peer last heard us (up to a keep-alive or heartbeat, more after a
    /// loss) never drops a player. Costs nothing while the link works. Default: 50 ms.
    pub probe_interval_ms: u32,
    /// A peer silent this long is timed out (anchors: a dead peer detected in ≤ 3 s).
    /// Default: 3,000 ms.
    pub idle_timeout_ms: u32,
    /// The longest playout buffer a client may hold turns in (a local setting; 0: turns
    /// execute the moment they arrive). A client executes turns on a steady schedule derived
    /// from the host's pace, behind a buffer of the 95th percentile of the recent arrival
    /// jitter, capped here: turns that arrive within it execute exactly a turn length apart.
    /// The buffer in force is [`ClientStats::playout_ms`](crate::ClientStats::playout_ms);
    /// speed control adds it to the round trip it covers. 0..=1000. Default: 80 ms.
    pub playout_max_ms: u32,
    /// Added to the playout buffer the jitter calls for, up to `playout_max_ms` (a local
    /// setting; 0, the default: the buffer covers the jitter alone). A turn length hides a single
    /// lost turn: its copy rides in the next turn's datagram (`redundant_turns` ≥ 1; under the
    /// quiet relay once the link has lost one: a first loss is reported overdue, and comes in time
    /// while the round trip is under the buffer less twice the jitter). The price is that more of
    /// the round trip for speed control to cover (the command delay may rise a step; see
    /// `pace_tolerance_ms`). The quiet relay's setting (see `heartbeat_ms`). 0..=`playout_max_ms`.
    /// Default: 0 ms.
    pub playout_extra_ms: u32,
    /// The quiet relay, for links where every datagram counts (0, the default: off). When
    /// set, a client with nothing to say stays silent and sends a heartbeat — its
    /// acknowledgements, the turn it executes, a state hash report, its turn cost and playout
    /// buffer — this often, instead of acknowledging every turn within `ack_delay_ms`. It still
    /// sends at once new commands (repeated a sixteenth of a turn later), pause requests,
    /// answers to a probe, and an ack when a turn is missing while a later one arrived or is
    /// overdue (a round trip before its playout time): the host resends what is missing at
    /// once. Keep-alives on both ends go at this period instead of `keep_alive_ms`, and the
    /// host's retransmit timer allows for it. Acks lag up to a heartbeat, so a window
    /// (`turns_ahead_max`) a heartbeat longer than an outage rides it out without the others
    /// waiting. A session setting: host and clients must agree (the host refuses a join with
    /// another, `JoinRefusal::HeartbeatMismatch`). 0 or 50..=`idle_timeout_ms` / 4.
    /// Default: 0 ms (off).
    pub heartbeat_ms: u32,
    /// How long the host waits for a newly seated player's first datagram. A client cannot
    /// send any before the join reply reaches it, and on a lossy link the reliable stream's
    /// retransmissions can take longer than `idle_timeout_ms`; a player is only held to the
    /// idle timeout once it has been heard. At least `idle_timeout_ms`; match it to the
    /// clients' join timeout (phalanx's default is 10 s). Default: 10,000 ms.
    pub join_grace_ms: u32,
    /// Malformed or spoofed datagrams tolerated from one peer before it is disconnected.
    /// Default: 32.
    pub misbehaviour_max: u32,
    /// How long a timed-out player's seat stays open for a rejoin (0: no rejoin). A player
    /// who comes back in time with its join token gets the log of every sealed turn, replays
    /// it from the game's start and plays on; later, the join is refused with
    /// [`JoinRefusal::RejoinExpired`](crate::JoinRefusal::RejoinExpired). Default: 60,000 ms.
    pub rejoin_window_ms: u32,
    /// The most bytes of sealed turns the host keeps for rejoins (and a client accepts in a
    /// join reply). A longer game makes rejoin unavailable rather than growing without bound:
    /// 1 MiB is about an hour of an 8-player game at 200 ms turns. Default: 1 MiB.
    pub rejoin_log_bytes_max: u32,
    /// Every this many turns (a multiple of `sync_interval_turns`; 0: never) the host wants
    /// a [`Snapshot`](crate::Snapshot) of the game's state after that check turn, verified
    /// against the sync check's reference hash. A rejoin then restores the latest one and
    /// replays only the turns after it, so the game's length no longer limits rejoin. The
    /// game must be able to serialize and restore its state. Off by default.
    /// Default: 0 turns (off).
    pub snapshot_interval_turns: u32,
    /// Whether the host seats a new player (an unused token) after the game started (a host
    /// setting). The late joiner gets what a returning player gets — the verified snapshot
    /// and the turns after it, or every turn — and its `Joined` record in the next sealed
    /// turn is when every game adds it. Needs rejoin on (`rejoin_window_ms` > 0: the turns are
    /// logged; otherwise [`validate`](Self::validate) names both fields); when the turns are
    /// not all held, the join is refused with `RejoinUnavailable`. Off by default:
    /// `GameStarted`. Default: `false`.
    pub late_join: bool,
    /// Spectator slots: spectators the host seats at once (their tokens are given with
    /// [`Host::allow_spectators`](crate::Host::allow_spectators)). 0..=64. Default: 16.
    pub spectators_max: u8,
    /// A spectator more than this many turns behind what it may be sent is dropped (it can
    /// join again, from a snapshot): the host keeps that many turns for spectators. The
    /// players never wait for a spectator. 1..=36,000. Default: 300 turns.
    pub spectator_lag_max_turns: u32,
    /// Broadcast delay: a spectator is sent a turn this many turns after it is sealed (0: as
    /// soon as the players; a tournament might use a few minutes). A spectator joining
    /// mid-game starts that far back too, from a snapshot at least that old. 0..=36,000.
    /// Default: 0 turns.
    pub spectator_delay_turns: u32,
    /// The largest snapshot a host keeps or a client sends or accepts (a local setting on
    /// each side; keep them equal). The host holds at most two. Default: 8 MiB.
    pub snapshot_bytes_max: u32,
    /// The protocol version both sides must speak (see [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
    /// Default: this build's `PROTOCOL_VERSION`.
    pub protocol_version: u8,
    /// A hash of the game's rules and data; a client with a different one is refused. Default: 0.
    pub game_data_hash: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            turn_length_ms: 100,
            turn_length_max_ms: 1_000,
            command_delay_turns: 2,
            command_delay_max_turns: 8,
            adaptive_pace: true,
            pace_margin_ms: 0,
            pace_tolerance_ms: 0,
            pace_settle_turns: 30,
            sync_interval_turns: 10,
            desync_reference: DesyncReference::Majority,
            desync_policy: DesyncPolicy::Warn,
            stall_notice_ms: 500,
            pauses_per_player_max: 3,
            turns_ahead_max: 16,
            players_max: 8,
            commands_per_turn_max: 4,
            turn_bytes_per_player_max: 72,
            overflow_turns_max: 0,
            command_bytes_max: 72,
            datagram_bytes_max: 1162,
            redundant_turns: 2,
            repeat_loss_permille: 0,
            ack_delay_ms: 25,
            rto_initial_ms: 300,
            rto_min_ms: 40,
            rto_max_ms: 2_000,
            timer_granularity_ms: 10,
            keep_alive_ms: 100,
            probe_interval_ms: 50,
            idle_timeout_ms: 3_000,
            playout_max_ms: 80,
            playout_extra_ms: 0,
            heartbeat_ms: 0,
            join_grace_ms: 10_000,
            misbehaviour_max: 32,
            rejoin_window_ms: 60_000,
            rejoin_log_bytes_max: 1 << 20,
            snapshot_interval_turns: 0,
            late_join: false,
            spectators_max: 16,
            spectator_lag_max_turns: 300,
            spectator_delay_turns: 0,
            snapshot_bytes_max: 8 << 20,
            protocol_version: crate::PROTOCOL_VERSION,
            game_data_hash: 0,
        }
    }
}

/// Whose state hash is taken as right when a check turn's hashes differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DesyncReference {
    /// The most common hash (ties: the group holding the lowest player id).
    Majority,
    /// The host's own player's hash (majority when the host does not play).
    Host,
}

/// What the host does when a check turn's hashes differ. Every peer gets the report either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DesyncPolicy {
    /// Report it and play on.
    Warn,
    /// Report it and pause the game (resume with `Host::resume`).
    Pause,
    /// Report it and end the session after that turn.
    End,
}

/// A [`SessionConfig`] field is out of range or inconsistent with another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `field` is outside `min..=max`.
    OutOfRange {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A full turn bundle (every player at full budget) would not fit in one datagram:
    /// lower `players_max`, `commands_per_turn_max` or `turn_bytes_per_player_max`, or raise
    /// `datagram_bytes_max`.
    BundleTooLarge {
        /// The largest encoded Down datagram the budgets allow.
        bytes: usize,
        /// `datagram_bytes_max`.
        datagram_bytes_max: u16,
    },
    /// `field` must be a multiple of `of` (another field's value, named by `of_field`).
    NotMultiple {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The field it must be a multiple of.
        of_field: &'static str,
        /// That field's value.
        of: u64,
    },
    /// `field` is set but needs `needs` (a condition on another field), which does not hold.
    Needs {
        /// The field that is set.
        field: &'static str,
        /// What it needs, as a condition on another field.
        needs: &'static str,
    },
    /// The same join token was given twice (as a player's or a spectator's): the second
    /// holder could never join.
    DuplicateToken {
        /// The token.
        token: u64,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange { field, value, min, max } => {
                write!(f, "{field} = {value} is outside {min}..={max}")
            }
            ConfigError::BundleTooLarge { bytes, datagram_bytes_max } => write!(
                f,
                "a full turn bundle needs {bytes} bytes but datagram_bytes_max is {datagram_bytes_max}"
            ),
            ConfigError::NotMultiple { field, value, of_field, of } => {
                write!(f, "{field} = {value} is not a non-zero multiple of {of_field} = {of}")
            }
            ConfigError::Needs { field, needs } => write!(f, "{field} needs {needs}"),
            ConfigError::DuplicateToken { token } => {
                write!(f, "join token {token} is given more than once")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange { field, value, min, max })
    }
}

impl SessionConfig {
    /// Whether the quiet relay is on (`heartbeat_ms` > 0).
    pub(crate) fn is_quiet(&self) -> bool {
        self.heartbeat_ms > 0
    }

    /// How long a link may stay silent before it sends a keep-alive: the heartbeat under the
    /// quiet relay, `keep_alive_ms` otherwise.
    pub(crate) fn keep_alive_period_ms(&self) -> u32 {
        if self.is_quiet() {
            self.heartbeat_ms
        } else {
            self.keep_alive_ms
        }
    }

    /// The longest a client holds an acknowledgement of the host's turns back: the heartbeat
    /// under the quiet relay, `ack_delay_ms` otherwise. The host's retransmit timer allows
    /// for it.
    pub(crate) fn client_ack_delay_ms(&self) -> u32 {
        if self.is_quiet() {
            self.heartbeat_ms
        } else {
            self.ack_delay_ms
        }
    }

    /// The longest the host holds an acknowledgement of a client's datagram back: a turn
    /// length under the quiet relay (the next turn's datagram carries it), `ack_delay_ms`
    /// otherwise.
    pub(crate) fn host_ack_delay_ms(&self) -> u32 {
        if self.is_quiet() {
            self.turn_length_ms
        } else {
            self.ack_delay_ms
        }
    }

    /// Checks every field and the datagram budget.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("turn_length_ms", self.turn_length_ms.into(), 10, 2_000)?;
        check(
            "turn_length_max_ms",
            self.turn_length_max_ms.into(),
            self.turn_length_ms.into(),
            5_000,
        )?;
        check("turns_ahead_max", self.turns_ahead_max.into(), 2, 256)?;
        check(
            "command_delay_max_turns",
            self.command_delay_max_turns.into(),
            1,
            u64::from(self.turns_ahead_max) - 1,
        )?;
        check(
            "command_delay_turns",
            self.command_delay_turns.into(),
            1,
            self.command_delay_max_turns.into(),
        )?;
        check("pace_margin_ms", self.pace_margin_ms.into(), 0, 10_000)?;
        check(
            "pace_tolerance_ms",
            self.pace_tolerance_ms.into(),
            0,
            (self.turn_length_ms / 2).into(),
        )?;
        check("pace_settle_turns", self.pace_settle_turns.into(), 1, 100_000)?;
        check("sync_interval_turns", self.sync_interval_turns.into(), 0, 1_000_000)?;
        check("stall_notice_ms", self.stall_notice_ms.into(), 0, 600_000)?;
        check("pauses_per_player_max", self.pauses_per_player_max.into(), 0, 255)?;
        check("players_max", self.players_max.into(), 1, 64)?;
        check("commands_per_turn_max", self.commands_per_turn_max.into(), 1, 64)?;
        check("turn_bytes_per_player_max", self.turn_bytes_per_player_max.into(), 1, 16_384)?;
        check(
            "command_bytes_max",
            self.command_bytes_max.into(),
            1,
            self.turn_bytes_per_player_max.into(),
        )?;
        check("datagram_bytes_max", self.datagram_bytes_max.into(), 256, 65_527)?;
        check("redundant_turns", self.redundant_turns.into(), 0, self.turns_ahead_max.into())?;
        check("repeat_loss_permille", self.repeat_loss_permille.into(), 0, 1_000)?;
        check("ack_delay_ms", self.ack_delay_ms.into(), 0, 1_000)?;
        check("rto_min_ms", self.rto_min_ms.into(), 1, 60_000)?;
        check("timer_granularity_ms", self.timer_granularity_ms.into(), 0, 1_000)?;
        check("rto_max_ms", self.rto_max_ms.into(), self.rto_min_ms.into(), 60_000)?;
        check(
            "rto_initial_ms",
            self.rto_initial_ms.into(),
            self.rto_min_ms.into(),
            self.rto_max_ms.into(),
        )?;
        self.validate_links()?;
        check(
            "overflow_turns_max",
            self.overflow_turns_max.into(),
            0,
            u64::from(self.turns_ahead_max)
                .saturating_sub(u64::from(self.command_delay_max_turns) + 1),
        )?;
        check("playout_max_ms", self.playout_max_ms.into(), 0, PLAYOUT_MAX_MS.into())?;
        check("join_grace_ms", self.join_grace_ms.into(), self.idle_timeout_ms.into(), 600_000)?;
        check("misbehaviour_max", self.misbehaviour_max.into(), 1, u32::MAX.into())?;
        check("rejoin_window_ms", self.rejoin_window_ms.into(), 0, 3_600_000)?;
        check("rejoin_log_bytes_max", self.rejoin_log_bytes_max.into(), 0, 64 << 20)?;
        self.validate_snapshots()?;
        let bytes = DOWN_HEADER_BYTES_MAX + bundle_bytes_max(self);
        let up =
            UP_HEADER_BYTES_MAX + UP_COMMAND_OVERHEAD_MAX + usize::from(self.command_bytes_max);
        if bytes.max(up) > usize::from(self.datagram_bytes_max) {
            return Err(ConfigError::BundleTooLarge {
                bytes: bytes.max(up),
                datagram_bytes_max: self.datagram_bytes_max,
            });
        }
        Ok(())
    }

    /// The keep-alive, probe and idle timers, the playout buffer and the quiet relay.
    fn validate_links(&self) -> Result<(), ConfigError> {
        check("keep_alive_ms", self.keep_alive_ms.into(), 10, 60_000)?;
        check("probe_interval_ms", self.probe_interval_ms.into(), 10, self.keep_alive_ms.into())?;
        check(
            "idle_timeout_ms",
            self.idle_timeout_ms.into(),
            u64::from(self.keep_alive_ms) + 1,
            600_000,
        )?;
        check("playout_extra_ms", self.playout_extra_ms.into(), 0, self.playout_max_ms.into())?;
        if self.heartbeat_ms != 0 {
            check(
                "heartbeat_ms",
                self.heartbeat_ms.into(),
                50,
                u64::from(self.idle_timeout_ms / 4).max(50),
            )?;
            check(
                "probe_interval_ms",
                self.probe_interval_ms.into(),
                10,
                self.heartbeat_ms.into(),
            )?;
        }
        Ok(())
    }

    /// Snapshots fall on check turns (they are verified by the sync check) and fit the limit;
    /// the spectator settings are in range.
    fn validate_snapshots(&self) -> Result<(), ConfigError> {
        if self.late_join && self.rejoin_window_ms == 0 {
            // A late joiner catches up from the logged turns, which only rejoin keeps.
            return Err(ConfigError::Needs { field: "late_join", needs: "rejoin_window_ms > 0" });
        }
        check("snapshot_bytes_max", self.snapshot_bytes_max.into(), 0, 256 << 20)?;
        check("spectators_max", self.spectators_max.into(), 0, 64)?;
        check("spectator_lag_max_turns", self.spectator_lag_max_turns.into(), 1, 36_000)?;
        check("spectator_delay_turns", self.spectator_delay_turns.into(), 0, 36_000)?;
        let sync = self.sync_interval_turns;
        if self.snapshot_interval_turns != 0
            && (sync == 0 || !self.snapshot_interval_turns.is_multiple_of(sync))
        {
            // A snapshot is verified by its turn's sync check: it must fall on one.
            return Err(ConfigError::NotMultiple {
                field: "snapshot_interval_turns",
                value: self.snapshot_interval_turns.into(),
                of_field: "sync_interval_turns",
                of: sync.into(),
            });
        }
        Ok(())
    }
}

/// The longest turn cost a game or a peer may report (speed control input): one minute.
/// Larger reports are capped rather than refused.
pub(crate) const TURN_COST_MAX_MS: u32 = 60_000;

/// The longest playout buffer: the limit of `playout_max_ms`, and of what the host believes a
/// client's report.
pub(crate) const PLAYOUT_MAX_MS: u32 = 1_000;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

//! [`SessionConfig`]: every limit of a session, named with its unit last, and its validation.
//!
//! The host's config is the session's config: a client takes the values that matter for the
//! turn pipeline (turn length, command delay, window, budgets) from the host's join reply.

use std::fmt;

#[path = "config_groups.rs"]
mod groups;
pub use groups::{
    BudgetConfig, CatchUpConfig, CommandOrder, Fairness, LinkConfig, PlayoutConfig, SyncConfig,
    TurnConfig,
};

use crate::wire::{
    bundle_bytes_max, DOWN_HEADER_BYTES_MAX, UP_COMMAND_OVERHEAD_MAX, UP_HEADER_BYTES_MAX,
};

/// The limits and timings of a lockstep session, grouped by who honours them: [`turns`](Self::turns)
/// (the pipeline and its pace), [`budget`](Self::budget) (what a player may send a turn),
/// [`link`](Self::link) (datagrams, acknowledgements, timers), [`sync`](Self::sync) (state-hash
/// checks), [`playout`](Self::playout) (a client's buffer) and [`catch_up`](Self::catch_up)
/// (rejoins, snapshots, spectators), then the two values both ends must agree on. Start from
/// [`SessionConfig::default`] and change fields (`config.turns.length_ms = 200`);
/// [`SessionConfig::validate`] (called by every constructor that takes one) refuses
/// inconsistent values with a [`ConfigError`] naming the field. Every field's name ends in its
/// unit, then its qualifier (`length_ms_max`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// The turn pipeline, its pace and the seats (see [`TurnConfig`]).
    pub turns: TurnConfig,
    /// What one player may send in one turn (see [`BudgetConfig`]).
    pub budget: BudgetConfig,
    /// Each link's datagrams, acknowledgements and timers (see [`LinkConfig`]).
    pub link: LinkConfig,
    /// State-hash checks and desyncs (see [`SyncConfig`]).
    pub sync: SyncConfig,
    /// A client's playout buffer (see [`PlayoutConfig`]).
    pub playout: PlayoutConfig,
    /// Rejoins, late joins, snapshots and spectators (see [`CatchUpConfig`]).
    pub catch_up: CatchUpConfig,
    /// The protocol version both sides must speak (see [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
    /// Default: this build's `PROTOCOL_VERSION`.
    pub protocol_version: u8,
    /// A hash of the game's rules and data; a client with a different one is refused. Default: 0.
    pub game_data_hash: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            turns: TurnConfig::default(),
            budget: BudgetConfig::default(),
            link: LinkConfig::default(),
            sync: SyncConfig::default(),
            playout: PlayoutConfig::default(),
            catch_up: CatchUpConfig::default(),
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
    /// lower `turns.players_max`, `budget.commands_per_turn_max` or `budget.turn_bytes_per_player_max`, or raise
    /// `link.datagram_bytes_max`.
    BundleTooLarge {
        /// The largest encoded Down datagram the budgets allow.
        bytes: usize,
        /// `link.datagram_bytes_max`.
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
                "a full turn bundle needs {bytes} bytes but link.datagram_bytes_max is {datagram_bytes_max}"
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
    /// This configuration with the quiet relay's profile, the one for a 28.8 kbit/s modem
    /// (`docs/design/quiet-relay.md`), which the archers demo plays: 150 ms turns; clients
    /// acknowledge turns in a heartbeat every 500 ms and send commands at once; a turn's
    /// datagram carries the unacknowledged turns before it once its link lost one; a playout
    /// buffer of a turn more than the jitter calls for (up to 170 ms) once the link has lost a
    /// turn (`playout.extra_after_loss`), the command delay starting at one turn; speed control
    /// tolerates 20 ms past two turns of round trip; a 20-turn window. About 6.4 kbit/s per
    /// player in the demo, against 16.6 with the defaults; on a clean link, a command delay of
    /// one turn while the round trip is under one.
    pub fn quiet_relay(mut self) -> SessionConfig {
        self.turns.length_ms = 150;
        self.link.heartbeat_ms = 500;
        self.playout.extra_ms = 150;
        self.playout.buffer_ms_max = 170;
        self.playout.extra_after_loss = true;
        self.turns.command_delay_turns = 1;
        self.turns.pace_tolerance_ms = 20;
        self.link.repeat_loss_permille = 1_000;
        self.turns.window_turns = 20;
        self
    }

    /// Whether the quiet relay is on (`link.heartbeat_ms` > 0).
    pub(crate) fn is_quiet(&self) -> bool {
        self.link.heartbeat_ms > 0
    }

    /// How long a link may stay silent before it sends a keep-alive: the heartbeat under the
    /// quiet relay, `link.keep_alive_ms` otherwise.
    pub(crate) fn keep_alive_period_ms(&self) -> u32 {
        if self.is_quiet() {
            self.link.heartbeat_ms
        } else {
            self.link.keep_alive_ms
        }
    }

    /// The longest a client holds an acknowledgement of the host's turns back: the heartbeat
    /// under the quiet relay, `link.ack_delay_ms` otherwise. The host's retransmit timer allows
    /// for it.
    pub(crate) fn client_ack_delay_ms(&self) -> u32 {
        if self.is_quiet() {
            self.link.heartbeat_ms
        } else {
            self.link.ack_delay_ms
        }
    }

    /// The longest the host holds an acknowledgement of a client's datagram back: a turn
    /// length under the quiet relay (the next turn's datagram carries it), `link.ack_delay_ms`
    /// otherwise.
    pub(crate) fn host_ack_delay_ms(&self) -> u32 {
        if self.is_quiet() {
            self.turns.length_ms
        } else {
            self.link.ack_delay_ms
        }
    }

    /// Checks every field and the datagram budget.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_turns()?;
        self.validate_budget_and_retransmits()?;
        self.validate_links()?;
        check(
            "budget.overflow_turns_max",
            self.budget.overflow_turns_max.into(),
            0,
            u64::from(self.turns.window_turns)
                .saturating_sub(u64::from(self.turns.command_delay_turns_max) + 1),
        )?;
        check(
            "playout.buffer_ms_max",
            self.playout.buffer_ms_max.into(),
            0,
            PLAYOUT_MAX_MS.into(),
        )?;
        check(
            "link.join_grace_ms",
            self.link.join_grace_ms.into(),
            self.link.idle_timeout_ms.into(),
            600_000,
        )?;
        check("link.misbehaviour_max", self.link.misbehaviour_max.into(), 1, u32::MAX.into())?;
        check("catch_up.rejoin_window_ms", self.catch_up.rejoin_window_ms.into(), 0, 3_600_000)?;
        check(
            "catch_up.rejoin_log_bytes_max",
            self.catch_up.rejoin_log_bytes_max.into(),
            0,
            64 << 20,
        )?;
        self.validate_snapshots()?;
        let bytes = DOWN_HEADER_BYTES_MAX + bundle_bytes_max(self);
        let up = UP_HEADER_BYTES_MAX
            + UP_COMMAND_OVERHEAD_MAX
            + usize::from(self.budget.command_bytes_max);
        if bytes.max(up) > usize::from(self.link.datagram_bytes_max) {
            return Err(ConfigError::BundleTooLarge {
                bytes: bytes.max(up),
                datagram_bytes_max: self.link.datagram_bytes_max,
            });
        }
        Ok(())
    }

    /// The turn pipeline, its pace, the seats and the sync interval.
    fn validate_turns(&self) -> Result<(), ConfigError> {
        check("turns.length_ms", self.turns.length_ms.into(), 10, 2_000)?;
        check(
            "turns.length_ms_max",
            self.turns.length_ms_max.into(),
            self.turns.length_ms.into(),
            5_000,
        )?;
        check("turns.window_turns", self.turns.window_turns.into(), 2, 256)?;
        check(
            "turns.command_delay_turns_max",
            self.turns.command_delay_turns_max.into(),
            1,
            u64::from(self.turns.window_turns) - 1,
        )?;
        check(
            "turns.command_delay_turns",
            self.turns.command_delay_turns.into(),
            1,
            self.turns.command_delay_turns_max.into(),
        )?;
        check("turns.pace_margin_ms", self.turns.pace_margin_ms.into(), 0, 10_000)?;
        check(
            "turns.pace_tolerance_ms",
            self.turns.pace_tolerance_ms.into(),
            0,
            (self.turns.length_ms / 2).into(),
        )?;
        check("turns.pace_settle_turns", self.turns.pace_settle_turns.into(), 1, 100_000)?;
        check("sync.interval_turns", self.sync.interval_turns.into(), 0, 1_000_000)?;
        check("turns.stall_notice_ms", self.turns.stall_notice_ms.into(), 0, 600_000)?;
        check("turns.pauses_per_player_max", self.turns.pauses_per_player_max.into(), 0, 255)?;
        check("turns.players_max", self.turns.players_max.into(), 1, 64)?;
        Ok(())
    }

    /// The per-turn budget, the datagram size, repetition, acknowledgements and retransmits.
    fn validate_budget_and_retransmits(&self) -> Result<(), ConfigError> {
        check("budget.commands_per_turn_max", self.budget.commands_per_turn_max.into(), 1, 64)?;
        check(
            "budget.turn_bytes_per_player_max",
            self.budget.turn_bytes_per_player_max.into(),
            1,
            16_384,
        )?;
        check(
            "budget.command_bytes_max",
            self.budget.command_bytes_max.into(),
            1,
            self.budget.turn_bytes_per_player_max.into(),
        )?;
        check("link.datagram_bytes_max", self.link.datagram_bytes_max.into(), 256, 65_527)?;
        check(
            "link.redundant_turns",
            self.link.redundant_turns.into(),
            0,
            self.turns.window_turns.into(),
        )?;
        check("link.repeat_loss_permille", self.link.repeat_loss_permille.into(), 0, 1_000)?;
        check("link.ack_delay_ms", self.link.ack_delay_ms.into(), 0, 1_000)?;
        check("link.rto_ms_min", self.link.rto_ms_min.into(), 1, 60_000)?;
        check("link.timer_granularity_ms", self.link.timer_granularity_ms.into(), 0, 1_000)?;
        check("link.rto_ms_max", self.link.rto_ms_max.into(), self.link.rto_ms_min.into(), 60_000)?;
        check(
            "link.rto_ms_initial",
            self.link.rto_ms_initial.into(),
            self.link.rto_ms_min.into(),
            self.link.rto_ms_max.into(),
        )?;
        Ok(())
    }

    /// The keep-alive, probe and idle timers, the playout buffer and the quiet relay.
    fn validate_links(&self) -> Result<(), ConfigError> {
        check("link.keep_alive_ms", self.link.keep_alive_ms.into(), 10, 60_000)?;
        check(
            "link.probe_interval_ms",
            self.link.probe_interval_ms.into(),
            10,
            self.link.keep_alive_ms.into(),
        )?;
        check(
            "link.idle_timeout_ms",
            self.link.idle_timeout_ms.into(),
            u64::from(self.link.keep_alive_ms) + 1,
            600_000,
        )?;
        check(
            "playout.extra_ms",
            self.playout.extra_ms.into(),
            0,
            self.playout.buffer_ms_max.into(),
        )?;
        if self.link.heartbeat_ms != 0 {
            check(
                "link.heartbeat_ms",
                self.link.heartbeat_ms.into(),
                50,
                u64::from(self.link.idle_timeout_ms / 4).max(50),
            )?;
            check(
                "link.probe_interval_ms",
                self.link.probe_interval_ms.into(),
                10,
                self.link.heartbeat_ms.into(),
            )?;
        }
        Ok(())
    }

    /// Snapshots fall on check turns (they are verified by the sync check) and fit the limit;
    /// the spectator settings are in range.
    fn validate_snapshots(&self) -> Result<(), ConfigError> {
        if self.catch_up.late_join && self.catch_up.rejoin_window_ms == 0 {
            // A late joiner catches up from the logged turns, which only rejoin keeps.
            return Err(ConfigError::Needs {
                field: "catch_up.late_join",
                needs: "catch_up.rejoin_window_ms > 0",
            });
        }
        check(
            "catch_up.snapshot_bytes_max",
            self.catch_up.snapshot_bytes_max.into(),
            0,
            256 << 20,
        )?;
        check("catch_up.spectators_max", self.catch_up.spectators_max.into(), 0, 64)?;
        check(
            "catch_up.spectator_lag_turns_max",
            self.catch_up.spectator_lag_turns_max.into(),
            1,
            36_000,
        )?;
        check(
            "catch_up.spectator_delay_turns",
            self.catch_up.spectator_delay_turns.into(),
            0,
            36_000,
        )?;
        let sync = self.sync.interval_turns;
        if self.catch_up.snapshot_interval_turns != 0
            && (sync == 0 || !self.catch_up.snapshot_interval_turns.is_multiple_of(sync))
        {
            // A snapshot is verified by its turn's sync check: it must fall on one.
            return Err(ConfigError::NotMultiple {
                field: "catch_up.snapshot_interval_turns",
                value: self.catch_up.snapshot_interval_turns.into(),
                of_field: "sync.interval_turns",
                of: sync.into(),
            });
        }
        Ok(())
    }
}

/// The longest turn cost a game or a peer may report (speed control input): one minute.
/// Larger reports are capped rather than refused.
pub(crate) const TURN_COST_MAX_MS: u32 = 60_000;

/// The longest playout buffer: the limit of `playout.buffer_ms_max`, and of what the host believes a
/// client's report.
pub(crate) const PLAYOUT_MAX_MS: u32 = 1_000;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

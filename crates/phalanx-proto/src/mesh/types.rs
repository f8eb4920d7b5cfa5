//! What a peer shows its game and driver: its settings, errors, events and counters.

use crate::bundle::DesyncReport;
use crate::config::ConfigError;
use crate::pace::Pace;
use crate::stats::DropCounters;
use crate::types::{PlayerId, Turn};

#[cfg(doc)]
use super::Peer;
#[cfg(doc)]
use crate::SessionConfig;

/// Settings only a mesh peer has; the rest comes from the [`SessionConfig`], which every peer
/// of a match must share.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerConfig {
    /// How long before its turn is due a contribution becomes final (ms): at least the worst
    /// one-way delay plus its jitter between any two peers, or turns wait. A command given as
    /// a turn executes runs `turns.length_ms` later when this is below a turn. Default: 100.
    pub lead_ms: u32,
    /// 0 (the default): each turn becomes final on its own, in a datagram to every peer, sent
    /// `copies` times. Above 0, the modem's way ([`PeerConfig::modem`]): turns become final
    /// in batches, the turns due within `ahead_ms` of the batch's first at once, in one
    /// datagram to each peer; a peer whose batch is overdue is asked for it again, and the
    /// lead grows by a round trip to leave time for that. A command waits for the next batch:
    /// up to `ahead_ms` more.
    pub ahead_ms: u32,
    /// How many times a datagram that makes turns final goes, `repeat_ms` apart, so a lost
    /// one does not stall everyone: every one when `ahead_ms` is 0, else those with new
    /// commands. 0 or 1 (or a `repeat_ms` of 0): once. Default: 3.
    pub copies: u8,
    /// The time between copies (ms), and between the two requests for an overdue batch and
    /// the two answers with `ahead_ms`. Default: 15.
    pub repeat_ms: u32,
    /// A pair that has had nothing from us for this long gets a datagram anyway (ms). Default: 1,000.
    pub heartbeat_ms: u32,
    /// How long a peer never heard from may stay silent before it is taken for gone (ms; at
    /// least `link.idle_timeout_ms`). Peers start as their links open, and one whose links go
    /// through a rendezvous starts seconds after the others. Default: 10,000.
    pub first_contact_ms: u32,
}

impl Default for PeerConfig {
    fn default() -> Self {
        PeerConfig {
            lead_ms: 100,
            ahead_ms: 0,
            copies: 3,
            repeat_ms: 15,
            heartbeat_ms: 1_000,
            first_contact_ms: 10_000,
        }
    }
}

impl PeerConfig {
    /// The modem's profile: turns become final in batches 400 ms apart (`ahead_ms`), each
    /// batch sent once, an overdue one asked for again (the lead grows by a round trip to
    /// leave time for that). With 100 ms turns a player sends an eighth as many datagrams as
    /// with the default profile, and a command waits up to a batch longer, plus the round
    /// trip. Figures: `docs/guide/peer-to-peer.md`.
    pub fn modem() -> Self {
        PeerConfig { ahead_ms: 400, copies: 1, ..PeerConfig::default() }
    }
}

/// Why a [`Peer`] could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerError {
    /// The session config is invalid.
    Config(ConfigError),
    /// The roster is unusable: the reason says why.
    Roster(&'static str),
    /// A setting of the [`PeerConfig`] is out of range.
    Setting(&'static str),
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Config(error) => write!(f, "invalid session config: {error}"),
            PeerError::Roster(why) => write!(f, "invalid roster: {why}"),
            PeerError::Setting(why) => write!(f, "invalid peer setting: {why}"),
        }
    }
}

impl std::error::Error for PeerError {}

/// How a peer's match ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerEnd {
    /// The master ended the game ([`Peer::end`]); every turn up to the last was executed.
    Finished {
        /// The game's reason.
        code: u32,
    },
    /// The master ended the game after a desync (`DesyncPolicy::End`).
    Desync,
    /// We left ([`Peer::leave`]) and every peer has our last contribution, or the idle
    /// timeout passed trying.
    Left,
    /// We cannot reach a majority of the match (or half of it without its lowest player):
    /// the other side plays on without us.
    LostMajority,
}

impl From<PeerEnd> for crate::EndReason {
    fn from(end: PeerEnd) -> Self {
        match end {
            PeerEnd::Finished { code } => crate::EndReason::Finished { code },
            PeerEnd::Desync => crate::EndReason::Desync,
            PeerEnd::Left => crate::EndReason::Left,
            PeerEnd::LostMajority => crate::EndReason::LostMajority,
        }
    }
}

impl PeerEnd {
    /// The reason in lower case, one word, as reports print it.
    pub fn name(&self) -> &'static str {
        match self {
            PeerEnd::Finished { .. } => "finished",
            PeerEnd::Desync => "desync",
            PeerEnd::Left => "left",
            PeerEnd::LostMajority => "lost_majority",
        }
    }
}

/// Something the game or driver should know. Drained with [`Peer::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerEvent {
    /// The match is over for us.
    Ended(PeerEnd),
    /// A check turn's state hashes differ; raised as the turn carrying the report executes
    /// (the same turn on every peer).
    Desync(DesyncReport),
    /// The master is now this player.
    MasterChanged(PlayerId),
    /// A peer's departure was decided: its contributions count through `last` (none if
    /// `None`), and its `Left` record is in the next turn.
    PeerGone {
        /// The peer.
        player: PlayerId,
        /// Its last turn.
        last: Option<Turn>,
    },
    /// The next turn is due, and these peers' contributions to it are missing.
    Waiting(Vec<PlayerId>),
    /// The wait announced by `Waiting` is over.
    StallEnded,
    /// The pace changes from the next turn on.
    PaceChanged(Pace),
}

/// One pair's counters, as [`Peer::stats`] reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PairStats {
    /// The other peer.
    pub player: PlayerId,
    /// The smoothed round trip to it (ms), once measured.
    pub rtt_ms: Option<u32>,
    /// Datagrams sent to it.
    pub datagrams_sent: u64,
    /// Datagrams received from it.
    pub datagrams_received: u64,
    /// Bytes sent to it (phalanx's payload, without the transport's).
    pub bytes_sent: u64,
    /// Bytes received from it.
    pub bytes_received: u64,
    /// Its datagrams we dropped, by cause.
    pub drops: DropCounters,
    /// Whether it is still in the match.
    pub in_match: bool,
}

/// A peer's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerStats {
    /// One entry per other player of the roster, ascending.
    pub pairs: Vec<PairStats>,
    /// Turns executed.
    pub turns_executed: u64,
    /// Time spent waiting past a turn's due time for contributions, ms.
    pub stall_ms: u64,
    /// Latency of our own commands, submit to execution, over the most recent 1,024 (ms).
    pub latency_ms_p50: Option<u32>,
    /// The 95th percentile.
    pub latency_ms_p95: Option<u32>,
    /// The largest.
    pub latency_ms_max: Option<u32>,
    /// The master as we see it.
    pub master: Option<PlayerId>,
    /// How long before its turn our contribution becomes final now (ms): `lead_ms`, or
    /// more when our worst peer's round trip needs it.
    pub lead_ms: u32,
    /// Datagrams from players not in the roster, dropped.
    pub unknown_sender: u64,
    /// Control records from a peer not allowed to make them, ignored.
    pub controls_refused: u64,
    /// Events dropped because nobody polled them.
    pub events_dropped: u64,
}

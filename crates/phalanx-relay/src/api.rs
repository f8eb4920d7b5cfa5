//! The relay's vocabulary: matches, their seats and join codes, what an operator asks and why
//! it may be refused.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use phalanx_proto::{JoinCode, PlayerId, SessionConfig};

use crate::metrics::Lateness;
use serde::{Deserialize, Serialize};

/// A match's name on a relay: 64 random bits, printed as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MatchId(pub u64);

impl fmt::Display for MatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Text that is not a [`MatchId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchIdError;

impl fmt::Display for MatchIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a match id (16 hex digits)")
    }
}

impl std::error::Error for MatchIdError {}

impl FromStr for MatchId {
    type Err = MatchIdError;
    fn from_str(text: &str) -> Result<MatchId, MatchIdError> {
        if text.len() != 16 {
            return Err(MatchIdError);
        }
        u64::from_str_radix(text, 16).map(MatchId).map_err(|_| MatchIdError)
    }
}

impl Serialize for MatchId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// When a match starts sealing turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartPolicy {
    /// As soon as every player's seat is taken (the default).
    #[default]
    WhenFull,
    /// When the operator says ([`crate::RelayHandle::start_match`]).
    Manual,
}

/// What a new match is: its players, its session, who may watch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MatchSpec {
    /// Players' seats, 1 to the relay's [`Limits::players_max`](crate::Limits::players_max).
    pub players: u8,
    /// The session every player's client must run with (its `game_data_hash` and
    /// `link.heartbeat_ms` are checked at the join).
    pub session: SessionConfig,
    /// The seats' tokens, one a player; `None` (the default): random tokens, handed back.
    pub tokens: Option<Vec<u64>>,
    /// Spectator seats (random tokens, handed back). Default 0.
    pub spectators: u8,
    /// When the match starts. Default: [`StartPolicy::WhenFull`].
    pub start: StartPolicy,
    /// The relay ends the match (code 0) once it has sealed this many turns (turns 0 to
    /// `turns_max - 1`; the end is in the next), as a game's own host would at its last turn.
    /// Default `None`: the match runs until the operator ends it or its players leave.
    pub turns_max: Option<u32>,
}

impl MatchSpec {
    /// A match for `players` with the default session.
    pub fn new(players: u8) -> MatchSpec {
        MatchSpec {
            players,
            session: SessionConfig::default(),
            tokens: None,
            spectators: 0,
            start: StartPolicy::WhenFull,
            turns_max: None,
        }
    }
}

/// One seat of a created match, as the lobby hands it to a player.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SeatTicket {
    /// The player this seat is (`PlayerId(0)` for the first token).
    pub player: u8,
    /// The token the client joins with (`ClientOptions::new(token, pin)`).
    pub token: u64,
    /// The same token as a player types it.
    pub code: JoinCode,
}

/// A created match: where to join it and with what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MatchTicket {
    /// The match.
    pub id: MatchId,
    /// The UDP address its players connect to.
    pub address: SocketAddr,
    /// The relay's key, as a client pins it (`udp:<hex>`; `phalanx::Pin` parses it).
    pub pin: String,
    /// One seat a player.
    pub seats: Vec<SeatTicket>,
    /// Spectator tokens.
    pub spectators: Vec<SeatTicket>,
}

/// Where a match is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchState {
    /// Waiting for players (not started).
    Lobby,
    /// Sealing turns.
    Running,
    /// Paused by a player.
    Paused,
    /// Ended; waiting for every player to hold the last turn before it is freed.
    Ending,
}

/// What the relay knows of one match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MatchInfo {
    /// The match.
    pub id: MatchId,
    /// Where it is in its life.
    pub state: MatchState,
    /// Players' seats.
    pub players: u8,
    /// Players connected now.
    pub connected: Vec<u8>,
    /// Spectators connected now.
    pub spectators: usize,
    /// The next turn to be sealed.
    pub turn: u64,
    /// Commands sealed into turns so far.
    pub commands: u64,
    /// Milliseconds since the match was created.
    pub age_ms: u64,
    /// Turns sealed, and how late: the 99th percentile, in milliseconds (a bucket's bound).
    pub seal_lateness_p99_ms: Option<u64>,
    /// The latest a turn was sealed, in milliseconds.
    pub seal_lateness_max_ms: u64,
    /// How late its turns were sealed, the whole histogram (for a window's figures:
    /// [`Lateness::since`]).
    pub seal_lateness: Lateness,
}

/// Why a match was not created. Nothing was created.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CreateError {
    /// The relay is draining: it takes no new match.
    Draining,
    /// The relay holds [`Limits::matches_max`](crate::Limits::matches_max) matches.
    Full {
        /// The limit.
        max: usize,
    },
    /// More players (or spectators) than the relay's limits allow, or none.
    Players {
        /// The players asked for.
        asked: u8,
        /// The most allowed.
        max: u8,
    },
    /// The tokens given are not one a player, or one is in use by another match or repeated.
    Tokens(String),
    /// The session configuration is not valid.
    Config(String),
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CreateError::Draining => f.write_str("the relay is draining: no new matches"),
            CreateError::Full { max } => write!(f, "the relay holds its most matches ({max})"),
            CreateError::Players { asked, max } => {
                write!(f, "{asked} seats asked; 1 to {max} players (and up to {max} spectators)")
            }
            CreateError::Tokens(why) => write!(f, "tokens: {why}"),
            CreateError::Config(why) => write!(f, "session configuration: {why}"),
        }
    }
}

impl std::error::Error for CreateError {}

/// Why an operation on a match failed. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchError {
    /// No match by that id (never created, or already freed).
    UnknownMatch(MatchId),
    /// No such player is seated in that match.
    NotSeated(PlayerId),
    /// The match has ended already.
    Ended,
    /// The match has started already.
    Started,
    /// The relay stopped.
    Stopped,
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::UnknownMatch(id) => write!(f, "no match {id}"),
            MatchError::NotSeated(player) => write!(f, "player {} is not seated", player.0),
            MatchError::Ended => f.write_str("the match has ended"),
            MatchError::Started => f.write_str("the match has started"),
            MatchError::Stopped => f.write_str("the relay stopped"),
        }
    }
}

impl std::error::Error for MatchError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_ids_print_and_parse_back() {
        for value in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            let id = MatchId(value);
            assert_eq!(id.to_string().parse(), Ok(id));
        }
        assert_eq!("123".parse::<MatchId>(), Err(MatchIdError));
        assert_eq!("0123456789abcdeg".parse::<MatchId>(), Err(MatchIdError));
    }
}

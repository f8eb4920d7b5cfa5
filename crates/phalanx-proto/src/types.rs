//! The newtypes of the protocol: turns, players, command sequence numbers, tickets.

use std::fmt;

/// Declares a public newtype over an integer: `Copy`, compared, ordered and hashed as the
/// integer, and serialized as serde's newtype of it. Attributes (its docs, any extra derives)
/// go before the name.
macro_rules! newtype {
    ($(#[$attr:meta])* $name:ident($inner:ty)) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[derive(serde::Serialize, serde::Deserialize)]
        pub struct $name(pub $inner);
    };
}

newtype! {
    /// A communication turn: the unit of lockstep time. Turn `t`'s commands execute on every
    /// peer when it executes turn `t`. Logical time — never derived from a clock.
    #[derive(Default)]
    Turn(u32)
}

impl Turn {
    /// The first turn of a session.
    pub const ZERO: Turn = Turn(0);

    /// The turn `turns` later, or `None` past `u32::MAX` (a session would have to run for 13
    /// years of the default 100 ms turns to get there; a peer claiming it is classified as
    /// far-future).
    pub fn checked_add(self, turns: u32) -> Option<Turn> {
        self.0.checked_add(turns).map(Turn)
    }

    /// The turn `turns` later, stopping at `u32::MAX`.
    pub fn saturating_add(self, turns: u32) -> Turn {
        Turn(self.0.saturating_add(turns))
    }

    /// The next turn, stopping at `u32::MAX`.
    pub fn next(self) -> Turn {
        self.saturating_add(1)
    }

    /// How many turns `self` is after `earlier` (0 if it is not after it).
    pub fn since(self, earlier: Turn) -> u32 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Turn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "turn {}", self.0)
    }
}

newtype! {
    /// A player's seat in the session, `0..turns.players_max`. Bound to a connection at join; a
    /// player id inside a later message from a peer is never trusted.
    PlayerId(u8)
}

impl fmt::Display for PlayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "player {}", self.0)
    }
}

newtype! {
    /// A spectator's slot in the session, `0..catch_up.spectators_max`. Bound to a connection at join
    /// as a player's seat is, but outside the game: it is sent the sealed turns, is never
    /// waited for, and nothing it sends enters a turn.
    SpectatorId(u8)
}

impl fmt::Display for SpectatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "spectator {}", self.0)
    }
}

/// Who a join seated: a player, or a spectator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Joined {
    /// A player's seat.
    Player(PlayerId),
    /// A spectator's slot.
    Spectator(SpectatorId),
}

impl Joined {
    /// The player, if a player joined.
    pub fn player(self) -> Option<PlayerId> {
        match self {
            Joined::Player(player) => Some(player),
            Joined::Spectator(_) => None,
        }
    }

    /// The spectator, if a spectator joined.
    pub fn spectator(self) -> Option<SpectatorId> {
        match self {
            Joined::Spectator(spectator) => Some(spectator),
            Joined::Player(_) => None,
        }
    }
}

impl From<PlayerId> for Joined {
    fn from(player: PlayerId) -> Self {
        Joined::Player(player)
    }
}

newtype! {
    /// A command's sequence number, per player, from 0. With the player it names a command
    /// uniquely: `(player, seq)` is the canonical order within a turn and the duplicate key.
    #[derive(Default)]
    CommandSeq(u32)
}

/// What [`Client::submit`](crate::Client::submit) returns for an accepted command: its
/// sequence number and the turn it was stamped for. The command may still execute later than
/// `turn` if it reaches the host after that turn was sealed; the bundle says where it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket {
    /// The command's sequence number.
    pub seq: CommandSeq,
    /// The turn it was stamped to execute at.
    pub turn: Turn,
}

/// The players named in a bit mask (bit `i`: player `i`), in id order.
pub(crate) fn players_in(mask: u64) -> Vec<PlayerId> {
    (0..64u8).filter(|i| mask & (1 << i) != 0).map(PlayerId).collect()
}

/// The turn a command submitted now is stamped for: the game is executing the turn before
/// `next_exec`, and commands execute `delay` turns after it (AoE: issued in 1000, run in 1002).
pub(crate) fn stamp(next_exec: Turn, delay: u32) -> Turn {
    Turn(next_exec.0.saturating_sub(1)).saturating_add(delay).max(next_exec)
}

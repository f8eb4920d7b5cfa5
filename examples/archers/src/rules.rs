//! The match's rules every player must agree on, natively and in the browser: the players,
//! archers, seed and length ([`Match`]), folded into the session's game-data hash, and the
//! demo's session profile ([`demo_session`]).

use phalanx_proto::{PlayerId, SessionConfig};

use crate::world::Order;

/// The match both sides must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// Players (each a client process).
    pub players: usize,
    /// Archers in total.
    pub units: usize,
    /// The game's seed.
    pub seed: u64,
    /// Turns to play.
    pub turns: u32,
}

impl Match {
    /// The session config: default timing and speed control, `players` seats, and a game-data
    /// hash over the match parameters.
    pub fn session(&self) -> SessionConfig {
        let mut session = demo_session();
        session.turns.players_max = self.players as u8;
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for word in [self.players as u64, self.units as u64, self.seed, u64::from(self.turns)] {
            for byte in word.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        session.game_data_hash = hash;
        session
    }

    /// Whether `player` may give `order`: only for its own archers (army `p` is ids
    /// `p × per .. (p + 1) × per`, `per` = archers / players), and at least one of them. The
    /// host's command rule: an honest client never sends anything else.
    pub fn admits(&self, player: PlayerId, order: &Order) -> bool {
        let (Order::Move { first, count, .. }
        | Order::AttackMove { first, count, .. }
        | Order::Stop { first, count }) = *order;
        let per = self.units / self.players.max(1);
        let start = usize::from(player.0) * per;
        let (first, count) = (usize::from(first), usize::from(count));
        count > 0 && first >= start && first + count <= start + per
    }
}

/// The demo's departure from the default session: the quiet relay
/// ([`SessionConfig::quiet_relay`]), the profile for a 28.8 kbit/s modem (see
/// docs/design/quiet-relay.md). 150 ms turns (AoE used 200);
/// a client acknowledges turns in a heartbeat every 500 ms instead of every turn and sends its
/// commands at once (and once more); the host never repeats a turn on its own (once its link
/// to a player lost a datagram, each turn's datagram carries the two before it that are not
/// acknowledged; a first loss is reported overdue and resent); the playout buffer is a turn
/// more than the jitter calls for, up to 170 ms (a turn plus the network's 20 ms of jitter),
/// so a single lost turn's copy, or its resend at up to about 130 ms RTT, arrives in time, and
/// a command submitted as a turn
/// executes still reaches the host within two turns at 100 ms RTT; speed control tolerates a
/// round trip up to 20 ms past what two turns cover rather than raising the command delay to
/// three (450 ms). The window is 20 turns (3 s) rather than 16: acknowledgements come a
/// heartbeat apart, and the window counts from the oldest turn not acknowledged, so 16 turns
/// would stall everyone for a moment near the end of a 2 s outage. On the default network
/// over UDP, seeds 1–10: about 6.4 kbit/s per player, against 16.6 with the session's
/// defaults, and less stall.
pub fn tune(session: &mut SessionConfig) {
    *session = session.clone().quiet_relay();
}

/// The demo's session before a match is folded in: the default with [`tune`] applied. Its
/// turn length is what a match's length in minutes is counted in.
pub fn demo_session() -> SessionConfig {
    let mut session = SessionConfig::default();
    tune(&mut session);
    session
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::World;

    /// Every player's own army, as its bot orders it, is admitted; another's army, an empty
    /// group and a group running past the army are not.
    #[test]
    fn a_player_may_order_its_own_archers_only() {
        let game = Match { players: 8, units: 1_500, seed: 1, turns: 100 };
        let world = World::new(game.players, game.units, game.seed);
        for seat in 0..8u8 {
            let (first, count, (x, y)) = world.army(PlayerId(seat));
            let order = Order::AttackMove { first, count, x, y };
            assert!(game.admits(PlayerId(seat), &order), "seat {seat}'s own army");
            assert!(!game.admits(PlayerId((seat + 1) % 8), &order), "another's army");
            assert!(!game.admits(PlayerId(seat), &Order::Stop { first, count: 0 }));
            assert!(!game.admits(PlayerId(seat), &Order::Stop { first, count: count + 1 }));
        }
    }
}

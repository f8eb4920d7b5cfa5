//! A bot for one player, as every mode plays it: natively (the simulation, the real-socket
//! client) and in the browser (`examples/archers-web`).

use phalanx_proto::{PlayerId, SplitMix64, Turn};

use crate::world::{self, Order, World};

/// A bot for one player: orders at AoE's measured pace (one every 1.5–2 s, bursts of 3–4 a
/// second in battle), from its own seeded random stream and the battle it sees. Deterministic:
/// the same seed, player and battle give the same orders.
#[derive(Clone, Debug)]
pub struct Bot {
    player: PlayerId,
    players: usize,
    random: SplitMix64,
    next_order: u32,
    quiet_from: u32,
}

impl Bot {
    /// The bot of `player` of `players`, seeded with the game's `seed`; it gives no orders from
    /// turn `quiet_from` on.
    pub fn new(player: PlayerId, players: usize, seed: u64, quiet_from: u32) -> Bot {
        Bot {
            player,
            players,
            random: SplitMix64::new(
                seed ^ (u64::from(player.0) + 1).wrapping_mul(0xA24B_AED4_963E_E407),
            ),
            next_order: 10 + u32::from(player.0),
            quiet_from,
        }
    }

    fn random(&mut self) -> u64 {
        self.random.next_u64()
    }

    /// The orders to submit at `turn`, given the battle as it stands (usually none: a bot
    /// speaks every 15–20 turns).
    pub fn orders(&mut self, turn: Turn, world: &World) -> Vec<Order> {
        if turn.0 < self.next_order || turn.0 >= self.quiet_from || self.players < 2 {
            return Vec::new();
        }
        let (first, count, _) = world.army(self.player);
        let burst = if self.random().is_multiple_of(4) { 3 } else { 1 };
        let mut orders = Vec::new();
        for _ in 0..burst {
            let enemy =
                (usize::from(self.player.0) + 1 + (self.random() as usize % (self.players - 1)))
                    % self.players;
            let (x, y) = world::spawn(enemy, self.players);
            let group = (count / 4).max(1);
            let start = first + (self.random() % u64::from(count.saturating_sub(group) + 1)) as u16;
            let order = match self.random() % 10 {
                0 => Order::Stop { first: start, count: group },
                1..=2 => Order::Move { first, count, x, y },
                _ => Order::AttackMove { first: start, count: group, x, y },
            };
            orders.push(order);
        }
        // 15-20 turns at 100 ms: one order every 1.5-2 s.
        self.next_order = turn.0 + 15 + (self.random() % 6) as u32;
        orders
    }
}

//! Speculation: the player's own orders show at once, while the turns stay lockstep's.
//!
//! A lockstep game executes a turn only once every player's commands for it are in, so a
//! player's own order shows a round trip and a turn or two after it was given. A game that can
//! save and restore its state ([`Rollback`]) can also run a *predicted* state ahead of the
//! confirmed one: the confirmed turns as they come, then the turns after them with the local
//! player's own orders at the turns they were stamped for (or the next turn, once that one
//! passed without them: the host took them late) and nobody else's. The game renders
//! the predicted state; when the next confirmed turn arrives, [`Speculation::confirm`] rolls
//! the game back to the confirmed state, executes the confirmed turn on it and saves it, and
//! [`Speculation::predict`] runs ahead again.
//!
//! Nothing predicted reaches the confirmed state: after [`confirm`](Speculation::confirm)
//! the game holds exactly the state a game without speculation would hold after that turn,
//! which is the state to hash, snapshot and record. The cost is the game's: a save after each
//! confirmed turn and the re-simulation of the predicted turns
//! ([`SpeculationStats::resimulated_turns`]).
//!
//! ```ignore
//! let mut speculation = Speculation::new(me, &mut game);
//! loop {
//!     while let Some(turn) = session.try_next_turn() {
//!         speculation.confirm(&mut game, &turn); // the confirmed state: hash it here
//!         session.report_state_hash(turn.turn, game.state_hash())?;
//!     }
//!     for order in input.orders() {
//!         let ticket = session.submit(&order)?;
//!         speculation.submitted(ticket, order);
//!     }
//!     speculation.predict(&mut game, speculation.horizon(session.next_turn()));
//!     render(&game); // the predicted state
//! }
//! ```
//!
//! **Late seals.** When the next confirmed turn is late (lost on the way, or the host waiting
//! for a slow player), the confirmed game waits; the predicted one need not. Predict through
//! [`Speculation::horizon_late`] instead, with how long ago the turn fell due (phalanx's
//! `Session::overdue`): the game runs on through the turns due since, as predicted (with
//! nobody's orders but ours), at most `turns_max` of them, and rolls back as usual when the
//! confirmed turns come. The player sees the world move on instead of a stall; a turn that
//! carried another player's order corrects it.

use crate::typed::{TypedRecord, TypedTurn};
use crate::types::{CommandSeq, PlayerId, Ticket, Turn};

/// A game whose whole simulation state can be saved and restored: what speculation asks.
pub trait Rollback<C> {
    /// A saved state.
    type Saved;
    /// Saves the whole simulation state (`&mut`: an ECS world may need it to query).
    fn save(&mut self) -> Self::Saved;
    /// Puts back a state [`save`](Rollback::save) made.
    fn restore(&mut self, saved: &Self::Saved);
    /// Executes one turn, confirmed or predicted, as it executes any turn. A predicted one
    /// has [`TypedTurn::predicted`] set: it will be rolled back, so what cannot be taken back
    /// (a replay, statistics, a sound) waits for the confirmed turn.
    fn execute(&mut self, turn: &TypedTurn<C>);
}

/// What speculation cost so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpeculationStats {
    /// Confirmed turns taken.
    pub confirmed_turns: u64,
    /// Predicted turns executed, counting each again every time it was re-simulated.
    pub predicted_turns: u64,
    /// Predicted turns thrown away by a confirmed turn (rolled back), counting each time.
    pub resimulated_turns: u64,
    /// Confirmed turns that differed from what was predicted for them (another player's
    /// commands, or ours at another turn than stamped).
    pub mispredictions: u64,
    /// Own orders given and not yet seen in a confirmed turn, now.
    pub pending_orders: usize,
}

/// Runs a game ahead of the confirmed turns on the local player's own orders (see the
/// [module docs](self)). `S` is the game's saved state.
pub struct Speculation<C, S> {
    me: PlayerId,
    /// The state after the last confirmed turn (before any, the game's initial state).
    confirmed: S,
    /// The next confirmed turn expected.
    next_confirmed: Turn,
    /// Our own orders not yet seen in a confirmed turn, by stamped turn then sequence.
    pending: Vec<(Ticket, C)>,
    /// The game holds a predicted state, through the turn before this one.
    predicted_to: Option<Turn>,
    /// An order came for a turn already predicted: the next `predict` starts over.
    stale: bool,
    /// The counts (`pending_orders` is read from `pending` when asked).
    stats: SpeculationStats,
}

impl<C: Clone, S> Speculation<C, S> {
    /// Speculation for player `me`, starting from `game`'s state now (before its first turn).
    pub fn new<G: Rollback<C, Saved = S>>(me: PlayerId, game: &mut G) -> Speculation<C, S> {
        Speculation {
            me,
            confirmed: game.save(),
            next_confirmed: Turn::ZERO,
            pending: Vec::new(),
            predicted_to: None,
            stale: false,
            stats: SpeculationStats::default(),
        }
    }

    /// An order of ours the session took (`ticket` from `submit`): predicted at its stamped
    /// turn until a confirmed turn carries it. The next [`predict`](Self::predict) re-runs
    /// from that turn if the game already ran past it.
    pub fn submitted(&mut self, ticket: Ticket, command: C) {
        let at =
            self.pending.partition_point(|(t, _)| (t.turn, t.seq) <= (ticket.turn, ticket.seq));
        self.pending.insert(at, (ticket, command));
        // Predicted past the order's turn without it: those turns run again.
        self.stale |= self.predicted_to.is_some_and(|to| to > ticket.turn);
    }

    /// The host will never seal our order `seq` (the session's `CommandRefused` event): it is
    /// no longer predicted. If the game's predicted state shows it, the game goes back to the
    /// confirmed state now (the next [`predict`](Self::predict) runs ahead again on the orders
    /// still pending). Returns whether it was pending. Without this a refused order would
    /// show in every prediction, and each confirmed turn would roll it back.
    pub fn refused<G: Rollback<C, Saved = S>>(&mut self, game: &mut G, seq: CommandSeq) -> bool {
        let Some(index) = self.pending.iter().position(|(ticket, _)| ticket.seq == seq) else {
            return false;
        };
        let (ticket, _) = self.pending.remove(index);
        let at = self.predicted_at(&ticket);
        if self.predicted_to.is_some_and(|to| to > at) {
            self.back_to_confirmed(game);
        }
        true
    }

    /// A confirmed turn (the next, in order, as the session hands them out): the game goes
    /// back to the confirmed state, executes `turn` and is saved. Afterwards it holds
    /// exactly the state a game without speculation holds after `turn`.
    pub fn confirm<G: Rollback<C, Saved = S>>(&mut self, game: &mut G, turn: &TypedTurn<C>) {
        if self.predicted_to.is_some() && !self.predicted_as(turn) {
            self.stats.mispredictions += 1;
        }
        self.back_to_confirmed(game);
        game.execute(turn);
        self.confirmed = game.save();
        self.next_confirmed = turn.turn.next();
        self.stats.confirmed_turns += 1;
        let me = self.me;
        let seen: Vec<CommandSeq> = turn
            .records
            .iter()
            .filter_map(|record| match record {
                TypedRecord::Command { player, seq, .. } if *player == me => Some(*seq),
                _ => None,
            })
            .collect();
        self.pending.retain(|(ticket, _)| !seen.contains(&ticket.seq));
    }

    /// Runs the game ahead through turn `through` (included) on our own pending orders:
    /// from the confirmed state if it holds that, else on from where it is. Does nothing
    /// when `through` is before the next confirmed turn.
    pub fn predict<G: Rollback<C, Saved = S>>(&mut self, game: &mut G, through: Turn) {
        if self.stale {
            self.back_to_confirmed(game);
        }
        let mut turn = self.predicted_to.unwrap_or(self.next_confirmed);
        while turn <= through {
            game.execute(&self.predicted_turn(turn));
            self.stats.predicted_turns += 1;
            turn = turn.next();
        }
        if turn > self.next_confirmed {
            self.predicted_to = Some(turn);
        }
    }

    /// How far to predict: the turn the schedule is at (`now`, say the session's next turn),
    /// or the stamped turn of our newest pending order if that is later, so that it shows.
    pub fn horizon(&self, now: Turn) -> Turn {
        self.pending.iter().map(|(ticket, _)| ticket.turn).fold(now, Turn::max)
    }

    /// How far to predict with late seals: as [`horizon`](Self::horizon) from the next
    /// confirmed turn, and through the turns due on the schedule since it fell due
    /// `overdue_ms` ago (each `length_ms` long), at most `turns_max` of them past it.
    pub fn horizon_late(&self, overdue_ms: u64, length_ms: u32, turns_max: u32) -> Turn {
        let late = (overdue_ms / u64::from(length_ms.max(1))).min(u64::from(turns_max));
        self.horizon(self.next_confirmed.saturating_add(late as u32))
    }

    /// Whether the game holds a predicted state (ahead of the confirmed one) now.
    pub fn is_predicting(&self) -> bool {
        self.predicted_to.is_some()
    }

    /// The last turn the game's predicted state has executed (`None`: it holds the confirmed
    /// state).
    pub fn predicted_through(&self) -> Option<Turn> {
        self.predicted_to.map(|to| Turn(to.0.saturating_sub(1)))
    }

    /// The next confirmed turn expected.
    pub fn next_confirmed(&self) -> Turn {
        self.next_confirmed
    }

    /// What speculation cost so far.
    pub fn stats(&self) -> SpeculationStats {
        SpeculationStats { pending_orders: self.pending.len(), ..self.stats }
    }

    /// The turn we predict an order of ours at: its stamped turn, or the next confirmed one
    /// once that passed without it (it arrived late, and goes into the first turn the host
    /// had not sealed yet).
    fn predicted_at(&self, ticket: &Ticket) -> Turn {
        ticket.turn.max(self.next_confirmed)
    }

    /// The turn we predict for `turn`: our pending orders predicted at it, nobody else's.
    fn predicted_turn(&self, turn: Turn) -> TypedTurn<C> {
        let records = self
            .pending
            .iter()
            .filter(|(ticket, _)| self.predicted_at(ticket) == turn)
            .map(|(ticket, command)| TypedRecord::Command {
                player: self.me,
                seq: ticket.seq,
                command: Ok(command.clone()),
            })
            .collect();
        TypedTurn {
            turn,
            records,
            length_ms: 0,
            restore: None,
            wants_snapshot: false,
            catching_up: false,
            last: false,
            predicted: true,
        }
    }

    /// Whether `turn` is what we predicted for it: exactly our pending orders predicted at it.
    fn predicted_as(&self, turn: &TypedTurn<C>) -> bool {
        let mut expected =
            self.pending.iter().filter(|(ticket, _)| self.predicted_at(ticket) == turn.turn);
        let mut records = turn.records.iter();
        loop {
            let (wanted, record) = (expected.next(), records.next());
            let same = match (wanted, record) {
                (None, None) => return true,
                (Some((ticket, _)), Some(TypedRecord::Command { player, seq, .. })) => {
                    (*player, *seq) == (self.me, ticket.seq)
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
    }

    /// Puts the game back in the confirmed state if it ran ahead, counting the turns thrown
    /// away.
    fn back_to_confirmed<G: Rollback<C, Saved = S>>(&mut self, game: &mut G) {
        self.stale = false;
        if let Some(to) = self.predicted_to.take() {
            game.restore(&self.confirmed);
            self.stats.resimulated_turns += u64::from(to.0.saturating_sub(self.next_confirmed.0));
        }
    }
}

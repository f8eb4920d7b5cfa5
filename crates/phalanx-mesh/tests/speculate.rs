//! Speculation (`phalanx_proto::speculate`) never changes the confirmed game, and shows the
//! player's own orders at once (L1, seeded, 200 seeds a run).
//!
//! A host seals a turn every four frames with the other players' random commands and ours,
//! each of ours at its stamped turn or, when it arrives late, at the first turn not sealed
//! yet; the client receives the sealed turns in bursts, up to three turns late. One client
//! speculates: it confirms each turn as it arrives, gives orders, and predicts ahead every
//! frame (in half the frames through the late turns too: `horizon_late`); another
//! just executes the turns. After every confirmed turn the speculating game's state is
//! bit for bit the other's, and after every frame the predicted state shows our latest order.

use phalanx_mesh::{ensure, for_each_seed, seeded_test, Rng};
use phalanx_proto::speculate::{Rollback, Speculation};
use phalanx_proto::{CommandSeq, PlayerId, Ticket, Turn, TypedRecord, TypedTurn};

const SEEDS: u64 = 200;
const FRAMES_PER_TURN: u32 = 4;
const ME: PlayerId = PlayerId(1);

/// Set unit `unit`'s velocity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    unit: usize,
    velocity: i64,
}

/// A toy deterministic game: units that move, and a chain over everything that happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct World {
    position: [i64; 4],
    velocity: [i64; 4],
    chain: u64,
}

impl World {
    fn mix(&mut self, value: u64) {
        self.chain = (self.chain ^ value).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

impl Rollback<Order> for World {
    type Saved = World;

    fn save(&mut self) -> World {
        self.clone()
    }

    fn restore(&mut self, saved: &World) {
        self.clone_from(saved);
    }

    fn execute(&mut self, turn: &TypedTurn<Order>) {
        for record in &turn.records {
            if let TypedRecord::Command { player, seq, command: Ok(order) } = record {
                self.velocity[order.unit] = order.velocity;
                self.mix(u64::from(player.0) << 32 | u64::from(seq.0));
            }
        }
        for unit in 0..4 {
            self.position[unit] += self.velocity[unit];
            self.mix(self.position[unit] as u64);
        }
        self.mix(u64::from(turn.turn.0));
    }
}

fn turn(number: u32, records: Vec<TypedRecord<Order>>) -> TypedTurn<Order> {
    TypedTurn {
        turn: Turn(number),
        records,
        length_ms: 100,
        restore: None,
        wants_snapshot: false,
        catching_up: false,
        last: false,
        predicted: false,
    }
}

/// The host's side: the turns it sealed, and our orders on their way to it.
#[derive(Default)]
struct Host {
    sealed: Vec<TypedTurn<Order>>,
    /// (frame it arrives, stamped turn, seq, order)
    in_flight: Vec<(u32, Turn, CommandSeq, Order)>,
}

impl Host {
    /// Seals the next turn: the orders of ours that arrived and are due, others' at random.
    fn seal(&mut self, frame: u32, rng: &mut Rng) {
        let number = self.sealed.len() as u32;
        let mut records = Vec::new();
        for player in 0..3u8 {
            if player == ME.0 {
                let (due, later): (Vec<_>, Vec<_>) = self
                    .in_flight
                    .iter()
                    .partition(|(at, stamped, _, _)| *at <= frame && stamped.0 <= number);
                self.in_flight = later;
                records.extend(due.into_iter().map(|(_, _, seq, order)| TypedRecord::Command {
                    player: ME,
                    seq,
                    command: Ok(order),
                }));
            } else if rng.chance(150) {
                let order =
                    Order { unit: rng.below(4) as usize, velocity: rng.below(7) as i64 - 3 };
                let seq = CommandSeq(number);
                records.push(TypedRecord::Command {
                    player: PlayerId(player),
                    seq,
                    command: Ok(order),
                });
            }
        }
        self.sealed.push(turn(number, records));
    }
}

fn run(seed: u64) -> Result<(u64, u64), String> {
    let mut rng = Rng::new(seed);
    let mut host = Host::default();
    let (mut plain, mut game) = (World::default(), World::default());
    let mut speculation = Speculation::new(ME, &mut game);
    let (mut delivered, mut next_seq, mut last_order) = (0usize, 0u32, None::<(u32, Order)>);
    let mut confirmed_seqs = Vec::new();
    for frame in 0..800u32 {
        if frame % FRAMES_PER_TURN == 0 {
            host.seal(frame, &mut rng);
        }
        // Late seals: the turns reach us up to three turns behind, in bursts.
        let behind = rng.below(4) as usize;
        let reach = host.sealed.len().saturating_sub(behind).max(delivered);
        for sealed in &host.sealed[delivered..reach] {
            speculation.confirm(&mut game, sealed);
            plain.execute(sealed);
            confirmed_seqs.extend(sealed.records.iter().filter_map(|record| match record {
                TypedRecord::Command { player, seq, .. } if *player == ME => Some(seq.0),
                _ => None,
            }));
            ensure(game == plain, || {
                format!("seed {seed}: after confirmed turn {} the states differ", sealed.turn.0)
            })?;
        }
        delivered = reach;
        if rng.chance(100) {
            let order = Order { unit: 1, velocity: rng.below(9) as i64 - 4 };
            let stamped = Turn(speculation.next_confirmed().0 + 2);
            let ticket = Ticket { seq: CommandSeq(next_seq), turn: stamped };
            next_seq += 1;
            host.in_flight.push((frame + rng.below(12) as u32, stamped, ticket.seq, order));
            speculation.submitted(ticket, order);
            last_order = Some((ticket.seq.0, order));
        }
        let now = Turn(speculation.next_confirmed().0 + 1);
        // Half the frames late-seal: on through the turns still behind, at most 0 to 5.
        let horizon = if rng.chance(500) {
            speculation.horizon_late(behind as u64, 1, rng.below(6) as u32)
        } else {
            speculation.horizon(now)
        };
        speculation.predict(&mut game, horizon);
        // Our latest order, while no confirmed turn carried it, shows in the predicted state
        // (an older one of ours that the host took later may override it once confirmed).
        if let Some((_, order)) = last_order.filter(|(seq, _)| !confirmed_seqs.contains(seq)) {
            ensure(game.velocity[1] == order.velocity, || {
                format!("seed {seed} frame {frame}: our latest order does not show")
            })?;
        }
    }
    let stats = speculation.stats();
    ensure(stats.confirmed_turns == delivered as u64, || format!("{stats:?}"))?;
    Ok((stats.mispredictions, stats.resimulated_turns))
}

#[test]
fn speculation_never_changes_the_confirmed_game() {
    let totals = std::sync::Mutex::new((0u64, 0u64));
    for_each_seed(seeded_test!("speculation_confirmed"), SEEDS, |seed| {
        let (mispredicted, resimulated) = run(seed)?;
        let mut totals = totals.lock().expect("not poisoned");
        totals.0 += mispredicted;
        totals.1 += resimulated;
        Ok(())
    });
    let (mispredicted, resimulated) = totals.into_inner().expect("not poisoned");
    // The runs exercised rollbacks, not only the easy path.
    assert!(mispredicted > 0 && resimulated > 0, "{mispredicted} {resimulated}");
}

/// An order the host refused (`Speculation::refused`, on the session's `CommandRefused`)
/// stops showing at once, and the turns after it are not rolled back for it; left pending,
/// it would show in every prediction and roll back every confirmed turn.
#[test]
fn a_refused_order_stops_showing() {
    let order = Order { unit: 1, velocity: 3 };
    let ticket = Ticket { seq: CommandSeq(0), turn: Turn(2) };
    let mispredictions = |refuse: bool| {
        let (mut game, mut plain) = (World::default(), World::default());
        let mut speculation = Speculation::new(ME, &mut game);
        speculation.submitted(ticket, order);
        speculation.predict(&mut game, speculation.horizon(Turn(1)));
        assert_eq!(game.velocity[1], 3, "the order shows at once");
        if refuse {
            assert!(speculation.refused(&mut game, ticket.seq));
            assert_eq!(game, plain, "refused: it shows no more, at once");
            assert!(!speculation.refused(&mut game, ticket.seq), "told once");
        }
        for number in 0..6 {
            let sealed = turn(number, Vec::new());
            speculation.confirm(&mut game, &sealed);
            plain.execute(&sealed);
            assert_eq!(game, plain);
            speculation.predict(&mut game, speculation.horizon(Turn(number + 1)));
        }
        let stats = speculation.stats();
        assert_eq!(stats.pending_orders, usize::from(!refuse));
        stats.mispredictions
    };
    // Refused before its turn was confirmed: no turn rolls back for it. Left pending, it is
    // predicted at each next turn, and each confirmed turn without it is a misprediction.
    assert_eq!(mispredictions(true), 0);
    assert!(mispredictions(false) >= 4, "a pending refused order rolls back every turn");
}

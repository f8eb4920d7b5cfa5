//! The deterministic battle: integer math only, units in id order, gameplay events (arrow
//! impacts, reloads) in phalanx-wheel's `HierarchicalWheel` on sim ticks, and a state hash
//! that covers the units and every pending event.

use phalanx_proto::{PlayerId, SplitMix64, TypedRecord, TypedTurn};
use phalanx_wheel::HierarchicalWheel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Sim ticks per communication turn (the game runs in lockstep turns of ticks).
pub const TICKS_PER_TURN: u64 = 2;
const MAP: i32 = 4_096;
/// The map's width and height, in world units.
pub const MAP_SIZE: i32 = MAP;
const CELL: i32 = 128;
const CELLS: usize = (MAP / CELL) as usize;
const SPEED: i32 = 8;
const RANGE: i32 = 120;
const RELOAD_TICKS: u64 = 6;
const HP: i32 = 100;

/// A player's order for a group of its units: ids `first..first + count` (only its own units
/// obey). A whole army fits in these few bytes, so an order never outgrows a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // the fields are the group's ids and the target point
pub enum Order {
    /// Walk to a point, ignoring enemies.
    Move { first: u16, count: u16, x: i32, y: i32 },
    /// Walk to a point, fighting whatever comes in range.
    AttackMove { first: u16, count: u16, x: i32, y: i32 },
    /// Stop and hold.
    Stop { first: u16, count: u16 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Goal {
    Idle,
    Move(i32, i32),
    AttackMove(i32, i32),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Unit {
    owner: u8,
    x: i32,
    y: i32,
    hp: i32,
    goal: Goal,
    target: Option<u16>,
    loaded: bool,
}

/// An arrow in flight ([`World::arrows`]): a view for drawing, not part of the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrow {
    /// The archer's army.
    pub army: u8,
    /// Where the archer stands now.
    pub from: (i32, i32),
    /// Where its target stands now.
    pub to: (i32, i32),
    /// The tick it was shot.
    pub shot_at: u64,
    /// The tick it lands (it hits: arrows never miss).
    pub lands_at: u64,
}

/// A gameplay event on the wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Event {
    Impact { target: u16, damage: i32 },
    Reload { unit: u16 },
}

/// The battlefield. It serializes whole (units, pending events with their order, tick,
/// random state) for snapshots; the grid is rebuilt every tick, so it is not saved.
#[derive(Debug, Serialize, Deserialize)]
pub struct World {
    units: Vec<Unit>,
    events: HierarchicalWheel<Event>,
    tick: u64,
    rng: SplitMix64,
    #[serde(skip, default = "empty_grid")]
    grid: Vec<Vec<u16>>,
}

fn empty_grid() -> Vec<Vec<u16>> {
    vec![Vec::new(); CELLS * CELLS]
}

impl World {
    /// `players` armies of `units / players` archers each, on a circle, seeded.
    pub fn new(players: usize, units: usize, seed: u64) -> World {
        let per = units / players.max(1);
        let mut list = Vec::with_capacity(units);
        for owner in 0..players {
            // Spawn points on a circle, from a small integer table (no floats anywhere).
            let (cx, cy) = spawn(owner, players);
            let mut side = 1i32;
            while (side * side) < per as i32 {
                side += 1;
            }
            for i in 0..per as i32 {
                list.push(Unit {
                    owner: owner as u8,
                    x: cx + (i % side) * 24 - side * 12,
                    y: cy + (i / side) * 24 - side * 12,
                    hp: HP,
                    goal: Goal::Idle,
                    target: None,
                    loaded: true,
                });
            }
        }
        World {
            units: list,
            events: HierarchicalWheel::new(0),
            tick: 0,
            rng: SplitMix64::new(seed),
            grid: empty_grid(),
        }
    }

    /// The world's bytes for a snapshot (postcard).
    pub fn save(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a world always serializes")
    }

    /// A world from [`save`](Self::save)'s bytes; `None` if they are not one.
    pub fn load(bytes: &[u8]) -> Option<World> {
        postcard::from_bytes(bytes).ok()
    }

    /// Units (alive or not) and their positions, for bots.
    pub fn army(&self, player: PlayerId) -> (u16, u16, (i32, i32)) {
        let mine: Vec<usize> =
            (0..self.units.len()).filter(|&i| self.units[i].owner == player.0).collect();
        let first = mine.first().copied().unwrap_or(0) as u16;
        (first, mine.len() as u16, spawn(usize::from(player.0), 8))
    }

    /// Executes one turn: its orders ([`order`](Self::order), in the turn's canonical order),
    /// then its [`TICKS_PER_TURN`] ticks.
    pub fn execute(&mut self, turn: &TypedTurn<Order>) {
        for record in &turn.records {
            if let TypedRecord::Command { player, command: Ok(order), .. } = record {
                self.order(*player, *order);
            }
        }
        for _ in 0..TICKS_PER_TURN {
            self.tick();
        }
    }

    /// Applies one of `player`'s orders (only its own living units in the group obey).
    pub fn order(&mut self, player: PlayerId, order: Order) {
        let (first, count, goal) = match order {
            Order::Move { first, count, x, y } => (first, count, Goal::Move(clamp(x), clamp(y))),
            Order::AttackMove { first, count, x, y } => {
                (first, count, Goal::AttackMove(clamp(x), clamp(y)))
            }
            Order::Stop { first, count } => (first, count, Goal::Idle),
        };
        let end = (usize::from(first) + usize::from(count)).min(self.units.len());
        for unit in &mut self.units[usize::from(first).min(end)..end] {
            if unit.owner == player.0 && unit.hp > 0 {
                unit.goal = goal;
                unit.target = None;
            }
        }
    }

    /// Advances one sim tick (a turn is [`TICKS_PER_TURN`] of them): due events, then every
    /// living unit in id order.
    pub fn tick(&mut self) {
        self.tick += 1;
        while let Some(event) = self.events.poll(self.tick) {
            match event.value {
                Event::Impact { target, damage } => {
                    if let Some(unit) = self.units.get_mut(usize::from(target)) {
                        unit.hp -= damage;
                    }
                }
                Event::Reload { unit } => {
                    if let Some(unit) = self.units.get_mut(usize::from(unit)) {
                        unit.loaded = true;
                    }
                }
            }
        }
        for cell in &mut self.grid {
            cell.clear();
        }
        for (id, unit) in self.units.iter().enumerate().filter(|(_, u)| u.hp > 0) {
            self.grid[cell_of(unit.x, unit.y)].push(id as u16);
        }
        for id in 0..self.units.len() {
            if self.units[id].hp <= 0 {
                continue;
            }
            let fights = !matches!(self.units[id].goal, Goal::Move(..));
            if fights {
                let target = self.units[id]
                    .target
                    .filter(|&t| self.in_range(id, usize::from(t)))
                    .or_else(|| self.nearest_enemy(id));
                self.units[id].target = target;
                if let Some(target) = target {
                    if self.units[id].loaded {
                        self.fire(id, target);
                    }
                    continue;
                }
            }
            let (x, y) = match self.units[id].goal {
                Goal::Move(x, y) | Goal::AttackMove(x, y) => (x, y),
                Goal::Idle => continue,
            };
            let unit = &mut self.units[id];
            unit.x += (x - unit.x).clamp(-SPEED, SPEED);
            unit.y += (y - unit.y).clamp(-SPEED, SPEED);
            if unit.x == x && unit.y == y {
                unit.goal = Goal::Idle;
            }
        }
    }

    /// Every living archer: `(army, x, y)`, in id order. The map is
    /// [`MAP_SIZE`] × [`MAP_SIZE`].
    pub fn living(&self) -> impl Iterator<Item = (u8, i32, i32)> + '_ {
        self.units.iter().filter(|u| u.hp > 0).map(|u| (u.owner, u.x, u.y))
    }

    /// Sim ticks executed so far.
    pub fn ticks(&self) -> u64 {
        self.tick
    }

    /// Gameplay events (arrows in flight, reloads) pending on the wheel.
    pub fn events_pending(&self) -> usize {
        self.events.len()
    }

    /// Every arrow in flight, for drawing, in the order they were shot. Read off the pending
    /// events without changing anything: a shot starts the impact and then the archer's
    /// reload, so each impact's archer is the reload with the next start sequence.
    pub fn arrows(&self) -> Vec<Arrow> {
        // One pass over the pending events (each `pending` call sorts them all).
        let mut reloads = BTreeMap::new();
        let mut impacts = Vec::new();
        for pending in self.events.pending() {
            match *pending.value {
                Event::Reload { unit } => {
                    reloads.insert(pending.sequence, (unit, pending.deadline));
                }
                Event::Impact { target, .. } => {
                    impacts.push((pending.sequence, target, pending.deadline));
                }
            }
        }
        impacts.sort_unstable_by_key(|&(sequence, ..)| sequence);
        impacts
            .into_iter()
            .filter_map(|(sequence, target, lands_at)| {
                let &(archer, reloaded_at) = reloads.get(&(sequence + 1))?;
                let (from, to) =
                    (self.units.get(usize::from(archer))?, self.units.get(usize::from(target))?);
                Some(Arrow {
                    army: from.owner,
                    from: (from.x, from.y),
                    to: (to.x, to.y),
                    shot_at: reloaded_at.saturating_sub(RELOAD_TICKS),
                    lands_at,
                })
            })
            .collect()
    }

    /// Flips the lowest bit of the hit points of the first living archer: a one-bit divergence
    /// of the game state, for showing desync detection.
    pub fn flip_one_bit(&mut self) {
        if let Some(unit) = self.units.iter_mut().find(|u| u.hp > 0) {
            unit.hp ^= 1;
        }
    }

    fn in_range(&self, a: usize, b: usize) -> bool {
        let (ua, ub) = (&self.units[a], &self.units[b]);
        ub.hp > 0 && distance2(ua, ub) <= i64::from(RANGE) * i64::from(RANGE)
    }

    fn nearest_enemy(&self, id: usize) -> Option<u16> {
        let me = &self.units[id];
        let (cx, cy) = ((me.x / CELL) as i64, (me.y / CELL) as i64);
        let mut best: Option<(i64, u16)> = None;
        for dy in -1..=1 {
            for dx in -1..=1 {
                let (x, y) = (cx + dx, cy + dy);
                if !(0..CELLS as i64).contains(&x) || !(0..CELLS as i64).contains(&y) {
                    continue;
                }
                for &other in &self.grid[y as usize * CELLS + x as usize] {
                    let unit = &self.units[usize::from(other)];
                    if unit.owner == me.owner {
                        continue;
                    }
                    let d = distance2(me, unit);
                    if d <= i64::from(RANGE) * i64::from(RANGE)
                        && best.is_none_or(|(bd, bid)| (d, other) < (bd, bid))
                    {
                        best = Some((d, other));
                    }
                }
            }
        }
        best.map(|(_, id)| id)
    }

    fn fire(&mut self, shooter: usize, target: u16) {
        let d = isqrt(distance2(&self.units[shooter], &self.units[usize::from(target)]));
        let damage = 8 + self.rng.below(5) as i32;
        let now = self.tick;
        // Deadlines are always in the future here: insertion cannot fail.
        let _ = self.events.insert(now + 1 + d / 60, Event::Impact { target, damage });
        let _ = self.events.insert(now + RELOAD_TICKS, Event::Reload { unit: shooter as u16 });
        self.units[shooter].loaded = false;
    }

    /// Every part of the state by name, with its value in words, in a stable order: the tick,
    /// the random generator, each unit's fields (`unit 12 hp`) and each pending event by its
    /// start sequence. What desync forensics compares ([`crate::inspect`]).
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut parts = vec![
            ("tick".to_owned(), self.tick.to_string()),
            ("rng".to_owned(), format!("{:?}", self.rng)),
        ];
        for (id, unit) in self.units.iter().enumerate() {
            let fields = [
                ("owner", unit.owner.to_string()),
                ("x", unit.x.to_string()),
                ("y", unit.y.to_string()),
                ("hp", unit.hp.to_string()),
                ("goal", format!("{:?}", unit.goal)),
                ("target", format!("{:?}", unit.target)),
                ("loaded", unit.loaded.to_string()),
            ];
            parts.extend(fields.map(|(field, value)| (format!("unit {id} {field}"), value)));
        }
        for pending in self.events.pending() {
            let value = format!("{:?} at tick {}", pending.value, pending.deadline);
            parts.push((format!("event {}", pending.sequence), value));
        }
        parts
    }

    /// The first living unit: the one [`flip_one_bit`](Self::flip_one_bit) changes.
    pub fn first_living(&self) -> Option<usize> {
        self.units.iter().position(|u| u.hp > 0)
    }

    /// A 64-bit FNV-1a hash of every unit and every pending event, in canonical order.
    pub fn state_hash(&self) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        let mut eat = |value: i64| {
            for byte in value.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(self.tick as i64);
        for unit in &self.units {
            eat(i64::from(unit.x) << 32 | i64::from(unit.y) & 0xffff_ffff);
            eat(i64::from(unit.hp) << 16 | unit.target.map_or(-1, i64::from) & 0xffff);
        }
        for pending in self.events.pending() {
            eat(pending.deadline as i64);
            eat(pending.sequence as i64);
            match *pending.value {
                Event::Impact { target, damage } => {
                    eat(i64::from(target) << 16 | i64::from(damage))
                }
                Event::Reload { unit } => eat(-1 - i64::from(unit)),
            }
        }
        hash
    }
}

fn clamp(v: i32) -> i32 {
    v.clamp(0, MAP - 1)
}

fn cell_of(x: i32, y: i32) -> usize {
    let (cx, cy) = ((x / CELL).clamp(0, CELLS as i32 - 1), (y / CELL).clamp(0, CELLS as i32 - 1));
    cy as usize * CELLS + cx as usize
}

fn distance2(a: &Unit, b: &Unit) -> i64 {
    let (dx, dy) = (i64::from(a.x - b.x), i64::from(a.y - b.y));
    dx * dx + dy * dy
}

/// Integer square root (Newton's method), exact for every non-negative `i64`.
fn isqrt(value: i64) -> u64 {
    let value = value.max(0) as u64;
    if value < 2 {
        return value;
    }
    let mut root = value;
    let mut next = (root + value / root) / 2;
    while next < root {
        root = next;
        next = (root + value / root) / 2;
    }
    root
}

/// Spawn point of `player` of `players`: eight compass points around the centre, integers.
pub fn spawn(player: usize, players: usize) -> (i32, i32) {
    const POINTS: [(i32, i32); 8] = [
        (2048, 600),
        (3072, 1024),
        (3496, 2048),
        (3072, 3072),
        (2048, 3496),
        (1024, 3072),
        (600, 2048),
        (1024, 1024),
    ];
    POINTS[(player * 8 / players.max(1)) % 8]
}

/// Speculation (`phalanx_proto::speculate`, `phalanx::speculate` natively) saves and restores the world as a snapshot does.
impl phalanx_proto::speculate::Rollback<Order> for World {
    type Saved = Vec<u8>;

    fn save(&mut self) -> Vec<u8> {
        World::save(self)
    }

    fn restore(&mut self, saved: &Vec<u8>) {
        if let Some(world) = World::load(saved) {
            *self = world;
        }
    }

    fn execute(&mut self, turn: &TypedTurn<Order>) {
        World::execute(self, turn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phalanx_proto::{CommandSeq, Turn};

    fn turn(number: u32, orders: Vec<(u8, Order)>) -> TypedTurn<Order> {
        let records = orders
            .into_iter()
            .enumerate()
            .map(|(seq, (player, order))| TypedRecord::Command {
                player: PlayerId(player),
                seq: CommandSeq(seq as u32),
                command: Ok(order),
            })
            .collect();
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

    /// A battle saved mid-fight (arrows in flight, reloads pending) and loaded plays on
    /// exactly as the original: the same hash after every later turn, the same bytes at the end.
    #[test]
    fn a_saved_world_plays_on_identically() {
        let mut world = World::new(4, 400, 9);
        let charge = |p: u8| (p, Order::AttackMove { first: 0, count: 400, x: 2_048, y: 2_048 });
        for number in 0..150 {
            let orders = if number == 3 { (0..4).map(charge).collect() } else { Vec::new() };
            world.execute(&turn(number, orders));
        }
        assert!(!world.events.is_empty(), "mid-fight: events pending");
        let mut loaded = World::load(&world.save()).expect("loads");
        for number in 150..300 {
            let orders = if number == 200 {
                vec![(1, Order::Stop { first: 100, count: 50 })]
            } else {
                Vec::new()
            };
            world.execute(&turn(number, orders.clone()));
            loaded.execute(&turn(number, orders));
            assert_eq!(world.state_hash(), loaded.state_hash(), "turn {number}");
        }
        assert_eq!(world.save(), loaded.save());
        assert_eq!(World::load(b"not a world").map(|w| w.tick), None);
    }

    /// Mid-fight, every pending impact is an arrow: shot by a living enemy of its target
    /// within range and reload time, landing in the future; the view changes nothing.
    #[test]
    fn arrows_in_flight_pair_each_impact_with_its_archer() {
        let mut world = World::new(4, 400, 9);
        let charge = |p: u8| (p, Order::AttackMove { first: 0, count: 400, x: 2_048, y: 2_048 });
        let mut seen = 0;
        for number in 0..150 {
            let orders = if number == 3 { (0..4).map(charge).collect() } else { Vec::new() };
            world.execute(&turn(number, orders));
            let before = world.save();
            let arrows = world.arrows();
            assert_eq!(world.save(), before);
            let impacts =
                world.events.pending().filter(|p| matches!(p.value, Event::Impact { .. })).count();
            assert_eq!(arrows.len(), impacts, "turn {number}");
            for arrow in &arrows {
                assert!(arrow.shot_at <= world.tick && world.tick < arrow.lands_at, "{arrow:?}");
                assert!(arrow.lands_at - arrow.shot_at <= 3, "{arrow:?}");
            }
            seen += arrows.len();
        }
        assert!(seen > 100, "a battle shoots arrows ({seen})");
    }
}

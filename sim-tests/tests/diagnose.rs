//! Desync forensics at L2 (real quinn under turmoil, 1 % loss, 10 ms jitter), as a game uses
//! it: players keep their state after every turn; one bit of one field of one entity flips
//! in a random player's game after a random turn. The host pins that exact turn, gets the
//! reference's and the diverged player's states there (`Event::DesyncDiagnosed`), and
//! the game's inspection hook names exactly that field; the bundle reads back; every player
//! plays on (warn).

use phalanx::{desync::DesyncBundle, Event, PlayerId, Turn, TypedRecord, TypedTurn};
use phalanx_sim::{run_with, Rng, SimConfig, SimGame};
use phalanx_testkit::{for_each_seed, seeded_test};

const ENTITIES: usize = 16;
const FIELDS: [&str; 4] = ["x", "y", "hp", "target"];

/// Entities with four fields each, stepped every turn from a chain over everything executed.
struct FieldGame {
    player: PlayerId,
    chain: u64,
    fields: Vec<u32>,
    /// `(player, turn, field, bits)`: that player's game flips those bits after that turn.
    corrupt: Option<(PlayerId, u32, usize, u32)>,
}

fn mix(state: u64, word: u64) -> u64 {
    let mut z = state ^ word.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The inspection hook: a sub-hash per entity and field, and one for the chain.
fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
    let (chain, fields) = state.split_first_chunk::<8>()?;
    if fields.len() != 4 * ENTITIES * FIELDS.len() {
        return None;
    }
    let mut parts = vec![("chain".to_owned(), u64::from_le_bytes(*chain))];
    for (index, field) in fields.chunks_exact(4).enumerate() {
        let value = u32::from_le_bytes(field.try_into().ok()?);
        let name = format!("entity {} {}", index / FIELDS.len(), FIELDS[index % FIELDS.len()]);
        parts.push((name, value.into()));
    }
    Some(parts)
}

impl SimGame for FieldGame {
    type Command = u32;
    type Setup = Option<(PlayerId, u32, usize, u32)>;

    fn new(player: PlayerId, seed: u64, corrupt: &Self::Setup) -> Self {
        let fields = vec![0; ENTITIES * FIELDS.len()];
        FieldGame { player, chain: seed, fields, corrupt: *corrupt }
    }

    fn execute(&mut self, turn: &TypedTurn<u32>) {
        self.chain = mix(self.chain, turn.turn.0.into());
        for record in &turn.records {
            if let TypedRecord::Command { player, command: Ok(n), .. } = record {
                self.chain = mix(self.chain, u64::from(player.0) << 32 | u64::from(*n));
            }
        }
        for (index, field) in self.fields.iter_mut().enumerate() {
            *field = field.wrapping_add(mix(self.chain, index as u64) as u32 >> 20);
        }
        if let Some((who, at, field, bits)) = self.corrupt {
            if who == self.player && at == turn.turn.0 {
                self.fields[field] ^= bits;
            }
        }
    }

    fn state_hash(&self) -> u64 {
        self.fields.iter().fold(self.chain, |hash, &field| mix(hash, field.into()))
    }

    fn commands(&mut self, turn: Turn) -> Vec<u32> {
        if (turn.0 + u32::from(self.player.0)).is_multiple_of(5) {
            vec![turn.0]
        } else {
            Vec::new()
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        let mut bytes = self.chain.to_le_bytes().to_vec();
        self.fields.iter().for_each(|field| bytes.extend_from_slice(&field.to_le_bytes()));
        Some(bytes)
    }
}

#[test]
fn the_flipped_field_is_named_at_its_first_divergent_turn() {
    for_each_seed(
        seeded_test!("the_flipped_field_is_named_at_its_first_divergent_turn"),
        200,
        |seed| {
            let mut rng = Rng::new(seed);
            let player = PlayerId(rng.below(3) as u8);
            let turn = 30 + rng.below(70) as u32;
            let field = rng.below((ENTITIES * FIELDS.len()) as u64) as usize;
            let bits = 1 << rng.below(32);
            let mut config = SimConfig::new(seed, 3);
            config.turns = 160;
            config.faults.loss_permille = 10;
            config.faults.jitter_ms = 10;
            config.keep_states = true;
            let setup = Some((player, turn, field, bits));
            let report = run_with::<FieldGame>(config, setup).map_err(|e| e.to_string())?;
            let bundles: Vec<&DesyncBundle> = report
                .events
                .iter()
                .filter_map(|(_, event)| match event {
                    Event::DesyncDiagnosed(bundle) => Some(bundle.as_ref()),
                    _ => None,
                })
                .collect();
            let name = format!("entity {} {}", field / FIELDS.len(), FIELDS[field % FIELDS.len()]);
            let context = format!("{player}'s {name} flipped after turn {turn}");
            let [bundle] = bundles.as_slice() else {
                return Err(format!("{context}: expected one bundle, got {}", bundles.len()));
            };
            let found = (bundle.first_turn, bundle.diverged.player, bundle.diff(inspect));
            if found != (Turn(turn), player, Ok(vec![name.clone()])) {
                return Err(format!("{context}: got {found:?}"));
            }
            let bytes = postcard::to_allocvec(bundle).map_err(|e| e.to_string())?;
            let read: DesyncBundle = postcard::from_bytes(&bytes).map_err(|e| e.to_string())?;
            if &read != *bundle {
                return Err(format!("{context}: the bundle did not read back"));
            }
            let played: Vec<usize> = report.players.iter().map(|p| p.turns_played()).collect();
            if played.iter().any(|&t| t != 160) {
                return Err(format!("{context}: the game did not go on: {played:?}"));
            }
            Ok(())
        },
    );
}

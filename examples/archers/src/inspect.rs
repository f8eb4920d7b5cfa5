//! Desync forensics for the archers: the inspection hook phalanx's
//! [`DesyncBundle::diff`](phalanx::desync::DesyncBundle::diff) calls on each side's state, and the
//! side-by-side view `archers diff BUNDLE` prints.

use phalanx::{desync::DesyncBundle, error::DiffError};

use crate::world::World;

/// The inspection hook: a saved world's parts by name, each with a hash of its value (`None`:
/// the bytes are not a saved world).
pub fn inspect(state: &[u8]) -> Option<Vec<(String, u64)>> {
    let world = World::load(state)?;
    let parts = world.describe().into_iter().map(|(name, value)| (name, fnv(value.as_bytes())));
    Some(parts.collect())
}

/// One part that differs: its name, and its value on the reference and the diverged side
/// (`None`: that side has no such part).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// As [`World::describe`] names it, e.g. `unit 12 hp`.
    pub name: String,
    /// The reference player's value.
    pub reference: Option<String>,
    /// The diverged player's value.
    pub diverged: Option<String>,
}

/// The parts of the two states in `bundle` that differ, with their values.
pub fn differences(bundle: &DesyncBundle) -> Result<Vec<Difference>, DiffError> {
    let names = bundle.diff(inspect)?;
    let describe = |peer: &phalanx::desync::PeerState| {
        let world = peer.state.as_deref().and_then(World::load);
        world.map(|w| w.describe()).ok_or(DiffError::NotInspected(peer.player))
    };
    let (reference, diverged) = (describe(&bundle.reference)?, describe(&bundle.diverged)?);
    let value = |parts: &[(String, String)], name: &str| {
        parts.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    let differences = names.into_iter().map(|name| Difference {
        reference: value(&reference, &name),
        diverged: value(&diverged, &name),
        name,
    });
    Ok(differences.collect())
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

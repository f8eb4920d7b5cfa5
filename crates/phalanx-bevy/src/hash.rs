//! The state hash: registered components in [`SimId`] order, then registered resources,
//! through a fixed hasher (FNV-1a, 64 bits), so that equal states hash equally on every
//! machine.

use std::hash::{Hash, Hasher};

use bevy::ecs::prelude::*;

use crate::Registry;

/// A simulated entity's stable id: the order the state hash visits entities in. Give every
/// entity of the simulation one, the same on every peer (for example, a counter the simulation
/// owns); Bevy's `Entity` ids are not the same across machines.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimId(pub u64);

/// FNV-1a over the bytes `Hash` feeds it: the same on every machine for the same values
/// (`Hash` of `usize` and of slices' lengths differs between 32- and 64-bit targets).
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Hashes every `T` of an entity with a [`SimId`], in id order.
pub(crate) fn component<T: Component + Hash>(world: &mut World, hasher: &mut Fnv64) {
    let mut query = world.query::<(&SimId, &T)>();
    let mut items: Vec<(SimId, &T)> = query.iter(world).map(|(id, value)| (*id, value)).collect();
    items.sort_unstable_by_key(|(id, _)| *id);
    hasher.write_u64(items.len() as u64);
    for (id, value) in items {
        id.hash(hasher);
        value.hash(hasher);
    }
}

/// Hashes resource `R`, or its absence.
pub(crate) fn resource<R: Resource + Hash>(world: &mut World, hasher: &mut Fnv64) {
    match world.get_resource::<R>() {
        Some(value) => {
            hasher.write_u8(1);
            value.hash(hasher);
        }
        None => hasher.write_u8(0),
    }
}

/// The state hash of `world`: every registered part, in registration order.
pub(crate) fn state(world: &mut World) -> u64 {
    let parts = world.resource::<Registry>().parts.clone();
    let mut hasher = Fnv64::default();
    for (index, part) in parts.iter().enumerate() {
        hasher.write_u64(index as u64);
        part(world, &mut hasher);
    }
    hasher.finish()
}

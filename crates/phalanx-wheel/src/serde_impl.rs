//! Serialization of [`HierarchicalWheel`] (feature `serde`).
//!
//! The snapshot holds the clock, the next start sequence, the slab layout (each entry's
//! generation and the free list in order) and every pending entry with its index. A restored
//! wheel therefore fires exactly what the original would, in the same order, *and* hands out
//! the same handles afterwards, so handles a game keeps in its own state stay valid across a
//! save and load. A snapshot is checked in full before anything is built: a malformed one is
//! refused with a [`RestoreError`], never a panic.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hierarchical::{HierarchicalWheel, LEVELS};
use crate::store::{Store, ENTRIES_MAX};

/// The snapshot format version this build writes and reads.
const SNAPSHOT_VERSION: u8 = 1;

#[derive(Serialize)]
struct SnapshotRef<'a, T> {
    version: u8,
    now: u64,
    next_sequence: u64,
    generations: Vec<u32>,
    free: Vec<u32>,
    entries: Vec<EntryRef<'a, T>>,
}

#[derive(Serialize)]
struct EntryRef<'a, T> {
    index: u32,
    deadline: u64,
    sequence: u64,
    value: &'a T,
}

#[derive(Deserialize)]
struct Snapshot<T> {
    version: u8,
    now: u64,
    next_sequence: u64,
    generations: Vec<u32>,
    free: Vec<u32>,
    entries: Vec<SnapshotEntry<T>>,
}

#[derive(Deserialize)]
struct SnapshotEntry<T> {
    index: u32,
    deadline: u64,
    sequence: u64,
    value: T,
}

/// Why a serialized [`HierarchicalWheel`] could not be restored. Reported through the
/// deserializer's error type; nothing is built from a snapshot that fails any check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestoreError {
    /// The snapshot was written by an incompatible version of this crate.
    Version {
        /// The version in the snapshot.
        found: u8,
        /// The version this build reads.
        expected: u8,
    },
    /// An entry or free-list index is outside the slab, or the slab is larger than a handle
    /// can address.
    IndexOutOfRange(u64),
    /// An index appears twice among the entries and the free list.
    DuplicateIndex(u32),
    /// Entries plus free slots do not add up to the slab size.
    CountMismatch,
    /// An entry is due before the snapshot's clock.
    DeadlineElapsed {
        /// The entry's deadline.
        deadline: u64,
        /// The snapshot's clock.
        now: u64,
    },
    /// An entry's sequence is not below the snapshot's next sequence, or two entries share one.
    BadSequence(u64),
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreError::Version { found, expected } => {
                write!(f, "wheel snapshot version {found}, this build reads {expected}")
            }
            RestoreError::IndexOutOfRange(index) => write!(f, "slab index {index} out of range"),
            RestoreError::DuplicateIndex(index) => write!(f, "slab index {index} used twice"),
            RestoreError::CountMismatch => {
                write!(f, "entries and free slots do not cover the slab exactly")
            }
            RestoreError::DeadlineElapsed { deadline, now } => {
                write!(f, "entry due at {deadline} is before the snapshot clock {now}")
            }
            RestoreError::BadSequence(sequence) => {
                write!(f, "entry sequence {sequence} is duplicated or not yet issued")
            }
        }
    }
}

impl std::error::Error for RestoreError {}

impl<T: Serialize> Serialize for HierarchicalWheel<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (generations, free) = self.store.layout();
        let entries = self
            .pending()
            .map(|pending| EntryRef {
                index: pending.handle.index,
                deadline: pending.deadline,
                sequence: pending.sequence,
                value: pending.value,
            })
            .collect();
        SnapshotRef {
            version: SNAPSHOT_VERSION,
            now: self.now,
            next_sequence: self.store.next_seq(),
            generations,
            free,
            entries,
        }
        .serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for HierarchicalWheel<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let snapshot = Snapshot::<T>::deserialize(deserializer)?;
        restore(snapshot).map_err(D::Error::custom)
    }
}

fn restore<T>(snapshot: Snapshot<T>) -> Result<HierarchicalWheel<T>, RestoreError> {
    let Snapshot { version, now, next_sequence, generations, free, mut entries } = snapshot;
    if version != SNAPSHOT_VERSION {
        return Err(RestoreError::Version { found: version, expected: SNAPSHOT_VERSION });
    }
    let slab_len = generations.len();
    #[allow(clippy::absurd_extreme_comparisons)] // `usize::MAX` on 32-bit targets
    if slab_len > ENTRIES_MAX {
        return Err(RestoreError::IndexOutOfRange(slab_len as u64));
    }
    if free.len() + entries.len() != slab_len {
        return Err(RestoreError::CountMismatch);
    }
    let mut seen = vec![false; slab_len];
    for index in free.iter().copied().chain(entries.iter().map(|entry| entry.index)) {
        let mark =
            seen.get_mut(index as usize).ok_or(RestoreError::IndexOutOfRange(u64::from(index)))?;
        if *mark {
            return Err(RestoreError::DuplicateIndex(index));
        }
        *mark = true;
    }
    for entry in &entries {
        if entry.deadline < now {
            return Err(RestoreError::DeadlineElapsed { deadline: entry.deadline, now });
        }
        if entry.sequence >= next_sequence {
            return Err(RestoreError::BadSequence(entry.sequence));
        }
    }
    // Linking in start order keeps every slot list in start order, which is all the firing
    // order depends on.
    entries.sort_unstable_by_key(|entry| entry.sequence);
    if let Some(pair) = entries.windows(2).find(|pair| pair[0].sequence == pair[1].sequence) {
        return Err(RestoreError::BadSequence(pair[0].sequence));
    }
    let store = Store::from_layout(LEVELS * 64, &generations, &free, next_sequence);
    let mut wheel = HierarchicalWheel { store, now, horizon: u64::MAX };
    for SnapshotEntry { index, deadline, sequence, value } in entries {
        let r = wheel.store.occupy(index, deadline, sequence, value);
        wheel.place(r);
    }
    Ok(wheel)
}

//! A slab with generations: matches and connections live in one each, and a timer names its
//! owner by a [`Key`] that goes stale when the owner is freed (a slot reused later has another
//! generation).

/// Where a value lives in a [`Slab`], and which occupant of that place it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) index: u32,
    generation: u32,
}

struct Entry<T> {
    generation: u32,
    value: Option<T>,
}

/// Values by [`Key`], reusing freed places (no allocation once warm).
pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { entries: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    /// Stores `value`.
    pub(crate) fn insert(&mut self, value: T) -> Key {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let entry = &mut self.entries[index as usize];
            entry.value = Some(value);
            return Key { index, generation: entry.generation };
        }
        let index = self.entries.len() as u32;
        self.entries.push(Entry { generation: 0, value: Some(value) });
        Key { index, generation: 0 }
    }

    /// Takes the value out; its key (and every copy) goes stale.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let entry = self.entries.get_mut(key.index as usize)?;
        if entry.generation != key.generation {
            return None;
        }
        let value = entry.value.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(key.index);
        self.len -= 1;
        Some(value)
    }

    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        let entry = self.entries.get(key.index as usize)?;
        (entry.generation == key.generation).then_some(entry.value.as_ref()).flatten()
    }

    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let entry = self.entries.get_mut(key.index as usize)?;
        (entry.generation == key.generation).then_some(entry.value.as_mut()).flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every live key, in index order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.value.is_some())
            .map(|(index, e)| Key { index: index as u32, generation: e.generation })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_key_goes_stale_and_its_place_is_reused() {
        let mut slab = Slab::default();
        let a = slab.insert("a");
        assert_eq!(slab.remove(a), Some("a"));
        let b = slab.insert("b");
        assert_eq!(a.index, b.index);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&"b"));
        assert_eq!(slab.len(), 1);
        assert_eq!(slab.keys().collect::<Vec<_>>(), vec![b]);
    }
}

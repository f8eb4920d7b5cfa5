//! A sliding window of the most recent samples that also keeps them sorted, so the minimum and
//! any percentile are a lookup: an arrival costs two binary searches and a short move, not a
//! sort. The playout schedule's arrival offsets and the client's command latencies use it.

use std::collections::VecDeque;

/// The last `capacity` samples, in arrival order and sorted.
#[derive(Debug)]
pub(crate) struct SortedWindow<T> {
    capacity: usize,
    /// Oldest first.
    arrivals: VecDeque<T>,
    sorted: Vec<T>,
}

impl<T: Copy> Clone for SortedWindow<T> {
    fn clone(&self) -> Self {
        SortedWindow {
            capacity: self.capacity,
            arrivals: self.arrivals.clone(),
            sorted: self.sorted.clone(),
        }
    }

    /// Copies `source` into the memory this window already holds.
    fn clone_from(&mut self, source: &Self) {
        self.capacity = source.capacity;
        self.arrivals.clone_from(&source.arrivals);
        self.sorted.clone_from(&source.sorted);
    }
}

impl<T: Ord + Copy> SortedWindow<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        SortedWindow {
            capacity,
            arrivals: VecDeque::with_capacity(capacity),
            sorted: Vec::with_capacity(capacity),
        }
    }

    /// Adds `sample`, forgetting the oldest when the window is full.
    pub(crate) fn push(&mut self, sample: T) {
        if self.arrivals.len() == self.capacity {
            if let Some(oldest) = self.arrivals.pop_front() {
                if let Ok(index) = self.sorted.binary_search(&oldest) {
                    self.sorted.remove(index);
                }
            }
        }
        self.arrivals.push_back(sample);
        let index = self.sorted.partition_point(|&other| other < sample);
        self.sorted.insert(index, sample);
    }

    /// Forgets every sample.
    pub(crate) fn clear(&mut self) {
        self.arrivals.clear();
        self.sorted.clear();
    }

    /// Whether the window holds no sample.
    pub(crate) fn is_empty(&self) -> bool {
        self.arrivals.is_empty()
    }

    /// The samples, smallest first.
    pub(crate) fn sorted(&self) -> &[T] {
        &self.sorted
    }

    /// The sample at `percent` of the sorted window (the largest for 100), if any.
    pub(crate) fn percentile(&self, percent: usize) -> Option<T> {
        let index = (self.sorted.len() * percent / 100).min(self.sorted.len().saturating_sub(1));
        self.sorted.get(index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_samples_sorted() {
        let mut window = SortedWindow::new(4);
        for sample in [5, 1, 4, 2, 3] {
            window.push(sample);
        }
        // 5 was the oldest and is forgotten.
        assert_eq!(window.sorted(), [1, 2, 3, 4]);
        assert_eq!(window.percentile(0), Some(1));
        assert_eq!(window.percentile(100), Some(4));
        window.clear();
        assert!(window.is_empty());
        assert_eq!(window.percentile(50), None);
    }
}

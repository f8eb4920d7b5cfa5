//! The bounded queue of events a session hands its driver.

use std::collections::VecDeque;

/// The most events held for the driver. Past it the oldest is dropped: every event is also
/// reflected in stats or in sealed turns, so only the notification is lost.
const EVENTS_MAX: usize = 1024;

/// Events waiting for the driver's `poll_event`, at most [`EVENTS_MAX`], oldest first.
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    events: VecDeque<E>,
    dropped: u64,
}

impl<E> EventQueue<E> {
    pub(crate) fn new() -> Self {
        EventQueue { events: VecDeque::new(), dropped: 0 }
    }

    /// Queues `event`, dropping (and counting) the oldest when full.
    pub(crate) fn push(&mut self, event: E) {
        if self.events.len() == EVENTS_MAX {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Events dropped so far because nobody polled them.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The oldest event, if any.
    pub(crate) fn pop(&mut self) -> Option<E> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_when_full() {
        let mut queue = EventQueue::new();
        for event in 0..EVENTS_MAX + 3 {
            queue.push(event);
        }
        assert_eq!(queue.dropped(), 3);
        assert_eq!(queue.pop(), Some(3));
        let rest: Vec<usize> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(rest.len(), EVENTS_MAX - 1);
        assert_eq!(rest.last(), Some(&(EVENTS_MAX + 2)));
    }
}

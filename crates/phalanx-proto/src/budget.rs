//! A player's budget in one turn: `budget.commands_per_turn_max` commands and
//! `budget.turn_bytes_per_player_max` bytes, checked the same way by a client before it queues a
//! command and by the host before it places one.

use crate::config::SessionConfig;

/// What one player used of one turn's budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    commands: u16,
    bytes: u32,
}

impl Usage {
    /// Whether one more command of `len` bytes fits the budget.
    pub(crate) fn admits(self, config: &SessionConfig, len: usize) -> bool {
        self.commands < config.budget.commands_per_turn_max
            && u64::from(self.bytes) + len as u64
                <= u64::from(config.budget.turn_bytes_per_player_max)
    }

    /// Counts a command of `len` bytes (which [`admits`](Self::admits) allowed).
    pub(crate) fn add(&mut self, len: usize) {
        self.commands += 1;
        self.bytes += len as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_limits_hold_at_their_boundary() {
        let mut config = SessionConfig::default();
        config.budget.commands_per_turn_max = 2;
        config.budget.turn_bytes_per_player_max = 10;
        let mut usage = Usage::default();
        assert!(usage.admits(&config, 10));
        assert!(!usage.admits(&config, 11));
        usage.add(4);
        assert!(usage.admits(&config, 6));
        assert!(!usage.admits(&config, 7));
        usage.add(1);
        assert!(!usage.admits(&config, 0), "the command count is spent");
    }
}

//! Unit tests of the session config's checks.

use super::*;

#[test]
fn default_is_valid() {
    assert_eq!(SessionConfig::default().validate(), Ok(()));
}

/// Boundaries in pairs: accepted at the limit, refused just past it.
#[test]
fn limits_pass_at_the_edge_and_fail_past_it() {
    let mut config = SessionConfig::default();
    config.turns.length_ms = 10;
    assert_eq!(config.validate(), Ok(()));
    config.turns.length_ms = 9;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "turns.length_ms", value: 9, .. })
    ));

    let mut config = SessionConfig::default();
    config.turns.command_delay_turns_max = config.turns.window_turns - 1;
    config.turns.command_delay_turns = config.turns.command_delay_turns_max;
    assert_eq!(config.validate(), Ok(()));
    config.turns.command_delay_turns_max = config.turns.window_turns;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "turns.command_delay_turns_max", .. })
    ));
    config.turns.command_delay_turns_max = 4;
    config.turns.command_delay_turns = 5;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "turns.command_delay_turns", .. })
    ));

    let mut config = SessionConfig::default();
    config.budget.command_bytes_max = config.budget.turn_bytes_per_player_max + 1;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "budget.command_bytes_max", .. })
    ));
}

#[test]
fn snapshots_fall_on_check_turns() {
    let mut config = SessionConfig::default();
    config.catch_up.snapshot_interval_turns = 600;
    assert_eq!(config.validate(), Ok(()));
    config.catch_up.snapshot_interval_turns = 605;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::NotMultiple { field: "catch_up.snapshot_interval_turns", of: 10, .. })
    ));
    config.catch_up.snapshot_interval_turns = 600;
    config.sync.interval_turns = 0;
    assert!(matches!(config.validate(), Err(ConfigError::NotMultiple { of: 0, .. })));
}

#[test]
fn the_quiet_relay_is_checked() {
    let quiet = |heartbeat_ms, extra_ms| {
        let mut config = SessionConfig::default();
        config.link.heartbeat_ms = heartbeat_ms;
        config.playout.extra_ms = extra_ms;
        config
    };
    assert_eq!(quiet(500, 80).validate(), Ok(()));
    // A heartbeat must leave the idle timeout four of them (3 s: at most 750 ms).
    assert!(quiet(750, 0).validate().is_ok());
    assert!(matches!(
        quiet(751, 0).validate(),
        Err(ConfigError::OutOfRange { field: "link.heartbeat_ms", .. })
    ));
    assert!(matches!(
        quiet(20, 0).validate(),
        Err(ConfigError::OutOfRange { field: "link.heartbeat_ms", .. })
    ));
    // What is added to the playout buffer is at most its cap.
    assert!(matches!(
        quiet(500, 81).validate(),
        Err(ConfigError::OutOfRange { field: "playout.extra_ms", .. })
    ));
}

#[test]
fn a_bundle_that_cannot_fit_a_datagram_is_refused() {
    let mut config = SessionConfig::default();
    config.turns.players_max = 64;
    assert!(matches!(config.validate(), Err(ConfigError::BundleTooLarge { .. })));
    config.link.datagram_bytes_max = 16_000;
    assert_eq!(config.validate(), Ok(()));
}

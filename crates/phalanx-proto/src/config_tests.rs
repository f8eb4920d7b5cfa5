//! Unit tests of the session config's checks.

use super::*;

#[test]
fn default_is_valid() {
    assert_eq!(SessionConfig::default().validate(), Ok(()));
}

/// Boundaries in pairs: accepted at the limit, refused just past it.
#[test]
fn limits_pass_at_the_edge_and_fail_past_it() {
    let mut config = SessionConfig { turn_length_ms: 10, ..SessionConfig::default() };
    assert_eq!(config.validate(), Ok(()));
    config.turn_length_ms = 9;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "turn_length_ms", value: 9, .. })
    ));

    let mut config = SessionConfig::default();
    config.command_delay_max_turns = config.turns_ahead_max - 1;
    config.command_delay_turns = config.command_delay_max_turns;
    assert_eq!(config.validate(), Ok(()));
    config.command_delay_max_turns = config.turns_ahead_max;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "command_delay_max_turns", .. })
    ));
    config.command_delay_max_turns = 4;
    config.command_delay_turns = 5;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "command_delay_turns", .. })
    ));

    let mut config = SessionConfig::default();
    config.command_bytes_max = config.turn_bytes_per_player_max + 1;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::OutOfRange { field: "command_bytes_max", .. })
    ));
}

#[test]
fn snapshots_fall_on_check_turns() {
    let mut config = SessionConfig { snapshot_interval_turns: 600, ..SessionConfig::default() };
    assert_eq!(config.validate(), Ok(()));
    config.snapshot_interval_turns = 605;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::NotMultiple { field: "snapshot_interval_turns", of: 10, .. })
    ));
    config.snapshot_interval_turns = 600;
    config.sync_interval_turns = 0;
    assert!(matches!(config.validate(), Err(ConfigError::NotMultiple { of: 0, .. })));
}

#[test]
fn the_quiet_relay_is_checked() {
    let quiet = |heartbeat_ms, playout_extra_ms| SessionConfig {
        heartbeat_ms,
        playout_extra_ms,
        ..SessionConfig::default()
    };
    assert_eq!(quiet(500, 80).validate(), Ok(()));
    // A heartbeat must leave the idle timeout four of them (3 s: at most 750 ms).
    assert!(quiet(750, 0).validate().is_ok());
    assert!(matches!(
        quiet(751, 0).validate(),
        Err(ConfigError::OutOfRange { field: "heartbeat_ms", .. })
    ));
    assert!(matches!(
        quiet(20, 0).validate(),
        Err(ConfigError::OutOfRange { field: "heartbeat_ms", .. })
    ));
    // What is added to the playout buffer is at most its cap.
    assert!(matches!(
        quiet(500, 81).validate(),
        Err(ConfigError::OutOfRange { field: "playout_extra_ms", .. })
    ));
}

#[test]
fn a_bundle_that_cannot_fit_a_datagram_is_refused() {
    let mut config = SessionConfig { players_max: 64, ..SessionConfig::default() };
    assert!(matches!(config.validate(), Err(ConfigError::BundleTooLarge { .. })));
    config.datagram_bytes_max = 16_000;
    assert_eq!(config.validate(), Ok(()));
}

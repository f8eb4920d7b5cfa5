//! The settings file in `deploy/` is what the relay reads, and says what the defaults are.

use phalanx_relay::RelayConfig;

#[test]
fn the_deploy_settings_file_parses_to_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/relay.toml");
    let text = std::fs::read_to_string(path).expect("deploy/relay.toml");
    let parsed: RelayConfig = toml::from_str(&text).expect("it parses");
    assert_eq!(format!("{parsed:?}"), format!("{:?}", RelayConfig::default()));
    // A typo is an error, not a silently ignored setting.
    let typo = text.replace("matches_max", "matchs_max");
    assert!(toml::from_str::<RelayConfig>(&typo).is_err());
}

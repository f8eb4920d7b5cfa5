//! Typed errors a game meets from outside: more seat tokens than seats, a dedicated host asked
//! to submit, a client asked to end the game, a finished session asked for more. Each names
//! its cause; nothing is queued.

mod common;

use std::time::Duration;

use phalanx::{
    error::{ConfigError, SubmitError},
    Host, HostError, HostOptions, SessionConfig, SessionError,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

fn options(tokens: Vec<u64>) -> HostOptions {
    let identity = common::host_transport(common::transport());
    let mut options = HostOptions::new(identity, "127.0.0.1:0".parse().unwrap(), tokens);
    options.session = SessionConfig::default();
    options
}

#[tokio::test]
async fn more_tokens_than_seats_is_refused_at_bind() {
    let seats = u64::from(SessionConfig::default().turns.players_max);
    let too_many = Host::<Order>::bind(options((0..=seats).collect())).await.err();
    assert!(
        matches!(
            too_many,
            Some(HostError::Config(ConfigError::OutOfRange { field: "tokens", .. }))
        ),
        "{too_many:?}"
    );
    // A listen server's own player takes a seat too.
    let mut listen = options((0..seats).collect());
    listen.local_player = true;
    let too_many = Host::<Order>::bind(listen).await.err();
    assert!(
        matches!(
            too_many,
            Some(HostError::Config(ConfigError::OutOfRange { field: "tokens", .. }))
        ),
        "{too_many:?}"
    );
    let fits = Host::<Order>::bind(options((0..seats).collect())).await.expect("every seat");
    fits.shutdown().await;
}

#[tokio::test]
async fn a_dedicated_host_has_no_player_to_submit_for() {
    let test = async {
        let host = Host::<Order>::bind(options(vec![1])).await.unwrap();
        host.start().await.unwrap();
        let submitted = host.submit(&Order(1)).await;
        host.shutdown().await;
        submitted
    };
    let submitted = tokio::time::timeout(Duration::from_secs(10), test).await.expect("bounded");
    assert!(matches!(submitted, Err(SessionError::Submit(SubmitError::NoPlayer))), "{submitted:?}");
}

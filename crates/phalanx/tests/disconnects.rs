//! Disconnects on real loopback sockets, over both transports, through the public API only:
//! a player who leaves or is kicked and comes straight back before the turn carrying its
//! departure is sealed plays on (it is not thrown out by its own `Left`); a kick can ban; a
//! dropped session is a lost connection (a timeout, then a rejoin), not a goodbye; a client
//! whose heartbeat differs from the host's is refused at once. Every test is bounded in time.

use std::time::Duration;

mod common;

use phalanx::{
    error::JoinRefusal, Client, ClientOptions, ConnectError, EndReason, Event, Host, HostOptions,
    PlayerId, Readmit, SessionConfig, Transport,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Order(u32);

/// Long turns, so that a player who comes straight back lands before the next seal.
fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 500;
    session.turns.length_ms_max = 500;
    session
}

struct Match {
    host: Host<Order>,
}

async fn host(transport: Transport, session: SessionConfig) -> Match {
    let transport = common::host_transport(transport);
    let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
    options.session = session;
    let host = Host::bind(options).await.unwrap();
    Match { host }
}

impl Match {
    fn options(&self, token: u64, session: SessionConfig) -> ClientOptions {
        let mut options = ClientOptions::new(token, self.host.pin());
        options.session = session;
        options
    }

    async fn join(&self, token: u64) -> Result<Client<Order>, ConnectError> {
        let addr = self.host.local_addr().unwrap();
        Client::connect(addr, self.options(token, session())).await
    }

    /// Joins with `token`, again while the host still holds the seat for the old connection
    /// (a goodbye may reach it a moment after the new handshake).
    async fn rejoin(&self, token: u64) -> Client<Order> {
        for _ in 0..50 {
            match self.join(token).await {
                Ok(client) => return client,
                Err(error) if error.refusal() == Some(JoinRefusal::TokenUsed) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(error) => panic!("rejoin failed: {error}"),
            }
        }
        panic!("the seat was never free again")
    }

    /// Every host event so far.
    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.host.try_event()).collect()
    }
}

/// Plays until the session ends, an order every other turn; returns how it ended and how many
/// turns it executed.
fn play(mut client: Client<Order>) -> tokio::task::JoinHandle<(Option<EndReason>, u32)> {
    tokio::spawn(async move {
        let mut turns = 0;
        while let Some(turn) = client.next_turn().await {
            turns += 1;
            if turn.turn.0 % 2 == 0 && !turn.catching_up && !turn.last {
                let _ = client.submit(&Order(turn.turn.0)).await;
            }
        }
        let ended = client.ended();
        client.shutdown().await;
        (ended, turns)
    })
}

/// How player 2 goes away before coming straight back.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// It leaves (`shutdown`: a goodbye).
    Leaves,
    /// The host kicks it, allowing a return.
    Kicked,
}

async fn back_before_the_seal(transport: Transport, away: Away) {
    let mut game = host(transport, session()).await;
    let first = play(game.join(1).await.unwrap());
    let mut second = game.join(2).await.unwrap();
    game.host.start().await.unwrap();
    // A turn or two in, player 2 goes and comes straight back.
    let turn = second.next_turn().await.expect("a first turn");
    assert_eq!(turn.turn.0, 0);
    match away {
        Away::Leaves => second.shutdown().await,
        Away::Kicked => {
            game.host.remove(PlayerId(1), Readmit::Allow).await.unwrap();
            while second.next_turn().await.is_some() {}
            assert_eq!(second.ended(), Some(EndReason::Removed));
        }
    }
    let back = play(game.rejoin(2).await);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    game.host.end(7).await.unwrap();
    let (ended, turns) = back.await.unwrap();
    assert_eq!(
        ended,
        Some(EndReason::Finished { code: 7 }),
        "{transport:?}, {away:?}: the returning player played to the end ({turns} turns)"
    );
    assert_eq!(first.await.unwrap().0, Some(EndReason::Finished { code: 7 }));
    // Before the end (after it, each player's goodbye closes its seat).
    let events = game.events();
    let end = events.iter().position(|e| matches!(e, Event::Ended(_))).expect("the end");
    let removed = events[..end].iter().filter(|e| **e == Event::PlayerRemoved(PlayerId(1))).count();
    assert_eq!(removed, 1, "{transport:?}, {away:?}: removed once, not again: {events:?}");
    game.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_who_leaves_and_comes_straight_back_plays_on() {
    for transport in common::transports() {
        let test = back_before_the_seal(transport, Away::Leaves);
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("in time");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kicked_player_allowed_back_plays_on() {
    for transport in common::transports() {
        let test = back_before_the_seal(transport, Away::Kicked);
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("in time");
    }
}

/// A kick with `Readmit::Never` is a ban: the kicked player's token is refused, at once and
/// later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_refuses_the_token() {
    for transport in common::transports() {
        let test = async {
            let game = host(transport, session()).await;
            let first = play(game.join(1).await.unwrap());
            let second = play(game.join(2).await.unwrap());
            game.host.start().await.unwrap();
            tokio::time::sleep(Duration::from_millis(600)).await;
            game.host.remove(PlayerId(1), Readmit::Never).await.unwrap();
            assert_eq!(second.await.unwrap().0, Some(EndReason::Removed));
            for _ in 0..2 {
                let refusal = game.join(2).await.err().and_then(|error| error.refusal());
                assert_eq!(refusal, Some(JoinRefusal::TokenRevoked), "{transport:?}");
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            game.host.end(0).await.unwrap();
            assert_eq!(first.await.unwrap().0, Some(EndReason::Finished { code: 0 }));
            game.host.shutdown().await;
        };
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("in time");
    }
}

/// A client dropped without `shutdown` (its process's runtime lives on) said no goodbye: the
/// host times it out, as it would a crash, over both transports — it is not removed at once
/// as if it had left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_is_timed_out_not_taken_for_a_leave() {
    for transport in common::transports() {
        let test = async {
            let mut session = session();
            session.turns.length_ms = 50;
            session.link.idle_timeout_ms = 1_000;
            session.link.join_grace_ms = 1_000;
            let mut game = host(transport, session.clone()).await;
            let addr = game.host.local_addr().unwrap();
            let first =
                play(Client::connect(addr, game.options(1, session.clone())).await.unwrap());
            let mut second: Client<Order> =
                Client::connect(addr, game.options(2, session)).await.unwrap();
            game.host.start().await.unwrap();
            for _ in 0..5 {
                second.next_turn().await.expect("a turn");
            }
            drop(second);
            let gone = loop {
                let event = game.host.next_event().await.expect("the host runs");
                if let Event::PlayerTimedOut(PlayerId(1)) | Event::PlayerRemoved(PlayerId(1)) =
                    event
                {
                    break event;
                }
            };
            assert_eq!(gone, Event::PlayerTimedOut(PlayerId(1)), "{transport:?}");
            game.host.end(0).await.unwrap();
            assert_eq!(first.await.unwrap().0, Some(EndReason::Finished { code: 0 }));
            game.host.shutdown().await;
        };
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("in time");
    }
}

/// `link.heartbeat_ms` must be the same on both ends: a client with another is refused at the
/// join, both values named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_another_heartbeat_is_refused() {
    for transport in common::transports() {
        let game = host(transport, session()).await;
        let mut quiet = session();
        quiet.link.heartbeat_ms = 500;
        let addr = game.host.local_addr().unwrap();
        let refused = Client::<Order>::connect(addr, game.options(1, quiet)).await;
        let refusal = refused.err().and_then(|error| error.refusal());
        assert_eq!(refusal, Some(JoinRefusal::HeartbeatMismatch { host: 0, client: 500 }));
        game.host.shutdown().await;
    }
}

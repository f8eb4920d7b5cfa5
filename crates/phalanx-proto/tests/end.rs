//! The end of a game as a client sees it when the host goes away: a host that ended the game
//! and shut down once every player held the last turn must not cut a client off before it has
//! executed that turn (it plays it out and ends `Finished`), while a host that shuts down
//! mid-game ends its clients at once (`HostClosed`).

use phalanx_proto::{Client, EndReason, Host, PlayerId, SessionConfig, TurnBundle};

/// A started host and its one client, and the datagram pump between them.
struct Pair {
    host: Host,
    client: Client,
    now: u64,
    buf: Vec<u8>,
}

impl Pair {
    fn new() -> Pair {
        let config = SessionConfig::default();
        let mut host = Host::new(config.clone(), &[7]).unwrap();
        let (mut client, request) = Client::new(config, 7).unwrap();
        let reply = host.handle_join(0, &request).reply.unwrap();
        client.handle_join_reply(0, &reply).unwrap();
        host.start(0);
        Pair { host, client, now: 0, buf: Vec::new() }
    }

    /// Runs 5 ms; the client's game takes turns only when `execute`.
    fn step(&mut self, execute: bool) -> Vec<TurnBundle> {
        self.now += 5;
        let (now, buf) = (self.now, &mut self.buf);
        self.host.handle_timeout(now);
        self.client.handle_timeout(now);
        while self.host.poll_transmit(now, buf).is_some() {
            self.client.handle_datagram(now, buf);
        }
        while self.client.poll_transmit(now, buf) {
            self.host.handle_datagram(now, PlayerId(0), buf);
        }
        if !execute {
            return Vec::new();
        }
        std::iter::from_fn(|| self.client.next_turn(now)).collect()
    }
}

#[test]
fn a_client_holding_the_last_turn_plays_it_out_when_the_host_closes() {
    let mut pair = Pair::new();
    for _ in 0..100 {
        pair.step(true);
    }
    let last = pair.host.end(pair.now, 3).unwrap();
    // The host is done once the client holds the last turn; the client's game is a few turns
    // behind (its frame loop is slow, or its playout buffer holds them).
    while !pair.host.is_finished() {
        pair.step(false);
        assert!(pair.now < 10_000, "the host never saw the last turn acknowledged");
    }
    assert!(pair.client.next_exec() <= last);
    pair.client.on_host_closed();
    assert_eq!(pair.client.ended(), None, "ended before executing the last turn");
    let mut executed = Vec::new();
    while pair.client.ended().is_none() && pair.now < 20_000 {
        executed.extend(pair.step(true));
    }
    assert_eq!(executed.last().map(|bundle| bundle.turn), Some(last));
    assert_eq!(pair.client.ended(), Some(EndReason::Finished { code: 3 }));
}

#[test]
fn a_host_that_closes_mid_game_ends_its_clients_at_once() {
    let mut pair = Pair::new();
    for _ in 0..100 {
        pair.step(true);
    }
    pair.client.on_host_closed();
    assert_eq!(pair.client.ended(), Some(EndReason::HostClosed));
    // Ended before the last turn, or before it arrived: still at once.
    let mut pair = Pair::new();
    for _ in 0..100 {
        pair.step(true);
    }
    pair.host.end(pair.now, 3).unwrap();
    pair.client.on_host_closed();
    assert_eq!(pair.client.ended(), Some(EndReason::HostClosed));
}

//! A listen server with a command rule, over real loopback sockets, as a game sets it up: each
//! player may order only its own units. A client that orders another's units has those
//! orders refused (counted, never executed by anyone) and is told of each; the host's own
//! player's refused order is a typed error; every game ends in the same state.

mod common;

use std::time::Duration;

use phalanx::proto::{CommandSeq, Fairness};
use phalanx::{
    error::SubmitError, Client, ClientOptions, CommandRule, Event, Host, HostOptions, PlayerId,
    SessionConfig, SessionError, TypedRecord,
};

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
enum Order {
    Move { unit: u16, x: i32 },
    Stop { unit: u16 },
}

impl Order {
    fn unit(&self) -> u16 {
        match *self {
            Order::Move { unit, .. } | Order::Stop { unit } => unit,
        }
    }
}

/// Player `p` owns units `100 × p .. 100 × p + 100`.
fn owns(player: PlayerId, unit: u16) -> bool {
    unit / 100 == u16::from(player.0)
}

const TURNS: usize = 60;

fn session() -> SessionConfig {
    let mut session = SessionConfig::default();
    session.turns.length_ms = 20;
    session.turns.fairness = Fairness::Fair;
    session
}

/// A hash chain over every record executed, and every command executed with its player.
#[derive(Debug, Default, PartialEq)]
struct Played {
    chain: Vec<u64>,
    commands: Vec<(PlayerId, Order)>,
}

impl Played {
    fn take(&mut self, turn: u32, records: &[TypedRecord<Order>]) {
        let text = format!("{turn}:{records:?}");
        let last = self.chain.last().copied().unwrap_or(0xcbf2_9ce4_8422_2325);
        let next =
            text.bytes().fold(last, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
        self.chain.push(next);
        for record in records {
            if let TypedRecord::Command { player, command: Ok(order), .. } = record {
                self.commands.push((*player, order.clone()));
            }
        }
    }
}

/// What a client did: its game, its cheating orders and those it was told were refused.
struct ClientRun {
    played: Played,
    cheats: Vec<CommandSeq>,
    told: Vec<CommandSeq>,
}

/// A client that plays `TURNS` turns; every fifth turn it orders one of its units, and when
/// `cheat` also one of player 1's.
async fn client(mut client: Client<Order>, cheat: bool) -> ClientRun {
    let me = client.player().expect("a seat");
    let mut run = ClientRun { played: Played::default(), cheats: Vec::new(), told: Vec::new() };
    while let Some(turn) = client.next_turn().await {
        run.played.take(turn.turn.0, &turn.records);
        while let Some(event) = client.try_event() {
            if let Event::CommandRefused { player, seq } = event {
                assert_eq!(player, me, "told of our own commands only");
                run.told.push(seq);
            }
        }
        if turn.turn.0 % 5 == 0 && run.played.chain.len() < TURNS - 20 {
            let unit = 100 * u16::from(me.0) + 1;
            client.submit(&Order::Move { unit, x: turn.turn.0 as i32 }).await.expect("budget");
            if cheat {
                let ticket = client.submit(&Order::Stop { unit: 101 }).await.expect("budget");
                run.cheats.push(ticket.seq);
            }
        }
        if run.played.chain.len() == TURNS {
            break;
        }
    }
    client.shutdown().await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_for_units_a_player_does_not_own_are_refused() {
    let test = async {
        let transport = common::host_transport(common::transport());
        let mut options = HostOptions::new(transport, "127.0.0.1:0".parse().unwrap(), vec![1, 2]);
        options.session = session();
        options.local_player = true;
        options.command_rule =
            Some(CommandRule::new(|player, order: &Order| owns(player, order.unit())));
        let mut host: Host<Order> = Host::bind(options).await.unwrap();
        let addr = host.local_addr().unwrap();
        let mut tasks = Vec::new();
        for (token, cheat) in [(1, false), (2, true)] {
            let mut options = ClientOptions::new(token, host.pin());
            options.session = session();
            let joined: Client<Order> = Client::connect(addr, options).await.expect("joins");
            tasks.push(tokio::spawn(client(joined, cheat)));
        }
        host.start().await.unwrap();
        let mut own = Played::default();
        let (mut own_refused, mut stats, mut refusal_events) = (None, None, 0);
        while let Some(turn) = host.next_turn().await {
            own.take(turn.turn.0, &turn.records);
            while let Some(event) = host.try_event() {
                if let Event::CommandRefused { player: PlayerId(2), .. } = event {
                    refusal_events += 1;
                }
            }
            if turn.turn.0 == 3 {
                own_refused = Some(host.submit(&Order::Stop { unit: 201 }).await);
                host.submit(&Order::Stop { unit: 1 }).await.expect("its own unit");
            }
            if own.chain.len() == TURNS - 5 {
                // Every order is in by now (the last ones 15 turns ago); the clients are
                // still seated.
                stats = Some(host.stats().await.unwrap());
            }
            if own.chain.len() == TURNS {
                break;
            }
        }
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        host.shutdown().await;
        let stats = stats.expect("the host played");
        (own, own_refused, results, stats, refusal_events)
    };
    let (own, own_refused, results, (stats, peers), refusal_events) =
        tokio::time::timeout(Duration::from_secs(60), test).await.expect("bounded");
    assert!(
        matches!(own_refused, Some(Err(SessionError::Submit(SubmitError::Refused)))),
        "the host's own order for another's unit: {own_refused:?}"
    );
    let cheats = results[1].cheats.len() as u32;
    assert!(cheats > 0, "the cheater tried");
    for run in &results {
        assert_eq!(run.played, own, "every game executes the same turns and commands");
    }
    assert_eq!(results[1].told, results[1].cheats, "the cheater is told of each refusal, once");
    assert!(results[0].told.is_empty(), "the honest client is told of nothing");
    assert!(own.commands.iter().all(|(player, order)| owns(*player, order.unit())));
    assert!(own.commands.len() >= 8, "orders flowed: {:?}", own.commands);
    assert_eq!(stats.commands_refused, u64::from(cheats) + 1, "every refusal counted");
    let cheater = peers.iter().find(|(player, _)| *player == PlayerId(2)).expect("seated");
    assert_eq!(cheater.1.drops.refused, u64::from(cheats));
    assert_eq!(refusal_events, cheats, "an Event::CommandRefused each");
}

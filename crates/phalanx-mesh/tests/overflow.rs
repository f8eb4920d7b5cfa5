//! `budget.overflow_turns_max`: a burst of orders larger than one turn's budget spills into the next
//! turns instead of being refused — each command stamped for the first turn with room, in
//! submission order, and executed exactly there; past the option's reach, or with it off,
//! `OverBudget` as before. Driven through the public sans-IO API, host and client wired
//! back to back on a 5 ms link.

use std::collections::VecDeque;

use phalanx_proto::{Client, Host, SessionConfig, SubmitError, Ticket, Turn};

/// A host and one joined client, started.
fn pair(config: &SessionConfig) -> (Host, Client) {
    let mut host = Host::new(config.clone(), &[1]).expect("valid");
    let (mut client, request) = Client::new(config.clone(), 1).expect("valid");
    let reply = host.handle_join(0, &request).reply.expect("a reply");
    client.handle_join_reply(0, &reply).expect("joins");
    host.start(0);
    (host, client)
}

/// Runs the pair until `until_ms` on a 5 ms link; returns every executed turn's commands as
/// `(turn, seq)`.
fn run(host: &mut Host, client: &mut Client, until_ms: u64) -> Vec<(Turn, u32)> {
    let player = client.player().expect("joined");
    let mut up: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let mut down: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let mut executed = Vec::new();
    let mut buf = Vec::new();
    for now in 0..until_ms {
        host.handle_timeout(now);
        client.handle_timeout(now);
        while up.front().is_some_and(|(at, _)| *at <= now) {
            let (_, bytes) = up.pop_front().expect("checked");
            host.handle_datagram(now, player, &bytes);
        }
        while down.front().is_some_and(|(at, _)| *at <= now) {
            let (_, bytes) = down.pop_front().expect("checked");
            client.handle_datagram(now, &bytes);
        }
        while client.poll_transmit(now, &mut buf) {
            up.push_back((now + 5, buf.clone()));
        }
        while host.poll_transmit(now, &mut buf).is_some() {
            down.push_back((now + 5, buf.clone()));
        }
        while let Some(bundle) = client.next_turn(now) {
            executed.extend(bundle.commands().map(|(_, seq, _)| (bundle.turn, seq.0)));
        }
    }
    executed
}

fn config(overflow_turns_max: u32) -> SessionConfig {
    let mut config = SessionConfig::default();
    config.budget.commands_per_turn_max = 4;
    config.budget.overflow_turns_max = overflow_turns_max;
    config
}

#[test]
fn a_burst_spills_into_the_next_turns_and_executes_there() {
    let (mut host, mut client) = pair(&config(2));
    let tickets: Vec<Result<Ticket, SubmitError>> =
        (0..13u8).map(|order| client.submit(0, &[order])).collect();
    let stamped = tickets[0].expect("fits").turn;
    for (index, ticket) in tickets.iter().take(12).enumerate() {
        let ticket = ticket.expect("within the overflow");
        assert_eq!(ticket.turn.0, stamped.0 + index as u32 / 4, "four a turn, in order");
    }
    // Three turns of four are full: the thirteenth is refused, naming the stamped turn.
    assert_eq!(tickets[12], Err(SubmitError::OverBudget { turn: stamped }));
    let executed = run(&mut host, &mut client, 2_000);
    let expected: Vec<(Turn, u32)> =
        tickets.iter().take(12).map(|t| t.expect("fits")).map(|t| (t.turn, t.seq.0)).collect();
    assert_eq!(executed, expected, "each command executes exactly at its ticket's turn");
}

#[test]
fn without_overflow_the_fifth_is_refused() {
    let (_host, mut client) = pair(&config(0));
    for order in 0..4u8 {
        client.submit(0, &[order]).expect("fits");
    }
    assert!(matches!(client.submit(0, &[4]), Err(SubmitError::OverBudget { .. })));
}

#[test]
fn the_overflow_stays_inside_the_window() {
    let mut too_far = SessionConfig::default();
    too_far.budget.overflow_turns_max =
        too_far.turns.window_turns - too_far.turns.command_delay_turns_max;
    assert!(too_far.validate().is_err());
    too_far.budget.overflow_turns_max -= 1;
    assert!(too_far.validate().is_ok());
}

//! The browser's game, natively: two `Game`s, each on a phalanx-web `Pump` (bytes through the
//! I/O buffer, as the page's glue moves them), play a match against the sans-IO host in memory
//! (10 ms each way). Their bots give orders, one player also clicks; both end at the same
//! state hash after every turn of the match, every order submitted executed by both, the end
//! told as `finished`, and the report is one JSON object with those figures. The same code
//! runs in the page; `examples/archers/tests/web.rs` runs it there.

use std::collections::VecDeque;

use archers::rules::Match;
use archers_web::Game;
use phalanx_proto::{Host, Joined, PlayerId};
use phalanx_web::Pump;

const LATENCY_MS: u64 = 10;

struct Seat {
    pump: Pump,
    game: Game,
    to_seat: VecDeque<(u64, Vec<u8>)>,
    to_host: VecDeque<(u64, Vec<u8>)>,
}

fn join(host: &mut Host, rules: Match, token: u64, autoplay: bool) -> Seat {
    let mut pump = Pump::new();
    let len = pump.join(rules.session(), token).expect("a valid config");
    let request = pump.io()[..len].to_vec();
    let reply = host.handle_join(0, &request).reply.expect("a reply");
    pump.io_mut(reply.len()).unwrap().copy_from_slice(&reply);
    let Joined::Player(player) = pump.join_reply(LATENCY_MS, reply.len()).expect("joined") else {
        panic!("a player")
    };
    let game = Game::new(rules, player, autoplay);
    Seat { pump, game, to_seat: VecDeque::new(), to_host: VecDeque::new() }
}

/// One millisecond for one seat: its datagrams in, its timers and frame, its datagrams out.
fn step(host: &mut Host, seat: &mut Seat, now: u64) {
    while seat.to_seat.front().is_some_and(|(at, _)| *at <= now) {
        let (_, datagram) = seat.to_seat.pop_front().unwrap();
        seat.pump.io_mut(datagram.len()).unwrap().copy_from_slice(&datagram);
        seat.pump.datagram(now, datagram.len()).unwrap();
    }
    seat.pump.timeout(now).unwrap();
    // A page's frame every 16 ms.
    if now.is_multiple_of(16) {
        seat.game.frame(seat.pump.client().expect("joined"), now);
    }
    while let Some(len) = seat.pump.poll_datagram(now).unwrap() {
        seat.to_host.push_back((now + LATENCY_MS, seat.pump.io()[..len].to_vec()));
    }
    while seat.to_host.front().is_some_and(|(at, _)| *at <= now) {
        let (_, datagram) = seat.to_host.pop_front().unwrap();
        host.handle_datagram(now, seat.game.player(), &datagram);
    }
}

#[test]
fn two_browser_games_play_a_match_to_the_same_state() {
    let rules = Match { players: 2, units: 200, seed: 7, turns: 200 };
    let mut host = Host::new(rules.session(), &[11, 22]).expect("a valid config");
    let mut seats = [join(&mut host, rules, 11, true), join(&mut host, rules, 22, true)];
    host.start(LATENCY_MS);
    let (mut ended, mut clicked) = (false, false);
    for now in LATENCY_MS..120_000 {
        if host.poll_timeout().is_some_and(|at| at <= now) {
            host.handle_timeout(now);
        }
        if !ended && host.stats().turns_sealed >= u64::from(rules.turns) {
            host.end(now, 0).expect("ends");
            ended = true;
        }
        let mut buf = Vec::new();
        while let Some(player) = host.poll_transmit(now, &mut buf) {
            seats[usize::from(player.0)].to_seat.push_back((now + LATENCY_MS, buf.clone()));
        }
        for seat in &mut seats {
            step(&mut host, seat, now);
        }
        if !clicked && seats[1].game.played().turns == 50 {
            let Seat { pump, game, .. } = &mut seats[1];
            clicked = game.order_at(pump.client().unwrap(), now, 2048, 2048);
            assert!(clicked, "the click's order is taken");
        }
        if seats.iter().all(|seat| seat.game.played().ended.is_some()) {
            break;
        }
    }
    let [a, b] = seats.map(|seat| seat.game);
    let (a, b, player_b) = (a.played().clone(), b.played().clone(), b.player());
    assert_eq!(a.ended, Some("finished"), "{a:?}");
    assert_eq!(b.ended, Some("finished"), "{b:?}");
    assert_eq!(a.turns, rules.turns, "every turn of the match executed");
    assert_eq!((b.turns, b.final_state_hash), (a.turns, a.final_state_hash), "the same state");
    assert!(a.submitted > 0 && b.submitted > 1, "both gave orders, b a click too");
    assert_eq!(a.executed, a.submitted + b.submitted, "every order executed");
    assert_eq!(b.executed, a.executed);
    assert_eq!((a.desyncs, b.desyncs), (0, 0));
    assert!(b.latency_ms.is_some(), "latency measured");
    assert_eq!(player_b, PlayerId(1));
}

#[test]
fn the_report_is_one_json_object_of_what_the_game_did() {
    let rules = Match { players: 2, units: 20, seed: 1, turns: 10 };
    let game = Game::new(rules, PlayerId(1), false);
    let report: serde_json::Value = serde_json::from_str(&game.report()).expect("JSON");
    assert_eq!(report["player"], 1);
    assert_eq!(report["turns"], 0);
    assert_eq!(report["final_state_hash"], "0000000000000000");
    assert!(report["ended"].is_null() && report["latency_ms_p95"].is_null());
}

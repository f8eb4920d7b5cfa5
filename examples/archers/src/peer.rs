//! The demo's peer-to-peer match over real sockets: `archers rendezvous` stands in for a
//! lobby (it draws every seat's key, runs a `phalanx::mesh::RendezvousServer` and prints each
//! seat's command line), and each `archers peer` plays one seat with a
//! `phalanx::mesh::MeshSession`, meeting the others through the rendezvous. The lowest player
//! still in the match ends it after the last turn.

use std::net::SocketAddr;
use std::time::Duration;

use phalanx::mesh::{MeshEnd, MeshMember, MeshOptions, MeshSession};
use phalanx::proto::mesh::{PeerConfig, PeerEvent};
use phalanx::udp::{HostKey, HostPublicKey};
use phalanx::{PlayerId, TypedRecord, TypedTurn};
use phalanx_sim::SimGame;

use crate::game::{Archers, Setup};
use crate::net::{ClientOutcome, Match};
use crate::world::Order;

/// One seat of a peer-to-peer match: what a lobby hands each player.
#[derive(Clone, Debug)]
pub struct PeerSeat {
    /// The rendezvous the peers meet through.
    pub rendezvous: SocketAddr,
    /// The match's id (the rendezvous keeps matches apart by it; keep it secret).
    pub match_id: u64,
    /// Our seat.
    pub seat: u8,
    /// Our secret key; the roster lists its public half.
    pub key: HostKey,
    /// Every seat's public key, by seat.
    pub roster: Vec<HostPublicKey>,
    /// The modem's profile (`PeerConfig::modem`) rather than the default.
    pub modem: bool,
}

/// Plays `seat` of the match `game` to its end: the bot's orders, every turn's state hash
/// reported on check turns. Latency and stalls are read after every turn.
pub async fn play_peer(seat: PeerSeat, game: Match) -> Result<ClientOutcome, String> {
    let me = PlayerId(seat.seat);
    let roster = seat
        .roster
        .iter()
        .enumerate()
        .map(|(i, key)| MeshMember { player: PlayerId(i as u8), key: *key, addrs: Vec::new() })
        .collect();
    let bind = SocketAddr::from(([0, 0, 0, 0], 0));
    let mut options = MeshOptions::new(me, seat.key.clone(), roster, seat.match_id, bind);
    options.session = game.session();
    options.peer = if seat.modem { PeerConfig::modem() } else { PeerConfig::default() };
    options.rendezvous = Some(seat.rendezvous);
    let handle = tokio::runtime::Handle::current();
    let mut session: MeshSession<Order> =
        MeshSession::start(options, Some(handle)).map_err(|error| error.to_string())?;
    let setup = Setup::new(game.players, game.units, game.turns);
    let mut archers = Archers::new(me, game.seed, &setup);
    let mut outcome = ClientOutcome { player: seat.seat, ..ClientOutcome::default() };
    let check_every = game.session().sync.interval_turns.max(1);
    while !session.is_over() {
        while let Some(turn) = session.try_next_turn() {
            if turn.turn.0 >= game.turns {
                // A turn after the match's last: it only carries the end.
                continue;
            }
            let hash = execute(&mut archers, &turn, &mut outcome);
            if turn.turn.0.is_multiple_of(check_every) {
                session.report_state_hash(turn.turn, hash);
            }
            read_stats(&session, turn.turn.0, &mut outcome);
            if turn.turn.0 + 1 >= game.turns {
                if session.master() == Some(me) {
                    session.end(0).map_err(|error| format!("cannot end the match: {error:?}"))?;
                }
            } else {
                for order in archers.commands(turn.turn) {
                    if session.submit(&order).is_ok() {
                        outcome.submitted += 1;
                    }
                }
            }
        }
        while let Some(event) = session.try_event() {
            if let PeerEvent::Desync(report) = event {
                let diverged = report.diverged.iter().map(|p| p.0).collect();
                outcome.desyncs.push((report.turn.0, diverged));
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    outcome.ended = session.ended().map(|end| match end {
        MeshEnd::Peer(end) => end.name().to_owned(),
        _ => "unreachable".to_owned(),
    });
    // The others may still need our last datagrams: answer them a moment longer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(session);
    Ok(outcome)
}

/// Executes `turn` in the game and counts it; returns the state hash.
fn execute(archers: &mut Archers, turn: &TypedTurn<Order>, outcome: &mut ClientOutcome) -> u64 {
    archers.execute(turn);
    outcome.turns += 1;
    let commands = turn.records.iter().filter(|r| matches!(r, TypedRecord::Command { .. }));
    outcome.executed += commands.count() as u64;
    outcome.final_state_hash = archers.state_hash();
    outcome.final_state_hash
}

/// Reads our latency and stalls after `turn` (they cannot be read once the match is over).
fn read_stats(session: &MeshSession<Order>, turn: u32, outcome: &mut ClientOutcome) {
    if let Some(stats) = session.stats() {
        outcome.latency_ms = match (stats.latency_ms_p50, stats.latency_ms_p95) {
            (Some(p50), Some(p95)) => Some((p50, p95, stats.latency_ms_max.unwrap_or(p95))),
            _ => None,
        };
        outcome.stall_ms = Some(stats.stall_ms);
        outcome.measured_at_turn = Some(turn);
    }
}

//! `archers rendezvous` and `archers peer`: the match peer to peer over real sockets, one
//! process per player. The rendezvous stands in for a lobby: it draws each seat's key and the
//! match id, prints `LISTENING <addr>` and one `PEER <seat> <command line>` per seat on stdout
//! (the loopback test reads them), and relays the pairs that cannot punch through. Each peer
//! prints its summary, and with `--json` a JSON line, like a client.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use archers::peer::{play_peer, PeerSeat};
use phalanx::mesh::RendezvousServer;
use phalanx::udp::{HostConfig, HostKey};

use super::sockets::{print_json, print_outcome, runtime};
use super::{MatchArgs, PeerArgs, RendezvousArgs};

/// Serves the rendezvous for three times the match's length and a minute more.
pub(crate) fn rendezvous(args: &RendezvousArgs) -> ExitCode {
    let keys: Vec<HostKey> = (0..args.game.players).map(|_| HostConfig::generate().key).collect();
    // Any 8 bytes of a fresh secret: the match id must be hard to guess.
    let id_bytes = HostConfig::generate().key.to_bytes();
    let match_id = u64::from_le_bytes(id_bytes[..8].try_into().expect("8 bytes"));
    runtime().block_on(async {
        let server = match RendezvousServer::bind(args.bind) {
            Ok(server) => server,
            Err(error) => {
                eprintln!("error: cannot listen on {}: {error}", args.bind);
                return ExitCode::FAILURE;
            }
        };
        let addr = server.local_addr();
        println!("LISTENING {addr}");
        let roster: Vec<String> = keys.iter().map(|key| key.public().to_string()).collect();
        for (seat, key) in keys.iter().enumerate() {
            let command = peer_command(args, addr, match_id, seat, key, &roster.join(","));
            println!("PEER {seat} {command}");
        }
        let MatchArgs { players, units, minutes, seed } = args.game;
        eprintln!(
            "archers rendezvous: {players} players, {units} archers, {minutes:.1} min, seed \
             {seed}; listening on {addr}. Start each seat's command above, on its machine (the \
             address must be one they reach); it serves for {:.0} s.",
            minutes * 180.0 + 60.0
        );
        let serve = Duration::from_secs_f64(minutes * 180.0 + 60.0);
        tokio::time::sleep(serve).await;
        drop(server);
        ExitCode::SUCCESS
    })
}

/// The `archers peer` command line of `seat`.
fn peer_command(
    args: &RendezvousArgs,
    addr: std::net::SocketAddr,
    match_id: u64,
    seat: usize,
    key: &HostKey,
    roster: &str,
) -> String {
    let MatchArgs { players, units, minutes, seed } = args.game;
    let secret = key.to_hex();
    let mut command = format!(
        "archers peer --rendezvous {addr} --match {match_id} --seat {seat} --secret {secret} \
         --roster {roster} --players {players} --units {units} --minutes {minutes} --seed {seed}"
    );
    if args.modem {
        command.push_str(" --modem");
    }
    command
}

/// Plays one seat; succeeds when the match was played to its last turn and ended there.
pub(crate) fn peer(args: &PeerArgs) -> ExitCode {
    let game = args.game.game();
    let seat = PeerSeat {
        rendezvous: args.rendezvous,
        match_id: args.match_id,
        seat: args.seat,
        key: args.secret.clone(),
        roster: args.roster.clone(),
        modem: args.modem,
    };
    eprintln!(
        "archers peer: seat {} of {}, meeting at {}",
        args.seat, game.players, args.rendezvous
    );
    let started = Instant::now();
    let outcome = match runtime().block_on(play_peer(seat, game)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print_outcome(&outcome, game.turns, started.elapsed().as_secs_f64());
    if args.json {
        print_json(&outcome, None);
    }
    let finished = outcome.ended.as_deref() == Some("finished");
    if outcome.turns == game.turns && finished && outcome.desyncs.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

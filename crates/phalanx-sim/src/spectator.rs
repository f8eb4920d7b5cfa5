//! A spectator's machine `s{index}`: joins at its time with a spectator token, runs the game
//! on every turn it is sent (restoring a snapshot when it joins mid-game), and reports its
//! hashes as a player's are reported. Its link to the host has the scenario's
//! [`SimConfig::spectator_link`](crate::SimConfig::spectator_link) latency and loss.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use phalanx::{Client, PlayerId};

use crate::run::{node_seed, now_ms, Run, HOST_PORT};
use crate::{SimGame, SimSocket};

/// Spectator `index`'s token (the host allows them).
pub(crate) fn spectator_token(index: usize) -> u64 {
    900 + index as u64
}

/// Starts machine `s{index}` in the simulation, with its link to the host.
pub(crate) fn spectator_node<G: SimGame>(
    sim: &mut turmoil::Sim<'_>,
    run: &Run,
    index: usize,
    setup: G::Setup,
) {
    let name = format!("s{index}");
    let node = run.clone();
    sim.client(name.as_str(), async move { watch::<G>(node, index, setup).await });
    // The loss is the sockets' (independent per datagram, both ways): turmoil's own link
    // failures drop everything in flight at once.
    let latency_ms = run.config.spectator_link.0;
    sim.set_link_latency("host", name.as_str(), Duration::from_millis(latency_ms));
}

/// Joins at its time (up to ten attempts: over a long lossy link a handshake and join can
/// outlast the host's join deadline), then watches to the last turn.
async fn watch<G: SimGame>(run: Run, index: usize, setup: G::Setup) -> turmoil::Result {
    let join_at = run.config.spectators[index];
    tokio::time::sleep(Duration::from_millis(join_at.saturating_sub(now_ms()))).await;
    let addr = SocketAddr::from((turmoil::lookup("host"), HOST_PORT));
    let mut attempt = 0u64;
    let mut client: Client<G::Command> = loop {
        let stream = 20_000 + index as u64 + 100 * attempt;
        let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), 6_000 + attempt as u16));
        let seed = node_seed(run.config.seed, stream);
        let name = format!("s{index}");
        let socket =
            SimSocket::bind(&name, bind, run.config.faults, seed, run.trace.clone()).await?;
        socket.add_loss_to(turmoil::lookup("host"), run.config.spectator_link.1);
        let options = run.client_options(spectator_token(index), socket, stream);
        match Client::connect(addr, options).await {
            Ok(client) => break client,
            Err(error) if attempt == 9 => {
                run.with_spectator(index, |report| report.join_error = Some(error.to_string()));
                return Ok(());
            }
            Err(_) => attempt += 1,
        }
    };
    run.with_spectator(index, |report| report.spectator = client.spectator());
    if index == 0 && run.config.hostile_spectator {
        send_commands(&client);
    }
    // A spectator's game has no player of its own: it only executes turns.
    let mut game = G::new(PlayerId(u8::MAX), run.config.seed, &setup);
    let interval = run.config.session.sync.interval_turns.max(1);
    while let Some(turn) = client.next_turn().await {
        if let Some(snapshot) = &turn.restore {
            if !game.restore(&snapshot.state) {
                run.with_spectator(index, |r| {
                    r.join_error = Some("snapshot did not restore".into())
                });
                break;
            }
            let restored = (snapshot.turn, snapshot.state.len());
            run.with_spectator(index, |report| {
                report.first_turn = turn.turn.0;
                report.restored = Some(restored);
            });
        }
        game.execute(&turn);
        let hash = game.state_hash();
        run.with_spectator(index, |report| {
            report.hashes.push(hash);
            report.executed_at_ms.push(now_ms());
        });
        if turn.turn.0 % interval == 0 {
            let _ = client.report_state_hash(turn.turn, hash).await;
        }
        if turn.turn.0 + 1 >= run.config.turns {
            break;
        }
    }
    let stats = client.stats().await.ok();
    run.with_spectator(index, |report| {
        report.finished_ms = Some(now_ms());
        report.ended = client.ended();
        if let Some(stats) = &stats {
            report.record_stats(now_ms(), stats);
        }
    });
    client.shutdown().await;
    Ok(())
}

/// From 3 s on, 100 datagrams a second carrying commands on the spectator's connection (the
/// host, acknowledging them, makes the honest client beside them see acks of packets it
/// never sent: fast enough that the host drops it first).
fn send_commands<C: serde::Serialize + serde::de::DeserializeOwned>(client: &Client<C>) {
    let sender = client.dangerous_raw_datagram_sender();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        for pn in 1u64 << 40.. {
            let turn = phalanx_proto::Turn((now_ms() / 100) as u32);
            let datagram =
                phalanx_proto::testing::up_datagram_with_commands(pn, turn, &[b"attack"]);
            if sender.send(datagram).is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

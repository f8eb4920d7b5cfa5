//! The nodes that are not players: the director, which applies the timeline's partitions and
//! repairs at their time, and the flood of joins with bad tokens (fault-matrix row 22).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use phalanx::Client;

use crate::run::{node_seed, now_ms, Run, HOST_PORT};
use crate::{LinkFaults, SimGame, SimSocket, Step};

/// Starts the director: each partition, half-open cut, hold and repair of the timeline at its
/// time (a hold's release too), on the machine then holding the step's seat (a seat nobody
/// holds yet: the step is skipped and listed in the report). Crashes are not its business: the
/// host's happen in the stepping loop, a client's in its own process.
pub(crate) fn director_node(sim: &mut turmoil::Sim<'_>, run: &Run) {
    let run = run.clone();
    sim.client("director", async move {
        // (when, the step, whether this is a hold's release)
        let mut actions: Vec<(u64, Step, bool)> = Vec::new();
        for &step in &run.config.timeline {
            match step {
                Step::Partition { .. } | Step::PartitionUp { .. } | Step::Repair { .. } => {
                    actions.push((step.at_ms(), step, false));
                }
                Step::Hold { at_ms, for_ms, .. } => {
                    actions.push((at_ms, step, false));
                    actions.push((at_ms.saturating_add(for_ms), step, true));
                }
                _ => {}
            }
        }
        actions.sort_by_key(|&(at_ms, _, _)| at_ms);
        for (at_ms, step, release) in actions {
            let player = match step {
                Step::Partition { player, .. }
                | Step::PartitionUp { player, .. }
                | Step::Hold { player, .. }
                | Step::Repair { player, .. } => player,
                _ => continue,
            };
            tokio::time::sleep(Duration::from_millis(at_ms.saturating_sub(now_ms()))).await;
            let Some(machine) = run.seats.lock().expect("not poisoned").get(&player).copied()
            else {
                if !release {
                    run.with_report(|report| report.steps_skipped.push(step));
                }
                continue;
            };
            let node = format!("p{machine}");
            match step {
                Step::Partition { .. } => turmoil::partition("host", node.as_str()),
                Step::PartitionUp { .. } => turmoil::partition_oneway(node.as_str(), "host"),
                Step::Hold { .. } if release => turmoil::release("host", node.as_str()),
                Step::Hold { .. } => turmoil::hold("host", node.as_str()),
                _ => turmoil::repair("host", node.as_str()),
            }
        }
        Ok(())
    });
}

/// Starts the flood: from 1 s on, `flood_joins` joins one after the other with bad tokens, on
/// a clean link, each from its own port and random stream (`10_000 + attempt`).
pub(crate) fn flood_node<G: SimGame>(sim: &mut turmoil::Sim<'_>, run: &Run) {
    let run = run.clone();
    sim.client("flood", async move {
        let addr = SocketAddr::from((turmoil::lookup("host"), HOST_PORT));
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        for attempt in 0..run.config.flood_joins {
            let port = 6_000 + (attempt % 50_000) as u16;
            let bind = SocketAddr::from((IpAddr::from([0, 0, 0, 0]), port));
            let stream = 10_000 + u64::from(attempt);
            let seed = node_seed(run.config.seed, stream);
            let socket =
                SimSocket::bind("flood", bind, LinkFaults::default(), seed, run.trace.clone())
                    .await?;
            let token = u64::MAX - u64::from(attempt);
            let options = run.client_options(token, socket, stream);
            match Client::<G::Command>::connect(addr, options).await {
                Ok(client) => client.shutdown().await,
                Err(_) => run.with_report(|report| report.flood_refused += 1),
            }
        }
        Ok(())
    });
}

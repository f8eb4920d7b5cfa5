//! The host's raw-UDP listener ([`crate::udp`]): the same join, datagrams and uploads as over
//! QUIC. The join request is the connection's first reliable message and the reply goes back
//! as one; every later message is an upload (a snapshot, a desync's hashes or state).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use phalanx_proto::{JoinRefusal, Joined};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::{
    CloseReason, HostConfig, Received, SharedSocket, UdpConnection, UdpHost, UdpHostStats,
    UdpOptions, UdpReceiver,
};
use crate::admission::{Gate, Outcome, Pass, Verdict};
use crate::conn::{Conn, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN, JOIN_BYTES_MAX};
use crate::host::{count_refusal, Input, Listen, REFUSAL_GRACE};
use crate::HostError;

type Connection = UdpConnection<SharedSocket>;

/// A listening UDP host, as the session's host keeps it: its address, its connections (to
/// close them at shutdown) and its endpoint's drop counters.
pub(crate) struct Listening {
    pub(crate) local: SocketAddr,
    conns: Conns,
    pub(crate) drops: Arc<Mutex<UdpHostStats>>,
}

type Conns = Arc<Mutex<Vec<Connection>>>;

/// Binds the endpoint with the config's static key and spawns its accept loop.
pub(crate) fn listen(
    config: HostConfig,
    listen: Listen<'_>,
) -> Result<(Listening, JoinHandle<()>), HostError> {
    let HostConfig { key, socket, seed } = config;
    let Listen { session, admission, bind, inputs, gate } = listen;
    let socket = match socket {
        Some(socket) => socket,
        None => super::bind_socket(bind).map_err(HostError::Bind)?,
    };
    let mut options = UdpOptions {
        seed,
        // The session's own idle timeout ends a silent player first, with its typed outcome.
        idle_timeout: Duration::from_millis(u64::from(session.link.idle_timeout_ms) + 2_000),
        peers_max: admission.pending_max + usize::from(session.turns.players_max),
        ..UdpOptions::default()
    };
    let uploads = session.snapshot_upload_bytes_max();
    options.stream.message_bytes_max = uploads.max(JOIN_BYTES_MAX);
    let host = UdpHost::bind(socket, key, options).map_err(HostError::Bind)?;
    let conns = Conns::default();
    let listening =
        Listening { local: host.local_addr(), conns: conns.clone(), drops: host.stats_handle() };
    let serve = udp_accept_loop(host, inputs, gate, conns, uploads);
    Ok((listening, tokio::spawn(serve)))
}

/// Closes every connection: clients end `HostClosed` at once.
pub(crate) fn shutdown(listening: Listening) {
    let conns =
        std::mem::take(&mut *listening.conns.lock().unwrap_or_else(PoisonError::into_inner));
    conns.iter().for_each(|conn| conn.close(CLOSE_SHUTDOWN));
}

/// Hands each connection whose handshake completed to admission control, then to a task of
/// its own; keeps the connections for the host's shutdown.
async fn udp_accept_loop(
    mut host: UdpHost<SharedSocket>,
    inputs: mpsc::Sender<Input>,
    gate: Arc<Gate>,
    conns: Conns,
    upload_max: usize,
) {
    while let Some((conn, receiver)) = host.accept().await {
        let address: IpAddr = conn.remote_address().ip();
        // The handshake's cookie proved the address: no retry needed.
        match gate.admit(address, true, false) {
            Verdict::Admit(pass) => {
                {
                    let mut list = conns.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    list.retain(|conn| !conn.is_closed());
                    list.push(conn.clone());
                }
                let span = tracing::info_span!("connection", %address);
                let serve = serve(conn, receiver, inputs.clone(), pass, upload_max);
                tokio::spawn(serve.instrument(span));
            }
            Verdict::Retry | Verdict::Refuse => conn.close(CLOSE_REMOVED),
        }
    }
}

/// One connection: its join request within the join timeout, the driver's answer, then its
/// datagrams and uploads until it ends.
async fn serve(
    conn: Connection,
    mut receiver: UdpReceiver,
    inputs: mpsc::Sender<Input>,
    pass: Pass,
    upload_max: usize,
) {
    pass.handshake_done();
    let Some(request) = read_join(&conn, &mut receiver, &pass).await else { return };
    let address = pass.address();
    let wrapped = Conn::udp(conn.clone());
    let id = wrapped.stable_id();
    let (reply_tx, reply_rx) = oneshot::channel();
    if inputs.send(Input::Join { conn: wrapped, request, reply: reply_tx }).await.is_err() {
        return;
    }
    let Ok(response) = reply_rx.await else { return };
    let player = match response.result {
        Ok(joined) => {
            pass.gate().joined();
            tracing::info!(%address, ?joined, "joined over UDP");
            joined
        }
        Err(error) => {
            count_refusal(&pass, &error);
            if let Some(reply) = response.reply {
                refuse(&conn, &reply).await;
            }
            return;
        }
    };
    drop(pass);
    if let Some(reply) = &response.reply {
        let _ = conn.send_message(reply);
    }
    tokio::spawn(tell_delivered(conn, inputs.clone(), player, id));
    forward(player, id, &mut receiver, &inputs, upload_max).await;
}

/// Tells the driver when the client holds the whole join reply (its idle timer starts then).
async fn tell_delivered(conn: Connection, inputs: mpsc::Sender<Input>, player: Joined, id: usize) {
    while !conn.is_closed() {
        if conn.messages_delivered() {
            let _ = inputs.send(Input::Delivered(player, id)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Hands the joined client's datagrams and uploads to the driver until the connection ends,
/// then how it ended.
async fn forward(
    player: Joined,
    id: usize,
    receiver: &mut UdpReceiver,
    inputs: &mpsc::Sender<Input>,
    upload_max: usize,
) {
    while let Some(received) = receiver.next().await {
        let input = match received {
            Received::Datagram(bytes) => Input::Datagram(player, id, Bytes::from(bytes)),
            Received::Message(bytes) => {
                let within = bytes.len() <= upload_max;
                Input::Snapshot(player, id, within.then_some(bytes))
            }
        };
        if inputs.send(input).await.is_err() {
            return;
        }
    }
    let input = match receiver.close_reason() {
        Some(CloseReason::Peer(CLOSE_LEFT)) => Input::Left(player, id),
        _ => Input::Closed(player, id),
    };
    let _ = inputs.send(input).await;
}

/// The join request: the connection's first message, within the join timeout; a connection
/// that fails is counted, answered when it can be, and closed.
async fn read_join(conn: &Connection, receiver: &mut UdpReceiver, pass: &Pass) -> Option<Vec<u8>> {
    let (gate, address) = (pass.gate(), Some(pass.address()));
    let deadline = tokio::time::Instant::now() + gate.limits().join_timeout;
    let first = tokio::select! {
        first = tokio::time::timeout_at(deadline, first_message(receiver)) => first,
        () = pass.evicted() => {
            // Counted by the gate.
            conn.close(CLOSE_REMOVED);
            return None;
        }
    };
    match first {
        Ok(Some(request)) if request.len() <= JOIN_BYTES_MAX => {
            pass.request_received();
            Some(request)
        }
        Ok(Some(_)) => {
            gate.count(Outcome::JoinOversized, address, None);
            let max = JOIN_BYTES_MAX as u32;
            let reply = phalanx_proto::encode_join_reply(&Err(JoinRefusal::TooLarge { max }));
            refuse(conn, &reply).await;
            None
        }
        // Closed by the client, or gone silent (no datagram for the idle timeout): each is
        // counted as what it was.
        Ok(None) => {
            match receiver.close_reason() {
                Some(CloseReason::Idle) => {
                    gate.count(Outcome::JoinTimeout, address, Some("the client went silent"));
                }
                _ => gate.count(Outcome::ClosedBeforeJoin, address, None),
            }
            None
        }
        Err(_) => {
            gate.count(Outcome::JoinTimeout, address, Some("waiting for the join request"));
            conn.close(CLOSE_REMOVED);
            None
        }
    }
}

/// The first message (datagrams before the join mean nothing and are skipped).
async fn first_message(receiver: &mut UdpReceiver) -> Option<Vec<u8>> {
    loop {
        if let Received::Message(message) = receiver.next().await? {
            return Some(message);
        }
    }
}

/// Sends a refusal, gives the stream time to deliver it, then closes.
async fn refuse(conn: &Connection, reply: &[u8]) {
    let _ = conn.send_message(reply);
    let deadline = tokio::time::Instant::now() + REFUSAL_GRACE;
    while !conn.messages_delivered() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    conn.close(CLOSE_REMOVED);
}

//! The host's QUIC listener: the endpoint, an accept loop that puts every attempt through
//! admission control, and one task per connection for its handshake, join request, datagrams
//! and uploads, all handed to the host's driver as [`Input`]s.

use std::net::SocketAddr;
use std::sync::Arc;

use phalanx_proto::{JoinRefusal, Joined, SessionConfig};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::config::{transport_config, End};
use super::HostConfig;
use crate::admission::{Admission, Gate, Outcome, Pass, Verdict};
use crate::conn::{Conn, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN, JOIN_BYTES_MAX};
use crate::host::{count_refusal, Input, Listen, REFUSAL_GRACE};
use crate::HostError;

/// Binds the endpoint and spawns its accept loop; the identity's fingerprint is what clients
/// pin.
pub(crate) fn listen(
    config: HostConfig,
    listen: Listen<'_>,
) -> Result<(quinn::Endpoint, JoinHandle<()>), HostError> {
    let HostConfig { identity, reset_key, socket, seed } = config;
    let server = server_config(&identity, listen.session, listen.admission)?;
    let endpoint = quic_endpoint(server, listen.bind, reset_key, socket, seed)?;
    let uploads = listen.session.snapshot_upload_bytes_max();
    let accept = accept_loop(endpoint.clone(), listen.inputs, listen.gate, uploads);
    Ok((endpoint, tokio::spawn(accept)))
}

/// Closes every connection (clients end `HostClosed` at once) and waits a moment for the
/// closes to leave.
pub(crate) async fn shutdown(endpoint: quinn::Endpoint) {
    endpoint.close(quinn::VarInt::from_u32(CLOSE_SHUTDOWN), b"host shut down");
    let wait = endpoint.wait_idle();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), wait).await;
}

/// The QUIC endpoint: on `socket` (a simulator's) or a real one bound to `bind`.
fn quic_endpoint(
    server: quinn::ServerConfig,
    bind: SocketAddr,
    reset_key: Option<[u8; 32]>,
    socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    quic_seed: Option<[u8; 32]>,
) -> Result<quinn::Endpoint, HostError> {
    let key = reset_key.unwrap_or_else(crate::random_bytes::<32>);
    let reset = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let mut endpoint_config = quinn::EndpointConfig::new(Arc::new(reset));
    super::seed_endpoint(&mut endpoint_config, quic_seed, super::HOST_CID_LEN);
    let runtime = quinn::default_runtime().ok_or(HostError::NoRuntime)?;
    match socket {
        Some(socket) => quinn::Endpoint::new_with_abstract_socket(
            endpoint_config,
            Some(server),
            socket,
            runtime,
        ),
        None => {
            let socket = std::net::UdpSocket::bind(bind).map_err(HostError::Bind)?;
            quinn::Endpoint::new(endpoint_config, Some(server), socket, runtime)
        }
    }
    .map_err(HostError::Bind)
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    inputs: mpsc::Sender<Input>,
    gate: Arc<Gate>,
    upload_max: usize,
) {
    while let Some(incoming) = endpoint.accept().await {
        let address = incoming.remote_address().ip();
        let verdict =
            gate.admit(address, incoming.remote_address_validated(), incoming.may_retry());
        match verdict {
            Verdict::Admit(pass) => {
                // Every event of the connection's life carries its address.
                let span = tracing::info_span!("connection", %address);
                let serve = serve_connection(incoming, inputs.clone(), pass, upload_max);
                tokio::spawn(serve.instrument(span));
            }
            Verdict::Retry => {
                // `may_retry` was checked: cannot fail.
                let _ = incoming.retry();
            }
            Verdict::Refuse => incoming.refuse(),
        }
    }
}

/// quinn's server config: the host's identity, the session's transport settings, and small
/// bounds on what quinn holds for connection attempts before admission control sees them.
fn server_config(
    identity: &super::HostIdentity,
    session: &SessionConfig,
    admission: &Admission,
) -> Result<quinn::ServerConfig, HostError> {
    let tls = identity.server_tls().map_err(HostError::Identity)?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(HostError::Tls)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport_config(session, End::Host));
    // Attempts quinn holds before the accept loop decides on them (it decides at once),
    // and the bytes it buffers for them: small, so a flood cannot grow them.
    server.max_incoming(admission.pending_max.max(64) * 4);
    server.incoming_buffer_size(16 * 1024);
    server.incoming_buffer_size_total(1024 * 1024);
    Ok(server)
}

/// One connection: its handshake and join request within the join timeout, then its
/// datagrams. The pass keeps it counted as pending until its join is answered.
async fn serve_connection(
    incoming: quinn::Incoming,
    inputs: mpsc::Sender<Input>,
    pass: Pass,
    upload_max: usize,
) {
    let Some((conn, send, request)) = read_join(incoming, &pass).await else { return };
    let Some((answer, reply)) = ask_driver(Conn::Quic(conn.clone()), request, &inputs, &pass).await
    else {
        return;
    };
    let Some(player) = answer else {
        if let Some(reply) = reply {
            refuse(&conn, send, &reply, b"join refused").await;
        }
        return;
    };
    drop(pass);
    let mut send = send;
    if let Some(reply) = &reply {
        let _ = send.write_all(reply).await;
        let _ = send.finish();
    }
    // Tell the session when the client holds the reply: its idle timer starts then.
    let (delivered, id) = (inputs.clone(), conn.stable_id());
    tokio::spawn(async move {
        if let Ok(None) = send.stopped().await {
            let _ = delivered.send(Input::Delivered(player, id)).await;
        }
    });
    tokio::select! {
        () = forward_datagrams(&conn, player, &inputs) => {}
        () = forward_uploads(&conn, player, &inputs, upload_max) => {}
    }
}

/// The driver's answer to a join request over any transport: the seat (`None`: refused, and
/// counted) and the reply to write; `None` when the driver is gone.
pub(crate) async fn ask_driver(
    conn: Conn,
    request: Vec<u8>,
    inputs: &mpsc::Sender<Input>,
    pass: &Pass,
) -> Option<(Option<Joined>, Option<Vec<u8>>)> {
    let address = pass.address();
    let (reply_tx, reply_rx) = oneshot::channel();
    inputs.send(Input::Join { conn, request, reply: reply_tx }).await.ok()?;
    let response = reply_rx.await.ok()?;
    let joined = match response.result {
        Ok(joined) => {
            pass.gate().joined();
            match joined {
                Joined::Player(player) => {
                    tracing::info!(%address, player = player.0, "player joined")
                }
                Joined::Spectator(id) => {
                    tracing::info!(%address, spectator = id.0, "spectator joined")
                }
            }
            Some(joined)
        }
        Err(error) => {
            count_refusal(pass, &error);
            None
        }
    };
    Some((joined, response.reply))
}

/// Hands the joined player's snapshot uploads to the driver, one stream at a time (the
/// transport allows one), each read to its end within `max` bytes. Returns never: the
/// datagram loop beside it sees the connection end.
async fn forward_uploads(
    conn: &quinn::Connection,
    player: Joined,
    inputs: &mpsc::Sender<Input>,
    max: usize,
) {
    let id = conn.stable_id();
    while let Ok(mut recv) = conn.accept_uni().await {
        let bytes = match recv.read_to_end(max).await {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                tracing::debug!(?player, %error, "snapshot upload not read");
                let _ = recv.stop(quinn::VarInt::from_u32(0));
                None
            }
        };
        if inputs.send(Input::Snapshot(player, id, bytes)).await.is_err() {
            break;
        }
    }
    std::future::pending::<()>().await;
}

/// The handshake and the join request, within the join timeout; a connection that fails
/// is counted, answered when it can be (a refusal for a malformed or oversized request) and
/// closed.
async fn read_join(
    incoming: quinn::Incoming,
    pass: &Pass,
) -> Option<(quinn::Connection, quinn::SendStream, Vec<u8>)> {
    let (gate, address) = (pass.gate(), Some(pass.address()));
    let deadline = tokio::time::Instant::now() + gate.limits().join_timeout;
    let conn = handshake_step(pass, deadline, incoming).await?;
    pass.handshake_done();
    let read = tokio::time::timeout_at(deadline, async {
        let (send, mut recv) = conn.accept_bi().await?;
        Ok::<_, quinn::ConnectionError>((send, recv.read_to_end(JOIN_BYTES_MAX).await))
    });
    let read = tokio::select! {
        read = read => read,
        () = pass.evicted() => {
            // Counted by the gate.
            conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"no join request: host busy");
            return None;
        }
    };
    match read {
        Ok(Ok((send, Ok(request)))) => {
            pass.request_received();
            return Some((conn, send, request));
        }
        Ok(Ok((send, Err(quinn::ReadToEndError::TooLong)))) => {
            gate.count(Outcome::JoinOversized, address, None);
            let max = JOIN_BYTES_MAX as u32;
            let reply = phalanx_proto::encode_join_reply(&Err(JoinRefusal::TooLarge { max }));
            refuse(&conn, send, &reply, b"join request too large").await;
        }
        Ok(Ok((send, Err(error)))) => {
            gate.count(Outcome::JoinMalformed, address, Some(&error.to_string()));
            let reply = phalanx_proto::encode_join_reply(&Err(JoinRefusal::Malformed));
            refuse(&conn, send, &reply, b"join request unreadable").await;
        }
        Ok(Err(error)) => {
            gate.count(Outcome::ClosedBeforeJoin, address, Some(&error.to_string()));
        }
        Err(_) => {
            gate.count(Outcome::JoinTimeout, address, Some("waiting for the join request"));
            conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), b"no join request in time");
        }
    }
    None
}

/// A step of a connection's handshake, by the join deadline: its outcome, or `None` once
/// counted as a failed or timed-out handshake.
pub(crate) async fn handshake_step<T, E: std::fmt::Display>(
    pass: &Pass,
    deadline: tokio::time::Instant,
    step: impl std::future::IntoFuture<Output = Result<T, E>>,
) -> Option<T> {
    let (gate, address) = (pass.gate(), Some(pass.address()));
    match tokio::time::timeout_at(deadline, step).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(error)) => {
            gate.count(Outcome::HandshakeFailed, address, Some(&error.to_string()));
            None
        }
        Err(_) => {
            gate.count(Outcome::JoinTimeout, address, Some("in the handshake"));
            None
        }
    }
}

/// Sends a refusal, lets the client read it (it closes once it has), then closes.
async fn refuse(conn: &quinn::Connection, mut send: quinn::SendStream, reply: &[u8], why: &[u8]) {
    let _ = send.write_all(reply).await;
    let _ = send.finish();
    let _ = tokio::time::timeout(REFUSAL_GRACE, conn.closed()).await;
    conn.close(quinn::VarInt::from_u32(CLOSE_REMOVED), why);
}

/// Hands the joined player's datagrams to the driver until the connection ends.
async fn forward_datagrams(conn: &quinn::Connection, player: Joined, inputs: &mpsc::Sender<Input>) {
    let id = conn.stable_id();
    loop {
        match conn.read_datagram().await {
            Ok(bytes) => {
                if inputs.send(Input::Datagram(player, id, bytes)).await.is_err() {
                    return;
                }
            }
            // Only a client's own goodbye is a leave, as over UDP: any other close (a dropped
            // session's implicit one among them) is a lost connection, left to the idle
            // timeout and the rejoin window.
            Err(quinn::ConnectionError::ApplicationClosed(close))
                if close.error_code == quinn::VarInt::from_u32(CLOSE_LEFT) =>
            {
                let _ = inputs.send(Input::Left(player, id)).await;
                return;
            }
            Err(_) => {
                let _ = inputs.send(Input::Closed(player, id)).await;
                return;
            }
        }
    }
}

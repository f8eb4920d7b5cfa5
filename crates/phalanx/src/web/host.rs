//! The host's WebTransport listener: an accept loop that puts every attempt through the host's
//! admission control, and one task per browser session for its HTTP/3 handshake, its join
//! request on a bidirectional stream, its datagrams and uploads — handed to the host's driver
//! as the same [`Input`]s a QUIC connection gives.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use phalanx_proto::{JoinRefusal, Joined, SessionConfig};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;
use wtransport::endpoint::endpoint_side::Server;
use wtransport::endpoint::IncomingSession;
use wtransport::{Endpoint, VarInt};

use super::{BrowserConfig, BrowserIdentity, CertificateHash, RenewalClock};
use crate::admission::{Gate, Outcome, Pass, Verdict};
use crate::conn::{Conn, CLOSE_LEFT, CLOSE_REMOVED, CLOSE_SHUTDOWN, JOIN_BYTES_MAX};
use crate::host::{Input, Listen, REFUSAL_GRACE};
use crate::quic::config::{transport, End};
use crate::quic::host::{ask_driver, handshake_step};
use crate::HostError;

/// HTTP/3's own unidirectional streams a browser opens (control and the two QPACK streams).
const H3_UNI_STREAMS: u32 = 3;

/// The certificate hash pages pin now (renewal replaces it).
pub(crate) type SharedHash = Arc<Mutex<CertificateHash>>;

/// The listener, as the host keeps it.
pub(crate) struct Listening {
    pub(crate) endpoint: Arc<Endpoint<Server>>,
    pub(crate) local: SocketAddr,
    pub(crate) hash: SharedHash,
    /// The renewal task, if renewal is on.
    renewal: Option<JoinHandle<()>>,
}

/// What the endpoint's config is made from, again at each renewal.
#[derive(Clone)]
struct Settings {
    bind: SocketAddr,
    session: SessionConfig,
    pending_max: usize,
}

impl Settings {
    /// The endpoint's config with `identity`: the session's QUIC settings, with room for
    /// HTTP/3 (the CONNECT stream beside the join stream; the browser's control and QPACK
    /// streams beside an upload), and small bounds on attempts before admission sees them.
    fn server_config(&self, identity: &BrowserIdentity) -> wtransport::ServerConfig {
        let mut quic = transport(&self.session, End::Host);
        quic.max_concurrent_bidi_streams(quinn::VarInt::from_u32(2));
        quic.max_concurrent_uni_streams(quinn::VarInt::from_u32(H3_UNI_STREAMS + 1));
        let mut server = wtransport::ServerConfig::builder()
            .with_bind_address(self.bind)
            .with_custom_transport(identity.identity(), quic)
            .build();
        server.quic_config_mut().max_incoming(self.pending_max.max(64) * 4);
        server.quic_config_mut().incoming_buffer_size(16 * 1024);
        server.quic_config_mut().incoming_buffer_size_total(1024 * 1024);
        server
    }
}

/// Binds the WebTransport endpoint on `config.bind` and spawns its accept loop (and its
/// renewal, if on).
pub(crate) fn listen(
    config: BrowserConfig,
    listen: &Listen<'_>,
) -> Result<(Listening, JoinHandle<()>), HostError> {
    let BrowserConfig { identity, bind, path, renew_before, clock } = config;
    let settings = Settings {
        bind,
        session: listen.session.clone(),
        pending_max: listen.admission.pending_max,
    };
    let endpoint =
        Arc::new(Endpoint::server(settings.server_config(&identity)).map_err(HostError::Bind)?);
    let local = endpoint.local_addr().map_err(HostError::Bind)?;
    let uploads = listen.session.snapshot_upload_bytes_max();
    let accept = accept_loop(
        endpoint.clone(),
        Arc::from(path),
        listen.inputs.clone(),
        listen.gate.clone(),
        uploads,
    );
    let hash = Arc::new(Mutex::new(identity.certificate_hash()));
    let renewal = renew_before.map(|before| {
        let renew = Renewal { endpoint: endpoint.clone(), settings, hash: hash.clone(), clock };
        tokio::spawn(renew.run(identity, before))
    });
    Ok((Listening { endpoint, local, hash, renewal }, tokio::spawn(accept)))
}

/// Renews the certificate before it runs out.
struct Renewal {
    endpoint: Arc<Endpoint<Server>>,
    settings: Settings,
    hash: SharedHash,
    clock: RenewalClock,
}

impl Renewal {
    /// Once a second: when `identity` runs out within `before` by the clock, a new one goes
    /// to new sessions, and its hash to [`Listening::hash`].
    async fn run(self, mut identity: BrowserIdentity, before: Duration) {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = (self.clock.0)();
            if now + before < identity.not_after() {
                continue;
            }
            let renewed = match identity.renewed(now) {
                Ok(renewed) => renewed,
                Err(error) => {
                    tracing::warn!(target: "phalanx", %error, "browser certificate not renewed");
                    continue;
                }
            };
            let config = self.settings.server_config(&renewed);
            if let Err(error) = self.endpoint.reload_config(config, false) {
                tracing::warn!(target: "phalanx", %error, "browser certificate not renewed");
                continue;
            }
            let hash = renewed.certificate_hash();
            tracing::info!(target: "phalanx", %hash, "browser certificate renewed");
            *self.hash.lock().unwrap_or_else(PoisonError::into_inner) = hash;
            identity = renewed;
        }
    }
}

/// Closes every browser session (pages see the host's shutdown code) and waits a moment for
/// the closes to leave.
pub(crate) async fn shutdown(listening: Listening) {
    if let Some(renewal) = &listening.renewal {
        renewal.abort();
    }
    listening.endpoint.close(VarInt::from_u32(CLOSE_SHUTDOWN), b"host shut down");
    let wait = listening.endpoint.wait_idle();
    let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
}

async fn accept_loop(
    endpoint: Arc<Endpoint<Server>>,
    path: Arc<str>,
    inputs: mpsc::Sender<Input>,
    gate: Arc<Gate>,
    upload_max: usize,
) {
    loop {
        let incoming = endpoint.accept().await;
        let address = incoming.remote_address().ip();
        let validated = incoming.remote_address_validated();
        match gate.admit(address, validated, !validated) {
            Verdict::Admit(pass) => {
                let span = tracing::info_span!("browser", %address);
                let serve = serve(incoming, path.clone(), inputs.clone(), pass, upload_max);
                tokio::spawn(serve.instrument(span));
            }
            // Only asked for when the address is not validated yet.
            Verdict::Retry => incoming.retry(),
            Verdict::Refuse => incoming.refuse(),
        }
    }
}

/// One browser session: its handshake and join request within the join timeout, then its
/// datagrams and uploads.
async fn serve(
    incoming: IncomingSession,
    path: Arc<str>,
    inputs: mpsc::Sender<Input>,
    pass: Pass,
    upload_max: usize,
) {
    let Some((conn, mut send, request)) = read_join(incoming, &path, &pass).await else { return };
    let asked = ask_driver(Conn::Web(conn.clone()), request, &inputs, &pass).await;
    let Some((answer, reply)) = asked else { return };
    let Some(player) = answer else {
        if let Some(reply) = reply {
            refuse(&conn, send, &reply, b"join refused").await;
        }
        return;
    };
    drop(pass);
    if let Some(reply) = &reply {
        let _ = send.write_all(reply).await;
        let _ = send.quic_stream_mut().finish();
    }
    // Tell the session when the browser holds the reply: its idle timer starts then.
    let (delivered, id) = (inputs.clone(), conn.stable_id());
    tokio::spawn(async move {
        if let Ok(None) = send.quic_stream_mut().stopped().await {
            let _ = delivered.send(Input::Delivered(player, id)).await;
        }
    });
    tokio::select! {
        () = forward_datagrams(&conn, player, &inputs) => {}
        () = forward_uploads(&conn, player, &inputs, upload_max) => {}
    }
}

/// The HTTP/3 handshake (a session on `path`, anything else answered 404) and the join
/// request, within the join timeout; a session that fails is counted, answered when it can be
/// and closed.
async fn read_join(
    incoming: IncomingSession,
    path: &str,
    pass: &Pass,
) -> Option<(wtransport::Connection, wtransport::SendStream, Vec<u8>)> {
    let (gate, address) = (pass.gate(), Some(pass.address()));
    let deadline = tokio::time::Instant::now() + gate.limits().join_timeout;
    let request = handshake_step(pass, deadline, incoming).await?;
    if request.path() != path {
        gate.count(Outcome::HandshakeFailed, address, Some("not the session's path"));
        request.not_found().await;
        return None;
    }
    let conn = handshake_step(pass, deadline, request.accept()).await?;
    pass.handshake_done();
    let read = tokio::time::timeout_at(deadline, async {
        let (send, mut recv) = conn.accept_bi().await.ok()?;
        Some((send, recv.quic_stream_mut().read_to_end(JOIN_BYTES_MAX).await))
    });
    let read = tokio::select! {
        read = read => read,
        () = pass.evicted() => {
            conn.close(VarInt::from_u32(CLOSE_REMOVED), b"no join request: host busy");
            return None;
        }
    };
    let refusal = match read {
        Ok(Some((send, Ok(request)))) => {
            pass.request_received();
            return Some((conn, send, request));
        }
        Ok(Some((send, Err(quinn::ReadToEndError::TooLong)))) => {
            gate.count(Outcome::JoinOversized, address, None);
            let max = JOIN_BYTES_MAX as u32;
            (send, JoinRefusal::TooLarge { max }, &b"join request too large"[..])
        }
        Ok(Some((send, Err(error)))) => {
            gate.count(Outcome::JoinMalformed, address, Some(&error.to_string()));
            (send, JoinRefusal::Malformed, &b"join request unreadable"[..])
        }
        Ok(None) => {
            gate.count(Outcome::ClosedBeforeJoin, address, None);
            return None;
        }
        Err(_) => {
            gate.count(Outcome::JoinTimeout, address, Some("waiting for the join request"));
            conn.close(VarInt::from_u32(CLOSE_REMOVED), b"no join request in time");
            return None;
        }
    };
    let (send, refusal, why) = refusal;
    let reply = phalanx_proto::encode_join_reply(&Err(refusal));
    refuse(&conn, send, &reply, why).await;
    None
}

/// Sends a refusal, lets the browser read it (it closes once it has), then closes.
async fn refuse(
    conn: &wtransport::Connection,
    mut send: wtransport::SendStream,
    reply: &[u8],
    why: &[u8],
) {
    let _ = send.write_all(reply).await;
    let _ = send.quic_stream_mut().finish();
    let _ = tokio::time::timeout(REFUSAL_GRACE, conn.closed()).await;
    conn.close(VarInt::from_u32(CLOSE_REMOVED), why);
}

/// Hands the joined player's datagrams to the driver until the session ends.
async fn forward_datagrams(
    conn: &wtransport::Connection,
    player: Joined,
    inputs: &mpsc::Sender<Input>,
) {
    let id = conn.stable_id();
    loop {
        match conn.receive_datagram().await {
            Ok(datagram) => {
                if inputs.send(Input::Datagram(player, id, datagram.payload())).await.is_err() {
                    return;
                }
            }
            // Only the page's own goodbye is a leave; any other end (a closed tab among them)
            // is a lost connection, left to the idle timeout and the rejoin window.
            Err(wtransport::error::ConnectionError::ApplicationClosed(close))
                if close.code() == VarInt::from_u32(CLOSE_LEFT) =>
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

/// Hands the joined player's snapshot uploads to the driver, one stream at a time, each read
/// to its end within `max` bytes. Returns never: the datagram loop beside it sees the end.
async fn forward_uploads(
    conn: &wtransport::Connection,
    player: Joined,
    inputs: &mpsc::Sender<Input>,
    max: usize,
) {
    let id = conn.stable_id();
    while let Ok(mut recv) = conn.accept_uni().await {
        let bytes = match recv.quic_stream_mut().read_to_end(max).await {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                tracing::debug!(?player, %error, "snapshot upload not read");
                recv.stop(VarInt::from_u32(0));
                None
            }
        };
        if inputs.send(Input::Snapshot(player, id, bytes)).await.is_err() {
            break;
        }
    }
    std::future::pending::<()>().await;
}

/// Sends an upload (a snapshot, a desync's hashes or state) on a stream of its own.
pub(crate) fn upload(connection: &wtransport::Connection, bytes: Vec<u8>) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let sent = async {
            let mut send = connection.open_uni().await?.await?;
            send.write_all(&bytes).await?;
            send.finish().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        if let Err(error) = sent.await {
            tracing::warn!(target: "phalanx", %error, "upload failed");
        }
    });
}

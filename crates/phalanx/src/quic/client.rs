//! The client's QUIC side: the endpoint, the handshake (retrying a busy host), the join on a
//! stream, and uploads on streams of their own.

use std::net::SocketAddr;
use std::sync::Arc;

use phalanx_proto::SessionConfig;

use super::config::{transport_config, End};
use super::tls::{client_tls, HostVerification, Mismatch};
use super::ClientConfig;
use crate::client::{Join, JoinProgress};
use crate::error::JoinStreamError;
use crate::ConnectError;

/// Sends an upload (a snapshot, a desync's hashes or state) on a stream of its own, beside
/// the datagrams; the host reads it to its end.
pub(crate) fn upload(connection: &quinn::Connection, bytes: Vec<u8>) {
    let connection = connection.clone();
    tokio::spawn(async move {
        let sent = async {
            let mut send = connection.open_uni().await?;
            send.write_all(&bytes).await?;
            send.finish()?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        if let Err(error) = sent.await {
            tracing::warn!(target: "phalanx", %error, "upload failed");
        }
    });
}

/// Reads a join reply to the end of its stream, at most `max` bytes, telling `progress`.
async fn read_reply(
    recv: &mut quinn::RecvStream,
    max: usize,
    progress: Option<&JoinProgress>,
) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let mut reply = Vec::new();
    while let Some(chunk) = recv.read_chunk(max + 1 - reply.len(), true).await? {
        reply.extend_from_slice(&chunk.bytes);
        if reply.len() > max {
            return Err(quinn::ReadToEndError::TooLong);
        }
        if let Some(progress) = progress {
            progress.report(reply.len());
        }
    }
    Ok(reply)
}

/// Connects over QUIC and joins on a stream: the endpoint, the connection and the reply.
pub(crate) async fn join(
    config: ClientConfig,
    join: Join<'_>,
) -> Result<(quinn::Endpoint, quinn::Connection, Vec<u8>), ConnectError> {
    let ClientConfig { verification, server_name, socket, seed: quic_seed } = config;
    let Join { addr, session, request, timeout: join_timeout, progress: join_progress } = join;
    let mismatch = Mismatch::default();
    let config = quic_config(session, &verification, &mismatch)?;
    // A game's own socket (a simulator's) cannot be bound again; a real one can.
    let rebind = socket.is_none();
    let mut endpoint = client_endpoint(addr, socket, quic_seed)?;
    endpoint.set_default_client_config(config.clone());
    let reply_max = session.join_reply_bytes_max();
    let mut busy = false;
    let joined = tokio::time::timeout(join_timeout, async {
        let mut fresh = || {
            let mut endpoint = client_endpoint(addr, None, quic_seed)?;
            endpoint.set_default_client_config(config.clone());
            Ok(endpoint)
        };
        let fresh: Option<&mut dyn FnMut() -> Result<quinn::Endpoint, ConnectError>> =
            if rebind { Some(&mut fresh) } else { None };
        let attempt = Attempt { addr, server_name: &server_name, fresh };
        let connection = attempt.connect(&mut endpoint, &mut busy).await?;
        let (mut send, mut recv) = connection.open_bi().await.map_err(ConnectError::Connection)?;
        let write = |e| ConnectError::Stream(JoinStreamError::Write(e));
        send.write_all(request).await.map_err(write)?;
        send.finish().map_err(|e| ConnectError::Stream(JoinStreamError::Closed(e)))?;
        let reply = read_reply(&mut recv, reply_max, join_progress)
            .await
            .map_err(|e| ConnectError::Stream(JoinStreamError::Read(e)))?;
        Ok::<_, ConnectError>((connection, reply))
    })
    .await
    .map_err(|_| if busy { ConnectError::HostBusy } else { ConnectError::Timeout })?
    .map_err(|error| {
        match (mismatch.lock().ok().and_then(|seen| *seen), &verification) {
            // The handshake failed because the host is not the one the lobby named.
            (Some(found), HostVerification::Pinned(expected)) => {
                ConnectError::WrongHost { expected: *expected, found }
            }
            _ => error,
        }
    })?;
    let (connection, reply) = joined;
    Ok((endpoint, connection, reply))
}

/// quinn's client config: the TLS that checks the host (recording a pinned mismatch) and the
/// session's transport settings.
fn quic_config(
    session: &SessionConfig,
    verification: &HostVerification,
    mismatch: &Mismatch,
) -> Result<quinn::ClientConfig, ConnectError> {
    let tls = client_tls(verification, mismatch).map_err(ConnectError::Tls)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|error| ConnectError::Tls(rustls::Error::General(error.to_string())))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport_config(session, End::Client));
    Ok(config)
}

/// A client endpoint on `socket`, or on a fresh local UDP socket of `addr`'s family.
/// The first pause before connecting again to a busy host; it doubles up to the most.
const BUSY_BACKOFF_FIRST: std::time::Duration = std::time::Duration::from_millis(20);
const BUSY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_millis(320);

/// How to connect: where, and how to get an endpoint for another attempt.
struct Attempt<'a> {
    addr: SocketAddr,
    server_name: &'a str,
    /// Makes a new endpoint on a new socket; `None`: the endpoint's socket is the game's own.
    fresh: Option<&'a mut dyn FnMut() -> Result<quinn::Endpoint, ConnectError>>,
}

impl Attempt<'_> {
    /// Connects; while the host refuses the connection before its handshake (its admission
    /// limits are reached: a burst of joins, or a flood), tries again after a short, doubling
    /// pause, setting `busy` (the caller's timeout bounds the whole).
    ///
    /// Each new attempt goes from a new endpoint, or, on the game's own socket, waits until
    /// the refused connection is gone: a client's connection ids are empty, so its endpoint
    /// routes by the host's address, and quinn, dropping a refused connection after its
    /// drain period, drops that route even when a newer connection to the same host uses it
    /// (the newer one would then hear nothing).
    async fn connect(
        mut self,
        endpoint: &mut quinn::Endpoint,
        busy: &mut bool,
    ) -> Result<quinn::Connection, ConnectError> {
        let mut pause = BUSY_BACKOFF_FIRST;
        loop {
            let connecting =
                endpoint.connect(self.addr, self.server_name).map_err(ConnectError::Connect)?;
            match connecting.await {
                Ok(connection) => return Ok(connection),
                Err(quinn::ConnectionError::ConnectionClosed(close))
                    if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED =>
                {
                    *busy = true;
                    tracing::debug!(?pause, "host busy: connecting again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BUSY_BACKOFF_MAX);
                    match self.fresh.as_mut() {
                        Some(fresh) => *endpoint = fresh()?,
                        None => endpoint.wait_idle().await,
                    }
                }
                // A raw-UDP host answers a QUIC Initial with version negotiation.
                Err(quinn::ConnectionError::VersionMismatch) => {
                    return Err(ConnectError::TransportMismatch)
                }
                Err(error) => return Err(ConnectError::Connection(error)),
            }
        }
    }
}

fn client_endpoint(
    addr: SocketAddr,
    socket: Option<Arc<dyn quinn::AsyncUdpSocket>>,
    quic_seed: Option<[u8; 32]>,
) -> Result<quinn::Endpoint, ConnectError> {
    let bind: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let mut endpoint_config = quinn::EndpointConfig::default();
    super::seed_endpoint(&mut endpoint_config, quic_seed, super::CLIENT_CID_LEN);
    let runtime = quinn::default_runtime().ok_or(ConnectError::NoRuntime)?;
    match socket {
        Some(socket) => {
            quinn::Endpoint::new_with_abstract_socket(endpoint_config, None, socket, runtime)
        }
        None => {
            let socket = std::net::UdpSocket::bind(bind).map_err(ConnectError::Endpoint)?;
            quinn::Endpoint::new(endpoint_config, None, socket, runtime)
        }
    }
    .map_err(ConnectError::Endpoint)
}

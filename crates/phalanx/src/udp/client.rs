//! The client's raw-UDP side: the Noise handshake pinning the host's key, then the join as a
//! reliable message.

use std::net::SocketAddr;

use super::{
    ClientConfig, Received, SharedSocket, UdpConnection, UdpError, UdpOptions, UdpReceiver,
};
use crate::client::Join;
use crate::ConnectError;

/// Connects (pinning the host's static key) and joins with a reliable message: the
/// connection, its receiver and the reply.
pub(crate) async fn join(
    config: ClientConfig,
    join: Join<'_>,
) -> Result<(UdpConnection<SharedSocket>, UdpReceiver, Vec<u8>), ConnectError> {
    let ClientConfig { host_key, socket, seed } = config;
    let Join { addr, session, request, timeout, progress } = join;
    let bind: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = match socket {
        Some(socket) => socket,
        None => super::bind_socket(bind).map_err(ConnectError::Endpoint)?,
    };
    let mut udp = UdpOptions {
        seed,
        handshake_timeout: timeout,
        // The session's own idle timeout ends a lost host first, with its typed outcome.
        idle_timeout: std::time::Duration::from_millis(
            u64::from(session.link.idle_timeout_ms) + 2_000,
        ),
        ..UdpOptions::default()
    };
    udp.stream.message_bytes_max = session.join_reply_bytes_max();
    let joined = tokio::time::timeout(timeout, async {
        let (connection, mut receiver) =
            super::connect(socket, addr, host_key, udp).await.map_err(|error| match error {
                super::UdpConnectError::QuicHost => ConnectError::TransportMismatch,
                error => ConnectError::Udp(error),
            })?;
        connection.send_message(request).map_err(ConnectError::UdpJoin)?;
        loop {
            match receiver.next().await {
                Some(Received::Message(reply)) => {
                    if let Some(progress) = progress {
                        progress.report(reply.len());
                    }
                    return Ok((connection, receiver, reply));
                }
                Some(Received::Datagram(_)) => {}
                None => return Err(ConnectError::UdpJoin(UdpError::Closed)),
            }
        }
    });
    joined.await.map_err(|_| ConnectError::Timeout)?
}

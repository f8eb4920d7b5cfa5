//! Every error phalanx returns, by operation: those of this crate and those of the session
//! core it re-exports.

use std::fmt;

pub use crate::pin::PinParseError;
pub use phalanx_proto::{
    ClientJoinError, CodecError, ConfigError, DiffError, EndError, JoinRefusal, RemoveError,
    ReplayError, SnapshotError, SubmitError,
};

#[cfg(feature = "quic")]
use crate::quic::Fingerprint;
#[cfg(feature = "quic")]
pub use crate::quic::{FingerprintParseError, IdentityError};
#[cfg(feature = "udp")]
use crate::udp;
#[cfg(doc)]
use crate::{session::Admission, Session};

/// Why a host could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostError {
    /// The session config is invalid.
    Config(phalanx_proto::ConfigError),
    /// The identity does not make a TLS configuration.
    #[cfg(feature = "quic")]
    Identity(IdentityError),
    /// The TLS configuration does not suit QUIC (no TLS 1.3 cipher suite QUIC can start with).
    #[cfg(feature = "quic")]
    Tls(quinn::crypto::rustls::NoInitialCipherSuite),
    /// The socket could not be bound.
    Bind(std::io::Error),
    /// No tokio runtime is running: call from inside one.
    NoRuntime,
    /// `local_player` was asked for but the session has no free seat.
    NoSeatForLocalPlayer,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Config(error) => write!(f, "invalid session config: {error}"),
            #[cfg(feature = "quic")]
            HostError::Identity(error) => error.fmt(f),
            #[cfg(feature = "quic")]
            HostError::Tls(error) => write!(f, "TLS configuration: {error}"),
            HostError::Bind(error) => write!(f, "cannot bind the socket: {error}"),
            HostError::NoRuntime => write!(f, "no tokio runtime is running"),
            HostError::NoSeatForLocalPlayer => write!(f, "no seat left for the host's player"),
        }
    }
}

impl std::error::Error for HostError {}

/// How the join's reliable stream failed (over QUIC).
#[cfg(feature = "quic")]
#[derive(Debug)]
#[non_exhaustive]
pub enum JoinStreamError {
    /// Sending the join request failed.
    Write(quinn::WriteError),
    /// The stream was closed before the request was finished.
    Closed(quinn::ClosedStream),
    /// Reading the host's reply failed (or it was longer than a join reply may be).
    Read(quinn::ReadToEndError),
}

#[cfg(feature = "quic")]
impl fmt::Display for JoinStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinStreamError::Write(error) => write!(f, "sending the request: {error}"),
            JoinStreamError::Closed(error) => write!(f, "finishing the request: {error}"),
            JoinStreamError::Read(error) => write!(f, "reading the reply: {error}"),
        }
    }
}

#[cfg(feature = "quic")]
impl std::error::Error for JoinStreamError {}

/// Why a client could not join.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The session config is invalid.
    Config(phalanx_proto::ConfigError),
    /// The TLS configuration could not be built.
    #[cfg(feature = "quic")]
    Tls(rustls::Error),
    /// The local socket could not be bound.
    Endpoint(std::io::Error),
    /// The connection could not be started (bad address or server name).
    #[cfg(feature = "quic")]
    Connect(quinn::ConnectError),
    /// The connection failed: unreachable host, certificate not accepted, or closed.
    #[cfg(feature = "quic")]
    Connection(quinn::ConnectionError),
    /// The join stream failed.
    #[cfg(feature = "quic")]
    Stream(JoinStreamError),
    /// No tokio runtime with IO and time is running: call from inside one (or use a
    /// [`Session`], which brings its own).
    NoRuntime,
    /// The host did not answer the join in time.
    Timeout,
    /// The host refused every connection attempt before its handshake until the join
    /// timeout: too many connections are waiting to join (or too many from this address;
    /// see [`Admission`]). `connect` already tried again at short intervals.
    HostBusy,
    /// The host refused the join, or its reply was unusable.
    Join(phalanx_proto::ClientJoinError),
    /// The host's certificate is not the pinned one: another host, or an impostor.
    #[cfg(feature = "quic")]
    WrongHost {
        /// The fingerprint the client pinned.
        expected: Fingerprint,
        /// The one the host presented.
        found: Fingerprint,
    },
    /// Over UDP: the handshake failed (a wrong pinned key names both keys).
    #[cfg(feature = "udp")]
    Udp(udp::UdpConnectError),
    /// Over UDP: the join's reliable message failed (the connection ended
    /// before the reply, or the reply was over the limit).
    #[cfg(feature = "udp")]
    UdpJoin(udp::UdpError),
    /// The host at that address speaks the other transport (a UDP client reached a QUIC host,
    /// or a QUIC client a UDP host): answered at once instead of waiting out the timeout.
    TransportMismatch,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(error) => write!(f, "invalid session config: {error}"),
            #[cfg(feature = "quic")]
            ConnectError::Tls(error) => write!(f, "TLS configuration: {error}"),
            ConnectError::Endpoint(error) => write!(f, "cannot bind a local socket: {error}"),
            #[cfg(feature = "quic")]
            ConnectError::Connect(error) => write!(f, "cannot connect: {error}"),
            #[cfg(feature = "quic")]
            ConnectError::Connection(error) => write!(f, "connection failed: {error}"),
            #[cfg(feature = "quic")]
            ConnectError::Stream(error) => write!(f, "join stream failed: {error}"),
            ConnectError::NoRuntime => write!(f, "no tokio runtime is running"),
            ConnectError::Timeout => write!(f, "the host did not answer the join in time"),
            ConnectError::HostBusy => {
                write!(f, "the host is busy (too many connections waiting to join): retry soon")
            }
            #[cfg(feature = "quic")]
            ConnectError::WrongHost { expected, found } => write!(
                f,
                "the host's certificate fingerprint is {found}, not the pinned {expected}: \
                 another host (or an impostor) answers at that address"
            ),
            ConnectError::Join(error) => error.fmt(f),
            #[cfg(feature = "udp")]
            ConnectError::Udp(error) => error.fmt(f),
            #[cfg(feature = "udp")]
            ConnectError::UdpJoin(error) => write!(f, "join over UDP failed: {error}"),
            ConnectError::TransportMismatch => f.write_str(
                "the host at that address speaks the other transport (QUIC or raw UDP): \
                 check which one the lobby named",
            ),
        }
    }
}

impl std::error::Error for ConnectError {}

impl ConnectError {
    /// The host's refusal, if the host refused the join (as opposed to a network or setup
    /// failure): retrying the same join will not help.
    pub fn refusal(&self) -> Option<JoinRefusal> {
        match self {
            ConnectError::Join(phalanx_proto::ClientJoinError::Refused(refusal)) => Some(*refusal),
            _ => None,
        }
    }
}

/// Why an operation on a running session failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// The command did not encode.
    Codec(CodecError),
    /// The session refused the command (too large, over budget, not running).
    Submit(SubmitError),
    /// The session's driver has stopped (the session ended or was shut down).
    Closed,
    /// [`HostControl::end`](crate::HostControl::end) was refused (not started, or already
    /// ending).
    End(EndError),
    /// [`HostControl::remove`](crate::HostControl::remove) was refused (nobody remote in that
    /// seat).
    Remove(RemoveError),
    /// The snapshot was not taken (not wanted, too large, stale).
    Snapshot(SnapshotError),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Codec(error) => error.fmt(f),
            SessionError::Submit(error) => error.fmt(f),
            SessionError::Closed => write!(f, "the session has ended"),
            SessionError::End(error) => write!(f, "cannot end the game: {error}"),
            SessionError::Remove(error) => write!(f, "cannot remove the player: {error}"),
            SessionError::Snapshot(error) => write!(f, "snapshot not taken: {error}"),
        }
    }
}

impl std::error::Error for SessionError {}

//! The typed layer: the game's own command type `C: Serialize + DeserializeOwned` on top of
//! the byte-level session. postcard is the default codec (a stable, documented wire format and
//! the smallest general encoding we measured); bincode 2 sits behind the `bincode` feature.
//! With neither feature the crate has no `DefaultCodec`: a game implements
//! [`CommandCodec`] for its own encoding (errors through [`CodecError::new`]) and names it.
//!
//! The host relays command bytes without decoding them, so bytes that do not decode as `C`
//! reach every peer identically and fail identically: each peer sees the same
//! [`TypedRecord::Command`] with an `Err`, and the game skips it the same way everywhere.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::bundle::Record;
use crate::client::Client;
use crate::snapshot::Snapshot;
use crate::types::{CommandSeq, PlayerId, Ticket, Turn};
use crate::SubmitError;

/// A command codec: how a game's command type becomes bytes and back.
pub trait CommandCodec {
    /// Encodes a command.
    fn encode<C: Serialize>(command: &C) -> Result<Vec<u8>, CodecError>;
    /// Decodes a command; trailing bytes are an error.
    fn decode<C: DeserializeOwned>(bytes: &[u8]) -> Result<C, CodecError>;
}

/// A command failed to encode or decode. Carries the codec's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodecError {
    message: String,
}

impl CodecError {
    /// An error carrying `message`: what a game's own [`CommandCodec`] returns when a command
    /// does not encode or the bytes do not decode.
    ///
    /// ```
    /// use phalanx_proto::{CodecError, CommandCodec};
    /// use serde::{de::DeserializeOwned, Serialize};
    ///
    /// /// postcard behind a format byte, so that a later build can change its encoding.
    /// struct Versioned;
    ///
    /// impl CommandCodec for Versioned {
    ///     fn encode<C: Serialize>(command: &C) -> Result<Vec<u8>, CodecError> {
    ///         let mut bytes = vec![1];
    ///         bytes.extend(phalanx_proto::Postcard::encode(command)?);
    ///         Ok(bytes)
    ///     }
    ///     fn decode<C: DeserializeOwned>(bytes: &[u8]) -> Result<C, CodecError> {
    ///         match bytes.split_first() {
    ///             Some((1, rest)) => phalanx_proto::Postcard::decode(rest),
    ///             Some((version, _)) => Err(CodecError::new(format!("format {version}"))),
    ///             None => Err(CodecError::new("no format byte")),
    ///         }
    ///     }
    /// }
    ///
    /// let bytes = Versioned::encode(&(3u8, -7i32)).unwrap();
    /// assert_eq!(Versioned::decode::<(u8, i32)>(&bytes), Ok((3, -7)));
    /// let error = Versioned::decode::<(u8, i32)>(&[2, 0]).unwrap_err();
    /// assert_eq!(error.to_string(), "command codec: format 2");
    /// ```
    pub fn new(message: impl std::fmt::Display) -> Self {
        CodecError { message: message.to_string() }
    }
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "command codec: {}", self.message)
    }
}

impl std::error::Error for CodecError {}

/// postcard 1.x: the default codec.
#[cfg(feature = "postcard")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Postcard;

#[cfg(feature = "postcard")]
impl CommandCodec for Postcard {
    fn encode<C: Serialize>(command: &C) -> Result<Vec<u8>, CodecError> {
        postcard::to_allocvec(command).map_err(CodecError::new)
    }

    fn decode<C: DeserializeOwned>(bytes: &[u8]) -> Result<C, CodecError> {
        let (command, rest) = postcard::take_from_bytes(bytes).map_err(CodecError::new)?;
        if !rest.is_empty() {
            return Err(CodecError::new(format_args!("{} trailing bytes", rest.len())));
        }
        Ok(command)
    }
}

/// bincode 2 through its serde API (feature `bincode`). bincode is unmaintained
/// (RUSTSEC-2025-0141); prefer [`Postcard`].
#[cfg(feature = "bincode")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Bincode;

#[cfg(feature = "bincode")]
impl CommandCodec for Bincode {
    fn encode<C: Serialize>(command: &C) -> Result<Vec<u8>, CodecError> {
        bincode::serde::encode_to_vec(command, bincode::config::standard()).map_err(CodecError::new)
    }

    fn decode<C: DeserializeOwned>(bytes: &[u8]) -> Result<C, CodecError> {
        // A command is at most a datagram: cap what a length prefix may make bincode allocate.
        let config = bincode::config::standard().with_limit::<65_536>();
        let (command, used) =
            bincode::serde::decode_from_slice(bytes, config).map_err(CodecError::new)?;
        if used != bytes.len() {
            return Err(CodecError::new(format_args!("{} trailing bytes", bytes.len() - used)));
        }
        Ok(command)
    }
}

/// Why a typed submit failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypedSubmitError {
    /// The command did not encode.
    Codec(CodecError),
    /// The session refused the encoded command.
    Submit(SubmitError),
}

impl std::fmt::Display for TypedSubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypedSubmitError::Codec(error) => error.fmt(f),
            TypedSubmitError::Submit(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for TypedSubmitError {}

/// A bundle record with the command decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypedRecord<C> {
    /// A command; `Err` if its bytes are not a `C` (the same on every peer).
    Command {
        /// Who issued it.
        player: PlayerId,
        /// Its sequence number.
        seq: CommandSeq,
        /// The decoded command.
        command: Result<C, CodecError>,
    },
    /// `player` joins this turn.
    Joined(PlayerId),
    /// `player` leaves this turn.
    Left(PlayerId),
}

/// A sealed turn with decoded commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypedTurn<C> {
    /// The turn to execute.
    pub turn: Turn,
    /// Its records in canonical order.
    pub records: Vec<TypedRecord<C>>,
    /// How long this turn lasts (see [`TurnBundle::length_ms`](crate::TurnBundle::length_ms)).
    pub length_ms: u32,
    /// After a rejoin through a snapshot, on the first turn handed out: the game's state
    /// after the snapshot's turn. Restore it (in place of the game's state) **before**
    /// executing this turn; the turns from here on build on it.
    pub restore: Option<Snapshot>,
    /// The session wants a snapshot of the game's state after this turn: once it has executed
    /// the turn, the game serializes its state and offers it (`offer_snapshot`) with its
    /// state hash. Only with `SessionConfig::catch_up.snapshot_interval_turns`, only on the peer asked.
    pub wants_snapshot: bool,
    /// A past turn replayed after a rejoin or a late join: the game executes it to catch up,
    /// but its player should give no orders until the turns are live again (orders given
    /// now are all stamped for the first live turn, and its budget refuses the excess).
    pub catching_up: bool,
    /// The game's last turn: it carries the end of the game (the host ended it, or a desync
    /// did), the session ends once it is executed, and orders submitted after it are
    /// refused with `NotRunning`.
    pub last: bool,
    /// A turn [`speculation`](crate::speculate) predicted, never one a session hands out: the
    /// game executes it as any turn, but it is not confirmed and will be rolled back. Keep it
    /// out of what cannot be taken back: replays, statistics, sounds, messages to players.
    pub predicted: bool,
}

impl<C: DeserializeOwned> TypedTurn<C> {
    /// Decodes a bundle's commands with codec `K`. Control records other than joins and
    /// leaves are dropped here (drivers report them as events).
    pub fn decode<K: CommandCodec>(bundle: crate::TurnBundle) -> TypedTurn<C> {
        let last = bundle.is_last();
        let records = bundle
            .records
            .into_iter()
            .filter_map(|record| match record {
                Record::Command { player, seq, payload } => {
                    Some(TypedRecord::Command { player, seq, command: K::decode(&payload) })
                }
                Record::Joined(player) => Some(TypedRecord::Joined(player)),
                Record::Left(player) => Some(TypedRecord::Left(player)),
                _ => None,
            })
            .collect();
        TypedTurn {
            turn: bundle.turn,
            records,
            length_ms: bundle.length_ms,
            restore: None,
            wants_snapshot: false,
            catching_up: false,
            last,
            predicted: false,
        }
    }
}

/// Defines [`TypedClient`], with `= DefaultCodec` as its codec's default when a codec feature
/// gives the crate one (with neither `postcard` nor `bincode`, a game names its own codec).
macro_rules! typed_client {
    ($($default:tt)*) => {
        /// A [`Client`] that speaks the game's command type `C` with codec `K`.
        ///
        /// ```
        /// use phalanx_proto::{Client, SessionConfig, TypedClient};
        /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        /// enum Order { Move { x: i32, y: i32 }, Stop }
        ///
        /// let (client, _join_request) = Client::new(SessionConfig::default(), 7).unwrap();
        /// let mut client: TypedClient<Order> = TypedClient::new(client);
        /// // Not joined yet: the command is refused, not queued.
        /// assert!(client.submit(0, &Order::Stop).is_err());
        /// ```
        #[derive(Debug)]
        pub struct TypedClient<C, K: CommandCodec $($default)*> {
            client: Client,
            /// A rejoin's snapshot, for the first turn handed out.
            restore: Option<Snapshot>,
            _types: PhantomData<fn(C) -> (C, K)>,
        }
    };
}

#[cfg(any(feature = "postcard", feature = "bincode"))]
typed_client!(= DefaultCodec);
#[cfg(not(any(feature = "postcard", feature = "bincode")))]
typed_client!();

/// The default codec: [`Postcard`].
#[cfg(feature = "postcard")]
pub type DefaultCodec = Postcard;
/// The default codec: [`Bincode`] when `postcard` is disabled.
#[cfg(all(not(feature = "postcard"), feature = "bincode"))]
pub type DefaultCodec = Bincode;

impl<C: Serialize + DeserializeOwned, K: CommandCodec> TypedClient<C, K> {
    /// Wraps a byte-level client.
    pub fn new(client: Client) -> Self {
        TypedClient { client, restore: None, _types: PhantomData }
    }

    /// The byte-level client, for the driver's calls.
    pub fn inner(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Encodes and submits a command.
    pub fn submit(&mut self, now_ms: u64, command: &C) -> Result<Ticket, TypedSubmitError> {
        let bytes = K::encode(command).map_err(TypedSubmitError::Codec)?;
        self.client.submit(now_ms, &bytes).map_err(TypedSubmitError::Submit)
    }

    /// The next turn, decoded. Control records other than joins and leaves are left to the
    /// byte-level events ([`ClientEvent`](crate::ClientEvent)).
    ///
    /// After a rejoin through a snapshot, the first turn carries it in
    /// [`TypedTurn::restore`]; a turn the host wants a snapshot after says so in
    /// [`TypedTurn::wants_snapshot`] (offer it with [`Client::offer_snapshot`] on
    /// [`inner`](Self::inner)).
    pub fn next_turn(&mut self, now_ms: u64) -> Option<TypedTurn<C>> {
        if self.restore.is_none() {
            self.restore = self.client.take_restore();
        }
        // Asked before the turn is taken: whether it comes from the catch-up queue.
        let catching_up = self.client.is_catching_up();
        let bundle = self.client.next_turn(now_ms)?;
        let mut turn = TypedTurn::decode::<K>(bundle);
        turn.restore = self.restore.take();
        turn.wants_snapshot = self.client.wants_snapshot(turn.turn);
        turn.catching_up = catching_up;
        Some(turn)
    }
}

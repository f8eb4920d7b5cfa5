//! The wire format, version 1: our own framing, written with `bytes`, read by a total decoder.
//!
//! Every message starts with the protocol version byte and a kind byte. Integers are LEB128
//! varints (canonical: an over-long encoding is rejected, so decode ∘ encode is the identity
//! and every message has exactly one encoding), except hashes and tokens (8 bytes, little
//! endian). Every count and length is checked against an explicit maximum *and* against the
//! bytes that remain before anything is allocated, so a hostile length field cannot make the
//! decoder allocate more than the datagram's own size. Trailing bytes are an error.
//!
//! ```text
//! Up    (client → host, datagram): version kind=1 pn ack turn_ack next_exec first_seq up_extras
//!                                  n {turn len payload}*n
//! Down  (host → client, datagram): version kind=2 pn ack cmd_ack down_extras first_turn
//!                                  n bundle*n
//!   ack    = 0 | 1 largest missing_bits delay_ms      (missing bit i: largest−1−i not received)
//!   up_extras   = flags [hash_turn hash:u64le] [cost_ms] [pause_seq:u8 pause_kind:u8]
//!                 [playout_ms]           (flag bit 4: probe, answer at once)
//!   down_extras = flags [hash_ack_turn] [waiting_mask] [snapshot_turn]  (flag bit 2: probe)
//!   bundle = m record*m
//!   record = head seq len payload | head | head ext   (head: kind in the top 2 bits — 0
//!            command, 1 joined, 2 left, 3 extended — and the player in the low 6)
//!   ext    = 0 turn_length_ms delay (pace) | 1 turn n {player hash:u64le}*n diverged_mask
//!            (desync) | 2 (paused) | 3 (resumed) | 4 cause:u8 (session ended)
//! Join  (client → host, stream):   version kind=3 game_data_hash:u64le token:u64le
//! Reply (host → client, stream):   version kind=4 (0 accepted-fields rejoin | 1 refusal-tag
//!                                  fields)
//!   rejoin = 0 | 1 next_seq turns (0 | 1 snapshot_turn hash:u64le len state) bundle*
//!            (the bundles of the turns after the snapshot's, or from turn 0, up to `turns`)
//! Snapshot (client → host, a stream of its own): version kind=5 turn hash:u64le state
//! Hashes   (client → host, a stream of its own): version kind=6 check_turn first_turn n
//!                                  hash:u64le*n   (each turn's state hash from first_turn)
//! Mesh     (peer → peer, datagram): version kind=8 ... (see `mesh.rs`)
//! ```

//!
//! `datagram.rs` holds the Up and Down datagrams, `records.rs` the turn bundles they carry,
//! `join.rs` the join messages of the reliable stream; this file the shared reader, varints,
//! size bounds and the limits the decoder enforces.

mod datagram;
mod forensics;
mod join;
mod mesh;
mod records;

use bytes::BufMut;

use crate::config::SessionConfig;
use crate::types::PlayerId;
use crate::PROTOCOL_VERSION;

pub(crate) use datagram::{
    decode_down, decode_up, put_down_header, put_up_command, put_up_header, refused_seqs,
    up_command_len, AckFrame, Down, DownExtras, PauseKind, Up, UpCommand, UpExtras,
};
pub(crate) use forensics::{
    decode_state_upload, encode_state_upload, StateUpload, STATE_UPLOAD_HEADER_MAX,
};
pub(crate) use join::{
    decode_hashes_upload, decode_join_reply_parts, decode_rejoin_log, decode_snapshot_upload,
    encode_hashes_upload, encode_join_reply_with_log, encode_snapshot_upload, upload_kind,
    JOIN_REPLY_FIELDS_MAX, SNAPSHOT_UPLOAD_HEADER_MAX,
};
pub use join::{
    decode_join_reply, encode_join_reply, JoinAccept, JoinRefusal, JoinReply, JoinRequest, Rejoin,
};
pub(crate) use mesh::{
    decode_mesh, entry_len, Entry, MeshDatagram, Report, ViewItem, ViewKind, ViewMsg, HASHES_MAX,
};
pub(crate) use records::encode_bundle;

const KIND_UP: u8 = 1;
const KIND_DOWN: u8 = 2;
const KIND_JOIN: u8 = 3;
const KIND_REPLY: u8 = 4;
const KIND_SNAPSHOT: u8 = 5;
pub(crate) const KIND_HASHES: u8 = 6;
pub(crate) const KIND_STATE: u8 = 7;

/// The most bytes a varint of a `u64` takes.
const VARINT_MAX: usize = 10;
/// The most bytes a varint of a `u32` takes.
pub(crate) const VARINT32_MAX: usize = 5;
/// Bytes of an ack frame at most: flag, largest, missing bits, delay.
const ACK_BYTES_MAX: usize = 1 + VARINT_MAX + VARINT_MAX + VARINT32_MAX;

/// Bytes of a Down datagram before its bundles, at most.
pub(crate) const DOWN_HEADER_BYTES_MAX: usize =
    2 + VARINT_MAX + ACK_BYTES_MAX + 3 * VARINT32_MAX + DOWN_EXTRAS_BYTES_MAX;
/// Bytes of an Up datagram before its commands, at most.
pub(crate) const UP_HEADER_BYTES_MAX: usize =
    2 + VARINT_MAX + ACK_BYTES_MAX + 4 * VARINT32_MAX + UP_EXTRAS_BYTES_MAX;
/// Bytes of an Up datagram's extras, at most: flags, hash report, cost, pause request, playout.
const UP_EXTRAS_BYTES_MAX: usize = 1 + VARINT32_MAX + 8 + VARINT32_MAX + 2 + VARINT32_MAX;
/// Bytes of a Down datagram's extras, at most: flags, hash ack, waiting mask, snapshot
/// request, state request, refused commands.
const DOWN_EXTRAS_BYTES_MAX: usize =
    1 + VARINT32_MAX + VARINT_MAX + 2 * VARINT32_MAX + VARINT32_MAX + VARINT_MAX;
/// Bytes one command adds to an Up datagram besides its payload, at most (turn, length).
pub(crate) const UP_COMMAND_OVERHEAD_MAX: usize = 2 * VARINT32_MAX;
/// Bytes one command record adds to a bundle besides its payload, at most.
const RECORD_COMMAND_OVERHEAD_MAX: usize = 1 + 2 * VARINT32_MAX;
/// Bytes of a join or leave record.
const RECORD_CONTROL_BYTES_MAX: usize = 1;

/// Control records one bundle may carry: a join and a leave per seat, a pace change, a
/// desync report, a pause and a resume, and the end of the session.
pub(crate) fn controls_per_bundle_max(config: &SessionConfig) -> usize {
    2 * usize::from(config.turns.players_max) + 5
}

/// Bytes of the extended records one bundle may carry, at most.
fn extended_bytes_max(config: &SessionConfig) -> usize {
    let pace = 2 + 2 * VARINT32_MAX;
    let desync = 2 + VARINT32_MAX + 1 + 9 * usize::from(config.turns.players_max) + VARINT_MAX;
    let pause_resume = 2 * 2;
    // (a host-made pause and a player's resume can share a bundle: still two records)
    // One `Ended` at most: the tag and a game code.
    let ended = 3 + VARINT32_MAX;
    pace + desync + pause_resume + ended
}

/// Records one bundle may carry.
pub(crate) fn records_per_bundle_max(config: &SessionConfig) -> usize {
    usize::from(config.turns.players_max) * usize::from(config.budget.commands_per_turn_max)
        + controls_per_bundle_max(config)
}

/// The largest encoded bundle the config's budgets allow.
pub(crate) fn bundle_bytes_max(config: &SessionConfig) -> usize {
    let per_player = usize::from(config.budget.commands_per_turn_max) * RECORD_COMMAND_OVERHEAD_MAX
        + usize::from(config.budget.turn_bytes_per_player_max);
    VARINT32_MAX
        + usize::from(config.turns.players_max) * per_player
        + 2 * usize::from(config.turns.players_max) * RECORD_CONTROL_BYTES_MAX
        + extended_bytes_max(config)
}

/// Why bytes from a peer were not a valid message. The datagram is dropped and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The message ended before a field did.
    Truncated,
    /// Bytes remained after a complete message.
    TrailingBytes,
    /// The version byte is not ours.
    Version {
        /// The version the peer speaks.
        found: u8,
    },
    /// The kind byte names no message this side accepts here.
    UnknownKind(u8),
    /// A record or refusal tag is unknown.
    UnknownTag(u8),
    /// A varint is over-long or overflows its type.
    BadVarint,
    /// A count or length exceeds its explicit maximum.
    TooLarge {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The maximum allowed.
        max: u64,
    },
    /// A field's value is impossible (for example an ack frame for a packet not yet sent).
    Invalid(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "message truncated"),
            DecodeError::TrailingBytes => write!(f, "trailing bytes after message"),
            DecodeError::Version { found } => {
                write!(f, "protocol version {found}, expected {PROTOCOL_VERSION}")
            }
            DecodeError::UnknownKind(kind) => write!(f, "unknown message kind {kind}"),
            DecodeError::UnknownTag(tag) => write!(f, "unknown tag {tag}"),
            DecodeError::BadVarint => write!(f, "malformed varint"),
            DecodeError::TooLarge { field, value, max } => {
                write!(f, "{field} = {value} exceeds {max}")
            }
            DecodeError::Invalid(what) => write!(f, "invalid {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A total reader over a byte slice: every method checks before it reads.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        let (&first, rest) = self.bytes.split_first().ok_or(DecodeError::Truncated)?;
        self.bytes = rest;
        Ok(first)
    }

    fn u64_le(&mut self) -> Result<u64, DecodeError> {
        let raw = self.take(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(raw);
        Ok(u64::from_le_bytes(array))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.bytes.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for index in 0..VARINT_MAX {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if index == VARINT_MAX - 1 && byte > 1 {
                return Err(DecodeError::BadVarint);
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                // Canonical form only: a final zero byte after the first is over-long.
                if byte == 0 && index > 0 {
                    return Err(DecodeError::BadVarint);
                }
                return Ok(value);
            }
        }
        Err(DecodeError::BadVarint)
    }

    fn varint_u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::BadVarint)
    }

    /// A count or length, checked against `max` and against the bytes left (each counted
    /// item takes at least `min_item_bytes`), before the caller allocates for it.
    fn count(
        &mut self,
        field: &'static str,
        max: usize,
        min_item_bytes: usize,
    ) -> Result<usize, DecodeError> {
        let value = self.varint()?;
        if value > max as u64 {
            return Err(DecodeError::TooLarge { field, value, max: max as u64 });
        }
        let value = value as usize;
        if value.saturating_mul(min_item_bytes) > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(value)
    }

    fn finish(self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }

    /// The version and kind bytes: this protocol's version, then `kind`.
    fn header(&mut self, kind: u8) -> Result<(), DecodeError> {
        let version = self.u8()?;
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::Version { found: version });
        }
        match self.u8()? {
            found if found == kind => Ok(()),
            found => Err(DecodeError::UnknownKind(found)),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Bytes `put_varint` writes for `value`.
pub(crate) fn varint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// What a peer accepts, from the session config: the explicit maxima the decoder enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    command_bytes_max: usize,
    commands_per_up_max: usize,
    bundles_per_down_max: usize,
    records_per_bundle_max: usize,
    players_max: u8,
}

impl Limits {
    pub(crate) fn new(config: &SessionConfig) -> Self {
        Limits {
            command_bytes_max: config.budget.command_bytes_max.into(),
            commands_per_up_max: config.turns.window_turns as usize
                * usize::from(config.budget.commands_per_turn_max),
            bundles_per_down_max: config.turns.window_turns as usize,
            records_per_bundle_max: records_per_bundle_max(config),
            players_max: config.turns.players_max,
        }
    }

    /// The bits of every seat.
    pub(crate) fn player_mask(&self) -> u64 {
        if self.players_max >= 64 {
            u64::MAX
        } else {
            (1u64 << self.players_max) - 1
        }
    }

    fn player(&self, player: u8) -> Result<PlayerId, DecodeError> {
        if player >= self.players_max {
            return Err(DecodeError::TooLarge {
                field: "player",
                value: player.into(),
                max: u64::from(self.players_max) - 1,
            });
        }
        Ok(PlayerId(player))
    }

    fn payload<'a>(&self, reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        let len = reader.count("command length", self.command_bytes_max, 1)?;
        reader.take(len)
    }
}

#[cfg(test)]
mod tests;

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
//!   down_extras = flags [hash_ack_turn] [waiting_mask]
//!   bundle = m record*m
//!   record = head seq len payload | head | head ext   (head: kind in the top 2 bits — 0
//!            command, 1 joined, 2 left, 3 extended — and the player in the low 6)
//!   ext    = 0 turn_length_ms delay (pace) | 1 turn n {player hash:u64le}*n diverged_mask
//!            (desync) | 2 (paused) | 3 (resumed) | 4 cause:u8 (session ended)
//! Join  (client → host, stream):   version kind=3 game_data_hash:u64le token:u64le
//! Reply (host → client, stream):   version kind=4 (0 accepted-fields | 1 refusal-tag fields)
//! ```

use bytes::{BufMut, Bytes};

use crate::bundle::{DesyncReport, EndCause, PauseBy, Record};
use crate::config::SessionConfig;
use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Turn};
use crate::PROTOCOL_VERSION;

const KIND_UP: u8 = 1;
const KIND_DOWN: u8 = 2;
const KIND_JOIN: u8 = 3;
const KIND_REPLY: u8 = 4;

/// A record's first byte: its kind in the top two bits, the player in the low six
/// (`players_max` is at most 64).
const RECORD_COMMAND: u8 = 0;
const RECORD_JOINED: u8 = 1;
const RECORD_LEFT: u8 = 2;
const RECORD_EXTENDED: u8 = 3;
const RECORD_PLAYER_BITS: u8 = 0x3f;

const EXT_PACE: u8 = 0;
const EXT_DESYNC: u8 = 1;
const EXT_PAUSED: u8 = 2;
const EXT_RESUMED: u8 = 3;
const EXT_ENDED: u8 = 4;
const EXT_PAUSED_BY_HOST: u8 = 5;
const EXT_RESUMED_BY_HOST: u8 = 6;

fn record_head(kind: u8, player: PlayerId) -> u8 {
    (kind << 6) | (player.0 & RECORD_PLAYER_BITS)
}

/// The most bytes a varint of a `u64` takes.
const VARINT_MAX: usize = 10;
/// The most bytes a varint of a `u32` takes.
const VARINT32_MAX: usize = 5;
/// Bytes of an ack frame at most: flag, largest, missing bits, delay.
const ACK_BYTES_MAX: usize = 1 + VARINT_MAX + VARINT_MAX + VARINT32_MAX;

/// Bytes of a Down datagram before its bundles, at most.
pub(crate) const DOWN_HEADER_BYTES_MAX: usize =
    2 + VARINT_MAX + ACK_BYTES_MAX + 3 * VARINT32_MAX + DOWN_EXTRAS_BYTES_MAX;
/// Bytes of an Up datagram before its commands, at most.
pub(crate) const UP_HEADER_BYTES_MAX: usize =
    2 + VARINT_MAX + ACK_BYTES_MAX + 4 * VARINT32_MAX + UP_EXTRAS_BYTES_MAX;
/// Bytes of an Up datagram's extras, at most: flags, hash report, cost, pause request.
const UP_EXTRAS_BYTES_MAX: usize = 1 + VARINT32_MAX + 8 + VARINT32_MAX + 2;
/// Bytes of a Down datagram's extras, at most: flags, hash ack, waiting mask.
const DOWN_EXTRAS_BYTES_MAX: usize = 1 + VARINT32_MAX + VARINT_MAX;
/// Bytes one command adds to an Up datagram besides its payload, at most (turn, length).
pub(crate) const UP_COMMAND_OVERHEAD_MAX: usize = 2 * VARINT32_MAX;
/// Bytes one command record adds to a bundle besides its payload, at most.
const RECORD_COMMAND_OVERHEAD_MAX: usize = 1 + 2 * VARINT32_MAX;
/// Bytes of a join or leave record.
const RECORD_CONTROL_BYTES_MAX: usize = 1;

/// Control records one bundle may carry: a join and a leave per seat, a pace change, a
/// desync report, a pause and a resume, and the end of the session.
pub(crate) fn controls_per_bundle_max(config: &SessionConfig) -> usize {
    2 * usize::from(config.players_max) + 5
}

/// Bytes of the extended records one bundle may carry, at most.
fn extended_bytes_max(config: &SessionConfig) -> usize {
    let pace = 2 + 2 * VARINT32_MAX;
    let desync = 2 + VARINT32_MAX + 1 + 9 * usize::from(config.players_max) + VARINT_MAX;
    let pause_resume = 2 * 2;
    // (a host-made pause and a player's resume can share a bundle: still two records)
    let ended = 3;
    pace + desync + pause_resume + ended
}

/// Records one bundle may carry.
pub(crate) fn records_per_bundle_max(config: &SessionConfig) -> usize {
    usize::from(config.players_max) * usize::from(config.commands_per_turn_max)
        + controls_per_bundle_max(config)
}

/// The largest encoded bundle the config's budgets allow.
pub(crate) fn bundle_bytes_max(config: &SessionConfig) -> usize {
    let per_player = usize::from(config.commands_per_turn_max) * RECORD_COMMAND_OVERHEAD_MAX
        + usize::from(config.turn_bytes_per_player_max);
    VARINT32_MAX
        + usize::from(config.players_max) * per_player
        + 2 * usize::from(config.players_max) * RECORD_CONTROL_BYTES_MAX
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

    /// The version and kind bytes.
    fn header(&mut self) -> Result<u8, DecodeError> {
        let version = self.u8()?;
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::Version { found: version });
        }
        self.u8()
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

/// Packet-number acknowledgement: the largest packet number received, which of the 64 before
/// it were *not* received, and how long the ack was held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckFrame {
    pub(crate) largest: u64,
    pub(crate) missing: u64,
    pub(crate) delay_ms: u32,
}

fn put_ack(out: &mut Vec<u8>, ack: Option<AckFrame>) {
    match ack {
        None => out.put_u8(0),
        Some(ack) => {
            out.put_u8(1);
            put_varint(out, ack.largest);
            put_varint(out, ack.missing);
            put_varint(out, ack.delay_ms.into());
        }
    }
}

fn read_ack(reader: &mut Reader<'_>) -> Result<Option<AckFrame>, DecodeError> {
    match reader.u8()? {
        0 => Ok(None),
        1 => Ok(Some(AckFrame {
            largest: reader.varint()?,
            missing: reader.varint()?,
            delay_ms: reader.varint_u32()?,
        })),
        tag => Err(DecodeError::UnknownTag(tag)),
    }
}

/// One command as a client sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UpCommand<'a> {
    pub(crate) turn: Turn,
    pub(crate) payload: &'a [u8],
}

/// A client → host datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Up<'a> {
    pub(crate) pn: u64,
    pub(crate) ack: Option<AckFrame>,
    /// The client holds every bundle before this turn.
    pub(crate) turn_ack: Turn,
    /// The client's game has executed every turn before this one.
    pub(crate) next_exec: Turn,
    /// The sequence number of `commands[0]`; the rest follow consecutively.
    pub(crate) first_seq: CommandSeq,
    pub(crate) extras: UpExtras,
    pub(crate) commands: Vec<UpCommand<'a>>,
}

/// What a pause request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PauseKind {
    Pause,
    Resume,
}

/// The optional reports a client adds to its datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UpExtras {
    /// The game's state hash at a check turn, repeated until the host acknowledges it.
    pub(crate) hash_report: Option<(Turn, u64)>,
    /// How long the game takes to simulate a turn (moving average), for speed control.
    pub(crate) cost_ms: Option<u32>,
    /// The latest pause or resume request, with a sequence number so a repeat is idempotent.
    pub(crate) pause: Option<(u8, PauseKind)>,
}

/// The optional notices the host adds to its datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DownExtras {
    /// The host holds this client's state hash reports up to this check turn.
    pub(crate) hash_ack: Option<Turn>,
    /// The players the host is waiting for (bit i: player i); 0 when not stalled.
    pub(crate) waiting: u64,
}

fn put_up_extras(out: &mut Vec<u8>, extras: &UpExtras) {
    let flags = u8::from(extras.hash_report.is_some())
        | u8::from(extras.cost_ms.is_some()) << 1
        | u8::from(extras.pause.is_some()) << 2;
    out.put_u8(flags);
    if let Some((turn, hash)) = extras.hash_report {
        put_varint(out, turn.0.into());
        out.put_u64_le(hash);
    }
    if let Some(cost) = extras.cost_ms {
        put_varint(out, cost.into());
    }
    if let Some((seq, kind)) = extras.pause {
        out.put_u8(seq);
        out.put_u8(match kind {
            PauseKind::Pause => 1,
            PauseKind::Resume => 2,
        });
    }
}

fn read_up_extras(reader: &mut Reader<'_>) -> Result<UpExtras, DecodeError> {
    let flags = reader.u8()?;
    if flags & !0b111 != 0 {
        return Err(DecodeError::Invalid("up flags"));
    }
    let hash_report =
        if flags & 1 != 0 { Some((Turn(reader.varint_u32()?), reader.u64_le()?)) } else { None };
    let cost_ms = if flags & 2 != 0 { Some(reader.varint_u32()?) } else { None };
    let pause = if flags & 4 != 0 {
        let seq = reader.u8()?;
        let kind = match reader.u8()? {
            1 => PauseKind::Pause,
            2 => PauseKind::Resume,
            tag => return Err(DecodeError::UnknownTag(tag)),
        };
        Some((seq, kind))
    } else {
        None
    };
    Ok(UpExtras { hash_report, cost_ms, pause })
}

fn put_down_extras(out: &mut Vec<u8>, extras: &DownExtras) {
    let flags = u8::from(extras.hash_ack.is_some()) | u8::from(extras.waiting != 0) << 1;
    out.put_u8(flags);
    if let Some(turn) = extras.hash_ack {
        put_varint(out, turn.0.into());
    }
    if extras.waiting != 0 {
        put_varint(out, extras.waiting);
    }
}

fn read_down_extras(reader: &mut Reader<'_>) -> Result<DownExtras, DecodeError> {
    let flags = reader.u8()?;
    if flags & !0b11 != 0 {
        return Err(DecodeError::Invalid("down flags"));
    }
    let hash_ack = if flags & 1 != 0 { Some(Turn(reader.varint_u32()?)) } else { None };
    let waiting = if flags & 2 != 0 {
        let mask = reader.varint()?;
        if mask == 0 {
            // Present means non-zero: one encoding per message.
            return Err(DecodeError::Invalid("waiting mask"));
        }
        mask
    } else {
        0
    };
    Ok(DownExtras { hash_ack, waiting })
}

/// A host → client datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Down {
    pub(crate) pn: u64,
    pub(crate) ack: Option<AckFrame>,
    /// The host holds every command of this client before this sequence number.
    pub(crate) cmd_ack: CommandSeq,
    pub(crate) extras: DownExtras,
    /// The turn of `bundles[0]`; the rest follow consecutively.
    pub(crate) first_turn: Turn,
    pub(crate) bundles: Vec<Vec<Record>>,
}

/// Writes the header of an Up datagram; commands follow with [`put_up_command`] after
/// [`put_varint`] of their count.
pub(crate) fn put_up_header(
    out: &mut Vec<u8>,
    pn: u64,
    ack: Option<AckFrame>,
    turn_ack: Turn,
    next_exec: Turn,
    first_seq: CommandSeq,
    extras: &UpExtras,
) {
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_UP);
    put_varint(out, pn);
    put_ack(out, ack);
    put_varint(out, turn_ack.0.into());
    put_varint(out, next_exec.0.into());
    put_varint(out, first_seq.0.into());
    put_up_extras(out, extras);
}

pub(crate) fn up_command_len(command: UpCommand<'_>) -> usize {
    varint_len(command.turn.0.into())
        + varint_len(command.payload.len() as u64)
        + command.payload.len()
}

pub(crate) fn put_up_command(out: &mut Vec<u8>, command: UpCommand<'_>) {
    put_varint(out, command.turn.0.into());
    put_varint(out, command.payload.len() as u64);
    out.put_slice(command.payload);
}

/// Writes the header of a Down datagram; `count` pre-encoded bundles follow as raw bytes.
pub(crate) fn put_down_header(
    out: &mut Vec<u8>,
    pn: u64,
    ack: Option<AckFrame>,
    cmd_ack: CommandSeq,
    extras: &DownExtras,
    first_turn: Turn,
    count: usize,
) {
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_DOWN);
    put_varint(out, pn);
    put_ack(out, ack);
    put_varint(out, cmd_ack.0.into());
    put_down_extras(out, extras);
    put_varint(out, first_turn.0.into());
    put_varint(out, count as u64);
}

/// Encodes one bundle's records (the part a Down datagram repeats verbatim).
pub(crate) fn encode_bundle(out: &mut Vec<u8>, records: &[Record]) {
    put_varint(out, records.len() as u64);
    for record in records {
        match record {
            Record::Command { player, seq, payload } => {
                out.put_u8(record_head(RECORD_COMMAND, *player));
                put_varint(out, seq.0.into());
                put_varint(out, payload.len() as u64);
                out.put_slice(payload);
            }
            Record::Joined(player) => out.put_u8(record_head(RECORD_JOINED, *player)),
            Record::Left(player) => out.put_u8(record_head(RECORD_LEFT, *player)),
            Record::Pace(pace) => {
                out.put_u8(record_head(RECORD_EXTENDED, PlayerId(0)));
                out.put_u8(EXT_PACE);
                put_varint(out, pace.turn_length_ms.into());
                put_varint(out, pace.command_delay_turns.into());
            }
            Record::Desync(report) => {
                out.put_u8(record_head(RECORD_EXTENDED, PlayerId(0)));
                out.put_u8(EXT_DESYNC);
                put_varint(out, report.turn.0.into());
                out.put_u8(report.hashes.len() as u8);
                for (player, hash) in &report.hashes {
                    out.put_u8(player.0);
                    out.put_u64_le(*hash);
                }
                let mask = report.diverged.iter().fold(0u64, |mask, p| mask | 1 << (p.0 & 63));
                put_varint(out, mask);
            }
            Record::Paused(by) | Record::Resumed(by) => {
                let paused = matches!(record, Record::Paused(_));
                let (player, tag) = match (by, paused) {
                    (PauseBy::Player(player), true) => (*player, EXT_PAUSED),
                    (PauseBy::Player(player), false) => (*player, EXT_RESUMED),
                    (PauseBy::Host, true) => (PlayerId(0), EXT_PAUSED_BY_HOST),
                    (PauseBy::Host, false) => (PlayerId(0), EXT_RESUMED_BY_HOST),
                };
                out.put_u8(record_head(RECORD_EXTENDED, player));
                out.put_u8(tag);
            }
            Record::Ended(cause) => {
                out.put_u8(record_head(RECORD_EXTENDED, PlayerId(0)));
                out.put_u8(EXT_ENDED);
                out.put_u8(match cause {
                    EndCause::Desync => 0,
                });
            }
        }
    }
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
            command_bytes_max: config.command_bytes_max.into(),
            commands_per_up_max: config.turns_ahead_max as usize
                * usize::from(config.commands_per_turn_max),
            bundles_per_down_max: config.turns_ahead_max as usize,
            records_per_bundle_max: records_per_bundle_max(config),
            players_max: config.players_max,
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

/// Decodes a client → host datagram.
pub(crate) fn decode_up<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Up<'a>, DecodeError> {
    let mut reader = Reader::new(bytes);
    match reader.header()? {
        KIND_UP => {}
        kind => return Err(DecodeError::UnknownKind(kind)),
    }
    let pn = reader.varint()?;
    let ack = read_ack(&mut reader)?;
    let turn_ack = Turn(reader.varint_u32()?);
    let next_exec = Turn(reader.varint_u32()?);
    let first_seq = CommandSeq(reader.varint_u32()?);
    let extras = read_up_extras(&mut reader)?;
    // A command is at least two bytes (turn, length).
    let count = reader.count("commands", limits.commands_per_up_max, 2)?;
    if u64::from(first_seq.0) + count as u64 > u64::from(u32::MAX) + 1 {
        return Err(DecodeError::Invalid("command sequence range"));
    }
    let mut commands = Vec::with_capacity(count);
    for _ in 0..count {
        let turn = Turn(reader.varint_u32()?);
        let payload = limits.payload(&mut reader)?;
        commands.push(UpCommand { turn, payload });
    }
    reader.finish()?;
    Ok(Up { pn, ack, turn_ack, next_exec, first_seq, extras, commands })
}

/// Decodes one bundle's records.
pub(crate) fn decode_bundle(
    reader: &mut Reader<'_>,
    limits: &Limits,
) -> Result<Vec<Record>, DecodeError> {
    // A record is at least one byte (its head).
    let count = reader.count("records", limits.records_per_bundle_max, 1)?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        let head = reader.u8()?;
        let player = limits.player(head & RECORD_PLAYER_BITS)?;
        let record = match head >> 6 {
            RECORD_COMMAND => {
                let seq = CommandSeq(reader.varint_u32()?);
                let payload = limits.payload(reader)?;
                Record::Command { player, seq, payload: Bytes::copy_from_slice(payload) }
            }
            RECORD_JOINED => Record::Joined(player),
            RECORD_LEFT => Record::Left(player),
            _ => decode_extended(reader, limits, player)?,
        };
        records.push(record);
    }
    Ok(records)
}

fn decode_extended(
    reader: &mut Reader<'_>,
    limits: &Limits,
    player: PlayerId,
) -> Result<Record, DecodeError> {
    Ok(match reader.u8()? {
        EXT_PACE => Record::Pace(Pace {
            turn_length_ms: reader.varint_u32()?,
            command_delay_turns: reader.varint_u32()?,
        }),
        EXT_DESYNC => {
            let turn = Turn(reader.varint_u32()?);
            let count = usize::from(reader.u8()?);
            if count > usize::from(limits.players_max) {
                return Err(DecodeError::TooLarge {
                    field: "desync hashes",
                    value: count as u64,
                    max: limits.players_max.into(),
                });
            }
            let mut hashes = Vec::with_capacity(count);
            for _ in 0..count {
                let who = limits.player(reader.u8()?)?;
                if hashes.last().is_some_and(|&(last, _): &(PlayerId, u64)| last >= who) {
                    return Err(DecodeError::Invalid("desync player order"));
                }
                hashes.push((who, reader.u64_le()?));
            }
            let mask = reader.varint()?;
            let listed = hashes.iter().fold(0u64, |m, (p, _)| m | 1 << p.0);
            if mask & !listed != 0 {
                return Err(DecodeError::Invalid("desync diverged mask"));
            }
            let diverged =
                hashes.iter().map(|&(p, _)| p).filter(|p| mask & (1 << p.0) != 0).collect();
            Record::Desync(DesyncReport { turn, hashes, diverged })
        }
        EXT_PAUSED => Record::Paused(PauseBy::Player(player)),
        EXT_RESUMED => Record::Resumed(PauseBy::Player(player)),
        EXT_PAUSED_BY_HOST => Record::Paused(PauseBy::Host),
        EXT_RESUMED_BY_HOST => Record::Resumed(PauseBy::Host),
        EXT_ENDED => match reader.u8()? {
            0 => Record::Ended(EndCause::Desync),
            tag => return Err(DecodeError::UnknownTag(tag)),
        },
        tag => return Err(DecodeError::UnknownTag(tag)),
    })
}

/// Decodes a host → client datagram.
pub(crate) fn decode_down(bytes: &[u8], limits: &Limits) -> Result<Down, DecodeError> {
    let mut reader = Reader::new(bytes);
    match reader.header()? {
        KIND_DOWN => {}
        kind => return Err(DecodeError::UnknownKind(kind)),
    }
    let pn = reader.varint()?;
    let ack = read_ack(&mut reader)?;
    let cmd_ack = CommandSeq(reader.varint_u32()?);
    let extras = read_down_extras(&mut reader)?;
    let first_turn = Turn(reader.varint_u32()?);
    // A bundle is at least one byte (its record count).
    let count = reader.count("bundles", limits.bundles_per_down_max, 1)?;
    if u64::from(first_turn.0) + count as u64 > u64::from(u32::MAX) + 1 {
        return Err(DecodeError::Invalid("turn range"));
    }
    let mut bundles = Vec::with_capacity(count);
    for _ in 0..count {
        bundles.push(decode_bundle(&mut reader, limits)?);
    }
    reader.finish()?;
    Ok(Down { pn, ack, cmd_ack, extras, first_turn, bundles })
}

/// A join request, sent by a client on the reliable stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    /// The protocol version the client speaks.
    pub protocol_version: u8,
    /// The client's hash of the game's rules and data.
    pub game_data_hash: u64,
    /// The seat token the lobby handed this player.
    pub token: u64,
}

impl JoinRequest {
    /// The request's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18);
        out.put_u8(self.protocol_version);
        out.put_u8(KIND_JOIN);
        out.put_u64_le(self.game_data_hash);
        out.put_u64_le(self.token);
        out
    }

    /// Parses a request. A different protocol version is *not* an error here: the host must
    /// read it to refuse the join with both versions named. Only its first byte is then
    /// trusted.
    pub fn decode(bytes: &[u8]) -> Result<JoinRequest, DecodeError> {
        let mut reader = Reader::new(bytes);
        let protocol_version = reader.u8()?;
        if protocol_version != PROTOCOL_VERSION {
            return Ok(JoinRequest { protocol_version, game_data_hash: 0, token: 0 });
        }
        match reader.u8()? {
            KIND_JOIN => {}
            kind => return Err(DecodeError::UnknownKind(kind)),
        }
        let game_data_hash = reader.u64_le()?;
        let token = reader.u64_le()?;
        reader.finish()?;
        Ok(JoinRequest { protocol_version, game_data_hash, token })
    }
}

/// Why the host refused a join. Sent to the client on the reliable stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinRefusal {
    /// The two sides speak different protocol versions: upgrade the older one.
    VersionMismatch {
        /// The host's version.
        host: u8,
        /// The client's version.
        client: u8,
    },
    /// The two sides run different game data (rules, maps, balance): they would desync.
    GameDataMismatch {
        /// The host's game-data hash.
        host: u64,
        /// The client's game-data hash.
        client: u64,
    },
    /// The token is not one the host was given for this session.
    BadToken,
    /// The token was already used by a player who joined.
    TokenUsed,
    /// Every seat is taken.
    SessionFull,
    /// The game has started and this token's seat was never taken: a new player cannot
    /// join mid-game. (A player who held the seat and dropped out can rejoin.)
    GameStarted,
    /// The player this token seated timed out longer ago than `rejoin_window_ms`: the seat
    /// is closed for good.
    RejoinExpired,
    /// Rejoin is off, or the game outgrew `rejoin_log_bytes_max`, or the player was removed
    /// for misbehaving: no catch-up is possible.
    RejoinUnavailable,
}

impl std::fmt::Display for JoinRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinRefusal::VersionMismatch { host, client } => {
                write!(f, "protocol version mismatch: host {host}, client {client}")
            }
            JoinRefusal::GameDataMismatch { host, client } => {
                write!(f, "game data mismatch: host {host:#018x}, client {client:#018x}")
            }
            JoinRefusal::BadToken => write!(f, "unknown join token"),
            JoinRefusal::TokenUsed => write!(f, "join token already used"),
            JoinRefusal::SessionFull => write!(f, "session is full"),
            JoinRefusal::GameStarted => write!(f, "game already started"),
            JoinRefusal::RejoinExpired => write!(f, "rejoin window closed"),
            JoinRefusal::RejoinUnavailable => write!(f, "rejoin unavailable"),
        }
    }
}

impl std::error::Error for JoinRefusal {}

/// What a client needs to play, from the host's join reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinAccept {
    /// The seat the client plays.
    pub player: PlayerId,
    /// The session's turn length.
    pub turn_length_ms: u32,
    /// The session's command delay.
    pub command_delay_turns: u32,
    /// The session's window.
    pub turns_ahead_max: u32,
    /// Seats in the session.
    pub players_max: u8,
    /// Per-player per-turn command budget.
    pub commands_per_turn_max: u16,
    /// Per-player per-turn byte budget.
    pub turn_bytes_per_player_max: u16,
    /// Largest command payload.
    pub command_bytes_max: u16,
    /// The session's sync-check interval (0: off); clients report hashes on this schedule.
    pub sync_interval_turns: u32,
    /// Set when this join takes back a seat the player dropped out of: the reply then also
    /// carries every sealed turn so far, for the game to replay from its start.
    pub rejoin: Option<Rejoin>,
}

/// A rejoin's catch-up: what the returning player needs besides the turns themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejoin {
    /// Sealed turns carried in the reply: turns `0..turns`. Live play resumes at `turns`.
    pub turns: u32,
    /// The next command sequence the host expects from this player.
    pub next_seq: CommandSeq,
}

/// The host's answer to a join request.
pub type JoinReply = Result<JoinAccept, JoinRefusal>;

const REFUSAL_VERSION: u8 = 0;
const REFUSAL_GAME_DATA: u8 = 1;
const REFUSAL_BAD_TOKEN: u8 = 2;
const REFUSAL_TOKEN_USED: u8 = 3;
const REFUSAL_FULL: u8 = 4;
const REFUSAL_STARTED: u8 = 5;
const REFUSAL_REJOIN_EXPIRED: u8 = 6;
const REFUSAL_REJOIN_UNAVAILABLE: u8 = 7;

/// The bytes of a join reply. A rejoin's reply also needs its turns:
/// see [`Host::handle_join`](crate::Host::handle_join), which writes them.
pub fn encode_join_reply(reply: &JoinReply) -> Vec<u8> {
    encode_join_reply_with_log(reply, &[])
}

/// A join reply followed, for a rejoin, by the encoded bundles of turns `0..log.len()`.
pub(crate) fn encode_join_reply_with_log(reply: &JoinReply, log: &[Bytes]) -> Vec<u8> {
    let log_bytes: usize = log.iter().map(Bytes::len).sum();
    let mut out = Vec::with_capacity(48 + log_bytes);
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_REPLY);
    match reply {
        Ok(accept) => {
            out.put_u8(0);
            out.put_u8(accept.player.0);
            put_varint(&mut out, accept.turn_length_ms.into());
            put_varint(&mut out, accept.command_delay_turns.into());
            put_varint(&mut out, accept.turns_ahead_max.into());
            out.put_u8(accept.players_max);
            put_varint(&mut out, accept.commands_per_turn_max.into());
            put_varint(&mut out, accept.turn_bytes_per_player_max.into());
            put_varint(&mut out, accept.command_bytes_max.into());
            put_varint(&mut out, accept.sync_interval_turns.into());
            match accept.rejoin {
                None => out.put_u8(0),
                Some(rejoin) => {
                    out.put_u8(1);
                    put_varint(&mut out, rejoin.next_seq.0.into());
                    put_varint(&mut out, rejoin.turns.into());
                    for bundle in log.iter().take(rejoin.turns as usize) {
                        out.extend_from_slice(bundle);
                    }
                }
            }
        }
        Err(refusal) => {
            out.put_u8(1);
            match *refusal {
                JoinRefusal::VersionMismatch { host, client } => {
                    out.put_u8(REFUSAL_VERSION);
                    out.put_u8(host);
                    out.put_u8(client);
                }
                JoinRefusal::GameDataMismatch { host, client } => {
                    out.put_u8(REFUSAL_GAME_DATA);
                    out.put_u64_le(host);
                    out.put_u64_le(client);
                }
                JoinRefusal::BadToken => out.put_u8(REFUSAL_BAD_TOKEN),
                JoinRefusal::TokenUsed => out.put_u8(REFUSAL_TOKEN_USED),
                JoinRefusal::SessionFull => out.put_u8(REFUSAL_FULL),
                JoinRefusal::GameStarted => out.put_u8(REFUSAL_STARTED),
                JoinRefusal::RejoinExpired => out.put_u8(REFUSAL_REJOIN_EXPIRED),
                JoinRefusal::RejoinUnavailable => out.put_u8(REFUSAL_REJOIN_UNAVAILABLE),
            }
        }
    }
    out
}

fn u16_field(reader: &mut Reader<'_>, field: &'static str) -> Result<u16, DecodeError> {
    let value = reader.varint()?;
    u16::try_from(value).map_err(|_| DecodeError::TooLarge { field, value, max: u16::MAX.into() })
}

/// Parses a join reply. The version byte is checked first, so a client facing a host of
/// another version learns it from [`DecodeError::Version`]. A rejoin's turns are not
/// decoded here (they need the session's limits); [`Client`](crate::Client) reads them.
pub fn decode_join_reply(bytes: &[u8]) -> Result<JoinReply, DecodeError> {
    decode_join_reply_parts(bytes).map(|(reply, _)| reply)
}

/// A join reply and the bytes of a rejoin's turns (empty otherwise); see [`decode_rejoin_log`].
pub(crate) fn decode_join_reply_parts(bytes: &[u8]) -> Result<(JoinReply, &[u8]), DecodeError> {
    let mut reader = Reader::new(bytes);
    match reader.header()? {
        KIND_REPLY => {}
        kind => return Err(DecodeError::UnknownKind(kind)),
    }
    let reply = match reader.u8()? {
        0 => Ok(JoinAccept {
            player: PlayerId(reader.u8()?),
            turn_length_ms: reader.varint_u32()?,
            command_delay_turns: reader.varint_u32()?,
            turns_ahead_max: reader.varint_u32()?,
            players_max: reader.u8()?,
            commands_per_turn_max: u16_field(&mut reader, "commands_per_turn_max")?,
            turn_bytes_per_player_max: u16_field(&mut reader, "turn_bytes_per_player_max")?,
            command_bytes_max: u16_field(&mut reader, "command_bytes_max")?,
            sync_interval_turns: reader.varint_u32()?,
            rejoin: match reader.u8()? {
                0 => None,
                1 => Some(Rejoin {
                    next_seq: CommandSeq(reader.varint_u32()?),
                    turns: reader.varint_u32()?,
                }),
                tag => return Err(DecodeError::UnknownTag(tag)),
            },
        }),
        1 => Err(match reader.u8()? {
            REFUSAL_VERSION => {
                JoinRefusal::VersionMismatch { host: reader.u8()?, client: reader.u8()? }
            }
            REFUSAL_GAME_DATA => {
                JoinRefusal::GameDataMismatch { host: reader.u64_le()?, client: reader.u64_le()? }
            }
            REFUSAL_BAD_TOKEN => JoinRefusal::BadToken,
            REFUSAL_TOKEN_USED => JoinRefusal::TokenUsed,
            REFUSAL_FULL => JoinRefusal::SessionFull,
            REFUSAL_STARTED => JoinRefusal::GameStarted,
            REFUSAL_REJOIN_EXPIRED => JoinRefusal::RejoinExpired,
            REFUSAL_REJOIN_UNAVAILABLE => JoinRefusal::RejoinUnavailable,
            tag => return Err(DecodeError::UnknownTag(tag)),
        }),
        tag => return Err(DecodeError::UnknownTag(tag)),
    };
    let log = reader.bytes;
    if !matches!(reply, Ok(JoinAccept { rejoin: Some(_), .. })) {
        reader.finish()?;
    }
    Ok((reply, log))
}

/// Decodes a rejoin's `turns` bundles: all the bytes, nothing left over. Allocation is bounded
/// by the bytes (every bundle is at least one byte) and `limits`.
pub(crate) fn decode_rejoin_log(
    bytes: &[u8],
    turns: u32,
    limits: &Limits,
) -> Result<Vec<Vec<Record>>, DecodeError> {
    let mut reader = Reader::new(bytes);
    if turns as usize > reader.remaining() {
        return Err(DecodeError::TooLarge {
            field: "rejoin turns",
            value: turns.into(),
            max: reader.remaining() as u64,
        });
    }
    let mut bundles = Vec::with_capacity(turns as usize);
    for _ in 0..turns {
        bundles.push(decode_bundle(&mut reader, limits)?);
    }
    reader.finish()?;
    Ok(bundles)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;

//! The datagrams: Up (client → host: acks, progress, riders, commands) and Down (host →
//! client: acks, riders, bundles).

use bytes::BufMut;

use crate::bundle::Record;
use crate::types::{CommandSeq, Turn};
use crate::PROTOCOL_VERSION;

use super::records::decode_bundle;
use super::{put_varint, varint_len, DecodeError, Limits, Reader, KIND_DOWN, KIND_UP};

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
    /// The client's playout buffer (ms), for speed control: its commands leave that much
    /// later than the turns it executes arrive.
    pub(crate) playout_ms: Option<u32>,
    /// The client has not heard from the host lately: answer at once.
    pub(crate) probe: bool,
    /// A turn is missing while a later one arrived (the quiet relay): resend what the client
    /// has not acknowledged at once.
    pub(crate) gap: bool,
}

/// The optional notices the host adds to its datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DownExtras {
    /// The host holds this client's state hash reports up to this check turn.
    pub(crate) hash_ack: Option<Turn>,
    /// The players the host is waiting for (bit i: player i); 0 when not stalled.
    pub(crate) waiting: u64,
    /// The host has not heard from this client lately: answer at once.
    pub(crate) probe: bool,
    /// The host asks this client's game for a snapshot of its state after this check turn.
    pub(crate) snapshot_wanted: Option<Turn>,
    /// A desync's forensics asks this client for its state after this turn.
    pub(crate) inspect: Option<Turn>,
    /// Commands of this client's the host will never seal: the newest, and which of the 64
    /// before it too (bit `i`: the command `i + 1` before it).
    pub(crate) refused: Option<(CommandSeq, u64)>,
}

/// The commands a notice names, newest first.
pub(crate) fn refused_seqs(newest: CommandSeq, before: u64) -> impl Iterator<Item = CommandSeq> {
    let older = (0..64u32).filter(move |bit| before & (1 << bit) != 0);
    std::iter::once(newest)
        .chain(older.filter_map(move |bit| newest.0.checked_sub(bit + 1).map(CommandSeq)))
}

fn put_up_extras(out: &mut Vec<u8>, extras: &UpExtras) {
    let flags = u8::from(extras.hash_report.is_some())
        | u8::from(extras.cost_ms.is_some()) << 1
        | u8::from(extras.pause.is_some()) << 2
        | u8::from(extras.playout_ms.is_some()) << 3
        | u8::from(extras.probe) << 4
        | u8::from(extras.gap) << 5;
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
    if let Some(playout) = extras.playout_ms {
        put_varint(out, playout.into());
    }
}

fn read_up_extras(reader: &mut Reader<'_>) -> Result<UpExtras, DecodeError> {
    let flags = reader.u8()?;
    if flags & !0b11_1111 != 0 {
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
    let playout_ms = if flags & 8 != 0 { Some(reader.varint_u32()?) } else { None };
    Ok(UpExtras {
        hash_report,
        cost_ms,
        pause,
        playout_ms,
        probe: flags & 16 != 0,
        gap: flags & 32 != 0,
    })
}

fn put_down_extras(out: &mut Vec<u8>, extras: &DownExtras) {
    let flags = u8::from(extras.hash_ack.is_some())
        | u8::from(extras.waiting != 0) << 1
        | u8::from(extras.probe) << 2
        | u8::from(extras.snapshot_wanted.is_some()) << 3
        | u8::from(extras.inspect.is_some()) << 4
        | u8::from(extras.refused.is_some()) << 5;
    out.put_u8(flags);
    if let Some(turn) = extras.hash_ack {
        put_varint(out, turn.0.into());
    }
    if extras.waiting != 0 {
        put_varint(out, extras.waiting);
    }
    if let Some(turn) = extras.snapshot_wanted {
        put_varint(out, turn.0.into());
    }
    if let Some(turn) = extras.inspect {
        put_varint(out, turn.0.into());
    }
    if let Some((seq, before)) = extras.refused {
        put_varint(out, seq.0.into());
        put_varint(out, before);
    }
}

fn read_down_extras(reader: &mut Reader<'_>) -> Result<DownExtras, DecodeError> {
    let flags = reader.u8()?;
    if flags & !0b11_1111 != 0 {
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
    let snapshot_wanted = if flags & 8 != 0 { Some(Turn(reader.varint_u32()?)) } else { None };
    let inspect = if flags & 16 != 0 { Some(Turn(reader.varint_u32()?)) } else { None };
    let refused = if flags & 32 != 0 {
        Some((CommandSeq(reader.varint_u32()?), reader.varint()?))
    } else {
        None
    };
    Ok(DownExtras { hash_ack, waiting, probe: flags & 4 != 0, snapshot_wanted, inspect, refused })
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

/// Decodes a client → host datagram.
pub(crate) fn decode_up<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Up<'a>, DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_UP)?;
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

/// Decodes a host → client datagram.
pub(crate) fn decode_down(bytes: &[u8], limits: &Limits) -> Result<Down, DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_DOWN)?;
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

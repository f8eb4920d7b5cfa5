//! Turn bundles on the wire: a count, then records — commands with their sequence and payload,
//! joins and leaves in one byte, and extended records (pace, desync, pause, resume, end).

use bytes::{BufMut, Bytes};

use crate::bundle::{DesyncReport, EndCause, PauseBy, Record};
use crate::pace::Pace;
use crate::types::{CommandSeq, PlayerId, Turn};

use super::{put_varint, DecodeError, Limits, Reader};

/// A record's first byte: its kind in the top two bits, the player in the low six
/// (`turns.players_max` is at most 64).
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
                match cause {
                    EndCause::Desync => out.put_u8(0),
                    EndCause::Finished { code } => {
                        out.put_u8(1);
                        put_varint(out, (*code).into());
                    }
                }
            }
        }
    }
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
            1 => Record::Ended(EndCause::Finished { code: reader.varint_u32()? }),
            tag => return Err(DecodeError::UnknownTag(tag)),
        },
        tag => return Err(DecodeError::UnknownTag(tag)),
    })
}

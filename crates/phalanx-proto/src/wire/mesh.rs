//! The mesh datagram: what one peer of a peer-to-peer match sends another.
//!
//! ```text
//! Mesh: version kind=8 flags through ack next_exec [due_in] [stamp] [echo hold] n entry*n
//!       [m {turn hash:u64le}*m] [lead_ms cost_ms suspects] [view]
//!   flags   = bit 0 echo, bit 1 hashes, bit 2 report, bit 3 view, bit 4 answer at once,
//!             bit 5 stamp, bit 6 due_in
//!   through = 1 + the last turn of our own contributions that is final (0: none)
//!   ack     = 1 + the last turn through which we hold every contribution of the recipient's
//!             (0: none), less `through` (zigzag)
//!   next_exec = the turn we execute next, less `through` (zigzag)
//!   due_in  = ms until our `next_exec` is due (zigzag: negative when overdue); the master's
//!   stamp   = our clock (ms, wrapping), for a round trip; in some datagrams only
//!   entry   = turn bundle            (our contribution to `turn`: records, as in a Down bundle)
//!   view    = kind view n {player turn upto k entry*k}*n
//!             (kind 0 freeze, 1 frozen, 2 drop, 3 drop ack, 4 behind; turn, upto: 1 + turn)
//! ```
//!
//! Only the non-empty contributions after `ack` travel: an empty one is implied by `through`.
//! Every datagram is complete on its own for the turns it covers, so a lost one is repaired by
//! any later one.

use bytes::BufMut;

use crate::bundle::Record;
use crate::types::{PlayerId, Turn};

use super::records::{decode_bundle, encode_bundle};
use super::{put_varint, DecodeError, Limits, Reader};

/// The mesh datagram's kind byte.
pub(crate) const KIND_MESH: u8 = 8;

const FLAG_ECHO: u8 = 1;
const FLAG_HASHES: u8 = 2;
const FLAG_REPORT: u8 = 4;
const FLAG_VIEW: u8 = 8;
const FLAG_PROBE: u8 = 16;
const FLAG_STAMP: u8 = 32;
const FLAG_DUE: u8 = 64;
const FLAGS_ALL: u8 =
    FLAG_ECHO | FLAG_HASHES | FLAG_REPORT | FLAG_VIEW | FLAG_PROBE | FLAG_STAMP | FLAG_DUE;

/// The most state hashes one datagram carries.
pub(crate) const HASHES_MAX: usize = 4;

/// One peer's contribution to one turn: its commands (each `Record::Command` naming the
/// sender) and its control records.
pub(crate) type Entry = Vec<Record>;

/// A view change message (see `mesh/view.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ViewKind {
    /// The master asks the survivors to stop taking the gone peers' contributions.
    Freeze,
    /// A survivor answers: what it holds of the gone peers'.
    Frozen,
    /// The master's decision: each gone peer's last turn.
    Drop,
    /// A survivor holds the gone peers' contributions through their last turns.
    DropAck,
    /// The proposer's view number is below one the sender answered (no items).
    Behind,
}

/// One gone peer in a view message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ViewItem {
    /// The gone peer.
    pub(crate) player: PlayerId,
    /// Freeze: the master holds its contributions through this; Frozen and DropAck: the
    /// survivor does; Drop: its last turn.
    pub(crate) turn: Option<Turn>,
    /// The entries below cover the turns through this one.
    pub(crate) upto: Option<Turn>,
    /// Its non-empty contributions in the turns covered.
    pub(crate) entries: Vec<(Turn, Entry)>,
}

/// A view change message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ViewMsg {
    pub(crate) kind: ViewKind,
    pub(crate) view: u32,
    pub(crate) items: Vec<ViewItem>,
}

/// What a peer tells the master of its side, in every datagram to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// The lead it needs (ms): how long before a turn its contributions must become final
    /// to reach its worst peer in time.
    pub(crate) lead_ms: u32,
    /// How long its game takes to simulate a turn, ms.
    pub(crate) cost_ms: u32,
    /// The peers it has not heard from for the idle timeout, as a bit mask by player.
    pub(crate) suspects: u64,
}

/// A decoded mesh datagram.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MeshDatagram {
    pub(crate) ack: Option<Turn>,
    pub(crate) through: Option<Turn>,
    pub(crate) next_exec: Turn,
    /// Ms until the sender's `next_exec` is due on its clock (negative: overdue): the
    /// master's schedule, which the others follow.
    pub(crate) due_in: Option<i32>,
    /// The sender's clock, for a round trip.
    pub(crate) stamp: Option<u32>,
    /// The last stamp received from the recipient, and how long ago (ms).
    pub(crate) echo: Option<(u32, u32)>,
    pub(crate) entries: Vec<(Turn, Entry)>,
    pub(crate) hashes: Vec<(Turn, u64)>,
    pub(crate) report: Option<Report>,
    pub(crate) view: Option<ViewMsg>,
    /// The sender wants an answer at once.
    pub(crate) probe: bool,
}

fn put_turn(out: &mut Vec<u8>, turn: Option<Turn>) {
    put_varint(out, turn_code(turn));
}

fn read_turn(reader: &mut Reader<'_>) -> Result<Option<Turn>, DecodeError> {
    match reader.varint()? {
        0 => Ok(None),
        value => u32::try_from(value - 1)
            .map(|turn| Some(Turn(turn)))
            .map_err(|_| DecodeError::BadVarint),
    }
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// `value - base`, zigzagged: a small number when the two are close.
fn put_delta(out: &mut Vec<u8>, value: u64, base: u64) {
    put_varint(out, zigzag(value as i64 - base as i64));
}

/// The value `put_delta` wrote against `base`: a turn's code, at most `u32::MAX + 1`.
fn read_delta(reader: &mut Reader<'_>, base: u64) -> Result<u64, DecodeError> {
    let delta = unzigzag(reader.varint()?);
    let value = (base as i64).checked_add(delta).ok_or(DecodeError::BadVarint)?;
    u64::try_from(value).ok().filter(|&code| code <= 1 << 32).ok_or(DecodeError::BadVarint)
}

/// A turn as `put_turn` writes it: 0 for none, else one more than the turn.
fn turn_code(turn: Option<Turn>) -> u64 {
    turn.map_or(0, |turn| u64::from(turn.0) + 1)
}

/// Encodes a list of entries: a count, then each turn and its records.
pub(crate) fn put_entries(out: &mut Vec<u8>, entries: &[(Turn, &Entry)]) {
    put_varint(out, entries.len() as u64);
    for (turn, entry) in entries {
        put_varint(out, turn.0.into());
        encode_bundle(out, entry);
    }
}

/// Bytes one entry takes on the wire.
pub(crate) fn entry_len(turn: Turn, entry: &Entry) -> usize {
    let mut scratch = Vec::new();
    put_varint(&mut scratch, turn.0.into());
    encode_bundle(&mut scratch, entry);
    scratch.len()
}

fn read_entries(
    reader: &mut Reader<'_>,
    limits: &Limits,
    max: usize,
) -> Result<Vec<(Turn, Entry)>, DecodeError> {
    // An entry is at least two bytes: its turn and its record count.
    let count = reader.count("mesh entries", max, 2)?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let turn = Turn(reader.varint_u32()?);
        if entries.last().is_some_and(|(last, _): &(Turn, Entry)| *last >= turn) {
            return Err(DecodeError::Invalid("mesh entry order"));
        }
        entries.push((turn, decode_bundle(reader, limits)?));
    }
    Ok(entries)
}

impl MeshDatagram {
    /// Encodes everything but the entries, then the given entries (the sender chose which fit).
    pub(crate) fn encode(&self, out: &mut Vec<u8>, entries: &[(Turn, &Entry)]) {
        out.put_u8(crate::PROTOCOL_VERSION);
        out.put_u8(KIND_MESH);
        let mut flags = 0;
        if self.echo.is_some() {
            flags |= FLAG_ECHO;
        }
        if !self.hashes.is_empty() {
            flags |= FLAG_HASHES;
        }
        if self.report.is_some() {
            flags |= FLAG_REPORT;
        }
        if self.view.is_some() {
            flags |= FLAG_VIEW;
        }
        if self.probe {
            flags |= FLAG_PROBE;
        }
        if self.stamp.is_some() {
            flags |= FLAG_STAMP;
        }
        if self.due_in.is_some() {
            flags |= FLAG_DUE;
        }
        out.put_u8(flags);
        let base = turn_code(self.through);
        put_varint(out, base);
        put_delta(out, turn_code(self.ack), base);
        put_delta(out, self.next_exec.0.into(), base);
        if let Some(due_in) = self.due_in {
            put_varint(out, zigzag(due_in.into()));
        }
        if let Some(stamp) = self.stamp {
            put_varint(out, stamp.into());
        }
        if let Some((stamp, hold)) = self.echo {
            put_varint(out, stamp.into());
            put_varint(out, hold.into());
        }
        put_entries(out, entries);
        if !self.hashes.is_empty() {
            put_varint(out, self.hashes.len() as u64);
            for (turn, hash) in &self.hashes {
                put_varint(out, turn.0.into());
                out.put_u64_le(*hash);
            }
        }
        if let Some(report) = self.report {
            put_varint(out, report.lead_ms.into());
            put_varint(out, report.cost_ms.into());
            put_varint(out, report.suspects);
        }
        if let Some(view) = &self.view {
            put_view(out, view);
        }
    }
}

fn put_view(out: &mut Vec<u8>, view: &ViewMsg) {
    out.put_u8(match view.kind {
        ViewKind::Freeze => 0,
        ViewKind::Frozen => 1,
        ViewKind::Drop => 2,
        ViewKind::DropAck => 3,
        ViewKind::Behind => 4,
    });
    put_varint(out, view.view.into());
    put_varint(out, view.items.len() as u64);
    for item in &view.items {
        out.put_u8(item.player.0);
        put_turn(out, item.turn);
        put_turn(out, item.upto);
        let entries: Vec<(Turn, &Entry)> = item.entries.iter().map(|(t, e)| (*t, e)).collect();
        put_entries(out, &entries);
    }
}

/// Decodes a mesh datagram. `entries_max` bounds the entries of any one list (the window).
pub(crate) fn decode_mesh(
    bytes: &[u8],
    limits: &Limits,
    entries_max: usize,
) -> Result<MeshDatagram, DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_MESH)?;
    let flags = reader.u8()?;
    if flags & !FLAGS_ALL != 0 {
        return Err(DecodeError::Invalid("mesh flags"));
    }
    let through = read_turn(&mut reader)?;
    let base = turn_code(through);
    let ack = match read_delta(&mut reader, base)? {
        0 => None,
        code => Some(Turn((code - 1) as u32)),
    };
    let next_exec =
        Turn(u32::try_from(read_delta(&mut reader, base)?).map_err(|_| DecodeError::BadVarint)?);
    let due_in = if flags & FLAG_DUE != 0 {
        let value = unzigzag(reader.varint()?);
        Some(i32::try_from(value).map_err(|_| DecodeError::BadVarint)?)
    } else {
        None
    };
    let stamp = if flags & FLAG_STAMP != 0 { Some(reader.varint_u32()?) } else { None };
    let echo = if flags & FLAG_ECHO != 0 {
        Some((reader.varint_u32()?, reader.varint_u32()?))
    } else {
        None
    };
    let entries = read_entries(&mut reader, limits, entries_max)?;
    let mut hashes = Vec::new();
    if flags & FLAG_HASHES != 0 {
        let count = reader.count("mesh hashes", HASHES_MAX, 9)?;
        for _ in 0..count {
            hashes.push((Turn(reader.varint_u32()?), reader.u64_le()?));
        }
    }
    let report = if flags & FLAG_REPORT != 0 {
        Some(Report {
            lead_ms: reader.varint_u32()?,
            cost_ms: reader.varint_u32()?,
            suspects: reader.varint()?,
        })
    } else {
        None
    };
    let view = if flags & FLAG_VIEW != 0 {
        Some(read_view(&mut reader, limits, entries_max)?)
    } else {
        None
    };
    reader.finish()?;
    Ok(MeshDatagram {
        ack,
        through,
        next_exec,
        due_in,
        stamp,
        echo,
        entries,
        hashes,
        report,
        view,
        probe: flags & FLAG_PROBE != 0,
    })
}

fn read_view(
    reader: &mut Reader<'_>,
    limits: &Limits,
    entries_max: usize,
) -> Result<ViewMsg, DecodeError> {
    let kind = match reader.u8()? {
        0 => ViewKind::Freeze,
        1 => ViewKind::Frozen,
        2 => ViewKind::Drop,
        3 => ViewKind::DropAck,
        4 => ViewKind::Behind,
        tag => return Err(DecodeError::UnknownTag(tag)),
    };
    let view = reader.varint_u32()?;
    // An item is at least four bytes: player, turn, upto, entry count.
    let count = reader.count("view items", usize::from(limits.players_max), 4)?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let player = limits.player(reader.u8()?)?;
        if items.last().is_some_and(|last: &ViewItem| last.player >= player) {
            return Err(DecodeError::Invalid("view item order"));
        }
        let turn = read_turn(reader)?;
        let upto = read_turn(reader)?;
        let entries = read_entries(reader, limits, entries_max)?;
        items.push(ViewItem { player, turn, upto, entries });
    }
    Ok(ViewMsg { kind, view, items })
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
mod tests;

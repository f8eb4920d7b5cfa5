//! The state upload a desync's forensics asks for (client → host, on a reliable stream of its
//! own): the check turn, the first divergent turn, the client's hash there, the turns it
//! executed up to it, then its state after it (if its game kept it).

use bytes::BufMut;

use crate::bundle::Record;
use crate::types::Turn;
use crate::PROTOCOL_VERSION;

use super::records::{decode_bundle, encode_bundle};
use super::{put_varint, DecodeError, Limits, Reader, KIND_STATE};

/// Bytes of a state upload besides its turns and its state, at most.
pub(crate) const STATE_UPLOAD_HEADER_MAX: usize = 2 + 5 + 5 + 8 + 5 + 1 + 5;

/// A client's state after the first divergent turn, as uploaded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StateUpload {
    pub(crate) check: Turn,
    pub(crate) turn: Turn,
    pub(crate) hash: u64,
    /// The turns executed up to `turn`, oldest first.
    pub(crate) turns: Vec<(Turn, Vec<Record>)>,
    pub(crate) state: Option<Vec<u8>>,
}

pub(crate) fn encode_state_upload(upload: &StateUpload) -> Vec<u8> {
    let state_len = upload.state.as_ref().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(STATE_UPLOAD_HEADER_MAX + 64 + state_len);
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_STATE);
    put_varint(&mut out, upload.check.0.into());
    put_varint(&mut out, upload.turn.0.into());
    out.put_u64_le(upload.hash);
    put_varint(&mut out, upload.turns.len() as u64);
    for (turn, records) in &upload.turns {
        put_varint(&mut out, turn.0.into());
        encode_bundle(&mut out, records);
    }
    match &upload.state {
        Some(state) => {
            out.put_u8(1);
            put_varint(&mut out, state.len() as u64);
            out.extend_from_slice(state);
        }
        None => out.put_u8(0),
    }
    out
}

/// Parses a state upload: at most `turns_max` turns, consecutive and ending at its turn, and
/// a state of at most `state_max` bytes.
pub(crate) fn decode_state_upload(
    bytes: &[u8],
    limits: &Limits,
    turns_max: usize,
    state_max: usize,
) -> Result<StateUpload, DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_STATE)?;
    let check = Turn(reader.varint_u32()?);
    let turn = Turn(reader.varint_u32()?);
    let hash = reader.u64_le()?;
    // A turn is at least two bytes: its number and its record count.
    let count = reader.count("state upload turns", turns_max, 2)?;
    let mut turns = Vec::with_capacity(count);
    for _ in 0..count {
        let number = Turn(reader.varint_u32()?);
        turns.push((number, decode_bundle(&mut reader, limits)?));
    }
    let consecutive = turns.windows(2).all(|pair| pair[1].0 == pair[0].0.next());
    if turn > check || !consecutive || turns.last().is_some_and(|(last, _)| *last != turn) {
        return Err(DecodeError::Invalid("state upload turns"));
    }
    let state = match reader.u8()? {
        0 => None,
        1 => {
            let len = reader.count("state", state_max, 1)?;
            Some(reader.take(len)?.to_vec())
        }
        tag => return Err(DecodeError::UnknownTag(tag)),
    };
    reader.finish()?;
    Ok(StateUpload { check, turn, hash, turns, state })
}

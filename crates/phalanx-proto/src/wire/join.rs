//! The join messages of the reliable stream: the request, and the reply — accepted with the
//! session's parameters (and, for a rejoin, every sealed turn), or refused with a cause.

use bytes::BufMut;

use crate::bundle::Record;
use crate::types::{CommandSeq, Joined, PlayerId, SpectatorId, Turn};
use crate::PROTOCOL_VERSION;

use super::records::decode_bundle;
use super::{
    put_varint, DecodeError, Limits, Reader, KIND_HASHES, KIND_JOIN, KIND_REPLY, KIND_SNAPSHOT,
};

/// A join request, sent by a client on the reliable stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    /// The protocol version the client speaks.
    pub protocol_version: u8,
    /// The client's hash of the game's rules and data.
    pub game_data_hash: u64,
    /// The seat token the lobby handed this player.
    pub token: u64,
    /// The client's `link.heartbeat_ms` (the quiet relay's setting), which must be the host's.
    pub heartbeat_ms: u32,
}

impl JoinRequest {
    /// The request's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(21);
        out.put_u8(self.protocol_version);
        out.put_u8(KIND_JOIN);
        out.put_u64_le(self.game_data_hash);
        out.put_u64_le(self.token);
        put_varint(&mut out, self.heartbeat_ms.into());
        out
    }

    /// Parses a request. A different protocol version is *not* an error here: the host must
    /// read it to refuse the join with both versions named. Only its first byte is then
    /// trusted.
    pub fn decode(bytes: &[u8]) -> Result<JoinRequest, DecodeError> {
        let mut reader = Reader::new(bytes);
        let protocol_version = reader.u8()?;
        if protocol_version != PROTOCOL_VERSION {
            return Ok(JoinRequest {
                protocol_version,
                game_data_hash: 0,
                token: 0,
                heartbeat_ms: 0,
            });
        }
        match reader.u8()? {
            KIND_JOIN => {}
            kind => return Err(DecodeError::UnknownKind(kind)),
        }
        let game_data_hash = reader.u64_le()?;
        let token = reader.u64_le()?;
        let heartbeat_ms = reader.varint_u32()?;
        reader.finish()?;
        Ok(JoinRequest { protocol_version, game_data_hash, token, heartbeat_ms })
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
    /// join mid-game unless the host allows it (`SessionConfig::catch_up.late_join`). (A player who
    /// held the seat and dropped out can rejoin.)
    GameStarted,
    /// The player this token seated timed out longer ago than `catch_up.rejoin_window_ms`: the seat
    /// is closed for good.
    RejoinExpired,
    /// Rejoin is off, or the turns since the last verified snapshot (or, without snapshots,
    /// since turn 0) outgrew `catch_up.rejoin_log_bytes_max`, or the player was removed for
    /// misbehaving: no catch-up is possible (for a rejoin or a late join).
    RejoinUnavailable,
    /// The join request could not be read (not a join request of this protocol, or cut
    /// short): a bug or a foreign client, not something a retry fixes.
    Malformed,
    /// The host removed this token's player for good ([`Readmit::Never`](crate::Readmit)):
    /// the token seats no one for the rest of the session.
    TokenRevoked,
    /// The client's `link.heartbeat_ms` is not the host's: the quiet relay's timers on both ends
    /// assume the same heartbeat, so the host refuses rather than let the link misjudge loss.
    HeartbeatMismatch {
        /// The host's `link.heartbeat_ms`.
        host: u32,
        /// The client's.
        client: u32,
    },
    /// The join request was longer than a join request may be.
    TooLarge {
        /// The most bytes a join request may have.
        max: u32,
    },
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
            JoinRefusal::Malformed => write!(f, "the host could not read the join request"),
            JoinRefusal::TokenRevoked => write!(f, "the host removed this player for good"),
            JoinRefusal::HeartbeatMismatch { host, client } => write!(
                f,
                "link.heartbeat_ms mismatch: host {host}, client {client} (the two must agree)"
            ),
            JoinRefusal::TooLarge { max } => {
                write!(f, "the join request is longer than the {max} bytes a join may have")
            }
        }
    }
}

impl std::error::Error for JoinRefusal {}

/// What a client needs to play, from the host's join reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinAccept {
    /// The seat the client plays, or the spectator slot it watches from.
    pub joined: Joined,
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
    /// Live play resumes at this turn. The reply carries the sealed turns before it: every
    /// one from turn 0, or with a `snapshot` the turns after the snapshot's.
    pub turns: u32,
    /// The next command sequence the host expects from this player.
    pub next_seq: CommandSeq,
    /// The game's state after this check turn, with its verified state hash, carried in the
    /// reply: the game restores it instead of replaying the turns up to it.
    pub snapshot: Option<(Turn, u64)>,
}

impl Rejoin {
    /// The first sealed turn the reply carries.
    pub fn first_turn(&self) -> u32 {
        self.snapshot.map_or(0, |(turn, _)| turn.0 + 1)
    }
}

/// The parts of a join reply after the accepted fields, for a rejoin: the snapshot's state
/// (empty without one) and the encoded turns.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RejoinParts<'a> {
    pub(crate) state: &'a [u8],
    pub(crate) log: &'a [u8],
}

/// The host's answer to a join request.
pub type JoinReply = Result<JoinAccept, JoinRefusal>;

/// In a join acceptance's seat byte: a spectator slot, not a player.
const SPECTATOR_BIT: u8 = 0x80;

const REFUSAL_VERSION: u8 = 0;
const REFUSAL_GAME_DATA: u8 = 1;
const REFUSAL_BAD_TOKEN: u8 = 2;
const REFUSAL_TOKEN_USED: u8 = 3;
const REFUSAL_FULL: u8 = 4;
const REFUSAL_STARTED: u8 = 5;
const REFUSAL_REJOIN_EXPIRED: u8 = 6;
const REFUSAL_REJOIN_UNAVAILABLE: u8 = 7;
const REFUSAL_MALFORMED: u8 = 8;
const REFUSAL_TOO_LARGE: u8 = 9;
const REFUSAL_TOKEN_REVOKED: u8 = 10;
const REFUSAL_HEARTBEAT: u8 = 11;

/// The bytes of a join reply. A rejoin's reply also needs its turns:
/// see [`Host::handle_join`](crate::Host::handle_join), which writes them.
pub fn encode_join_reply(reply: &JoinReply) -> Vec<u8> {
    encode_join_reply_with_log(reply, &[], std::iter::empty())
}

/// A join reply followed, for a rejoin, by the snapshot's `state` (when the rejoin names a
/// snapshot) and the encoded bundles of turns `rejoin.first_turn()..rejoin.turns`, the first
/// of `log`.
pub(crate) fn encode_join_reply_with_log<'a>(
    reply: &JoinReply,
    state: &[u8],
    log: impl IntoIterator<Item = &'a [u8]> + Clone,
) -> Vec<u8> {
    let log_bytes: usize = log.clone().into_iter().map(<[u8]>::len).sum();
    let mut out = Vec::with_capacity(64 + state.len() + log_bytes);
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_REPLY);
    match reply {
        Ok(accept) => {
            out.put_u8(0);
            match accept.joined {
                Joined::Player(player) => out.put_u8(player.0),
                Joined::Spectator(spectator) => {
                    // Player ids are below 64: the high bit marks a spectator slot.
                    out.put_u8(SPECTATOR_BIT | spectator.0);
                }
            }
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
                    match rejoin.snapshot {
                        None => out.put_u8(0),
                        Some((turn, hash)) => {
                            out.put_u8(1);
                            put_varint(&mut out, turn.0.into());
                            out.put_u64_le(hash);
                            put_varint(&mut out, state.len() as u64);
                            out.extend_from_slice(state);
                        }
                    }
                    let count = rejoin.turns.saturating_sub(rejoin.first_turn()) as usize;
                    for bundle in log.into_iter().take(count) {
                        out.extend_from_slice(bundle);
                    }
                }
            }
        }
        Err(refusal) => {
            out.put_u8(1);
            encode_refusal(&mut out, refusal);
        }
    }
    out
}

/// A refusal's code and fields, after the reply's refusal byte.
fn encode_refusal(out: &mut Vec<u8>, refusal: &JoinRefusal) {
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
        JoinRefusal::Malformed => out.put_u8(REFUSAL_MALFORMED),
        JoinRefusal::TokenRevoked => out.put_u8(REFUSAL_TOKEN_REVOKED),
        JoinRefusal::HeartbeatMismatch { host, client } => {
            out.put_u8(REFUSAL_HEARTBEAT);
            put_varint(out, host.into());
            put_varint(out, client.into());
        }
        JoinRefusal::TooLarge { max } => {
            out.put_u8(REFUSAL_TOO_LARGE);
            put_varint(out, max.into());
        }
    }
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

/// A join reply and, for a rejoin, its snapshot's state and the bytes of its turns (empty
/// otherwise); see [`decode_rejoin_log`].
pub(crate) fn decode_join_reply_parts(
    bytes: &[u8],
) -> Result<(JoinReply, RejoinParts<'_>), DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_REPLY)?;
    let mut state: &[u8] = &[];
    let reply = match reader.u8()? {
        0 => Ok(JoinAccept {
            joined: match reader.u8()? {
                byte if byte & SPECTATOR_BIT != 0 => {
                    Joined::Spectator(SpectatorId(byte & !SPECTATOR_BIT))
                }
                byte => Joined::Player(PlayerId(byte)),
            },
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
                1 => {
                    let next_seq = CommandSeq(reader.varint_u32()?);
                    let turns = reader.varint_u32()?;
                    let snapshot = match reader.u8()? {
                        0 => None,
                        1 => {
                            let turn = Turn(reader.varint_u32()?);
                            let hash = reader.u64_le()?;
                            let len = reader.count("snapshot bytes", usize::MAX, 1)?;
                            state = reader.take(len)?;
                            Some((turn, hash))
                        }
                        tag => return Err(DecodeError::UnknownTag(tag)),
                    };
                    let rejoin = Rejoin { turns, next_seq, snapshot };
                    if rejoin.first_turn() > turns {
                        return Err(DecodeError::Invalid("rejoin snapshot turn"));
                    }
                    Some(rejoin)
                }
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
            REFUSAL_MALFORMED => JoinRefusal::Malformed,
            REFUSAL_TOO_LARGE => JoinRefusal::TooLarge { max: reader.varint_u32()? },
            REFUSAL_TOKEN_REVOKED => JoinRefusal::TokenRevoked,
            REFUSAL_HEARTBEAT => JoinRefusal::HeartbeatMismatch {
                host: reader.varint_u32()?,
                client: reader.varint_u32()?,
            },
            tag => return Err(DecodeError::UnknownTag(tag)),
        }),
        tag => return Err(DecodeError::UnknownTag(tag)),
    };
    let log = reader.bytes;
    if !matches!(reply, Ok(JoinAccept { rejoin: Some(_), .. })) {
        reader.finish()?;
    }
    Ok((reply, RejoinParts { state, log }))
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

/// Bytes of a join reply besides a rejoin's snapshot state and turns, at most.
pub(crate) const JOIN_REPLY_FIELDS_MAX: usize = 96;

/// Bytes of a snapshot upload besides the state, at most.
pub(crate) const SNAPSHOT_UPLOAD_HEADER_MAX: usize = 2 + 5 + 8;

/// A snapshot upload (client → host, on a reliable stream of its own): the check turn and
/// the state hash the client reported for it, then the state to the end of the stream.
pub(crate) fn encode_snapshot_upload(turn: Turn, hash: u64, state: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_UPLOAD_HEADER_MAX + state.len());
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_SNAPSHOT);
    put_varint(&mut out, turn.0.into());
    out.put_u64_le(hash);
    out.extend_from_slice(state);
    out
}

/// Parses a snapshot upload: its turn, hash and state.
pub(crate) fn decode_snapshot_upload(bytes: &[u8]) -> Result<(Turn, u64, &[u8]), DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_SNAPSHOT)?;
    let turn = Turn(reader.varint_u32()?);
    let hash = reader.u64_le()?;
    Ok((turn, hash, reader.bytes))
}

/// The turn hashes a desync asks for (client → host, on a reliable stream of its own): the
/// check turn, the first turn listed, then one hash per turn from it.
pub(crate) fn encode_hashes_upload(check: Turn, first: Turn, hashes: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 15 + 8 * hashes.len());
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(KIND_HASHES);
    put_varint(&mut out, check.0.into());
    put_varint(&mut out, first.0.into());
    put_varint(&mut out, hashes.len() as u64);
    for &hash in hashes {
        out.put_u64_le(hash);
    }
    out
}

/// Parses a turn hashes upload: at most `max` hashes, every byte used.
pub(crate) fn decode_hashes_upload(
    bytes: &[u8],
    max: usize,
) -> Result<(Turn, Turn, Vec<u64>), DecodeError> {
    let mut reader = Reader::new(bytes);
    reader.header(KIND_HASHES)?;
    let check = Turn(reader.varint_u32()?);
    let first = Turn(reader.varint_u32()?);
    let count = reader.count("turn hashes", max, 8)?;
    let hashes = (0..count).map(|_| reader.u64_le()).collect::<Result<Vec<_>, _>>()?;
    reader.finish()?;
    if first > check || check.since(first) as usize + 1 < count {
        return Err(DecodeError::Invalid("turn hashes range"));
    }
    Ok((check, first, hashes))
}

/// The kind byte of an upload stream's message (after the version), if it has one.
pub(crate) fn upload_kind(bytes: &[u8]) -> Option<u8> {
    bytes.get(1).copied()
}

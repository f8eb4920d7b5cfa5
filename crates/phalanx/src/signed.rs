//! Signed match records: the host's word on how a match went (who played, the game data, how
//! many turns, the last agreed state hash, how it ended), signed with the host's Ed25519 key
//! and bound to the match's replay by the replay's SHA-256 digest. Anyone holding the host's
//! public key checks a record and its replay without trusting the file's owner: a ladder, a
//! tournament organiser, a player disputing a result.
//!
//! The signature covers a domain tag and the record's canonical (postcard) encoding; the file
//! is [`SignedMatch::to_bytes`]. Verification fails with a typed [`VerifyError`]: a file that
//! does not decode, another format version, another signer, a signature that does not match
//! (any changed byte of the record: a flipped bit, a swapped roster), or a replay that is not
//! the one signed.

use std::fmt;

use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde::{Deserialize, Serialize};

use phalanx_proto::Replay;

/// The signed record format this build writes and reads.
pub const SIGNED_FORMAT_VERSION: u16 = 1;

/// What the signature covers besides the record: no signature made for anything else (a
/// handshake, another format) verifies as a match record.
const DOMAIN: &[u8] = b"phalanx signed match record\0";

/// A seat of the match as the record names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterSeat {
    /// The player id.
    pub player: u8,
    /// Who sat there, as the lobby knows them: a public key, an account id, a digest of the
    /// seat's token (at most [`ROSTER_KEY_BYTES_MAX`] bytes).
    pub key: Vec<u8>,
}

/// The most bytes a [`RosterSeat::key`] holds.
pub const ROSTER_KEY_BYTES_MAX: usize = 256;

/// How a match went, as its host certifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchRecord {
    /// The match's id (the lobby's or the relay's).
    pub match_id: u64,
    /// Every seat, in player order.
    pub roster: Vec<RosterSeat>,
    /// The session's game-data hash (the game's version and rules).
    pub game_data_hash: u64,
    /// The session's protocol version.
    pub protocol_version: u8,
    /// Turns the replay holds (from its first turn).
    pub turns: u32,
    /// The last check turn every player agreed on, and its state hash (`None`: no check turn
    /// was decided).
    pub final_state: Option<(u32, u64)>,
    /// How the match ended, in the words of [`EndReason::name`](crate::proto::EndReason::name)
    /// (`finished`, `desync`...).
    pub end_reason: String,
    /// The game's own end code ([`Host::end`](crate::Host::end)'s), 0 if none.
    pub end_code: u32,
    /// SHA-256 of the replay's canonical encoding ([`replay_digest`]).
    pub replay_digest: [u8; 32],
}

impl MatchRecord {
    /// The record of a match recorded in `replay`: its game-data hash, protocol version,
    /// turns, last decided check and digest come from the replay; the rest from the caller.
    pub fn of_replay(
        match_id: u64,
        roster: Vec<RosterSeat>,
        replay: &Replay,
        end_reason: &str,
        end_code: u32,
    ) -> MatchRecord {
        MatchRecord {
            match_id,
            roster,
            game_data_hash: replay.game_data_hash,
            protocol_version: replay.protocol_version,
            turns: u32::try_from(replay.turns.len()).unwrap_or(u32::MAX),
            final_state: replay.checks.last().copied(),
            end_reason: end_reason.to_owned(),
            end_code,
            replay_digest: replay_digest(replay),
        }
    }
}

/// SHA-256 of `replay`'s canonical (postcard) encoding: equal replays, equal digests.
pub fn replay_digest(replay: &Replay) -> [u8; 32] {
    let bytes = postcard::to_stdvec(replay).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A host's public key for match records: what verifiers hold.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatchKey(pub [u8; 32]);

impl MatchKey {
    /// The key as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        crate::hex32(&self.0)
    }

    /// A key from 64 hex digits (`None`: not that).
    pub fn from_hex(hex: &str) -> Option<MatchKey> {
        crate::parse_hex32(hex).map(MatchKey)
    }
}

impl fmt::Debug for MatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MatchKey({})", self.to_hex())
    }
}

impl fmt::Display for MatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A host's signing key for match records (Ed25519). Keep its [`seed`](Self::seed) secret and
/// stable: verifiers pin the [`public_key`](Self::public_key).
pub struct MatchSigner {
    pair: Ed25519KeyPair,
    seed: [u8; 32],
}

impl fmt::Debug for MatchSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatchSigner").field("public_key", &self.public_key()).finish()
    }
}

/// Why a [`MatchSigner`] could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignerError {
    /// The operating system's random source failed.
    Random,
    /// The seed is not an Ed25519 secret key.
    BadSeed,
}

impl fmt::Display for SignerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignerError::Random => "the system's random source failed",
            SignerError::BadSeed => "not an Ed25519 secret key",
        })
    }
}

impl std::error::Error for SignerError {}

impl MatchSigner {
    /// A fresh key from the operating system's random source.
    pub fn generate() -> Result<MatchSigner, SignerError> {
        let mut seed = [0; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
            .map_err(|_| SignerError::Random)?;
        MatchSigner::from_seed(seed)
    }

    /// The key of a stored secret seed.
    pub fn from_seed(seed: [u8; 32]) -> Result<MatchSigner, SignerError> {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|_| SignerError::BadSeed)?;
        Ok(MatchSigner { pair, seed })
    }

    /// The secret seed, to store (as the host's key file).
    pub fn seed(&self) -> [u8; 32] {
        self.seed
    }

    /// The public key verifiers pin.
    pub fn public_key(&self) -> MatchKey {
        let mut key = [0; 32];
        key.copy_from_slice(self.pair.public_key().as_ref());
        MatchKey(key)
    }

    /// `record`, signed.
    pub fn sign(&self, record: MatchRecord) -> SignedMatch {
        let signature = self.pair.sign(&signed_bytes(&record)).as_ref().to_vec();
        SignedMatch {
            format_version: SIGNED_FORMAT_VERSION,
            signer: self.public_key(),
            record,
            signature,
        }
    }
}

/// The bytes a signature covers: the domain tag, then the record's encoding.
fn signed_bytes(record: &MatchRecord) -> Vec<u8> {
    let mut bytes = DOMAIN.to_vec();
    bytes.extend(postcard::to_stdvec(record).unwrap_or_default());
    bytes
}

/// A signed match record, as its file holds it ([`to_bytes`](Self::to_bytes)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedMatch {
    /// [`SIGNED_FORMAT_VERSION`] when written.
    pub format_version: u16,
    /// Who signed (checked against the key the verifier holds).
    pub signer: MatchKey,
    /// What was signed.
    pub record: MatchRecord,
    /// Ed25519 over the domain tag and the record's encoding.
    pub signature: Vec<u8>,
}

/// Why a signed record or its replay does not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// The bytes are not a signed record (or carry bytes past its end).
    Malformed,
    /// Written in another format version.
    Version {
        /// The file's.
        found: u16,
        /// This build's.
        expected: u16,
    },
    /// Signed by another key than the one the verifier holds.
    WrongSigner {
        /// The key the verifier holds.
        expected: MatchKey,
        /// The file's signer.
        found: MatchKey,
    },
    /// The signature does not match the record: something in it changed after signing.
    BadSignature,
    /// A roster key longer than [`ROSTER_KEY_BYTES_MAX`].
    RosterKeyTooLong,
    /// The replay is not the one the record signs (its digest differs).
    ReplayMismatch,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Malformed => f.write_str("not a signed match record"),
            VerifyError::Version { found, expected } => {
                write!(f, "signed record format {found}, this build reads {expected}")
            }
            VerifyError::WrongSigner { expected, found } => {
                write!(f, "signed by {found}, not by the host's key {expected}")
            }
            VerifyError::BadSignature => f.write_str("the signature does not match the record"),
            VerifyError::RosterKeyTooLong => {
                write!(f, "a roster key over {ROSTER_KEY_BYTES_MAX} bytes")
            }
            VerifyError::ReplayMismatch => {
                f.write_str("the replay is not the one the record signs")
            }
        }
    }
}

impl std::error::Error for VerifyError {}

impl SignedMatch {
    /// The record's file.
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    /// A record read from its file (not verified yet: [`verify`](Self::verify)).
    pub fn from_bytes(bytes: &[u8]) -> Result<SignedMatch, VerifyError> {
        match postcard::take_from_bytes::<SignedMatch>(bytes) {
            Ok((signed, [])) => Ok(signed),
            _ => Err(VerifyError::Malformed),
        }
    }

    /// The record, if `key` signed it as it stands.
    pub fn verify(&self, key: &MatchKey) -> Result<&MatchRecord, VerifyError> {
        if self.format_version != SIGNED_FORMAT_VERSION {
            return Err(VerifyError::Version {
                found: self.format_version,
                expected: SIGNED_FORMAT_VERSION,
            });
        }
        if self.signer != *key {
            return Err(VerifyError::WrongSigner { expected: *key, found: self.signer });
        }
        if self.record.roster.iter().any(|seat| seat.key.len() > ROSTER_KEY_BYTES_MAX) {
            return Err(VerifyError::RosterKeyTooLong);
        }
        UnparsedPublicKey::new(&ED25519, key.0)
            .verify(&signed_bytes(&self.record), &self.signature)
            .map_err(|_| VerifyError::BadSignature)?;
        Ok(&self.record)
    }

    /// The record, if `key` signed it and `replay` is the replay it signs.
    pub fn verify_replay(
        &self,
        key: &MatchKey,
        replay: &Replay,
    ) -> Result<&MatchRecord, VerifyError> {
        let record = self.verify(key)?;
        if record.replay_digest != replay_digest(replay) {
            return Err(VerifyError::ReplayMismatch);
        }
        Ok(record)
    }
}

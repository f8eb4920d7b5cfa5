//! Static X25519 keys, and the seeded randomness handed to snow (no OS randomness here).

use std::fmt;
use std::str::FromStr;

use blake2::digest::consts::U32;
use blake2::digest::{KeyInit, Mac};
use blake2::Blake2sMac;
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};

/// The host's public key: what clients pin (the analogue of the QUIC certificate fingerprint).
///
/// `Display` writes 64 lowercase hex digits (what an invite carries; `FromStr` reads them back);
/// the alternate form `{:#}` writes the first 16 digits and `…`, for logs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPublicKey(pub [u8; 32]);

impl fmt::Display for HostPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if f.alternate() { &self.0[..8] } else { &self.0[..] };
        write_hex(f, shown)?;
        if f.alternate() {
            write!(f, "…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HostPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostPublicKey({self:#})")
    }
}

/// A key string (a [`HostPublicKey`], or a [`HostKey`]'s secret) was not 64 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyParseError;

impl fmt::Display for KeyParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a key is 64 hex digits (X25519)")
    }
}

/// Writes `bytes` as lowercase hex digits.
fn write_hex(out: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|byte| write!(out, "{byte:02x}"))
}

/// Reads 32 bytes from 64 hex digits (surrounding whitespace ignored).
fn parse_hex32(text: &str) -> Result<[u8; 32], KeyParseError> {
    let text = text.trim().as_bytes();
    if text.len() != 64 {
        return Err(KeyParseError);
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
        let digits = std::str::from_utf8(pair).map_err(|_| KeyParseError)?;
        *byte = u8::from_str_radix(digits, 16).map_err(|_| KeyParseError)?;
    }
    Ok(bytes)
}

impl std::error::Error for KeyParseError {}

impl FromStr for HostPublicKey {
    type Err = KeyParseError;

    fn from_str(text: &str) -> Result<HostPublicKey, KeyParseError> {
        parse_hex32(text).map(HostPublicKey)
    }
}

/// A static X25519 key pair. The host's is its identity; a client's is made fresh per join.
///
/// `Debug` shows the public half only.
#[derive(Clone)]
pub struct HostKey {
    secret: [u8; 32],
    public: HostPublicKey,
}

impl HostKey {
    /// The key pair whose secret is `secret`: 32 bytes from a cryptographic random source
    /// (the caller's; this crate draws no randomness), or bytes saved by [`HostKey::to_bytes`].
    /// Any 32 bytes are a valid X25519 secret (they are clamped when used).
    pub fn from_bytes(secret: [u8; 32]) -> HostKey {
        let mut dh = dh25519();
        dh.set(&secret);
        let mut public = [0u8; 32];
        public.copy_from_slice(dh.pubkey());
        HostKey { secret, public: HostPublicKey(public) }
    }

    /// The secret, to save the identity and restore it with [`HostKey::from_bytes`].
    pub fn to_bytes(&self) -> [u8; 32] {
        self.secret
    }

    /// The secret as 64 lowercase hex digits, to keep the identity in a file or hand a seat
    /// its key (it *is* the key: keep it as secret); [`HostKey::from_hex`] reads it back.
    pub fn to_hex(&self) -> String {
        let mut text = String::with_capacity(64);
        // Writing to a String cannot fail.
        let _ = write_hex(&mut text, &self.secret);
        text
    }

    /// The key pair whose secret [`HostKey::to_hex`] wrote (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<HostKey, KeyParseError> {
        parse_hex32(text).map(HostKey::from_bytes)
    }

    /// The public half, which clients pin.
    pub fn public(&self) -> HostPublicKey {
        self.public
    }

    pub(crate) fn secret(&self) -> &[u8; 32] {
        &self.secret
    }
}

impl fmt::Debug for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostKey {{ public: {:#} }}", self.public)
    }
}

fn dh25519() -> Box<dyn Dh> {
    DefaultResolver
        .resolve_dh(&DHChoice::Curve25519)
        .expect("snow is built with the use-curve25519 feature")
}

/// A keyed BLAKE2s of `parts` under `key`, 32 bytes. Used to derive keys from seeds, to expand
/// seeds into a random stream, and (truncated) as the cookie MAC.
pub(crate) fn keyed_hash(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac =
        <Blake2sMac<U32> as KeyInit>::new_from_slice(key).expect("BLAKE2s takes a 32-byte key");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// A deterministic random stream: BLAKE2s(seed, label ‖ counter), 32 bytes per block.
/// snow draws ephemeral keys from it; the seed comes from the caller's random source.
struct SeededRandom {
    seed: [u8; 32],
    counter: u64,
}

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        for chunk in dest.chunks_mut(32) {
            let block = keyed_hash(&self.seed, &[b"phalanx-udp rng", &self.counter.to_le_bytes()]);
            chunk.copy_from_slice(&block[..chunk.len()]);
            self.counter += 1;
        }
        Ok(())
    }
}

/// snow's default primitives, with randomness from a caller-given seed instead of the OS.
pub(crate) struct SeededResolver {
    pub(crate) seed: [u8; 32],
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRandom { seed: self.seed, counter: 0 }))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

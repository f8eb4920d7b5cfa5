//! The browser side of a phalanx match: phalanx's sans-IO client compiled to
//! `wasm32-unknown-unknown`, for a page whose JavaScript moves the bytes over WebTransport
//! (the host listens for browsers with phalanx's `webtransport` feature). The page opens a
//! session to the host's browser port, pinning the certificate hash the lobby gave it, then:
//!
//! 1. `phx_join(token_hi, token_lo)` makes the client and leaves the join request in the I/O
//!    buffer, returning its length; the page reads it from the module's memory at
//!    `phx_io(length)`, writes it on a bidirectional stream and closes its side.
//! 2. The page reads the reply to the end, writes it into the I/O buffer (`phx_io(length)`
//!    gives the address) and calls `phx_join_reply(length, now)`.
//! 3. From then on: each datagram received goes through the I/O buffer into
//!    `phx_datagram(length, now)`; every frame `phx_timeout(now)`, then
//!    `phx_poll_datagram(now)` until it returns -1, sending each datagram it leaves in the I/O
//!    buffer; `phx_wakeup()` says when the next timer is due.
//!
//! `now` is the page's clock in milliseconds (`performance.now()`). The game runs in the same
//! module, through its own exports, taking turns and submitting orders on the client
//! [`with_client`] lends it; turns need not cross to JavaScript.
//!
//! [`Pump`] is all of this as a safe Rust type: the exports drive the module's one pump, and
//! native tests drive a pump the same way.
//!
//! The page's side is `js/phalanx.js` in this crate's directory: an ES module with no build
//! step whose `Session.open(wasm, { url, certificateHash, requestLength })` does steps 1–2
//! and then carries the datagrams and keeps the timers of step 3 (`tick()` and `flush()` each
//! frame). `examples/archers-web` in phalanx's repository is a whole game built this way, and
//! its guide is `docs/guide/browser.md`.

#![deny(unsafe_code)]

use std::cell::RefCell;
use std::fmt;

pub use phalanx_proto::{Client, ClientJoinError, ConfigError, Joined, SessionConfig};

#[cfg(target_arch = "wasm32")]
pub mod exports;

/// The I/O buffer's largest size: a join reply carrying a rejoin's snapshot fits.
pub const IO_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Why a [`Pump`] call failed. Nothing a page or a host sends makes it panic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PumpError {
    /// No client yet: [`Pump::join`] first.
    NoClient,
    /// More bytes than the I/O buffer holds (or may hold: [`IO_BYTES_MAX`]).
    TooLarge {
        /// The length asked for.
        len: usize,
        /// The most there is.
        max: usize,
    },
    /// The session config is not valid.
    Config(ConfigError),
    /// The join did not complete: refused, or a reply that does not decode.
    Join(ClientJoinError),
}

impl fmt::Display for PumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PumpError::NoClient => f.write_str("no client: join first"),
            PumpError::TooLarge { len, max } => write!(f, "{len} bytes: at most {max}"),
            PumpError::Config(error) => write!(f, "session config: {error}"),
            PumpError::Join(error) => write!(f, "join: {error:?}"),
        }
    }
}

impl std::error::Error for PumpError {}

impl PumpError {
    /// The error as the exports return it to a page: -1 no client, -2 too large, -3 bad
    /// config, -4 join refused or unreadable.
    pub fn code(&self) -> i32 {
        match self {
            PumpError::NoClient => -1,
            PumpError::TooLarge { .. } => -2,
            PumpError::Config(_) => -3,
            PumpError::Join(_) => -4,
        }
    }
}

/// The page's clock (`performance.now()`, milliseconds, a float) as the client's: whole
/// milliseconds, 0 for anything negative or not finite. A game's own exports take `now` the
/// same way.
pub fn page_ms(now: f64) -> u64 {
    if now.is_finite() && now > 0.0 {
        now as u64
    } else {
        0
    }
}

/// What a page's glue drives: one client, and the buffer the bytes cross in.
#[derive(Debug, Default)]
pub struct Pump {
    client: Option<Client>,
    io: Vec<u8>,
}

impl Pump {
    /// A pump with no client yet.
    pub fn new() -> Pump {
        Pump::default()
    }

    /// The I/O buffer, made `len` bytes long (zeroed past what it held), for the page to
    /// write into.
    pub fn io_mut(&mut self, len: usize) -> Result<&mut [u8], PumpError> {
        if len > IO_BYTES_MAX {
            return Err(PumpError::TooLarge { len, max: IO_BYTES_MAX });
        }
        self.io.resize(len, 0);
        Ok(&mut self.io)
    }

    /// The I/O buffer as it is.
    pub fn io(&self) -> &[u8] {
        &self.io
    }

    /// A client joining with `token` under `config` (its local settings; the rest comes
    /// from the host's reply). The join request is left in the I/O buffer: its length.
    pub fn join(&mut self, config: SessionConfig, token: u64) -> Result<usize, PumpError> {
        let (client, request) = Client::new(config, token).map_err(PumpError::Config)?;
        self.client = Some(client);
        self.io = request;
        Ok(self.io.len())
    }

    /// The host's join reply: the I/O buffer's first `len` bytes.
    pub fn join_reply(&mut self, now_ms: u64, len: usize) -> Result<Joined, PumpError> {
        let reply = self.io.get(..len).ok_or(PumpError::TooLarge { len, max: self.io.len() })?;
        let client = self.client.as_mut().ok_or(PumpError::NoClient)?;
        client.handle_join_reply(now_ms, reply).map_err(PumpError::Join)
    }

    /// A datagram from the host: the I/O buffer's first `len` bytes (the client drops and
    /// counts bad ones).
    pub fn datagram(&mut self, now_ms: u64, len: usize) -> Result<(), PumpError> {
        let datagram = self.io.get(..len).ok_or(PumpError::TooLarge { len, max: self.io.len() })?;
        let client = self.client.as_mut().ok_or(PumpError::NoClient)?;
        client.handle_datagram(now_ms, datagram);
        Ok(())
    }

    /// Fires the client's due timers (early calls are harmless).
    pub fn timeout(&mut self, now_ms: u64) -> Result<(), PumpError> {
        self.client.as_mut().ok_or(PumpError::NoClient)?.handle_timeout(now_ms);
        Ok(())
    }

    /// The next datagram for the host, left in the I/O buffer: its length (`None`: nothing
    /// to send now).
    pub fn poll_datagram(&mut self, now_ms: u64) -> Result<Option<usize>, PumpError> {
        let client = self.client.as_mut().ok_or(PumpError::NoClient)?;
        Ok(client.poll_transmit(now_ms, &mut self.io).then_some(self.io.len()))
    }

    /// When [`timeout`](Self::timeout) is next due, on the page's clock (`None`: no timer).
    pub fn wakeup_ms(&self) -> Option<u64> {
        self.client.as_ref()?.poll_timeout()
    }

    /// The client, for the game: its turns, its orders, its state hashes.
    pub fn client(&mut self) -> Option<&mut Client> {
        self.client.as_mut()
    }
}

thread_local! {
    /// The module's one pump, which the exports drive.
    static PUMP: RefCell<Pump> = RefCell::new(Pump::new());
}

/// Runs `f` on the module's pump (the exports' and the game's).
pub fn with_pump<R>(f: impl FnOnce(&mut Pump) -> R) -> R {
    PUMP.with(|pump| f(&mut pump.borrow_mut()))
}

/// Runs `f` on the module's client, for the game's own exports: its turns (`next_turn`), its
/// orders (`submit`), its state hashes. `None` before the page joined.
pub fn with_client<R>(f: impl FnOnce(&mut Client) -> R) -> Option<R> {
    with_pump(|pump| pump.client().map(f))
}

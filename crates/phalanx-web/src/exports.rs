//! The exports a page's glue calls (see the [crate docs](crate)), for wasm32 only.
//!
//! The one place in the crate that allows `unsafe_code`, for `#[unsafe(no_mangle)]` alone: a
//! wasm module exports a function by its plain name, and without wasm-bindgen that is the only
//! way. SAFETY (every export below): the `phx_` names are this crate's own; no other symbol of
//! those names is linked into a page's module. There is no `unsafe` block: the page reads and
//! writes the I/O buffer in the module's memory at the address `phx_io` gives, between calls.
//!
//! Lengths and results are `i32` for JavaScript: a negative result is a [`PumpError`] code
//! (-1 no client, -2 too large, -3 bad config, -4 join refused or unreadable).

#![allow(unsafe_code)]

use crate::{page_ms as ms, with_pump, PumpError, SessionConfig};

/// A result as `i32`: the length, or a negative code.
fn length(result: Result<usize, PumpError>) -> i32 {
    match result {
        Ok(len) => i32::try_from(len).unwrap_or(i32::MAX),
        Err(error) => error.code(),
    }
}

/// The I/O buffer made `len` bytes long: its address in the module's memory (0: too long).
#[unsafe(no_mangle)]
pub extern "C" fn phx_io(len: u32) -> u32 {
    with_pump(|pump| match pump.io_mut(len as usize) {
        Ok(io) => io.as_mut_ptr() as usize as u32,
        Err(_) => 0,
    })
}

/// A client joining with the token `hi << 32 | lo` and the default session config: the join
/// request's length in the I/O buffer.
#[unsafe(no_mangle)]
pub extern "C" fn phx_join(token_hi: u32, token_lo: u32) -> i32 {
    let token = u64::from(token_hi) << 32 | u64::from(token_lo);
    length(with_pump(|pump| pump.join(SessionConfig::default(), token)))
}

/// The host's reply, the I/O buffer's first `len` bytes: the player's id (a spectator: 255).
#[unsafe(no_mangle)]
pub extern "C" fn phx_join_reply(len: u32, now: f64) -> i32 {
    match with_pump(|pump| pump.join_reply(ms(now), len as usize)) {
        Ok(phalanx_proto::Joined::Player(player)) => i32::from(player.0),
        Ok(_) => 255,
        Err(error) => error.code(),
    }
}

/// A datagram from the host, the I/O buffer's first `len` bytes: 0, or a negative code.
#[unsafe(no_mangle)]
pub extern "C" fn phx_datagram(len: u32, now: f64) -> i32 {
    length(with_pump(|pump| pump.datagram(ms(now), len as usize).map(|()| 0)))
}

/// Fires the due timers: 0, or a negative code.
#[unsafe(no_mangle)]
pub extern "C" fn phx_timeout(now: f64) -> i32 {
    length(with_pump(|pump| pump.timeout(ms(now)).map(|()| 0)))
}

/// The next datagram for the host, left in the I/O buffer: its length (-1: none now, or no
/// client).
#[unsafe(no_mangle)]
pub extern "C" fn phx_poll_datagram(now: f64) -> i32 {
    match with_pump(|pump| pump.poll_datagram(ms(now))) {
        Ok(Some(len)) => i32::try_from(len).unwrap_or(-2),
        Ok(None) | Err(_) => -1,
    }
}

/// When the next timer is due on the page's clock (-1: none).
#[unsafe(no_mangle)]
pub extern "C" fn phx_wakeup() -> f64 {
    with_pump(|pump| pump.wakeup_ms()).map_or(-1.0, |at| at as f64)
}

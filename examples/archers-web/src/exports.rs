//! The game's exports the page calls (beside phalanx-web's `phx_` exports, which move the
//! datagrams), for wasm32 only. A page:
//!
//! 1. writes the match code (13 characters) into the I/O buffer (`phx_io(13)` gives the
//!    address) and calls `archers_join(13, players, units, seed_hi, seed_lo, turns)`, which
//!    leaves the join request there; after `phx_join_reply` gave the seat,
//!    `archers_start(player, autoplay)`;
//! 2. every frame: `archers_frame(now)`, then `archers_units()` archers at
//!    `archers_units_ptr()` (`army, x, y` as 32-bit integers) to draw; a click:
//!    `archers_order(x, y, now)` in world units;
//! 3. at the end, `archers_report()`: a JSON object of that length in the I/O buffer.
//!
//! The one module of the crate that allows `unsafe_code`, for `#[unsafe(no_mangle)]` alone.
//! SAFETY (every export below): the `archers_` names are this crate's own; no other symbol of
//! those names is linked into the page's module. There is no `unsafe` block.
//!
//! A negative result: -1 no game (or no client), -2 too large, -3 bad rules, -4 join refused,
//! -5 a match code that does not read.

#![allow(unsafe_code)]

use std::cell::RefCell;

use archers::rules::Match;
use phalanx_proto::{JoinCode, PlayerId};
use phalanx_web::{page_ms as ms, with_pump};

use crate::Game;

thread_local! {
    /// The rules `archers_join` was given, until `archers_start`.
    static RULES: RefCell<Option<Match>> = const { RefCell::new(None) };
    /// The module's one game.
    static GAME: RefCell<Option<Game>> = const { RefCell::new(None) };
    /// The archers handed to the page, `army, x, y` at a time.
    static UNITS: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the game and the pump's client: `None` before both exist.
fn with_game<R>(f: impl FnOnce(&mut Game, &mut phalanx_proto::Client) -> R) -> Option<R> {
    GAME.with(|game| {
        let mut game = game.borrow_mut();
        let game = game.as_mut()?;
        with_pump(|pump| pump.client().map(|client| f(game, client)))
    })
}

/// Joins with the match code in the I/O buffer's first `code_len` bytes, for the match of
/// these rules (host and page must agree: they are folded into the game-data hash): the join
/// request's length in the I/O buffer, or a negative code.
#[unsafe(no_mangle)]
pub extern "C" fn archers_join(
    code_len: u32,
    players: u32,
    units: u32,
    seed_hi: u32,
    seed_lo: u32,
    turns: u32,
) -> i32 {
    let code = with_pump(|pump| {
        let code = pump.io().get(..code_len as usize)?;
        std::str::from_utf8(code).ok()?.parse::<JoinCode>().ok()
    });
    let Some(JoinCode(token)) = code else { return -5 };
    if !(2..=8).contains(&players) || units < players || units > 60_000 || turns == 0 {
        return -3;
    }
    let rules = Match {
        players: players as usize,
        units: units as usize,
        seed: u64::from(seed_hi) << 32 | u64::from(seed_lo),
        turns,
    };
    RULES.with(|stash| *stash.borrow_mut() = Some(rules));
    match with_pump(|pump| pump.join(rules.session(), token)) {
        Ok(len) => i32::try_from(len).unwrap_or(-2),
        Err(error) => error.code(),
    }
}

/// Starts the game of `player` (what `phx_join_reply` returned); `autoplay` non-zero: a bot
/// gives the orders. 0, or -1 without `archers_join` first.
#[unsafe(no_mangle)]
pub extern "C" fn archers_start(player: u32, autoplay: u32) -> i32 {
    let Some(rules) = RULES.with(|stash| *stash.borrow()) else { return -1 };
    let Ok(player) = u8::try_from(player) else { return -1 };
    GAME.with(|game| *game.borrow_mut() = Some(Game::new(rules, PlayerId(player), autoplay != 0)));
    0
}

/// Takes the turns due at `now`: how many, or -1 (no game).
#[unsafe(no_mangle)]
pub extern "C" fn archers_frame(now: f64) -> i32 {
    with_game(|game, client| game.frame(client, ms(now)))
        .map_or(-1, |taken| i32::try_from(taken).unwrap_or(i32::MAX))
}

/// The player's army attack-moves to `(x, y)` (world units): 1 taken, 0 not, -1 no game.
#[unsafe(no_mangle)]
pub extern "C" fn archers_order(x: i32, y: i32, now: f64) -> i32 {
    with_game(|game, client| game.order_at(client, ms(now), x, y)).map_or(-1, i32::from)
}

/// The living archers, gathered for drawing: how many (`army, x, y` each, at
/// `archers_units_ptr()`).
#[unsafe(no_mangle)]
pub extern "C" fn archers_units() -> u32 {
    UNITS.with(|units| {
        let mut units = units.borrow_mut();
        units.clear();
        GAME.with(|game| {
            if let Some(game) = game.borrow().as_ref() {
                game.units(&mut units);
            }
        });
        (units.len() / 3) as u32
    })
}

/// Where the archers `archers_units` gathered are, in the module's memory.
#[unsafe(no_mangle)]
pub extern "C" fn archers_units_ptr() -> u32 {
    UNITS.with(|units| units.borrow().as_ptr() as usize as u32)
}

/// Turns of the match executed so far (0 before the game starts).
#[unsafe(no_mangle)]
pub extern "C" fn archers_turns() -> u32 {
    GAME.with(|game| game.borrow().as_ref().map_or(0, |game| game.played().turns))
}

/// 1 once the session ended, 0 before.
#[unsafe(no_mangle)]
pub extern "C" fn archers_ended() -> i32 {
    GAME.with(|game| {
        game.borrow().as_ref().is_some_and(|game| game.played().ended.is_some()).into()
    })
}

/// The game's report ([`Game::report`]) left in the I/O buffer: its length, or -1 (no game).
#[unsafe(no_mangle)]
pub extern "C" fn archers_report() -> i32 {
    let Some(report) = GAME.with(|game| game.borrow().as_ref().map(Game::report)) else {
        return -1;
    };
    with_pump(|pump| match pump.io_mut(report.len()) {
        Ok(io) => {
            io.copy_from_slice(report.as_bytes());
            i32::try_from(report.len()).unwrap_or(-2)
        }
        Err(_) => -2,
    })
}

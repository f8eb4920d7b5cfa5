//! The archers battle in a browser: the demo's deterministic [`World`] and [`Bot`] on
//! phalanx's sans-IO client (through [`phalanx_web`]), compiled to `wasm32-unknown-unknown`
//! and drawn by `page/archers.js` in a canvas. `archers serve` builds this module, serves the
//! page and hosts the match; the page's WebTransport glue is phalanx-web's `js/phalanx.js`.
//!
//! [`Game`] is one browser player's side as a safe Rust type (native tests drive it the same
//! way); `exports` (wasm32 only) are the few functions the page calls, on the module's one game.
//! Turns never cross to JavaScript: the page moves datagrams, calls
//! `archers_frame(performance.now())` once a frame and draws the archers it is handed.

#![deny(unsafe_code)]

use std::fmt::Write as _;

use archers::bot::Bot;
use archers::rules::Match;
use archers::world::{Order, World};
use phalanx_proto::{
    Client, ClientEvent, CommandCodec, DefaultCodec, PlayerId, TypedRecord, TypedTurn,
};

#[cfg(target_arch = "wasm32")]
pub mod exports;

/// One browser player's game: the battle as this player sees it, and what it did.
#[derive(Debug)]
pub struct Game {
    rules: Match,
    world: World,
    player: PlayerId,
    bot: Option<Bot>,
    played: Played,
}

/// What a [`Game`] saw and did, for its report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Played {
    /// Turns of the match executed.
    pub turns: u32,
    /// Orders executed (every player's).
    pub executed: u64,
    /// Orders this player submitted (accepted by the client).
    pub submitted: u64,
    /// The state hash after the last turn executed.
    pub final_state_hash: u64,
    /// Desync reports the host sent.
    pub desyncs: u32,
    /// How the session ended (`finished` after the match's last turn), once it has.
    pub ended: Option<&'static str>,
    /// Order latency (submitted to executed), milliseconds: p50, p95, max, as the client
    /// measures it.
    pub latency_ms: Option<(u32, u32, u32)>,
    /// Time spent waiting for turns, milliseconds.
    pub stall_ms: u64,
}

impl Game {
    /// `player`'s game in `rules`. `autoplay`: a bot gives this player's orders, as the demo's
    /// native bots do (a headless page plays that way); otherwise the page's clicks do.
    pub fn new(rules: Match, player: PlayerId, autoplay: bool) -> Game {
        let quiet_from = rules.turns.saturating_sub(30);
        Game {
            world: World::new(rules.players, rules.units, rules.seed),
            bot: autoplay.then(|| Bot::new(player, rules.players, rules.seed, quiet_from)),
            rules,
            player,
            played: Played::default(),
        }
    }

    /// Takes every turn due at `now_ms` from `client` (executing it, reporting the state hash
    /// on check turns, submitting the bot's orders) and the client's events: the turns taken.
    /// After the session ended, the turns already delivered are still taken.
    pub fn frame(&mut self, client: &mut Client, now_ms: u64) -> u32 {
        let mut taken = 0;
        loop {
            let before = taken;
            while let Some(bundle) = client.next_turn(now_ms) {
                self.take(client, now_ms, &TypedTurn::decode::<DefaultCodec>(bundle));
                taken += 1;
            }
            while let Some(event) = client.poll_event() {
                match event {
                    ClientEvent::Desync(_) => self.played.desyncs += 1,
                    ClientEvent::Ended(reason) => self.played.ended = Some(reason.name()),
                    _ => {}
                }
            }
            if taken == before {
                break;
            }
        }
        let stats = client.stats();
        if let (Some(p50), Some(p95)) = (stats.latency_ms_p50, stats.latency_ms_p95) {
            self.played.latency_ms = Some((p50, p95, stats.latency_ms_max.unwrap_or(p95)));
        }
        self.played.stall_ms = stats.stall_ms;
        taken
    }

    /// Executes one turn, as the native client does.
    fn take(&mut self, client: &mut Client, now_ms: u64, turn: &TypedTurn<Order>) {
        if turn.turn.0 >= self.rules.turns {
            // The turn that carries the end: nothing of the match's is left in it.
            return;
        }
        self.world.execute(turn);
        self.played.turns += 1;
        self.played.executed += turn
            .records
            .iter()
            .filter(|record| matches!(record, TypedRecord::Command { .. }))
            .count() as u64;
        let hash = self.world.state_hash();
        self.played.final_state_hash = hash;
        if turn.turn.0.is_multiple_of(client.config().sync.interval_turns.max(1)) {
            client.report_state_hash(turn.turn, hash);
        }
        if turn.turn.0 + 1 >= self.rules.turns {
            return;
        }
        if let Some(bot) = &mut self.bot {
            for order in bot.orders(turn.turn, &self.world) {
                self.submit(client, now_ms, &order);
            }
        }
    }

    /// Submits `order`: whether the client took it.
    fn submit(&mut self, client: &mut Client, now_ms: u64, order: &Order) -> bool {
        let taken = DefaultCodec::encode(order)
            .is_ok_and(|payload| client.submit(now_ms, &payload).is_ok());
        self.played.submitted += u64::from(taken);
        taken
    }

    /// The player's order from the page: its whole army attack-moves to `(x, y)` (world
    /// units, clamped to the map by the battle). Whether the client took it (not once the
    /// session is over, nor past the budget of orders in flight).
    pub fn order_at(&mut self, client: &mut Client, now_ms: u64, x: i32, y: i32) -> bool {
        let (first, count, _) = self.world.army(self.player);
        self.submit(client, now_ms, &Order::AttackMove { first, count, x, y })
    }

    /// The living archers as `army, x, y` triples (world units), appended to `out`.
    pub fn units(&self, out: &mut Vec<i32>) {
        for (army, x, y) in self.world.living() {
            out.extend([i32::from(army), x, y]);
        }
    }

    /// The player this game plays.
    pub fn player(&self) -> PlayerId {
        self.player
    }

    /// What it saw and did so far.
    pub fn played(&self) -> &Played {
        &self.played
    }

    /// [`played`](Self::played) as one JSON object (the page adds its frame times and sends
    /// it to `archers serve`). Hashes are hex strings: JavaScript's numbers hold 53 bits.
    pub fn report(&self) -> String {
        let played = &self.played;
        let mut json = format!(
            "{{\"player\":{},\"turns\":{},\"executed\":{},\"submitted\":{},\
             \"final_state_hash\":\"{:016x}\",\"desyncs\":{},\"stall_ms\":{}",
            self.player.0,
            played.turns,
            played.executed,
            played.submitted,
            played.final_state_hash,
            played.desyncs,
            played.stall_ms
        );
        match played.ended {
            Some(reason) => {
                let _ = write!(json, ",\"ended\":\"{reason}\"");
            }
            None => json.push_str(",\"ended\":null"),
        }
        match played.latency_ms {
            Some((p50, p95, max)) => {
                let _ = write!(
                    json,
                    ",\"latency_ms_p50\":{p50},\"latency_ms_p95\":{p95},\"latency_ms_max\":{max}"
                );
            }
            None => json.push_str(",\"latency_ms_p50\":null,\"latency_ms_p95\":null"),
        }
        json.push('}');
        json
    }
}

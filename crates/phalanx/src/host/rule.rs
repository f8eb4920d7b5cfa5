//! The game's rule for the commands a host lets into its turns.

use std::sync::Arc;

use phalanx_proto::{CommandCodec, DefaultCodec, PlayerId};
use serde::de::DeserializeOwned;

/// A game's rule for commands, set in [`HostOptions::command_rule`](crate::HostOptions): the
/// host asks it before any command enters an open turn, its own player's and every client's.
/// A refused command is never sealed (no game executes it, no replay holds it, so it cannot
/// desync anyone), is counted (`HostStats::commands_refused`, and per client
/// `PeerStats::drops.refused`), raises [`Event::CommandRefused`](crate::Event), and is an
/// offence of the client's: past
/// `link.misbehaviour_max` offences the client is removed ([`Event::PlayerMisbehaved`](crate::Event)).
/// The host's own player's refused command is a
/// [`SubmitError::Refused`](phalanx_proto::SubmitError::Refused).
///
/// Refuse what an honest client never sends: a payload that does not decode, a unit id out of
/// range, an order for another player's units. An order the game may make moot before it
/// executes (its unit dies on the way) is for the simulation to ignore, deterministically. The
/// client is told: its session raises [`Event::CommandRefused`](crate::Event) with its own
/// player. The rule runs on the host's driver task for every command: keep it short.
///
/// ```
/// use phalanx::{CommandRule, PlayerId};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// enum Order {
///     Move { unit: u16, x: i32, y: i32 },
///     Stop { unit: u16 },
/// }
///
/// /// Each player owns units `100 × seat .. 100 × seat + 100`.
/// fn owns(player: PlayerId, unit: u16) -> bool {
///     unit / 100 == u16::from(player.0)
/// }
///
/// let rule = CommandRule::new(|player, order: &Order| match *order {
///     Order::Move { unit, .. } | Order::Stop { unit } => owns(player, unit),
/// });
/// let stop = |unit| postcard::to_allocvec(&Order::Stop { unit }).unwrap();
/// assert!(rule.admits(PlayerId(1), &stop(150)));
/// assert!(!rule.admits(PlayerId(1), &stop(250)), "seat 2's unit");
/// assert!(!rule.admits(PlayerId(1), &[9, 9, 9]), "does not decode");
/// ```
#[derive(Clone)]
pub struct CommandRule(Arc<RuleFn>);

/// The rule over a payload's bytes: `false` refuses `player`'s command.
type RuleFn = dyn Fn(PlayerId, &[u8]) -> bool + Send + Sync;

impl CommandRule {
    /// A rule over the game's commands, decoded with the default codec (postcard): a payload
    /// that does not decode as `C` is refused; `rule` decides the rest.
    pub fn new<C: DeserializeOwned>(
        rule: impl Fn(PlayerId, &C) -> bool + Send + Sync + 'static,
    ) -> CommandRule {
        CommandRule::with_codec::<C, DefaultCodec>(rule)
    }

    /// [`new`](Self::new) for a host whose commands use the game's own codec `K`.
    pub fn with_codec<C: DeserializeOwned, K: CommandCodec>(
        rule: impl Fn(PlayerId, &C) -> bool + Send + Sync + 'static,
    ) -> CommandRule {
        CommandRule::bytes(move |player, payload| {
            K::decode::<C>(payload).is_ok_and(|command| rule(player, &command))
        })
    }

    /// A rule over the payload's bytes, undecoded.
    pub fn bytes(rule: impl Fn(PlayerId, &[u8]) -> bool + Send + Sync + 'static) -> CommandRule {
        CommandRule(Arc::new(rule))
    }

    /// Whether the rule lets `player`'s command `payload` in.
    pub fn admits(&self, player: PlayerId, payload: &[u8]) -> bool {
        (self.0)(player, payload)
    }
}

impl std::fmt::Debug for CommandRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandRule")
    }
}

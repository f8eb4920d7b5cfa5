//! A game's rule for the commands a relay lets into its matches' turns.

use std::sync::Arc;

use phalanx_proto::PlayerId;

use crate::MatchId;

/// The rule over a match's commands: `false` refuses `player`'s command `payload`.
type RuleFn = dyn Fn(MatchId, PlayerId, &[u8]) -> bool + Send + Sync;

/// A game's rule for commands, for every match of a relay ([`RelayConfig::command_rule`](crate::RelayConfig),
/// or [`Shard::set_command_rule`](crate::Shard::set_command_rule)): each match's host asks it
/// before a command enters a turn, as a game's own host asks `phalanx::CommandRule`. A
/// refused command is never sealed, is counted ([`Metrics::commands_refused`](crate::Metrics))
/// and is an offence of its player's: past `link.misbehaviour_max` offences the player is
/// removed. A relay runs no game, so the rule sees the payload's bytes: decode them with the
/// game's command type and codec (a relay serving one game), or look the match up by its id.
/// It runs on the worker's thread for every command: keep it short. Set in code by a server
/// that embeds the relay; the `phalanx-relay` binary sets none.
///
/// ```
/// use phalanx_relay::CommandRule;
///
/// // Commands of at most 16 bytes whose first byte names a known order (0 to 3).
/// let rule = CommandRule::new(|_match, _player, payload| {
///     payload.len() <= 16 && payload.first().is_some_and(|&kind| kind < 4)
/// });
/// # let _ = rule;
/// ```
#[derive(Clone)]
pub struct CommandRule(Arc<RuleFn>);

impl CommandRule {
    /// A rule over a match's id, the player and the command's bytes.
    pub fn new(rule: impl Fn(MatchId, PlayerId, &[u8]) -> bool + Send + Sync + 'static) -> Self {
        CommandRule(Arc::new(rule))
    }

    /// Whether the rule lets `player`'s command `payload` into match `id`.
    pub fn admits(&self, id: MatchId, player: PlayerId, payload: &[u8]) -> bool {
        (self.0)(id, player, payload)
    }
}

impl std::fmt::Debug for CommandRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommandRule")
    }
}

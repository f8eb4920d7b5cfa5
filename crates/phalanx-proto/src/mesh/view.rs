//! Departures: how the peers agree that a peer is gone, and on its last turn.
//!
//! A peer can crash after its contribution to turn `t` reached some peers and not others.
//! Those that hold it may execute `t`; so the gone peer's last turn must be at least the
//! highest turn any survivor holds of it, and every survivor must be handed what it lacks
//! before it executes further. The master does this in a view change:
//!
//! 1. **Freeze** (master → every survivor, repeated until answered): stop taking the gone
//!    peers' contributions. It states what the master holds of each.
//! 2. **Frozen** (survivor → master, repeated until the decision): what the survivor holds of
//!    each gone peer, and the contributions the master lacks. Frozen, a survivor's holdings
//!    cannot grow, so the highest of them bounds every turn anyone executed with the peer.
//! 3. **Drop** (master → every survivor, repeated until acknowledged): each gone peer's last
//!    turn (the highest holding), with the contributions that survivor lacks. Every survivor
//!    executes the same turns with the same contributions and puts the peer's `Left` record
//!    in the turn after its last.
//! 4. **DropAck** (survivor → master): it holds everything through the last turns.
//!
//! A survivor answers a Freeze only from the lowest peer outside its gone list, with a view
//! number above any it answered, and only if it too has heard nothing from every gone peer
//! lower than the proposer (so a peer cut off from the master alone cannot depose it). A
//! decision needs every survivor's answer; a survivor that does not answer is silent, so it is
//! added to the gone list in a later view. Decisions already made are part of every later
//! view with their last turns fixed. A master whose survivors are not a majority of the match
//! (or exactly half without its lowest player) ends instead: the other side may be playing on.

use std::collections::BTreeMap;

use crate::types::{PlayerId, Turn};
use crate::wire::{ViewItem, ViewKind, ViewMsg};

use super::pair::Status;
use super::peer::{Peer, State};
use super::types::{PeerEnd, PeerEvent};

/// A peer's side of view changes.
#[derive(Debug, Default)]
pub(crate) struct Views {
    /// The highest view we proposed or answered.
    promised: u32,
    /// As master: our proposal.
    proposal: Option<Proposal>,
    /// As survivor: the view we answered.
    answer: Option<Answer>,
    /// Every departure decided so far, with its last turn: fixed in every later view.
    decided: BTreeMap<PlayerId, Option<Turn>>,
}

#[derive(Debug)]
struct Proposal {
    view: u32,
    gone: Vec<PlayerId>,
    survivors: Vec<PlayerId>,
    /// Each survivor's holdings of each gone peer (in `gone`'s order).
    answers: BTreeMap<PlayerId, Vec<Option<Turn>>>,
    /// The last turns, once decided.
    lasts: Option<Vec<Option<Turn>>>,
    /// Survivors known to hold everything through the last turns.
    complete: Vec<PlayerId>,
}

#[derive(Debug)]
struct Answer {
    master: PlayerId,
    view: u32,
    gone: Vec<PlayerId>,
    /// What the master said it holds of each gone peer.
    master_holds: Vec<Option<Turn>>,
    /// Set once the Drop arrived.
    lasts: Option<Vec<Option<Turn>>>,
    /// A DropAck is owed.
    ack_due: bool,
}

impl Peer {
    /// The lowest player we still hear, us included: the master we would follow or be.
    pub(crate) fn candidate(&self) -> PlayerId {
        self.pairs
            .iter()
            .filter(|pair| pair.is_in() && !pair.doubted() && pair.player < self.me)
            .map(|pair| pair.player)
            .next()
            .unwrap_or(self.me)
    }

    /// Whether the peers we still hear (and we) are a majority of those in the match.
    fn has_majority(&self, reachable: &[PlayerId], members: &[PlayerId]) -> bool {
        let (r, m) = (reachable.len(), members.len());
        r * 2 > m || (r * 2 == m && members.first().is_some_and(|low| reachable.contains(low)))
    }

    fn members(&self) -> Vec<PlayerId> {
        let mut members: Vec<PlayerId> =
            self.pairs.iter().filter(|p| p.is_in()).map(|p| p.player).collect();
        let at = members.partition_point(|&p| p < self.me);
        members.insert(at, self.me);
        members
    }

    /// The time's part in view changes: quorum, and the master's proposal.
    pub(crate) fn view_tick(&mut self, now_ms: u64) {
        if self.state != State::Running {
            return;
        }
        let members = self.members();
        let reachable: Vec<PlayerId> = members
            .iter()
            .copied()
            .filter(|&p| {
                p == self.me || self.pair_index(p).is_some_and(|i| !self.pairs[i].doubted())
            })
            .collect();
        if !self.has_majority(&reachable, &members) {
            self.end_with(PeerEnd::LostMajority, now_ms);
            return;
        }
        if self.candidate() != self.me {
            if self.views.proposal.as_ref().is_some_and(|p| p.lasts.is_none()) {
                self.views.proposal = None;
            }
            return;
        }
        let wanted = self.wanted_gone(now_ms);
        let busy = self.views.proposal.as_ref().map(|p| (p.lasts.is_some(), p.gone.clone()));
        match busy {
            None if !wanted.is_empty() => self.propose(wanted),
            Some((false, gone)) if gone != self.with_decided(&wanted) && !wanted.is_empty() => {
                self.propose(wanted);
            }
            Some((true, _)) if !wanted.is_empty() => self.propose(wanted),
            _ => {}
        }
        self.try_decide(now_ms);
        if let Some(proposal) = &self.views.proposal {
            if proposal.lasts.is_some()
                && proposal.survivors.iter().all(|s| proposal.complete.contains(s))
            {
                self.views.proposal = None;
            }
        }
    }

    /// The peers the master would drop now: those it has not heard from or that broke the
    /// rules, a peer two or more others report they cannot hear (or that broke their rules),
    /// the higher of a pair that reports only each other, and a peer that cannot hear us. A
    /// report counts once it has held for half the idle timeout (the others' reports of the
    /// same peer arrive meanwhile), and only while we hear both peers: one silent to us too,
    /// or that we doubt ourselves, is left to our own judgement.
    fn wanted_gone(&self, now_ms: u64) -> Vec<PlayerId> {
        let fresh = u64::from(self.config.link.idle_timeout_ms) / 2;
        let heard = |p: &super::pair::Pair| p.heard_ms.is_some_and(|h| now_ms < h + fresh);
        let mut wanted = Vec::new();
        let mut accused: BTreeMap<PlayerId, Vec<PlayerId>> = BTreeMap::new();
        for pair in self.pairs.iter().filter(|p| p.is_in()) {
            if pair.doubted() {
                wanted.push(pair.player);
                continue;
            }
            if now_ms < pair.report_since_ms + fresh {
                continue;
            }
            let others = self.pairs.iter().filter(|o| o.is_in() && o.player != pair.player);
            let others = others.filter(|o| heard(o) && !o.doubted()).map(|o| o.player);
            for other in others.chain([self.me]) {
                if pair.report.suspects & (1 << other.0) != 0 {
                    accused.entry(other).or_default().push(pair.player);
                }
            }
        }
        for (player, accusers) in accused {
            match accusers.as_slice() {
                _ if player == self.me => wanted.extend(accusers),
                [one] => wanted.push(player.max(*one)),
                _ => wanted.push(player),
            }
        }
        wanted.sort_unstable();
        wanted.dedup();
        wanted
    }

    /// `wanted` and every departure decided before, sorted.
    fn with_decided(&self, wanted: &[PlayerId]) -> Vec<PlayerId> {
        let mut gone: Vec<PlayerId> = wanted.to_vec();
        gone.extend(self.views.decided.keys().copied());
        gone.sort_unstable();
        gone.dedup();
        gone
    }

    fn propose(&mut self, wanted: Vec<PlayerId>) {
        let gone = self.with_decided(&wanted);
        let survivors: Vec<PlayerId> = self
            .pairs
            .iter()
            .filter(|p| p.is_in() && !gone.contains(&p.player))
            .map(|p| p.player)
            .collect();
        self.views.promised += 1;
        self.views.answer = None;
        for pair in &mut self.pairs {
            if pair.status == Status::Live && gone.contains(&pair.player) {
                pair.status = Status::Frozen;
            }
            pair.send_due |= survivors.contains(&pair.player);
        }
        self.views.proposal = Some(Proposal {
            view: self.views.promised,
            gone,
            survivors,
            answers: BTreeMap::new(),
            lasts: None,
            complete: Vec::new(),
        });
    }

    /// Decides the proposal once every survivor answered and we hold every gone peer's
    /// contributions through the highest holding.
    fn try_decide(&mut self, now_ms: u64) {
        let Some(proposal) = &self.views.proposal else { return };
        if proposal.lasts.is_some()
            || !proposal.survivors.iter().all(|s| proposal.answers.contains_key(s))
        {
            return;
        }
        let mut lasts = Vec::with_capacity(proposal.gone.len());
        for (i, &gone) in proposal.gone.iter().enumerate() {
            let Some(index) = self.pair_index(gone) else { return };
            let mine = self.pairs[index].have;
            let last = match self.views.decided.get(&gone) {
                Some(&fixed) => fixed,
                None => proposal.answers.values().map(|holds| holds[i]).fold(mine, Option::max),
            };
            if self.pairs[index].is_in() && mine < last {
                return; // a survivor's tail is still on its way
            }
            lasts.push(last);
        }
        let mut reachable = proposal.survivors.clone();
        reachable.push(self.me);
        reachable.sort_unstable();
        if !self.has_majority(&reachable, &self.members()) {
            self.end_with(PeerEnd::LostMajority, now_ms);
            return;
        }
        let gone = proposal.gone.clone();
        self.apply_drops(&gone, &lasts);
        if let Some(proposal) = &mut self.views.proposal {
            proposal.lasts = Some(lasts);
        }
    }

    /// Marks each gone peer gone with its last turn (once), and tells the game.
    fn apply_drops(&mut self, gone: &[PlayerId], lasts: &[Option<Turn>]) {
        for (&player, &last) in gone.iter().zip(lasts) {
            self.views.decided.entry(player).or_insert(last);
            let Some(index) = self.pair_index(player) else { continue };
            if self.pairs[index].is_in() {
                self.pairs[index].status = Status::Gone { last };
                self.events.push(PeerEvent::PeerGone { player, last });
            }
        }
    }

    /// A view message from `index`'s peer.
    pub(crate) fn on_view(&mut self, _now_ms: u64, index: usize, msg: ViewMsg) {
        let sender = self.pairs[index].player;
        match msg.kind {
            ViewKind::Freeze => self.on_freeze(index, sender, &msg),
            ViewKind::Frozen => {
                let Some(proposal) = &self.views.proposal else { return };
                if proposal.view != msg.view || !proposal.survivors.contains(&sender) {
                    return;
                }
                let gone = proposal.gone.clone();
                let holds = self.absorb(&gone, &msg.items);
                if let Some(proposal) = &mut self.views.proposal {
                    proposal.answers.insert(sender, holds);
                }
            }
            ViewKind::Drop => self.on_drop(index, sender, &msg),
            ViewKind::DropAck => {
                let Some(proposal) = &mut self.views.proposal else { return };
                let Some(lasts) = &proposal.lasts else { return };
                if proposal.view != msg.view || msg.items.len() != lasts.len() {
                    return;
                }
                let holds: Vec<Option<Turn>> = msg.items.iter().map(|item| item.turn).collect();
                let done = holds.iter().zip(lasts).all(|(holds, last)| holds >= last);
                proposal.answers.insert(sender, holds);
                if done && !proposal.complete.contains(&sender) {
                    proposal.complete.push(sender);
                }
            }
            ViewKind::Behind => {
                // Our proposal's number is stale: propose again above it.
                if self.views.proposal.as_ref().is_some_and(|p| p.lasts.is_none())
                    && msg.view >= self.views.promised
                {
                    self.views.promised = msg.view;
                    let wanted =
                        self.views.proposal.as_ref().map(|p| p.gone.clone()).unwrap_or_default();
                    self.propose(wanted);
                }
            }
        }
    }

    fn on_freeze(&mut self, index: usize, sender: PlayerId, msg: &ViewMsg) {
        let gone: Vec<PlayerId> = msg.items.iter().map(|item| item.player).collect();
        if gone.contains(&self.me) {
            return;
        }
        if msg.view < self.views.promised {
            // A proposer that missed a later view: tell it the number to beat.
            self.pairs[index].behind_due = true;
            return;
        }
        let lowest_outside =
            self.members().into_iter().find(|p| !gone.contains(p)).unwrap_or(self.me);
        let lower_all_silent = gone.iter().filter(|&&q| q < sender).all(|&q| {
            self.pair_index(q).is_none_or(|i| self.pairs[i].doubted() || !self.pairs[i].is_in())
        });
        if sender != lowest_outside || !lower_all_silent {
            return;
        }
        let holds: Vec<Option<Turn>> = msg.items.iter().map(|item| item.turn).collect();
        match &mut self.views.answer {
            Some(answer) if answer.view == msg.view && answer.master == sender => {
                answer.master_holds = holds;
            }
            _ if msg.view == self.views.promised => return,
            _ => {
                self.views.promised = msg.view;
                self.views.proposal = None;
                self.views.answer = Some(Answer {
                    master: sender,
                    view: msg.view,
                    gone: gone.clone(),
                    master_holds: holds,
                    lasts: None,
                    ack_due: false,
                });
                for pair in &mut self.pairs {
                    match pair.status {
                        Status::Live if gone.contains(&pair.player) => pair.status = Status::Frozen,
                        Status::Frozen if !gone.contains(&pair.player) => {
                            pair.status = Status::Live
                        }
                        _ => {}
                    }
                }
            }
        }
        self.pairs[index].send_due = true;
    }

    fn on_drop(&mut self, index: usize, sender: PlayerId, msg: &ViewMsg) {
        let Some(answer) = &self.views.answer else { return };
        if answer.view != msg.view
            || answer.master != sender
            || msg.items.len() != answer.gone.len()
        {
            return;
        }
        let gone = answer.gone.clone();
        if msg.items.iter().zip(&gone).any(|(item, q)| item.player != *q) {
            return;
        }
        self.absorb(&gone, &msg.items);
        let lasts: Vec<Option<Turn>> = msg.items.iter().map(|item| item.turn).collect();
        if self.views.answer.as_ref().is_some_and(|a| a.lasts.is_none()) {
            self.apply_drops(&gone, &lasts);
        }
        if let Some(answer) = &mut self.views.answer {
            answer.lasts = Some(lasts);
            answer.ack_due = true;
        }
        self.pairs[index].send_due = true;
    }

    /// Takes the gone peers' contributions a view message carries (each item's entries cover
    /// the turns after what the sender was told we hold, through `upto`); returns what the
    /// sender says it holds of each.
    fn absorb(&mut self, gone: &[PlayerId], items: &[ViewItem]) -> Vec<Option<Turn>> {
        let mut holds = vec![None; gone.len()];
        for item in items {
            let Some(slot) = gone.iter().position(|&q| q == item.player) else { continue };
            holds[slot] = item.turn;
            let Some(index) = self.pair_index(item.player) else { continue };
            if item
                .entries
                .iter()
                .any(|(turn, entry)| Some(*turn) > item.upto || !self.entry_ok(index, entry))
            {
                self.pairs[index].drops.spoofed += 1;
                continue;
            }
            let pair = &mut self.pairs[index];
            if item.upto <= pair.have {
                continue;
            }
            for (turn, entry) in &item.entries {
                if Some(*turn) > pair.have && !entry.is_empty() {
                    pair.inbox.insert(*turn, entry.clone());
                }
            }
            pair.have = item.upto;
        }
        holds
    }

    /// Whether `index`'s peer is owed a view message.
    pub(crate) fn view_pending(&self, index: usize) -> bool {
        let player = self.pairs[index].player;
        if self.pairs[index].behind_due {
            return true;
        }
        if let Some(proposal) = &self.views.proposal {
            if proposal.survivors.contains(&player) && !proposal.complete.contains(&player) {
                return true;
            }
        }
        self.views
            .answer
            .as_ref()
            .is_some_and(|a| a.master == player && (a.lasts.is_none() || a.ack_due))
    }

    /// The view message for `index`'s peer, if one is owed (a DropAck or Behind once each).
    pub(crate) fn view_message(&mut self, index: usize) -> Option<ViewMsg> {
        let player = self.pairs[index].player;
        if self.pairs[index].behind_due {
            self.pairs[index].behind_due = false;
            return Some(ViewMsg {
                kind: ViewKind::Behind,
                view: self.views.promised,
                items: Vec::new(),
            });
        }
        if let Some(proposal) = &self.views.proposal {
            if proposal.survivors.contains(&player) && !proposal.complete.contains(&player) {
                let (gone, view) = (proposal.gone.clone(), proposal.view);
                let Some(lasts) = proposal.lasts.clone() else {
                    let items = self.items(&gone, |peer, _, q| (peer.holding(q), None));
                    return Some(ViewMsg { kind: ViewKind::Freeze, view, items });
                };
                let theirs = proposal.answers.get(&player).cloned().unwrap_or_default();
                let items = self.items(&gone, |_, i, _| {
                    (lasts[i], Some((theirs.get(i).copied().flatten(), lasts[i])))
                });
                return Some(ViewMsg { kind: ViewKind::Drop, view, items });
            }
        }
        let answer = self.views.answer.as_ref().filter(|a| a.master == player)?;
        let (view, gone) = (answer.view, answer.gone.clone());
        match &answer.lasts {
            None => {
                let told = answer.master_holds.clone();
                let items = self.items(&gone, |peer, i, q| {
                    let mine = peer.holding(q);
                    (mine, Some((told.get(i).copied().flatten(), mine)))
                });
                Some(ViewMsg { kind: ViewKind::Frozen, view, items })
            }
            Some(_) if answer.ack_due => {
                if let Some(answer) = &mut self.views.answer {
                    answer.ack_due = false;
                }
                let items = self.items(&gone, |peer, _, q| (peer.holding(q), None));
                Some(ViewMsg { kind: ViewKind::DropAck, view, items })
            }
            Some(_) => None,
        }
    }

    /// What we hold of `player`'s contributions.
    fn holding(&self, player: PlayerId) -> Option<Turn> {
        self.pair_index(player).and_then(|i| self.pairs[i].have)
    }

    /// One item per gone peer. `spec(peer, i, q)` gives the item's turn and, when it carries
    /// contributions, the turn after which the recipient lacks them and the last turn wanted;
    /// they follow through what we hold, as many as fit in half a datagram.
    fn items(
        &self,
        gone: &[PlayerId],
        spec: impl Fn(&Peer, usize, PlayerId) -> (Option<Turn>, Option<(Option<Turn>, Option<Turn>)>),
    ) -> Vec<ViewItem> {
        let room = usize::from(self.config.link.datagram_bytes_max) / 2;
        let mut used = 0;
        let mut items = Vec::with_capacity(gone.len());
        for (i, &q) in gone.iter().enumerate() {
            let (turn, tail) = spec(self, i, q);
            let mut item = ViewItem { player: q, turn, upto: None, entries: Vec::new() };
            if let (Some(index), Some((after, wanted))) = (self.pair_index(q), tail) {
                let pair = &self.pairs[index];
                item.upto = pair.have.min(wanted);
                if let Some(top) = item.upto {
                    for (turn, entry) in pair.entries_between(after, top) {
                        let len = crate::wire::entry_len(turn, entry);
                        if used + len > room {
                            item.upto = turn.0.checked_sub(1).map(Turn);
                            break;
                        }
                        used += len;
                        item.entries.push((turn, entry.clone()));
                    }
                }
            }
            items.push(item);
        }
        items
    }
}

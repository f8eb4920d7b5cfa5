//! Datagrams to players. Each one acknowledges the player's packets and commands, carries the
//! riders (state hash acknowledgement, the waiting notice), and repeats the sealed bundles the
//! player has not acknowledged as far as they fit: the newest always, the `link.redundant_turns`
//! before it (under the quiet relay only on a link that lost a datagram lately), and all of
//! them when the retransmit timer fired or the player reported a gap. (Spectators: see
//! `spectate.rs`, which always repeats.)

use crate::link::{repeat_delay_ms, Sent};
use crate::types::{PlayerId, Turn};
use crate::wire::{put_down_header, DownExtras, DOWN_HEADER_BYTES_MAX};

use super::{Host, Seat};

impl Host {
    /// Writes the next datagram to send into `buf` (cleared first) and returns the player to
    /// send it to, or `None` when nothing is due.
    pub fn poll_transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> Option<PlayerId> {
        let seats = self.seats.len();
        for step in 0..seats {
            let index = (self.send_cursor + step) % seats;
            if self.transmit_to(now_ms, index, buf) {
                self.send_cursor = (index + 1) % seats;
                return Some(PlayerId(index as u8));
            }
        }
        None
    }

    fn transmit_to(&mut self, now_ms: u64, index: usize, buf: &mut Vec<u8>) -> bool {
        let latest = self.next_seal;
        let wanted = self.snapshots.wanted_from(PlayerId(index as u8));
        let inspect = self.inspect_wanted(PlayerId(index as u8));
        let Seat::Remote(peer) = &mut self.seats[index] else {
            return false;
        };
        let has_new = peer.send_next < latest;
        let has_unacked = peer.turn_ack < latest;
        if !(has_new || peer.link.is_due(has_unacked) || peer.notify_due) {
            return false;
        }
        buf.clear();
        let (pn, ack) = peer.link.next_packet(now_ms);
        // Redundancy: a datagram with a new bundle also repeats the `link.redundant_turns` bundles
        // before it that are still unacknowledged; the retransmit timer resends all of them.
        // Under the quiet relay, whose clients acknowledge a heartbeat apart, only on a link
        // that lost a datagram lately: on a clean one every copy would be for nothing.
        let oldest_unacked = peer.turn_ack.max(self.sealed_base);
        let copies = if self.config.is_quiet() && !peer.link.lost_lately() {
            0
        } else {
            self.config.link.redundant_turns
        };
        let first = if peer.link.is_retransmitting() {
            oldest_unacked
        } else {
            oldest_unacked.max(Turn(peer.send_next.0.saturating_sub(copies)))
        };
        // A datagram sent only to acknowledge or keep the line alive carries no bundles: a new
        // bundle goes out every turn anyway and repeats whatever is unacknowledged, so
        // repeating it in between would only add bytes.
        let carry = has_new || peer.link.resend_due(has_unacked);
        let skip = first.since(self.sealed_base) as usize;
        let take = if carry { self.sealed.len() } else { 0 };
        let sealed = self.sealed.iter().take(take).skip(skip);
        let bundles = sealed.map(|sealed| (sealed.bundle.turn, &sealed.encoded[..]));
        let budget = usize::from(self.config.link.datagram_bytes_max);
        let (count, redundant_bytes) = fit_bundles(bundles.clone(), peer.send_next, budget);
        let extras = DownExtras {
            hash_ack: peer.hash_acked,
            waiting: self.waiting,
            probe: peer.link.is_probing(now_ms),
            // Asked until the client's game has executed the turn: by then it gave it or not.
            snapshot_wanted: wanted.filter(|&turn| peer.next_exec <= turn),
            inspect,
            refused: peer.refusals.notice(pn, peer.link.largest_acked()),
        };
        peer.notify_due = false;
        put_down_header(buf, pn, ack, peer.next_seq, &extras, first, count);
        bundles.take(count).for_each(|(_, encoded)| buf.extend_from_slice(encoded));
        if count > 0 {
            peer.send_next = peer.send_next.max(first.saturating_add(count as u32));
        }
        let sent = Sent {
            pn,
            len: buf.len(),
            carries_data: count > 0,
            redundant_bytes,
            repeat_after_ms: has_new.then(|| repeat_delay_ms(self.pace.current.turn_length_ms)),
        };
        peer.link.on_sent(now_ms, sent);
        true
    }
}

/// How many of `bundles` (turn, encoding; in turn order) fit a datagram of `budget` bytes
/// after its header, and how many of their bytes were sent before (turns before
/// `send_next`). The caller then copies that many straight into the datagram (no buffer in
/// between). Players and spectators alike.
pub(super) fn fit_bundles<'a>(
    bundles: impl Iterator<Item = (Turn, &'a [u8])>,
    send_next: Turn,
    budget: usize,
) -> (usize, u64) {
    let (mut count, mut bytes, mut redundant) = (0usize, 0usize, 0u64);
    for (turn, encoded) in bundles {
        // Header bound: count as a varint of at most 2 bytes for a window of <= 256.
        if DOWN_HEADER_BYTES_MAX + bytes + encoded.len() > budget {
            break;
        }
        if turn < send_next {
            redundant += encoded.len() as u64;
        }
        bytes += encoded.len();
        count += 1;
    }
    (count, redundant)
}

//! Telling a client which of its commands the host will never seal: the game's rule refused
//! them, or the open turns had no room. The notice rides the client's datagrams (the newest
//! such command and a mask of the 64 before it, as an ack frame names packets) until the
//! client acknowledges a datagram that carried all of it; older ones fall off the mask.

use crate::recovery::slide;
use crate::types::CommandSeq;
#[cfg(test)]
use crate::wire::refused_seqs;

/// One client's refused commands not yet known to be told.
#[derive(Debug, Default)]
pub(super) struct Refusals {
    /// The newest, and which of the 64 before it too (bit `i`: `newest − 1 − i`).
    newest: Option<CommandSeq>,
    before: u64,
    /// The first packet that carried the notice as it stands: once the client acknowledges
    /// it or any later packet (every later one carried it too), it knows.
    first_pn: Option<u64>,
}

impl Refusals {
    /// The host will never seal command `seq`.
    pub(super) fn refuse(&mut self, seq: CommandSeq) {
        match self.newest {
            None => {
                self.newest = Some(seq);
                self.before = 0;
            }
            Some(newest) if seq.0 > newest.0 => {
                self.before = slide(self.before, u64::from(seq.0 - newest.0));
                self.newest = Some(seq);
            }
            Some(newest) => {
                let behind = newest.0 - seq.0;
                if behind == 0 || behind > 64 {
                    return;
                }
                self.before |= 1 << (behind - 1);
            }
        }
        self.first_pn = None;
    }

    /// The notice for packet `pn`, given the largest packet the client acknowledged; `None`
    /// once it knows everything (or nothing was refused).
    pub(super) fn notice(
        &mut self,
        pn: u64,
        largest_acked: Option<u64>,
    ) -> Option<(CommandSeq, u64)> {
        let newest = self.newest?;
        if let (Some(first), Some(acked)) = (self.first_pn, largest_acked) {
            if acked >= first {
                *self = Refusals::default();
                return None;
            }
        }
        self.first_pn.get_or_insert(pn);
        Some((newest, self.before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_names_every_refusal_until_a_later_packet_is_acknowledged() {
        let mut refusals = Refusals::default();
        assert_eq!(refusals.notice(1, None), None);
        refusals.refuse(CommandSeq(10));
        refusals.refuse(CommandSeq(12));
        let (newest, before) = refusals.notice(5, Some(4)).unwrap();
        let named: Vec<u32> = refused_seqs(newest, before).map(|seq| seq.0).collect();
        assert_eq!(named, [12, 10]);
        // Packet 5 lost; 6 carries it again.
        assert!(refusals.notice(6, Some(4)).is_some());
        // A new refusal: the notice changed, and packet 7 is the first to carry all of it.
        refusals.refuse(CommandSeq(11));
        let (newest, before) = refusals.notice(7, Some(6)).unwrap();
        let named: Vec<u32> = refused_seqs(newest, before).map(|seq| seq.0).collect();
        assert_eq!(named, [12, 11, 10]);
        // Packet 6 acknowledged does not tell 11; 7 does.
        assert!(refusals.notice(8, Some(6)).is_some());
        assert_eq!(refusals.notice(9, Some(7)), None);
        assert_eq!(refusals.notice(10, Some(9)), None);
    }

    #[test]
    fn refusals_further_back_than_the_mask_fall_off() {
        let mut refusals = Refusals::default();
        refusals.refuse(CommandSeq(0));
        refusals.refuse(CommandSeq(64));
        refusals.refuse(CommandSeq(200));
        let (newest, before) = refusals.notice(1, None).unwrap();
        assert_eq!(refused_seqs(newest, before).map(|seq| seq.0).collect::<Vec<_>>(), [200]);
        // Older than the mask reaches: dropped.
        refusals.refuse(CommandSeq(100));
        refusals.refuse(CommandSeq(199));
        let (newest, before) = refusals.notice(2, None).unwrap();
        assert_eq!(refused_seqs(newest, before).map(|seq| seq.0).collect::<Vec<_>>(), [200, 199]);
    }
}

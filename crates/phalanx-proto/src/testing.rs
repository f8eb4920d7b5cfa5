//! Hooks for test harnesses that play a hostile peer: well-formed datagrams carrying claims a
//! correct peer would never make, built with the real wire encoder so they stay well-formed
//! when the format changes. Nothing in a session uses them.
//!
//! phalanx-sim sends [`up_datagram_claiming`] from an authenticated player (fault-matrix
//! row 19): the host must classify the claim and drop the datagram, never act on it.
//! [`up_datagram_with_commands`] is what a hostile spectator would send.

use crate::wire::{
    put_up_command, put_up_header, put_varint, MeshDatagram, UpCommand, UpExtras, ViewItem,
    ViewKind, ViewMsg,
};
use crate::{CommandSeq, PlayerId, Record, Turn};

/// A well-formed client → host datagram with packet number `pn` that claims to hold every
/// turn before `turn_ack` — and nothing else: no acknowledgement, no turn executed, no extras,
/// no commands. With a `turn_ack` past what the host has sealed it is a spoofed claim.
pub fn up_datagram_claiming(pn: u64, turn_ack: Turn) -> Vec<u8> {
    let mut out = Vec::new();
    let extras = UpExtras::default();
    put_up_header(&mut out, pn, None, turn_ack, Turn(0), CommandSeq(0), &extras);
    put_varint(&mut out, 0); // commands
    out
}

/// A well-formed client → host datagram with packet number `pn` carrying `commands` (each
/// stamped for `turn`) from sequence 0, and nothing else — what a spectator must never send:
/// the host refuses and counts them.
pub fn up_datagram_with_commands(pn: u64, turn: Turn, commands: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let extras = UpExtras::default();
    put_up_header(&mut out, pn, None, Turn(0), Turn(0), CommandSeq(0), &extras);
    put_varint(&mut out, commands.len() as u64);
    for payload in commands {
        put_up_command(&mut out, UpCommand { turn, payload });
    }
    out
}

/// A well-formed peer → peer mesh datagram saying its sender's contributions are final
/// through `through` and carrying `entries` (each a turn and its records), and nothing else.
/// An entry holding a command that names another player is a forgery: the recipient must
/// refuse the datagram and count it.
pub fn mesh_datagram(through: Turn, entries: &[(Turn, Vec<Record>)]) -> Vec<u8> {
    let datagram = MeshDatagram { through: Some(through), ..MeshDatagram::default() };
    let entries: Vec<(Turn, &Vec<Record>)> = entries.iter().map(|(t, e)| (*t, e)).collect();
    let mut out = Vec::new();
    datagram.encode(&mut out, &entries);
    out
}

/// A well-formed mesh datagram carrying only a view change's Freeze: view `view` proposes to
/// drop `gone` (ascending). From anyone but the rightful master it must change nothing.
pub fn mesh_freeze(view: u32, gone: &[PlayerId]) -> Vec<u8> {
    let items = gone
        .iter()
        .map(|&player| ViewItem { player, turn: None, upto: None, entries: Vec::new() })
        .collect();
    let view = ViewMsg { kind: ViewKind::Freeze, view, items };
    let datagram = MeshDatagram { view: Some(view), ..MeshDatagram::default() };
    let mut out = Vec::new();
    datagram.encode(&mut out, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_up, Limits};
    use crate::SessionConfig;

    /// The datagram decodes as exactly the claim, at the edges of both fields.
    #[test]
    fn claim_decodes_as_written() {
        let limits = Limits::new(&SessionConfig::default());
        for (pn, turn_ack) in [(0, Turn(0)), (1 << 40, Turn(u32::MAX)), (u64::MAX, Turn(7))] {
            let bytes = up_datagram_claiming(pn, turn_ack);
            let up = decode_up(&bytes, &limits).expect("well-formed");
            assert_eq!((up.pn, up.ack, up.turn_ack, up.next_exec), (pn, None, turn_ack, Turn(0)));
            assert_eq!(up.first_seq, CommandSeq(0));
            assert!(up.commands.is_empty());
            assert_eq!(up.extras, UpExtras::default());
        }
    }
}

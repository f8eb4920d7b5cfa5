//! The mesh datagram against itself and against hostile bytes: every datagram round-trips,
//! including turns and clocks at their extremes; no strict prefix and no datagram with a byte
//! appended decodes; random bytes behind its header never panic. Seeded like the rest of the
//! codec's tests (`PHALANX_SEED`, `PHALANX_CASES`).

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::super::tests::{limits, run_seeded};
use super::*;
use crate::types::CommandSeq;

const ENTRIES_MAX: usize = 64;

fn turn() -> impl Strategy<Value = Option<Turn>> {
    prop::option::of(prop_oneof![0..1_000u32, any::<u32>(), Just(u32::MAX)].prop_map(Turn))
}

fn entries() -> impl Strategy<Value = Vec<(Turn, Entry)>> {
    let command = (0..8u8, any::<u32>(), prop::collection::vec(any::<u8>(), 0..24)).prop_map(
        |(player, seq, payload)| Record::Command {
            player: PlayerId(player),
            seq: CommandSeq(seq),
            payload: Bytes::from(payload),
        },
    );
    let entry = prop::collection::vec(command, 1..3);
    prop::collection::btree_map(any::<u32>(), entry, 0..4)
        .prop_map(|entries| entries.into_iter().map(|(turn, e)| (Turn(turn), e)).collect())
}

type Spec = (
    (Option<Turn>, Option<Turn>, u32, Option<i32>, Option<u32>, Option<(u32, u32)>),
    (Vec<(Turn, Entry)>, Vec<(u32, u64)>, Option<(u32, u32, u64)>, bool),
);

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            turn(),
            turn(),
            any::<u32>(),
            prop::option::of(any::<i32>()),
            prop::option::of(any::<u32>()),
            prop::option::of((any::<u32>(), any::<u32>())),
        ),
        (
            entries(),
            prop::collection::vec((any::<u32>(), any::<u64>()), 0..=HASHES_MAX),
            prop::option::of((any::<u32>(), any::<u32>(), any::<u64>())),
            any::<bool>(),
        ),
    )
}

fn datagram(((ack, through, next, due_in, stamp, echo), rest): Spec) -> MeshDatagram {
    let (entries, hashes, report, probe) = rest;
    MeshDatagram {
        ack,
        through,
        next_exec: Turn(next),
        due_in,
        stamp,
        echo,
        entries,
        hashes: hashes.into_iter().map(|(turn, hash)| (Turn(turn), hash)).collect(),
        report: report.map(|(lead_ms, cost_ms, suspects)| Report { lead_ms, cost_ms, suspects }),
        view: None,
        probe,
    }
}

fn encode(datagram: &MeshDatagram) -> Vec<u8> {
    let mut bytes = Vec::new();
    let entries: Vec<(Turn, &Entry)> = datagram.entries.iter().map(|(t, e)| (*t, e)).collect();
    datagram.encode(&mut bytes, &entries);
    bytes
}

/// Every datagram reads back as written; every truncation and an extra byte are refused.
#[test]
fn mesh_datagrams_round_trip_and_refuse_the_malformed() {
    run_seeded("mesh_datagrams_round_trip_and_refuse_the_malformed", spec(), |spec| {
        let datagram = datagram(spec);
        let bytes = encode(&datagram);
        let decoded = decode_mesh(&bytes, &limits(), ENTRIES_MAX);
        prop_assert_eq!(decoded.as_ref(), Ok(&datagram));
        for cut in 0..bytes.len() {
            prop_assert!(decode_mesh(&bytes[..cut], &limits(), ENTRIES_MAX).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(decode_mesh(&longer, &limits(), ENTRIES_MAX).is_err());
        Ok::<(), TestCaseError>(())
    });
}

/// Random bytes, bare and behind a mesh header, never panic the decoder.
#[test]
fn random_bytes_never_panic_the_mesh_decoder() {
    run_seeded(
        "random_bytes_never_panic_the_mesh_decoder",
        prop::collection::vec(any::<u8>(), 0..200),
        |tail| {
            let mut bytes = vec![crate::PROTOCOL_VERSION, KIND_MESH];
            bytes.extend_from_slice(&tail);
            let _ = decode_mesh(&tail, &limits(), ENTRIES_MAX);
            let _ = decode_mesh(&bytes, &limits(), ENTRIES_MAX);
            Ok(())
        },
    );
}

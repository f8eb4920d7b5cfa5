//! The link's unit tests.

use super::*;

/// Sends 40 data packets, 1 ms apart, each acknowledged at once except every `lose_every`-th
/// (never acknowledged, so declared lost); returns how many repeats were armed.
fn repeats(repeat_loss_permille: u32, lose_every: u64) -> u64 {
    let mut config = SessionConfig::default();
    config.link.repeat_loss_permille = repeat_loss_permille;
    let mut link = Link::new(0, &config, 25, 25);
    let mut missing = 0u64;
    for pn in 0..40u64 {
        let (sent, _) = link.next_packet(pn);
        assert_eq!(sent, pn);
        let sent =
            Sent { pn, len: 40, carries_data: true, redundant_bytes: 0, repeat_after_ms: Some(25) };
        link.on_sent(pn, sent);
        missing <<= 1;
        if pn % lose_every == lose_every - 1 {
            missing |= 1;
            continue;
        }
        // Bit i of `missing` is packet `pn - 1 - i`; the frame's bits exclude `pn` itself.
        let ack = AckFrame { largest: pn, missing: missing >> 1, delay_ms: 0 };
        assert!(link.on_ack(pn, ack));
    }
    link.stats.repeats
}

#[test]
fn repeats_follow_the_loss_threshold() {
    // No loss: never repeats, whatever the threshold.
    assert_eq!(repeats(0, u64::MAX), 0);
    // Any loss, threshold 0: repeats from the first detected loss on.
    let eager = repeats(0, 10);
    assert!(eager > 20, "eager repeats {eager}");
    // A threshold above a 10 % link's estimate most of the time: fewer repeats.
    let picky = repeats(150, 10);
    assert!(picky < eager, "picky {picky} vs eager {eager}");
    // 1000: off.
    assert_eq!(repeats(1_000, 10), 0);
    // A 1-in-3 link stays above 150 ‰: repeats nearly as often as eager.
    assert!(repeats(150, 3) > 20);
}

//! Signed match records, as a ladder checks them: for random matches (rosters, turns, check
//! hashes, end reasons; one seed each), a record signed by the host verifies with the host's
//! key, and its replay with it; any single flipped byte of the file, a swapped roster, another
//! key, and a replay from another match each fail with a typed error. Seeds:
//! `PHALANX_SEEDS=N` (default 48), `PHALANX_SEED=S` for one.

use phalanx::proto::SplitMix64;
use phalanx::replay::{
    MatchKey, MatchRecord, MatchSigner, Replay, ReplayRecord, RosterSeat, SignedMatch, VerifyError,
    REPLAY_FORMAT_VERSION,
};
use phalanx_testkit::{for_each_seed, seeded_test};

/// A random recorded match.
fn replay(random: &mut SplitMix64) -> Replay {
    let turns = 1 + random.next_u64() % 60;
    let players = 2 + (random.next_u64() % 7) as u8;
    let turns: Vec<Vec<ReplayRecord>> = (0..turns)
        .map(|_| {
            (0..random.next_u64() % 3)
                .map(|seq| ReplayRecord::Command {
                    player: (random.next_u64() % u64::from(players)) as u8,
                    seq: seq as u32,
                    payload: random.next_u64().to_le_bytes().to_vec(),
                })
                .collect()
        })
        .collect();
    let checks = (0..turns.len() as u32).step_by(10).map(|t| (t, random.next_u64())).collect();
    Replay {
        format_version: REPLAY_FORMAT_VERSION,
        protocol_version: 1,
        game_data_hash: random.next_u64(),
        seed: random.next_u64(),
        players_max: players,
        first_pace: (100, 2),
        first_turn: 0,
        turns,
        checks,
        truncated: false,
    }
}

fn record(random: &mut SplitMix64, replay: &Replay) -> MatchRecord {
    let roster = (0..replay.players_max)
        .map(|player| RosterSeat { player, key: random.next_u64().to_le_bytes().to_vec() })
        .collect();
    let (reason, code) =
        if random.next_u64().is_multiple_of(2) { ("finished", 7) } else { ("desync", 0) };
    MatchRecord::of_replay(random.next_u64(), roster, replay, reason, code)
}

#[test]
fn a_signed_record_verifies_and_every_change_is_caught() {
    for_each_seed(seeded_test!("signed records"), 48, |seed| {
        let mut random = SplitMix64::new(seed);
        let signer =
            MatchSigner::from_seed(random.next_u64().to_le_bytes().repeat(4).try_into().unwrap())
                .map_err(|e| e.to_string())?;
        let key = signer.public_key();
        let replay = replay(&mut random);
        let record = record(&mut random, &replay);
        let file = signer.sign(record.clone()).to_bytes();

        let signed = SignedMatch::from_bytes(&file).map_err(|e| e.to_string())?;
        if signed.verify_replay(&key, &replay) != Ok(&record) {
            return Err("the signed record and its replay do not verify".into());
        }
        // Any flipped byte of the file: refused, never accepted as some other record.
        for at in 0..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 1 << (random.next_u64() % 8);
            let verdict = SignedMatch::from_bytes(&bad).and_then(|s| s.verify(&key).cloned());
            if verdict.is_ok() {
                return Err(format!("a flipped byte at {at} of {} verified", file.len()));
            }
        }
        // A byte more or less: malformed.
        let mut longer = file.clone();
        longer.push(0);
        if SignedMatch::from_bytes(&longer) != Err(VerifyError::Malformed)
            || SignedMatch::from_bytes(&file[..file.len() - 1]) != Err(VerifyError::Malformed)
        {
            return Err("a file with a byte more or less was read".into());
        }
        // The roster swapped (two seats trade keys) under the same signature.
        let mut swapped = signed.clone();
        let last = swapped.record.roster.len() - 1;
        let (first_key, last_key) =
            (swapped.record.roster[0].key.clone(), swapped.record.roster[last].key.clone());
        swapped.record.roster[0].key = last_key;
        swapped.record.roster[last].key = first_key;
        if swapped.record != record && swapped.verify(&key) != Err(VerifyError::BadSignature) {
            return Err("a swapped roster verified".into());
        }
        // Another host's key.
        let other = MatchSigner::generate().map_err(|e| e.to_string())?.public_key();
        if signed.verify(&other) != Err(VerifyError::WrongSigner { expected: other, found: key }) {
            return Err("another key was accepted".into());
        }
        // The replay of another match.
        let other_replay = self::replay(&mut random);
        if other_replay != replay
            && signed.verify_replay(&key, &other_replay) != Err(VerifyError::ReplayMismatch)
        {
            return Err("another match's replay verified".into());
        }
        Ok(())
    });
}

#[test]
fn keys_read_back_from_hex_and_seeds() {
    let signer = MatchSigner::generate().expect("a key");
    let key = signer.public_key();
    assert_eq!(MatchKey::from_hex(&key.to_hex()), Some(key));
    assert_eq!(MatchKey::from_hex("00"), None);
    assert_eq!(MatchKey::from_hex(&"zz".repeat(32)), None);
    let again = MatchSigner::from_seed(signer.seed()).expect("the same key");
    assert_eq!(again.public_key(), key);
}

#[test]
fn a_record_from_another_format_version_is_refused_by_name() {
    let signer = MatchSigner::generate().expect("a key");
    let replay = replay(&mut SplitMix64::new(1));
    let record = record(&mut SplitMix64::new(2), &replay);
    let mut signed = signer.sign(record);
    signed.format_version += 1;
    let read = SignedMatch::from_bytes(&signed.to_bytes()).expect("it decodes");
    assert_eq!(
        read.verify(&signer.public_key()),
        Err(VerifyError::Version { found: 2, expected: 1 })
    );
}

//! Smoke run of the fuzz targets (`kayvee_resp::fuzzing`) inside `cargo test`: a few hundred
//! thousand deterministic pseudo-random and mutated-valid inputs, so the properties the
//! cargo-fuzz targets check also guard every ordinary test run (no nightly needed).

use kayvee_resp::fuzzing::{self, Rng};
use std::collections::BTreeSet;

/// Valid requests and replies that mutations start from.
const REQUEST_SEEDS: &[&[u8]] = &[
    b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
    b"PING\r\nSET \"a b\" 'c d'\r\nECHO \"\\x41\\n\"\r\n\r\n",
    b"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n*1\r\n$4\r\nPI\x00G\r\n",
    b"*2\r\n$4\r\nECHO\r\n$10\r\n0123456789\r\nGET k\n",
    b"*11\r\n*1\r\n$16385\r\n",
];

/// Valid replies that mutations start from.
const REPLY_SEEDS: &[&[u8]] = &[
    b"*3\r\n$3\r\nfoo\r\n:-1\r\n*2\r\n+OK\r\n-ERR x\r\n",
    b"%2\r\n+a\r\n,1.5\r\n$1\r\nb\r\n~1\r\n#t\r\n",
    b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n=7\r\ntxt:abc\r\n",
    b"|1\r\n+ttl\r\n:3\r\n(12345678901234567890\r\n",
    b"*2\r\n_\r\n$-1\r\n",
    b"!5\r\nERR x\r\n",
    b",-inf\r\n,nan\r\n,0.10000000000000001\r\n",
];

/// Bytes mutations like to insert: the protocol's own punctuation.
const INTERESTING: &[u8] = b"*$\r\n\"'\\ \x00\x0b-+:0123456789x_,#(=%~>|!";

/// A random input: either noise over the protocol's alphabet or a mutated seed.
fn input(rng: &mut Rng, seeds: &[&[u8]], out: &mut Vec<u8>) {
    out.clear();
    out.push(rng.next_u64() as u8);
    out.push(rng.next_u64() as u8);
    if rng.below(4) == 0 {
        for _ in 0..rng.below(64) {
            out.push(INTERESTING[rng.below(INTERESTING.len() as u64) as usize]);
        }
        return;
    }
    for _ in 0..=rng.below(3) {
        out.extend_from_slice(seeds[rng.below(seeds.len() as u64) as usize]);
    }
    for _ in 0..rng.below(4) {
        mutate(rng, out);
    }
}

/// One mutation past the two control bytes: flip, insert, delete or duplicate a byte.
fn mutate(rng: &mut Rng, out: &mut Vec<u8>) {
    let len = out.len() as u64;
    if len <= 2 {
        return;
    }
    let at = 2 + rng.below(len - 2) as usize;
    let byte = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
    match rng.below(4) {
        0 => out[at] = byte,
        1 => out.insert(at, byte),
        2 => {
            out.remove(at);
        }
        _ => out.insert(at, out[at]),
    }
}

#[test]
fn decode_target_smoke() {
    let mut rng = Rng(0x5EED_0001);
    let mut buf = Vec::new();
    let (mut commands, mut errors) = (0, BTreeSet::new());
    for _ in 0..60_000 {
        input(&mut rng, REQUEST_SEEDS, &mut buf);
        if let Some(run) = fuzzing::decode(&buf) {
            commands += run.commands.iter().filter(|c| !c.is_empty()).count();
            if let Err(e) = run.end {
                errors.insert(format!("{e}"));
            }
        }
    }
    // The inputs must reach real commands and most protocol errors, or the run proves little.
    assert!(commands > 50_000, "only {commands} commands decoded");
    assert!(errors.len() >= 6, "errors reached: {errors:?}");
}

#[test]
fn parse_reply_target_smoke() {
    let mut rng = Rng(0x5EED_0002);
    let mut buf = Vec::new();
    let mut parsed = 0;
    for _ in 0..200_000 {
        input(&mut rng, REPLY_SEEDS, &mut buf);
        // The reply target has no control bytes: skip them.
        parsed += usize::from(fuzzing::parse_reply(&buf[2..]).is_some());
    }
    assert!(parsed > 50_000, "only {parsed} replies parsed");
}

//! Smoke fuzzing inside `cargo test`: mutated and truncated RDB files and DUMP payloads
//! (from a valid Kayvee file and Redis 7.0's own dump) must load or fail with an error,
//! never panic, loop or allocate without bound.

use kayvee_engine::Config;
use kayvee_rdb::{dump, load, LoadOptions, CRC64};

/// splitmix64, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Flips, inserts, deletes or overwrites a few bytes; then, half the time, fixes the
/// checksum so the mutation reaches the parser instead of failing the CRC.
fn mutate(rng: &mut Rng, seed: &[u8], fix_crc: bool) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let i = rng.below(v.len().max(1));
        match rng.below(5) {
            0 if !v.is_empty() => v[i] ^= 1 << rng.below(8),
            1 => v.insert(i.min(v.len()), rng.next() as u8),
            2 if !v.is_empty() => {
                v.remove(i);
            }
            3 if !v.is_empty() => v[i] = [0, 0x40, 0x80, 0x81, 0xC3, 0xFF][rng.below(6)],
            _ => v.truncate(i),
        }
    }
    if fix_crc && v.len() > 8 {
        let n = v.len() - 8;
        let crc = CRC64.checksum(&v[..n]);
        v[n..].copy_from_slice(&crc.to_le_bytes());
    }
    v
}

#[test]
fn mutated_rdb_files_never_panic() {
    let redis = include_bytes!("fixtures/redis7.rdb");
    let config = Config::default();
    let opts = LoadOptions {
        config: &config,
        seed: 1,
        now_ms: 0,
    };
    let mut rng = Rng(7);
    let mut errors = 0;
    for round in 0..3000 {
        let file = mutate(&mut rng, redis, round % 2 == 0);
        if load(&file, &opts).is_err() {
            errors += 1;
        }
    }
    assert!(errors > 1000, "mutations should mostly be caught: {errors}");
    for n in 0..redis.len() {
        assert!(load(&redis[..n], &opts).is_err(), "truncated at {n} loaded");
    }
}

#[test]
fn mutated_dump_payloads_never_panic() {
    let values: Vec<Vec<u8>> = vec![
        b"\x12\x01\x02\x11\x11\x00\x00\x00\x04\x00\x81a\x02\x81b\x02\x01\x01\x02\x01\xff\n\x00"
            .to_vec(),
        b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00".to_vec(),
        b"\x10\x13\x13\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x82f2\x03\x02\x01\xff\n\x00".to_vec(),
        b"\x05\x02\x01a\x00\x00\x00\x00\x00\x00\xf0\x3f\x01b\x00\x00\x00\x00\x00\x00\x00\x40\n\x00"
            .to_vec(),
    ];
    let mut rng = Rng(11);
    for v in &values {
        let mut p = v.clone();
        let crc = CRC64.checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert!(dump::restore(&p, 1, false, true).is_ok());
        for _ in 0..3000 {
            let m = mutate(&mut rng, &p, true);
            let _ = dump::restore(&m, 1, false, true);
            // As under DEBUG SET-SKIP-CHECKSUM-VALIDATION 1: the mutation reaches the decoders.
            let _ = dump::restore(&m, 1, true, true);
            let _ = dump::restore(&m, 1, true, false);
        }
    }
}

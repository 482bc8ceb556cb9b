//! Fuzz target: the request decoder must never panic, and decoding in pieces must give the
//! same commands as decoding at once (logic in `kayvee_resp::fuzzing::decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = kayvee_resp::fuzzing::decode(data);
});

//! Fuzz target: the reply parser must never panic, and what it parses must re-encode stably
//! (logic in `kayvee_resp::fuzzing::parse_reply`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = kayvee_resp::fuzzing::parse_reply(data);
});

//! Fuzz the Xenstore decoder, request parser and store: arbitrary bytes, split at a
//! fuzzer-chosen point, must never panic, must yield only payloads <= 4096, and must decode the
//! same messages however the input is split (no desynchronisation).
#![no_main]

use kayvee_xenstore::{XsConfig, Xenstored};
use kayvee_xenstore::Now;
use kayvee_xswire::{encode_reply, parse_request, Decoder, PAYLOAD_MAX};
use libfuzzer_sys::fuzz_target;

/// All messages decodable from `chunks` fed in order, and whether decoding failed.
fn decode_all(chunks: &[&[u8]]) -> (Vec<(u32, u32, Vec<u8>)>, bool) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.push(c);
        loop {
            match d.next_message() {
                Ok(Some(m)) => {
                    assert!(m.payload.len() <= PAYLOAD_MAX);
                    out.push((m.header.ty, m.header.tx_id, m.payload));
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let cut = data[0] as usize % data.len();
    let whole = decode_all(&[&data[1..]]);
    let split = decode_all(&[&data[1..cut.max(1)], &data[cut.max(1)..]]);
    assert_eq!(whole, split);
    let mut xs = Xenstored::new(XsConfig::default());
    xs.connect(1, 0);
    let mut out = Vec::new();
    for (ty, tx, payload) in whole.0 {
        let op = parse_request(ty, &payload);
        let reply = xs.handle(1, tx, &op, Now::default());
        let h = kayvee_xswire::Header { ty, req_id: 0, tx_id: tx, len: 0 };
        encode_reply(&mut out, &h, &reply);
        xs.take_events();
    }
    xs.store().check_invariants();
});

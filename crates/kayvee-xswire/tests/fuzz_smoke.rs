//! Smoke fuzzing of the decoder and request parser inside `cargo test`: arbitrary bytes, cut
//! at arbitrary points, never panic; well-formed streams decode to the same messages however
//! they are split (no desynchronisation).

use kayvee_xswire::{encode, parse_request, DecodeError, Decoder, PAYLOAD_MAX};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..16)) {
        let mut d = Decoder::new();
        for c in &chunks {
            d.push(c);
            loop {
                match d.next_message() {
                    Ok(Some(m)) => {
                        prop_assert!(m.payload.len() <= PAYLOAD_MAX);
                        let _ = parse_request(m.header.ty, &m.payload);
                    }
                    Ok(None) => break,
                    Err(DecodeError::PayloadTooLarge(n)) => {
                        prop_assert!(n as usize > PAYLOAD_MAX);
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn any_split_gives_the_same_messages(
        msgs in prop::collection::vec((0u32..30, any::<u32>(), any::<u32>(), prop::collection::vec(any::<u8>(), 0..300)), 1..8),
        cuts in prop::collection::vec(1usize..97, 1..40),
    ) {
        let mut wire = Vec::new();
        for (ty, r, t, p) in &msgs {
            encode(&mut wire, *ty, *r, *t, p);
        }
        let mut d = Decoder::new();
        let mut got = Vec::new();
        let mut at = 0;
        for c in cuts.iter().cycle() {
            if at >= wire.len() { break; }
            let end = (at + c).min(wire.len());
            d.push(&wire[at..end]);
            at = end;
            while let Some(m) = d.next_message().unwrap() {
                got.push((m.header.ty, m.header.req_id, m.header.tx_id, m.payload));
            }
        }
        prop_assert_eq!(got, msgs);
    }
}

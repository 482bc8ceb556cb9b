//! Fuzz target logic shared by the cargo-fuzz project (`fuzz/`) and the smoke test that runs
//! in `cargo test` (`tests/fuzz_smoke.rs`). Each target panics when a property fails.

use crate::decode::{Decoder, Limits, ProtocolError};
use crate::encode::RespWriter;
use alloc::vec::Vec;
use kayvee_engine::{Protocol, Reply};

/// Everything a decoding run produced.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// The commands, as owned arguments.
    pub commands: Vec<Vec<Vec<u8>>>,
    /// How it ended: the protocol error, or `None` with this many bytes left undecoded.
    pub end: Result<usize, ProtocolError>,
}

/// Feeds `stream` to a fresh decoder in chunks of the given sizes (the last chunk takes the
/// rest), decoding every complete command after each chunk, as a server does.
pub fn decode_in_pieces(stream: &[u8], chunks: &[usize], limits: Limits, auth: bool) -> Run {
    let mut decoder = Decoder::new(limits);
    let mut buf = Vec::new();
    let mut commands = Vec::new();
    let mut rest = stream;
    let mut sizes = chunks.iter().copied();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        loop {
            let consumed = match decoder.decode(&buf, auth) {
                Ok(Some(frame)) => {
                    assert!(frame.consumed > 0 && frame.consumed <= buf.len());
                    commands.push(frame.argv.iter().map(<[u8]>::to_vec).collect());
                    frame.consumed
                }
                Ok(None) => break,
                Err(e) => {
                    return Run {
                        commands,
                        end: Err(e),
                    }
                }
            };
            buf.drain(..consumed);
        }
    }
    Run {
        commands,
        end: Ok(buf.len()),
    }
}

/// A small deterministic generator (xorshift64*), for chunk sizes.
pub struct Rng(pub u64);

impl Rng {
    /// The next pseudo-random number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Decoder target. `data[0]` picks authentication and `proto-max-bulk-len`, `data[1]` seeds the
/// chunk sizes, the rest is the client's stream. Decoding must not panic, and decoding in
/// pieces (byte by byte, and in random chunks) must give the same commands and the same end
/// as decoding everything at once. Streams stay below the 64 KiB line limit and the query
/// buffer limit stays at its default, where the two must agree exactly. Returns the run, so
/// the smoke test can check what the inputs reached.
pub fn decode(data: &[u8]) -> Option<Run> {
    let [flags, seed, stream @ ..] = data else {
        return None;
    };
    let limits = Limits {
        bulk_len_max: [512 << 20, 0, 5, 100][usize::from(flags >> 1 & 3)],
        ..Limits::default()
    };
    let auth = flags & 1 == 0;
    let stream = &stream[..stream.len().min(crate::decode::LINE_LEN_MAX)];
    let whole = decode_in_pieces(stream, &[], limits, auth);
    let bytewise = decode_in_pieces(stream, &alloc::vec![1; stream.len()], limits, auth);
    assert_eq!(whole, bytewise, "byte by byte differs");
    let mut rng = Rng(u64::from(*seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let max = [2, 7, 64, 1000][usize::from(seed & 3)];
    let chunks: Vec<usize> = (0..stream.len())
        .map(|_| 1 + rng.below(max) as usize)
        .collect();
    assert_eq!(
        whole,
        decode_in_pieces(stream, &chunks, limits, auth),
        "chunks differ"
    );
    Some(whole)
}

/// Reply parser target: never panics; a parsed reply used at most the input, every shorter
/// prefix is incomplete, and encoding it (RESP3) then parsing and encoding again is stable.
/// Returns the parsed reply.
pub fn parse_reply(data: &[u8]) -> Option<Reply> {
    let Ok(Some((reply, used))) = crate::parse_reply(data) else {
        return None;
    };
    assert!(used > 0 && used <= data.len());
    for cut in [0, used / 2, used - 1] {
        assert_eq!(crate::parse_reply(&data[..cut]), Ok(None), "prefix {cut}");
    }
    let first = encode(&reply);
    let (again, n) = crate::parse_reply(&first)
        .expect("own encoding parses")
        .expect("own encoding is complete");
    assert_eq!(n, first.len());
    assert_eq!(encode(&again), first, "re-encoding differs");
    Some(reply)
}

/// A reply as RESP3 bytes.
fn encode(r: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    r.write_to(&mut RespWriter::new(&mut out, Protocol::Resp3));
    out
}

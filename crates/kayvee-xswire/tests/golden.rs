//! Golden wire vectors: exact bytes of requests and replies as libxenstore and cxenstored
//! 4.17 put them on the socket (captured with a raw client against the real daemon).

use kayvee_xenstore::{Op, Reply, XsError};
use kayvee_xswire::{encode_event, encode_reply, parse_request, Decoder, Header};

/// Hex to bytes, spaces ignored.
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Decode one whole request from bytes.
fn decode_one(bytes: &[u8]) -> (Header, Op) {
    let mut d = Decoder::new();
    d.push(bytes);
    let m = d.next_message().unwrap().unwrap();
    assert_eq!(d.pending(), 0);
    (m.header, parse_request(m.header.ty, &m.payload))
}

#[test]
fn read_request_and_reply() {
    // xenstore-read /s/a: READ, req_id 0, tx 0, len 5, "/s/a\0".
    let (h, op) = decode_one(&hex("02000000 00000000 00000000 05000000 2f732f6100"));
    assert_eq!(op, Op::Read(b"/s/a".to_vec()));
    let mut out = Vec::new();
    encode_reply(&mut out, &h, &Reply::Value(b"1"[..].into()));
    assert_eq!(out, hex("02000000 00000000 00000000 01000000 31"));
}

#[test]
fn error_reply_keeps_ids() {
    let h = Header {
        ty: 2,
        req_id: 7,
        tx_id: 3,
        len: 0,
    };
    let mut out = Vec::new();
    encode_reply(&mut out, &h, &Reply::Error(XsError::Enoent));
    // ERROR (16), req 7, tx 3, "ENOENT\0".
    assert_eq!(
        out,
        hex("10000000 07000000 03000000 07000000 454e4f454e5400")
    );
}

#[test]
fn transaction_start_and_end() {
    let (h, op) = decode_one(&hex("06000000 00000000 00000000 01000000 00"));
    assert_eq!(op, Op::TransactionStart);
    let mut out = Vec::new();
    encode_reply(&mut out, &h, &Reply::Text("1".into()));
    assert_eq!(out, hex("06000000 00000000 00000000 02000000 3100"));
    let (h, op) = decode_one(&hex("07000000 00000000 01000000 02000000 5400"));
    assert_eq!((h.tx_id, op), (1, Op::TransactionEnd(true)));
    let mut out = Vec::new();
    encode_reply(&mut out, &h, &Reply::Ok);
    assert_eq!(out, hex("07000000 00000000 01000000 03000000 4f4b00"));
}

#[test]
fn write_directory_watch_event() {
    let (_, op) = decode_one(&hex("0b000000 00000000 00000000 06000000 2f732f6100 31"));
    assert_eq!(op, Op::Write(b"/s/a".to_vec(), b"1".to_vec()));
    let h = Header {
        ty: 1,
        req_id: 0,
        tx_id: 0,
        len: 0,
    };
    let mut out = Vec::new();
    encode_reply(
        &mut out,
        &h,
        &Reply::List(vec![b"a".to_vec(), b"b".to_vec()]),
    );
    assert_eq!(out, hex("01000000 00000000 00000000 04000000 610062 00"));
    let mut out = Vec::new();
    encode_reply(&mut out, &h, &Reply::List(vec![]));
    assert_eq!(out, hex("01000000 00000000 00000000 00000000"));
    let mut out = Vec::new();
    encode_event(&mut out, b"/w", b"/w");
    assert_eq!(
        out,
        hex("0f000000 00000000 00000000 06000000 2f7700 2f7700")
    );
}

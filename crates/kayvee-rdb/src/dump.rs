//! DUMP and RESTORE payloads: the object (type byte and body, as in an RDB file), the RDB
//! version as two little-endian bytes, and the CRC-64 of all that, little-endian.

use crate::encode::write_value;
use crate::read::Reader;
use crate::{CRC64, RDB_VERSION};
use alloc::vec::Vec;
use kayvee_engine::persist::{RestoreError, ValueCodec};
use kayvee_engine::Value;

/// Footer length: version (2) + CRC-64 (8).
const FOOTER_LEN: usize = 10;

/// The DUMP payload of a value.
pub fn dump(value: &Value, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lzf = compress.then(crate::lzf::Lzf::new);
    write_value(&mut out, value, lzf.as_mut());
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The value in a RESTORE payload: the footer is checked first (length, version, CRC), then
/// the object must parse and fill the payload exactly.
pub fn restore(payload: &[u8], seed: u64) -> Result<Value, RestoreError> {
    if payload.len() < FOOTER_LEN {
        return Err(RestoreError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let crc = u64::from_le_bytes(
        footer
            .try_into()
            .map_err(|_| RestoreError::VersionOrChecksum)?,
    );
    if version > RDB_VERSION || crc != CRC64.checksum(body) {
        return Err(RestoreError::VersionOrChecksum);
    }
    let object = &body[..body.len() - 2];
    let (&ty, rest) = object.split_first().ok_or(RestoreError::BadFormat)?;
    let mut r = Reader::new(rest);
    let value = crate::object::read_value(&mut r, ty, seed).map_err(|_| RestoreError::BadFormat)?;
    if !r.is_empty() {
        return Err(RestoreError::BadFormat);
    }
    Ok(value)
}

/// The codec the engine's DUMP and RESTORE use.
pub struct Codec;

/// The instance to pass to `Engine::set_codec`.
pub static CODEC: Codec = Codec;

impl ValueCodec for Codec {
    fn dump(&self, value: &Value, compress: bool) -> Vec<u8> {
        dump(value, compress)
    }

    fn restore(&self, payload: &[u8], seed: u64) -> Result<Value, RestoreError> {
        restore(payload, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_pds::SmallBytes;

    #[test]
    fn string_payloads_are_byte_identical_to_redis() {
        // `redis-cli --no-raw DUMP` on redis-server 7.0.15.
        let s = |v: &str| Value::Str(SmallBytes::from(v));
        assert_eq!(dump(&s("hello"), true), b"\x00\x05hello\n\x00cr\xdfve4 \n");
        assert_eq!(
            dump(&s("12345"), true),
            b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9"
        );
        assert_eq!(
            dump(&s("-7"), true),
            b"\x00\xc0\xf9\n\x00^&\xd10\xd7\xa2B\xab"
        );
        assert_eq!(
            dump(&s(&"a".repeat(100)), true),
            b"\x00\xc3\x09@d\x01aa\xe0W\x00\x01aa\n\x00\xe8\xa3\xb5\x07\xb0m\xf2q"
        );
    }

    #[test]
    fn restore_checks_footer_then_body() {
        let good = dump(&Value::Str(SmallBytes::from("hello")), true);
        assert_eq!(
            restore(&good, 1).unwrap(),
            Value::Str(SmallBytes::from("hello"))
        );
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(restore(&bad, 1), Err(RestoreError::VersionOrChecksum));
        assert_eq!(restore(&good[..9], 1), Err(RestoreError::VersionOrChecksum));
        let mut newer = good[..good.len() - 10].to_vec();
        newer.extend_from_slice(&11u16.to_le_bytes());
        let crc = CRC64.checksum(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&newer, 1), Err(RestoreError::VersionOrChecksum));
        let mut short = b"\x00\x06hello\n\x00".to_vec();
        let crc = CRC64.checksum(&short);
        short.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&short, 1), Err(RestoreError::BadFormat));
    }
}

//! DUMP and RESTORE payloads: the object (type byte and body, as in an RDB file), the RDB
//! version as two little-endian bytes, and the CRC-64 of all that, little-endian.

use crate::encode::write_value;
use crate::read::Reader;
use crate::{CRC64, RDB_VERSION};
use alloc::vec::Vec;
use kayvee_engine::persist::{RestoreError, ValueCodec};
use kayvee_engine::{Value, ValueRef};

/// Footer length: version (2) + CRC-64 (8).
const FOOTER_LEN: usize = 10;

/// The DUMP payload of a value.
pub fn dump(value: ValueRef<'_>, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lzf = compress.then(crate::lzf::Lzf::new);
    write_value(&mut out, value, lzf.as_mut());
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The value in a RESTORE payload: the footer is checked first (length, version, and the CRC
/// unless `skip_checksum`), then the object must parse and fill the payload exactly; `deep`
/// as [`crate::object::read_value`] takes it.
pub fn restore(
    payload: &[u8],
    seed: u64,
    skip_checksum: bool,
    deep: bool,
) -> Result<Value, RestoreError> {
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
    if version > RDB_VERSION || (!skip_checksum && crc != CRC64.checksum(body)) {
        return Err(RestoreError::VersionOrChecksum);
    }
    let object = &body[..body.len() - 2];
    let (&ty, rest) = object.split_first().ok_or(RestoreError::BadFormat)?;
    let mut r = Reader::new(rest);
    let value = crate::object::read_value(&mut r, ty, seed, deep).map_err(|e| match e {
        crate::Error::Integrity(why) => RestoreError::Integrity(why),
        crate::Error::ListpackDups(lp) => RestoreError::ListpackDups(lp),
        _ => RestoreError::BadFormat,
    })?;
    // An empty collection is refused, as Redis refuses (and skips when loading) empty keys.
    if !r.is_empty() || crate::load::is_empty(&value) {
        return Err(RestoreError::BadFormat);
    }
    Ok(value)
}

/// The codec the engine's DUMP and RESTORE use.
pub struct Codec;

/// The instance to pass to `Engine::set_codec`.
pub static CODEC: Codec = Codec;

impl ValueCodec for Codec {
    fn dump(&self, value: ValueRef<'_>, compress: bool) -> Vec<u8> {
        dump(value, compress)
    }

    fn restore(
        &self,
        payload: &[u8],
        seed: u64,
        skip_checksum: bool,
        deep: bool,
    ) -> Result<Value, RestoreError> {
        restore(payload, seed, skip_checksum, deep)
    }

    fn dump_functions(&self, codes: &[Vec<u8>], compress: bool) -> Vec<u8> {
        dump_functions(codes, compress)
    }

    fn restore_functions(&self, payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
        restore_functions(payload)
    }
}

/// FUNCTION DUMP's payload: the libraries' RDB function records, then the footer.
pub fn dump_functions(codes: &[Vec<u8>], compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lzf = compress.then(crate::lzf::Lzf::new);
    crate::write::write_functions(&mut out, codes, lzf.as_mut());
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries' code in a FUNCTION RESTORE payload (Redis 7.0's error texts).
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    const WRONG: &str = "DUMP payload version or checksum are wrong";
    if payload.len() < FOOTER_LEN {
        return Err(WRONG);
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let crc = u64::from_le_bytes(footer.try_into().map_err(|_| WRONG)?);
    if version > RDB_VERSION || crc != CRC64.checksum(body) {
        return Err(WRONG);
    }
    let mut r = Reader::new(&body[..body.len() - 2]);
    let mut codes = Vec::new();
    while !r.is_empty() {
        match r.u8() {
            Ok(crate::opcode::FUNCTION2) => {}
            Ok(crate::opcode::FUNCTION_PRE_GA) => {
                return Err("Pre-GA function format not supported")
            }
            Ok(_) => return Err("given type is not a function"),
            Err(_) => return Err("can not read data type"),
        }
        let code = r
            .string()
            .map_err(|_| "failed loading the given functions payload")?;
        codes.push(code.into_owned());
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kayvee_pds::SmallBytes;

    #[test]
    fn string_payloads_are_byte_identical_to_redis() {
        // `redis-cli --no-raw DUMP` on redis-server 7.0.15.
        let s = |v: &str| Value::Str(SmallBytes::from(v));
        assert_eq!(
            dump(s("hello").view(), true),
            b"\x00\x05hello\n\x00cr\xdfve4 \n"
        );
        assert_eq!(
            dump(s("12345").view(), true),
            b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9"
        );
        assert_eq!(
            dump(s("-7").view(), true),
            b"\x00\xc0\xf9\n\x00^&\xd10\xd7\xa2B\xab"
        );
        assert_eq!(
            dump(s(&"a".repeat(100)).view(), true),
            b"\x00\xc3\x09@d\x01aa\xe0W\x00\x01aa\n\x00\xe8\xa3\xb5\x07\xb0m\xf2q"
        );
    }

    #[test]
    fn function_payloads_are_byte_identical_to_redis() {
        // `FUNCTION DUMP` on redis-server 7.0.15 (the second library's code LZF-compressed).
        let lib1 = b"#!lua name=lib1\nredis.register_function('f1', function() return 1 end)";
        let big: Vec<u8> = (0..3)
            .map(|i| alloc::format!("redis.register_function('g{i}', function() return {i} end)"))
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes();
        let big = [&b"#!lua name=big\n"[..], &big].concat();
        let codes = [lib1.to_vec(), big];
        let redis = b"\xf5@F#!lua name=lib1\nredis.register_function('f1', function() return 1 end)\xf5\xc3@[@\xb3\x1f#!lua name=big\nredis.register_fu\x0cnction('g0', \xe0\x00\x0e\x0e) return 0 end)\xe0\x126\x001\xe0\x0c6\x001\xe0\x176\x002\xe0\x0c6\x002 6\x01d)\n\x00\x1d\xfa\xab\r\x8a\xcd\xa1p";
        assert_eq!(dump_functions(&codes, true), redis);
        assert_eq!(restore_functions(redis).unwrap(), codes);
        assert_eq!(dump_functions(&[], true), b"\n\x00]\x9b\\@\x0f\x7f\xa2\xda");
        assert_eq!(
            restore_functions(&dump_functions(&[], true)).unwrap().len(),
            0
        );
        let mut bad = redis.to_vec();
        bad[3] ^= 1;
        assert_eq!(
            restore_functions(&bad),
            Err("DUMP payload version or checksum are wrong")
        );
        let value = dump(Value::Str(SmallBytes::from("hello")).view(), true);
        assert_eq!(
            restore_functions(&value),
            Err("given type is not a function")
        );
    }

    #[test]
    fn restore_checks_footer_then_body() {
        let good = dump(Value::Str(SmallBytes::from("hello")).view(), true);
        assert_eq!(
            restore(&good, 1, false, true).unwrap(),
            Value::Str(SmallBytes::from("hello"))
        );
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(
            restore(&bad, 1, false, true),
            Err(RestoreError::VersionOrChecksum)
        );
        // DEBUG SET-SKIP-CHECKSUM-VALIDATION 1: the CRC is not checked, the version still is.
        assert_eq!(
            restore(&bad, 1, true, true).unwrap(),
            Value::Str(SmallBytes::from("hello"))
        );
        assert_eq!(
            restore(&good[..9], 1, false, true),
            Err(RestoreError::VersionOrChecksum)
        );
        let mut newer = good[..good.len() - 10].to_vec();
        newer.extend_from_slice(&11u16.to_le_bytes());
        let crc = CRC64.checksum(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            restore(&newer, 1, false, true),
            Err(RestoreError::VersionOrChecksum)
        );
        assert_eq!(
            restore(&newer, 1, true, true),
            Err(RestoreError::VersionOrChecksum)
        );
        let mut short = b"\x00\x06hello\n\x00".to_vec();
        let crc = CRC64.checksum(&short);
        short.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            restore(&short, 1, false, true),
            Err(RestoreError::BadFormat)
        );
    }
}

//! A bounds-checked cursor over RDB bytes: lengths, strings (integer and LZF encodings),
//! numbers. Every read checks what is left, so truncated or corrupt input is an error.

use crate::{Error, Result};
use alloc::borrow::Cow;
use alloc::vec::Vec;

/// An LZF string may not claim to expand more than this many times (the format's maximum is
/// 88: three bytes for 264): so a forged length cannot make the loader allocate gigabytes.
const LZF_RATIO_MAX: u64 = 90;

/// An RDB length field, or the special string encoding it announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Len {
    /// A plain length.
    Plain(u64),
    /// `0xC0 | n`: an encoded string (0, 1, 2 = 8/16/32-bit integer, 3 = LZF).
    Encoded(u8),
}

/// The cursor.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Error::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Error::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u32.
    pub fn u32_le(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian u64.
    pub fn u64_le(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// A little-endian IEEE double (ZSET_2 scores).
    pub fn f64_le(&mut self) -> Result<f64> {
        self.array().map(f64::from_le_bytes)
    }

    /// A length field or a string encoding marker.
    pub fn len_field(&mut self) -> Result<Len> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3f)),
            1 => Len::Plain(u64::from(b & 0x3f) << 8 | u64::from(self.u8()?)),
            3 => Len::Encoded(b & 0x3f),
            _ => match b {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(Error::Corrupt("unknown length encoding")),
            },
        })
    }

    /// A plain length.
    pub fn len(&mut self) -> Result<u64> {
        match self.len_field()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(Error::Corrupt("encoded value where a length belongs")),
        }
    }

    /// A plain length that counts items each taking at least one byte: bounded by what is
    /// left, so a forged count fails early instead of looping or allocating.
    pub fn count(&mut self) -> Result<usize> {
        let n = self.len()?;
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(Error::Truncated);
        }
        Ok(n as usize)
    }

    /// A string in any encoding, decoded (integers as decimal text, LZF expanded).
    pub fn string(&mut self) -> Result<Cow<'a, [u8]>> {
        match self.len_field()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Error::Truncated)?;
                Ok(Cow::Borrowed(self.take(n)?))
            }
            Len::Encoded(0) => Ok(Cow::Owned(decimal(i64::from(self.u8()? as i8)))),
            Len::Encoded(1) => Ok(Cow::Owned(decimal(i64::from(i16::from_le_bytes(
                self.array()?,
            ))))),
            Len::Encoded(2) => Ok(Cow::Owned(decimal(i64::from(i32::from_le_bytes(
                self.array()?,
            ))))),
            Len::Encoded(3) => self.lzf().map(Cow::Owned),
            Len::Encoded(_) => Err(Error::Corrupt("unknown string encoding")),
        }
    }

    /// The body of an LZF string: compressed length, original length, data.
    fn lzf(&mut self) -> Result<Vec<u8>> {
        let clen = self.len()?;
        let ulen = self.len()?;
        if ulen > clen.saturating_mul(LZF_RATIO_MAX) + 64 {
            return Err(Error::Corrupt("LZF length"));
        }
        let data = self.take(usize::try_from(clen).map_err(|_| Error::Truncated)?)?;
        crate::lzf::decompress(data, ulen as usize).map_err(|_| Error::Corrupt("LZF data"))
    }

    /// A score in the old text form (ZSET type 3): length byte, 253 nan, 254 +inf, 255 -inf.
    pub fn double_text(&mut self) -> Result<f64> {
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_f64(self.take(usize::from(n))?),
        }
    }
}

/// Decimal text of an integer.
pub fn decimal(v: i64) -> Vec<u8> {
    alloc::format!("{v}").into_bytes()
}

/// A float from decimal text (scores stored as strings in listpacks and old zsets).
pub fn parse_f64(s: &[u8]) -> Result<f64> {
    let t = core::str::from_utf8(s).map_err(|_| Error::Corrupt("score text"))?;
    match t {
        "inf" | "+inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        _ => t.parse().map_err(|_| Error::Corrupt("score text")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_decode_every_encoding() {
        let mut r = Reader::new(b"\x05hello\xc190\xc0\xf9\xc2\x00\x00\x00\x80");
        assert_eq!(&*r.string().unwrap(), b"hello");
        assert_eq!(&*r.string().unwrap(), b"12345");
        assert_eq!(&*r.string().unwrap(), b"-7");
        assert_eq!(&*r.string().unwrap(), b"-2147483648");
        assert!(r.is_empty());
        let mut r = Reader::new(b"\xc3\x09\x40\x64\x01aa\xe0\x57\x00\x01aa");
        assert_eq!(&*r.string().unwrap(), &[b'a'; 100][..]);
    }

    #[test]
    fn truncation_and_forged_lengths_are_errors() {
        assert_eq!(Reader::new(b"\x05hel").string(), Err(Error::Truncated));
        assert_eq!(Reader::new(b"\x40").len(), Err(Error::Truncated));
        assert_eq!(
            Reader::new(b"\x81\xff\xff\xff\xff\xff\xff\xff\xff").string(),
            Err(Error::Truncated)
        );
        assert!(Reader::new(b"\xc3\x01\x80\xff\xff\xff\xff\x00")
            .string()
            .is_err());
        assert_eq!(
            Reader::new(b"\x84").len(),
            Err(Error::Corrupt("unknown length encoding"))
        );
        assert_eq!(
            Reader::new(b"\x80\x00\x01\x00\x00").count(),
            Err(Error::Truncated)
        );
    }
}

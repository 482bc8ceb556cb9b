//! Request payloads to the store's [`Op`]s, with cxenstored 4.17's argument rules (checked on the
//! real daemon): single-argument requests need exactly one NUL-terminated string; WRITE needs
//! a NUL after the path; multi-argument requests count complete (NUL-terminated) strings and
//! ignore an unterminated tail. Wrong shapes are EINVAL; unknown or server-only types ENOSYS.

use alloc::vec::Vec;

use kayvee_xenstore::{Op, XsError};

use crate::MsgType;

/// The complete NUL-terminated strings of a payload (an unterminated tail is dropped).
fn strings(payload: &[u8]) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = payload.split(|&c| c == 0).map(<[u8]>::to_vec).collect();
    parts.pop();
    parts
}

/// Exactly one NUL-terminated string.
fn one(payload: &[u8]) -> Result<Vec<u8>, XsError> {
    match payload.split_last() {
        Some((0, s)) if !s.contains(&0) => Ok(s.to_vec()),
        _ => Err(XsError::Einval),
    }
}

/// Exactly `n` complete strings.
fn exactly<const N: usize>(payload: &[u8]) -> Result<[Vec<u8>; N], XsError> {
    strings(payload).try_into().map_err(|_| XsError::Einval)
}

/// WRITE: `path\0value`.
fn write(payload: &[u8]) -> Result<Op, XsError> {
    let nul = payload
        .iter()
        .position(|&c| c == 0)
        .ok_or(XsError::Einval)?;
    Ok(Op::Write(
        payload[..nul].to_vec(),
        payload[nul + 1..].to_vec(),
    ))
}

/// SET_PERMS: path then at least one permission (the store checks the count).
fn set_perms(payload: &[u8]) -> Result<Op, XsError> {
    let mut s = strings(payload);
    if s.is_empty() {
        return Err(XsError::Einval);
    }
    let path = s.remove(0);
    Ok(Op::SetPerms(path, s))
}

/// TRANSACTION_END: `T\0` or `F\0`.
fn transaction_end(payload: &[u8]) -> Result<Op, XsError> {
    match payload {
        b"T\0" => Ok(Op::TransactionEnd(true)),
        b"F\0" => Ok(Op::TransactionEnd(false)),
        _ => Err(XsError::Einval),
    }
}

/// The request of type `ty` with `payload`, or the error it must be answered with.
pub fn parse_request(ty: u32, payload: &[u8]) -> Op {
    let Some(t) = MsgType::from_u32(ty) else {
        return Op::Invalid(XsError::Enosys);
    };
    let r = match t {
        MsgType::Control => match strings(payload) {
            s if s.is_empty() => Err(XsError::Einval),
            s => Ok(Op::Control(s)),
        },
        MsgType::Directory => one(payload).map(Op::Directory),
        MsgType::Read => one(payload).map(Op::Read),
        MsgType::GetPerms => one(payload).map(Op::GetPerms),
        MsgType::Watch => exactly::<2>(payload).map(|[p, t]| Op::Watch(p, t)),
        MsgType::Unwatch => exactly::<2>(payload).map(|[p, t]| Op::Unwatch(p, t)),
        MsgType::TransactionStart => Ok(Op::TransactionStart),
        MsgType::TransactionEnd => transaction_end(payload),
        MsgType::Introduce => exactly::<3>(payload).map(|[d, g, p]| Op::Introduce(d, g, p)),
        MsgType::Release => one(payload).map(Op::Release),
        MsgType::GetDomainPath => one(payload).map(Op::GetDomainPath),
        MsgType::Write => write(payload),
        MsgType::Mkdir => one(payload).map(Op::Mkdir),
        MsgType::Rm => one(payload).map(Op::Rm),
        MsgType::SetPerms => set_perms(payload),
        MsgType::IsDomainIntroduced => one(payload).map(Op::IsDomainIntroduced),
        MsgType::Resume => one(payload).map(Op::Resume),
        MsgType::SetTarget => exactly::<2>(payload).map(|[d, t]| Op::SetTarget(d, t)),
        MsgType::ResetWatches => Ok(Op::ResetWatches),
        MsgType::DirectoryPart => exactly::<2>(payload).map(|[p, o]| Op::DirectoryPart(p, o)),
        MsgType::GetFeature => Ok(Op::GetFeature(strings(payload))),
        MsgType::SetFeature => Ok(Op::SetFeature(strings(payload))),
        MsgType::GetQuota => Ok(Op::GetQuota(strings(payload))),
        MsgType::SetQuota => Ok(Op::SetQuota(strings(payload))),
        MsgType::WatchEvent | MsgType::Error | MsgType::Restrict | MsgType::Invalid => {
            Err(XsError::Enosys)
        }
    };
    r.unwrap_or_else(Op::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn v(s: &[u8]) -> Vec<u8> {
        s.to_vec()
    }

    #[test]
    fn shapes_as_cxenstored() {
        let einval = Op::Invalid(XsError::Einval);
        assert_eq!(parse_request(2, b"/a\0"), Op::Read(v(b"/a")));
        assert_eq!(parse_request(2, b""), einval);
        assert_eq!(parse_request(2, b"/a"), einval);
        assert_eq!(parse_request(2, b"/a\0b\0"), einval);
        assert_eq!(parse_request(11, b"/x\0"), Op::Write(v(b"/x"), vec![]));
        assert_eq!(
            parse_request(11, b"/x\0a\0b"),
            Op::Write(v(b"/x"), v(b"a\0b"))
        );
        assert_eq!(parse_request(11, b"/nonul"), einval);
        assert_eq!(parse_request(4, b"/a\0b\0c"), Op::Watch(v(b"/a"), v(b"b")));
        assert_eq!(parse_request(4, b"/w\0t\x001\0"), einval);
        assert_eq!(parse_request(4, b"/w\0"), einval);
        assert_eq!(parse_request(7, b"T"), einval);
        assert_eq!(parse_request(7, b"F\0"), Op::TransactionEnd(false));
        assert_eq!(parse_request(6, b"junk"), Op::TransactionStart);
        assert_eq!(
            parse_request(14, b"/a\0r0\0"),
            Op::SetPerms(v(b"/a"), vec![v(b"r0")])
        );
        assert_eq!(parse_request(0, b""), einval);
        for ty in [15, 16, 20, 27, 99, 0xffff] {
            assert_eq!(
                parse_request(ty, b"\0"),
                Op::Invalid(XsError::Enosys),
                "{ty}"
            );
        }
    }
}

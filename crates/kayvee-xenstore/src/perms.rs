//! Node permissions (xenstore.txt "Permissions"): the first entry names the owner and the
//! access of every domain not listed; later entries grant per-domain access.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::XsError;

/// An access right: none, read, write or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `n`: no access.
    None,
    /// `r`: read.
    Read,
    /// `w`: write.
    Write,
    /// `b`: read and write.
    Both,
}

impl Access {
    /// The letter used on the wire.
    fn letter(self) -> char {
        match self {
            Access::None => 'n',
            Access::Read => 'r',
            Access::Write => 'w',
            Access::Both => 'b',
        }
    }

    /// True when this access includes reading.
    pub fn can_read(self) -> bool {
        matches!(self, Access::Read | Access::Both)
    }

    /// True when this access includes writing.
    pub fn can_write(self) -> bool {
        matches!(self, Access::Write | Access::Both)
    }
}

/// One permission entry: a domain and its access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Perm {
    /// The domain.
    pub domid: u32,
    /// Its access.
    pub access: Access,
}

/// A node's permission list; never empty (entry 0 is the owner).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Perms(Vec<Perm>);

impl Perms {
    /// `n<owner>`: owned by `owner`, no access for anyone else.
    pub fn owned_by(owner: u32) -> Self {
        Perms(alloc::vec![Perm {
            domid: owner,
            access: Access::None
        }])
    }

    /// Parse SET_PERMS arguments (`r0`, `b5`...); empty list or bad entry is EINVAL.
    pub fn parse(args: &[&[u8]]) -> Result<Self, XsError> {
        let list = args
            .iter()
            .map(|a| parse_one(a))
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(XsError::Einval);
        }
        Ok(Perms(list))
    }

    /// The owning domain.
    pub fn owner(&self) -> u32 {
        self.0[0].domid
    }

    /// All entries, owner first.
    pub fn entries(&self) -> &[Perm] {
        &self.0
    }

    /// This list with the owner replaced (unprivileged creators own what they create).
    pub fn with_owner(&self, owner: u32) -> Self {
        let mut list = self.0.clone();
        list[0].domid = owner;
        Perms(list)
    }

    /// The access `domid` (acting also for `target`, see SET_TARGET) has to the node; the
    /// owner has full access, listed domains their entry, everybody else entry 0's access.
    pub fn access_for(&self, domid: u32, target: Option<u32>) -> Access {
        let is = |d: u32| d == domid || Some(d) == target;
        if is(self.owner()) {
            return Access::Both;
        }
        match self.0[1..].iter().find(|p| p.domid == domid) {
            Some(p) => p.access,
            None => match target.and_then(|t| self.0[1..].iter().find(|p| p.domid == t)) {
                Some(p) => p.access,
                None => self.0[0].access,
            },
        }
    }

    /// The wire strings, e.g. `["n0", "r5"]`.
    pub fn to_strings(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|p| format!("{}{}", p.access.letter(), p.domid))
            .collect()
    }
}

/// Parse one entry: a letter among `nrwb` then a decimal domid.
fn parse_one(raw: &[u8]) -> Result<Perm, XsError> {
    let (&letter, digits) = raw.split_first().ok_or(XsError::Einval)?;
    let access = match letter {
        b'n' => Access::None,
        b'r' => Access::Read,
        b'w' => Access::Write,
        b'b' => Access::Both,
        _ => return Err(XsError::Einval),
    };
    let domid = parse_u32(digits).ok_or(XsError::Einval)?;
    Ok(Perm { domid, access })
}

/// A strict decimal u32: digits only, no sign, no overflow.
pub fn parse_u32(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(digits).ok()?.parse().ok()
}

/// C `strtoul`-like lenient parse used for domids by cxenstored: leading blanks skipped, an
/// optional sign, digits read until the first non-digit (garbage gives 0), wrapping like an
/// unsigned long, then truncated to 32 bits (`-1` is 4294967295, `4294967296` is 0).
pub fn parse_lenient(raw: &[u8]) -> u32 {
    parse_lenient_u64(raw) as u32
}

/// [`parse_lenient`] without the truncation: an unsigned long (INTRODUCE's guest frame).
pub fn parse_lenient_u64(raw: &[u8]) -> u64 {
    let start = raw
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(raw.len());
    let mut rest = &raw[start..];
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    let mut n: u64 = 0;
    for &c in rest.iter().take_while(|c| c.is_ascii_digit()) {
        n = n.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
    }
    if negative {
        n = n.wrapping_neg();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format() {
        let p = Perms::parse(&[b"r0", b"b9"]).unwrap();
        assert_eq!(p.to_strings(), ["r0", "b9"]);
        assert_eq!(Perms::parse(&[]), Err(XsError::Einval));
        assert_eq!(Perms::parse(&[b"x0"]), Err(XsError::Einval));
        assert_eq!(Perms::parse(&[b"r"]), Err(XsError::Einval));
        assert_eq!(Perms::parse(&[b"r-1"]), Err(XsError::Einval));
    }

    #[test]
    fn access_rules() {
        let p = Perms::parse(&[b"n1", b"r2", b"w3"]).unwrap();
        assert_eq!(p.access_for(1, None), Access::Both);
        assert_eq!(p.access_for(2, None), Access::Read);
        assert_eq!(p.access_for(3, None), Access::Write);
        assert_eq!(p.access_for(4, None), Access::None);
        assert_eq!(p.access_for(4, Some(1)), Access::Both);
        assert_eq!(p.access_for(4, Some(2)), Access::Read);
        let open = Perms::parse(&[b"r1"]).unwrap();
        assert_eq!(open.access_for(7, None), Access::Read);
    }

    #[test]
    fn lenient_numbers() {
        assert_eq!(parse_lenient(b" 100"), 100);
        assert_eq!(parse_lenient(b"abc"), 0);
        assert_eq!(parse_lenient(b"12x"), 12);
        assert_eq!(parse_lenient(b"-1"), u32::MAX);
        assert_eq!(parse_lenient(b"4294967296"), 0);
        assert_eq!(parse_u32(b"12x"), None);
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
    }
}

//! The message type table of xs_wire.h (numbers are ABI) with the exact XS_ names.

/// A message type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum MsgType {
    /// XS_CONTROL (alias XS_DEBUG).
    Control = 0,
    /// XS_DIRECTORY.
    Directory = 1,
    /// XS_READ.
    Read = 2,
    /// XS_GET_PERMS.
    GetPerms = 3,
    /// XS_WATCH.
    Watch = 4,
    /// XS_UNWATCH.
    Unwatch = 5,
    /// XS_TRANSACTION_START.
    TransactionStart = 6,
    /// XS_TRANSACTION_END.
    TransactionEnd = 7,
    /// XS_INTRODUCE.
    Introduce = 8,
    /// XS_RELEASE.
    Release = 9,
    /// XS_GET_DOMAIN_PATH.
    GetDomainPath = 10,
    /// XS_WRITE.
    Write = 11,
    /// XS_MKDIR.
    Mkdir = 12,
    /// XS_RM.
    Rm = 13,
    /// XS_SET_PERMS.
    SetPerms = 14,
    /// XS_WATCH_EVENT (server to client).
    WatchEvent = 15,
    /// XS_ERROR (server to client).
    Error = 16,
    /// XS_IS_DOMAIN_INTRODUCED.
    IsDomainIntroduced = 17,
    /// XS_RESUME.
    Resume = 18,
    /// XS_SET_TARGET.
    SetTarget = 19,
    /// XS_RESTRICT (removed from Xen; ENOSYS).
    Restrict = 20,
    /// XS_RESET_WATCHES.
    ResetWatches = 21,
    /// XS_DIRECTORY_PART.
    DirectoryPart = 22,
    /// XS_GET_FEATURE.
    GetFeature = 23,
    /// XS_SET_FEATURE.
    SetFeature = 24,
    /// XS_GET_QUOTA.
    GetQuota = 25,
    /// XS_SET_QUOTA.
    SetQuota = 26,
    /// XS_INVALID.
    Invalid = 0xffff,
}

impl MsgType {
    /// Every type, in number order.
    pub const ALL: [MsgType; 28] = [
        MsgType::Control,
        MsgType::Directory,
        MsgType::Read,
        MsgType::GetPerms,
        MsgType::Watch,
        MsgType::Unwatch,
        MsgType::TransactionStart,
        MsgType::TransactionEnd,
        MsgType::Introduce,
        MsgType::Release,
        MsgType::GetDomainPath,
        MsgType::Write,
        MsgType::Mkdir,
        MsgType::Rm,
        MsgType::SetPerms,
        MsgType::WatchEvent,
        MsgType::Error,
        MsgType::IsDomainIntroduced,
        MsgType::Resume,
        MsgType::SetTarget,
        MsgType::Restrict,
        MsgType::ResetWatches,
        MsgType::DirectoryPart,
        MsgType::GetFeature,
        MsgType::SetFeature,
        MsgType::GetQuota,
        MsgType::SetQuota,
        MsgType::Invalid,
    ];

    /// The type with this number.
    pub fn from_u32(n: u32) -> Option<MsgType> {
        MsgType::ALL.into_iter().find(|t| *t as u32 == n)
    }

    /// The xs_wire.h name, e.g. `"XS_READ"`.
    pub fn name(self) -> &'static str {
        match self {
            MsgType::Control => "XS_CONTROL",
            MsgType::Directory => "XS_DIRECTORY",
            MsgType::Read => "XS_READ",
            MsgType::GetPerms => "XS_GET_PERMS",
            MsgType::Watch => "XS_WATCH",
            MsgType::Unwatch => "XS_UNWATCH",
            MsgType::TransactionStart => "XS_TRANSACTION_START",
            MsgType::TransactionEnd => "XS_TRANSACTION_END",
            MsgType::Introduce => "XS_INTRODUCE",
            MsgType::Release => "XS_RELEASE",
            MsgType::GetDomainPath => "XS_GET_DOMAIN_PATH",
            MsgType::Write => "XS_WRITE",
            MsgType::Mkdir => "XS_MKDIR",
            MsgType::Rm => "XS_RM",
            MsgType::SetPerms => "XS_SET_PERMS",
            MsgType::WatchEvent => "XS_WATCH_EVENT",
            MsgType::Error => "XS_ERROR",
            MsgType::IsDomainIntroduced => "XS_IS_DOMAIN_INTRODUCED",
            MsgType::Resume => "XS_RESUME",
            MsgType::SetTarget => "XS_SET_TARGET",
            MsgType::Restrict => "XS_RESTRICT",
            MsgType::ResetWatches => "XS_RESET_WATCHES",
            MsgType::DirectoryPart => "XS_DIRECTORY_PART",
            MsgType::GetFeature => "XS_GET_FEATURE",
            MsgType::SetFeature => "XS_SET_FEATURE",
            MsgType::GetQuota => "XS_GET_QUOTA",
            MsgType::SetQuota => "XS_SET_QUOTA",
            MsgType::Invalid => "XS_INVALID",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_abi() {
        assert_eq!(MsgType::from_u32(2), Some(MsgType::Read));
        assert_eq!(MsgType::from_u32(26), Some(MsgType::SetQuota));
        assert_eq!(MsgType::from_u32(0xffff), Some(MsgType::Invalid));
        assert_eq!(MsgType::from_u32(27), None);
        for (i, t) in MsgType::ALL[..27].iter().enumerate() {
            assert_eq!(*t as u32, i as u32, "{}", t.name());
        }
    }
}

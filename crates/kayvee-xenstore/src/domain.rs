//! Domains known to the daemon (INTRODUCE / RELEASE / RESUME / SET_TARGET bookkeeping) and
//! their per-domain quota overrides and features.

use alloc::collections::BTreeMap;

use crate::store::Quota;

/// An introduced domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// Guest frame of its ring page (as INTRODUCE gave it).
    pub gfn: u64,
    /// Its event channel port.
    pub port: u32,
    /// The domain it is a device model for (SET_TARGET; set it only through
    /// `Xenstored`'s SET_TARGET, which notes that some domain has one).
    pub target: Option<u32>,
    /// Its own quota (SET_QUOTA with a domid; set it only through `Xenstored`'s SET_QUOTA,
    /// which notes that some domain has one), else the global one.
    pub quota: Option<Quota>,
    /// Features it negotiated (SET_FEATURE).
    pub features: u32,
    /// Times RESUME was received (kept for CONTROL memreport / tests).
    pub resumed: u32,
}

/// The domain table. Dom0 is always present: it is the privileged domain.
#[derive(Clone, Debug, Default)]
pub struct Domains {
    /// Introduced guests by domid (dom0 not stored).
    pub table: BTreeMap<u32, Domain>,
    /// Features SET_FEATURE gave domains not introduced yet: they take them at INTRODUCE
    /// (newer Xen's toolstack restricts a guest's features before introducing it).
    pub preset_features: BTreeMap<u32, u32>,
}

impl Domains {
    /// True when `domid` is dom0 or has been introduced and not released.
    pub fn exists(&self, domid: u32) -> bool {
        domid == 0 || self.table.contains_key(&domid)
    }

    /// Record an introduction; true when the domain is new (fires `@introduceDomain`).
    pub fn introduce(&mut self, domid: u32, gfn: u64, port: u32) -> bool {
        if domid == 0 {
            return false;
        }
        let fresh = !self.table.contains_key(&domid);
        let d = self.table.entry(domid).or_insert(Domain {
            gfn,
            port,
            target: None,
            quota: None,
            features: 0,
            resumed: 0,
        });
        d.gfn = gfn;
        d.port = port;
        fresh
    }

    /// The target of `domid`, if SET_TARGET gave one.
    pub fn target(&self, domid: u32) -> Option<u32> {
        self.table.get(&domid).and_then(|d| d.target)
    }

    /// The quota applying to `domid`.
    pub fn quota(&self, domid: u32, global: &Quota) -> Quota {
        self.table
            .get(&domid)
            .and_then(|d| d.quota)
            .unwrap_or(*global)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn introduce_release_target() {
        let mut d = Domains::default();
        assert!(d.exists(0));
        assert!(!d.exists(3));
        assert!(d.introduce(3, 100, 5));
        assert!(!d.introduce(3, 101, 5));
        assert_eq!(d.table[&3].gfn, 101);
        assert!(!d.introduce(0, 1, 1));
        d.table.get_mut(&3).unwrap().target = Some(4);
        assert_eq!(d.target(3), Some(4));
        let q = Quota::default();
        assert_eq!(d.quota(3, &q), q);
    }
}

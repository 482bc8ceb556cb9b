//! Executes the store operations (READ, DIRECTORY, DIRECTORY_PART, GET_PERMS, WRITE, MKDIR,
//! RM, SET_PERMS) against one [`Store`] version, for plain requests, for requests inside a
//! transaction and for the replay of a transaction at commit.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::XsError;
use crate::op::{Op, Reply};
use crate::path::{canonicalize, parent};
use crate::perms::{parse_lenient, Perms};
use crate::store::{child_names, Actor, Change, Quota, Store};

/// Largest payload a reply may carry (XENSTORE_PAYLOAD_MAX).
pub const PAYLOAD_MAX: usize = 4096;

/// What one operation touched: paths it read (their outcome depends on the state there) and
/// the changes it made.
#[derive(Clone, Debug, Default)]
pub struct Effects {
    /// Paths whose state the reply depends on.
    pub reads: Vec<String>,
    /// Modifications made.
    pub changes: Vec<Change>,
}

/// The context an operation runs in: who, with which limits, and the stamp counter.
pub struct Ctx<'a> {
    /// The requesting domain.
    pub actor: Actor,
    /// The quota applying to it.
    pub quota: &'a Quota,
    /// Generation counter: each modification takes the next stamp.
    pub gen: &'a mut u64,
}

impl Ctx<'_> {
    /// Validate a path for this actor.
    fn path(&self, raw: &[u8]) -> Result<String, XsError> {
        canonicalize(raw, self.actor.domid, self.quota.path_max as usize)
    }

    /// The next generation stamp.
    fn stamp(&mut self) -> u64 {
        *self.gen += 1;
        *self.gen
    }
}

/// Run a store operation; the reply and what it touched go to the caller.
pub fn apply(store: &mut Store, cx: &mut Ctx<'_>, op: &Op, fx: &mut Effects) -> Reply {
    let result = match op {
        Op::Read(p) => read(store, cx, p, fx),
        Op::Directory(p) => directory(store, cx, p, fx),
        Op::DirectoryPart(p, off) => directory_part(store, cx, p, off, fx),
        Op::GetPerms(p) => get_perms(store, cx, p, fx),
        Op::Write(p, v) => write(store, cx, p, v, fx),
        Op::Mkdir(p) => mkdir(store, cx, p, fx),
        Op::Rm(p) => rm(store, cx, p, fx),
        Op::SetPerms(p, perms) => set_perms(store, cx, p, perms, fx),
        _ => Err(XsError::Einval),
    };
    result.unwrap_or_else(Reply::Error)
}

/// READ: the raw value.
fn read(store: &Store, cx: &Ctx<'_>, p: &[u8], fx: &mut Effects) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let r = store
        .read(&cx.actor, &path)
        .map(|n| Reply::Value(n.value.clone()));
    fx.reads.push(path);
    r
}

/// DIRECTORY: child names; E2BIG when they would not fit in one reply.
fn directory(store: &Store, cx: &Ctx<'_>, p: &[u8], fx: &mut Effects) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let r = store.read(&cx.actor, &path).map(|n| child_names(n));
    fx.reads.push(path);
    let names = r?;
    match names.iter().map(|n| n.len() + 1).sum::<usize>() > PAYLOAD_MAX {
        true => Err(XsError::E2big),
        false => Ok(Reply::List(names)),
    }
}

/// DIRECTORY_PART: `<gen>\0` then the NUL-joined child list from byte `offset`, as many
/// whole names as fit; the last chunk ends with an extra NUL (cxenstored's format).
fn directory_part(
    store: &Store,
    cx: &Ctx<'_>,
    p: &[u8],
    off: &[u8],
    fx: &mut Effects,
) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let r = store
        .read(&cx.actor, &path)
        .map(|n| (n.gen, child_names(n)));
    fx.reads.push(path);
    let (gen, names) = r?;
    let mut joined = Vec::new();
    for n in &names {
        joined.extend_from_slice(n);
        joined.push(0);
    }
    let offset = (parse_lenient(off) as usize).min(joined.len());
    let head = format!("{gen}");
    let room = PAYLOAD_MAX - head.len() - 2;
    let rest = &joined[offset..];
    let mut items = alloc::vec![head.into_bytes()];
    let cut = match rest.len() <= room {
        true => rest.len(),
        false => rest[..room]
            .iter()
            .rposition(|&c| c == 0)
            .map_or(0, |i| i + 1),
    };
    items.extend(
        rest[..cut]
            .split(|&c| c == 0)
            .filter(|s| !s.is_empty())
            .map(<[u8]>::to_vec),
    );
    if cut == rest.len() {
        items.push(Vec::new());
    }
    Ok(Reply::List(items))
}

/// GET_PERMS: the permission strings.
fn get_perms(store: &Store, cx: &Ctx<'_>, p: &[u8], fx: &mut Effects) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let r = store.read(&cx.actor, &path).map(|n| n.perms.to_strings());
    fx.reads.push(path);
    Ok(Reply::List(
        r?.into_iter().map(String::into_bytes).collect(),
    ))
}

/// Record a failed modification as a read of the parent (its error depends on the state
/// there), and pass the error on.
fn failed(path: &str, fx: &mut Effects, e: XsError) -> Result<Reply, XsError> {
    fx.reads.push(String::from(parent(path)));
    Err(e)
}

/// WRITE.
fn write(
    store: &mut Store,
    cx: &mut Ctx<'_>,
    p: &[u8],
    v: &[u8],
    fx: &mut Effects,
) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let gen = cx.stamp();
    match store.write(&cx.actor, cx.quota, &path, v, gen) {
        Ok(c) => Ok(changed(fx, c)),
        Err(e) => failed(&path, fx, e),
    }
}

/// MKDIR; an existing node still counts as written (its existence is what MKDIR asserts).
fn mkdir(
    store: &mut Store,
    cx: &mut Ctx<'_>,
    p: &[u8],
    fx: &mut Effects,
) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let gen = cx.stamp();
    match store.mkdir(&cx.actor, cx.quota, &path, gen) {
        Ok(Some(c)) => Ok(changed(fx, c)),
        Ok(None) => {
            fx.reads.push(path);
            Ok(Reply::Ok)
        }
        Err(e) => failed(&path, fx, e),
    }
}

/// RM.
fn rm(store: &mut Store, cx: &mut Ctx<'_>, p: &[u8], fx: &mut Effects) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let gen = cx.stamp();
    match store.rm(&cx.actor, &path, gen) {
        Ok(Some(c)) => Ok(changed(fx, c)),
        Ok(None) => {
            fx.reads.push(String::from(parent(&path)));
            Ok(Reply::Ok)
        }
        Err(e) => failed(&path, fx, e),
    }
}

/// SET_PERMS on a node (special paths are the daemon's business).
fn set_perms(
    store: &mut Store,
    cx: &mut Ctx<'_>,
    p: &[u8],
    perms: &[Vec<u8>],
    fx: &mut Effects,
) -> Result<Reply, XsError> {
    let path = cx.path(p)?;
    let args: Vec<&[u8]> = perms.iter().map(Vec::as_slice).collect();
    let perms = Perms::parse(&args)?;
    let gen = cx.stamp();
    match store.set_perms(&cx.actor, cx.quota, &path, perms, gen) {
        Ok(c) => Ok(changed(fx, c)),
        Err(e) => failed(&path, fx, e),
    }
}

/// Record a change and answer OK.
fn changed(fx: &mut Effects, c: Change) -> Reply {
    fx.changes.push(c);
    Reply::Ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn run(store: &mut Store, op: Op) -> Reply {
        let q = Quota::default();
        let mut gen = 0;
        let mut cx = Ctx {
            actor: Actor::DOM0,
            quota: &q,
            gen: &mut gen,
        };
        apply(store, &mut cx, &op, &mut Effects::default())
    }

    #[test]
    fn directory_part_chunks() {
        let mut s = Store::new();
        run(&mut s, Op::Write(b"/tool".to_vec(), vec![]));
        run(&mut s, Op::Write(b"/a".to_vec(), vec![]));
        let Reply::List(items) = run(&mut s, Op::DirectoryPart(b"/".to_vec(), b"0".to_vec()))
        else {
            panic!()
        };
        assert_eq!(&items[1..], [&b"a"[..], b"tool", b""]);
        let Reply::List(items) = run(&mut s, Op::DirectoryPart(b"/".to_vec(), b"4".to_vec()))
        else {
            panic!()
        };
        assert_eq!(&items[1..], [&b"ol"[..], b""]);
    }

    #[test]
    fn big_directories() {
        let mut s = Store::new();
        for i in 0..600 {
            let p = format!("/d/child-number-{i:04}");
            assert_eq!(run(&mut s, Op::Write(p.into_bytes(), vec![])), Reply::Ok);
        }
        assert_eq!(
            run(&mut s, Op::Directory(b"/d".to_vec())),
            Reply::Error(XsError::E2big)
        );
        let mut all = Vec::new();
        let mut offset = 0usize;
        loop {
            let op = Op::DirectoryPart(b"/d".to_vec(), format!("{offset}").into_bytes());
            let Reply::List(items) = run(&mut s, op) else {
                panic!()
            };
            let last = items.last().unwrap().is_empty();
            for it in &items[1..] {
                if !it.is_empty() {
                    offset += it.len() + 1;
                    all.push(it.clone());
                }
            }
            if last {
                break;
            }
        }
        assert_eq!(all.len(), 600);
    }
}

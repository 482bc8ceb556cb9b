//! XPENDING, XCLAIM and XAUTOCLAIM: the pending entries lists of consumer groups.

use super::{
    no_group, parse_range_bound, parse_strict_id, propagate_claim, propagate_group_id, reply_entry,
    reply_id, write_stream,
};
use crate::argv::Argv;
use crate::cmd::notify::{class as nc, emit};
use crate::error::{CmdResult, Error};
use crate::reply::ReplySink;
use crate::util::parse_i64;
use crate::value::stream::{OwnedEntry, Pending, Stream, StreamId};
use crate::value::ValueRef;
use crate::Cx;
use alloc::vec::Vec;
use kayvee_pds::SmallBytes;

/// XPENDING key group [[IDLE min-idle] start end count [consumer]].
pub(super) fn xpending(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(Error::Syntax);
    }
    let mut range = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if args.get(3).eq_ignore_ascii_case(b"idle") {
            min_idle = parse_i64(args.get(4)).ok_or(Error::NotInteger)?;
            if n < 8 {
                return Err(Error::Syntax);
            }
            at += 2;
        }
        let count =
            parse_i64(args.try_get(at + 2).ok_or(Error::Syntax)?).ok_or(Error::NotInteger)?;
        let start = parse_range_bound(args.get(at), 0, true)?
            .ok_or(Error::msg("ERR invalid start ID for the interval"))?;
        let end = parse_range_bound(args.get(at + 1), u64::MAX, false)?
            .ok_or(Error::msg("ERR invalid end ID for the interval"))?;
        range = Some((
            min_idle,
            start,
            end,
            count.max(0) as usize,
            args.try_get(at + 3),
        ));
    }
    let (key, gname) = (args.get(1), args.get(2));
    let now = cx.now_ms();
    let s = match cx.db().lookup_read(key, now).map(|e| e.value()) {
        None => None,
        Some(ValueRef::Stream(s)) => Some(super::readable(s)?),
        Some(_) => return Err(Error::WrongType),
    };
    let Some(g) = s.and_then(|s| s.group(gname)) else {
        return Err(no_group(key, gname, ""));
    };
    let Some((min_idle, start, end, count, consumer)) = range else {
        out.array(4);
        out.int(g.pel.len() as i64);
        match (g.pel.first(), g.pel.last()) {
            (Some(a), Some(b)) => {
                reply_id(out, a.id);
                reply_id(out, b.id);
                let owners: Vec<_> = g.consumers.iter().filter(|c| !c.pel.is_empty()).collect();
                out.array(owners.len());
                for c in owners {
                    out.array(2);
                    out.bulk(&c.name);
                    out.bulk(c.pel.len().to_string().as_bytes());
                }
            }
            _ => {
                out.null();
                out.null();
                out.null_array();
            }
        }
        return Ok(());
    };
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumer(name) {
            None => {
                out.array(0);
                return Ok(());
            }
            Some(c) => c.pel.iter_from(c.pel.count_less(&start)).copied().collect(),
        },
        None => g
            .pel
            .iter_from(g.pel.count_less(&Pending::probe(start)))
            .map(|p| p.id)
            .collect(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if id > end || rows.len() >= count {
            break;
        }
        let p = g.pel.get(&Pending::probe(id)).expect("pending");
        let idle = now as i64 - p.delivery_ms as i64;
        if min_idle > 0 && idle < min_idle {
            continue;
        }
        rows.push((p.id, p.consumer.to_vec(), idle.max(0), p.delivery_count));
    }
    out.array(rows.len());
    for (id, c, idle, n) in rows {
        out.array(4);
        reply_id(out, id);
        out.bulk(&c);
        out.int(idle);
        out.int(n as i64);
    }
    Ok(())
}

use alloc::string::ToString;

/// The group `gname` of the stream at `key`, which must exist (NOGROUP otherwise).
fn group_stream<'c>(cx: &'c mut Cx<'_>, key: &[u8], gname: &[u8]) -> Result<&'c mut Stream, Error> {
    match write_stream(cx, key)? {
        Some(s) if s.group(gname).is_some() => Ok(s),
        _ => Err(no_group(key, gname, "")),
    }
}

/// What a claim does to one pending entry, for the reply and propagation.
enum Claimed {
    Entry(StreamId, Option<OwnedEntry>),
}

/// XCLAIM key group consumer min-idle id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
/// [JUSTID] [LASTID id].
pub(super) fn xclaim(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, gname, cname) = (args.get(1), args.get(2), args.get(3));
    group_stream(cx, key, gname)?;
    let min_idle = parse_i64(args.get(4))
        .ok_or(Error::msg("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(args.get(j), 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = cx.now_ms() as i64;
    let (mut force, mut justid) = (false, false);
    let mut retry: Option<i64> = None;
    let mut delivery: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        let num = |j: usize, what: &'static str| parse_i64(args.get(j)).ok_or(Error::msg(what));
        if opt.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if opt.eq_ignore_ascii_case(b"idle") && more > 0 {
            j += 1;
            delivery = Some(now - num(j, "ERR Invalid IDLE option argument for XCLAIM")?);
        } else if opt.eq_ignore_ascii_case(b"time") && more > 0 {
            j += 1;
            delivery = Some(num(j, "ERR Invalid TIME option argument for XCLAIM")?);
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more > 0 {
            j += 1;
            retry = Some(num(j, "ERR Invalid RETRYCOUNT option argument for XCLAIM")?);
        } else if opt.eq_ignore_ascii_case(b"lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(args.get(j), 0)?;
        } else {
            let mut t = b"ERR Unrecognized XCLAIM option '".to_vec();
            t.extend_from_slice(opt);
            t.push(b'\'');
            return Err(Error::Bytes(t));
        }
        j += 1;
    }
    // A time in the future is taken as now (a client's clock may run ahead), except in an
    // AOF replay, whose XCLAIMs carry the times to restore.
    let delivery = match delivery {
        Some(d) if d >= 0 && (d <= now || super::replaying(cx)) => d as u64,
        _ => now as u64,
    };
    let now = now as u64;
    let s = group_stream(cx, key, gname)?;
    let gi = s.group_pos(gname).expect("checked");
    let mut moved = false;
    if last_id > s.groups[gi].last_id {
        s.groups[gi].last_id = last_id;
        moved = true;
    }
    let mut claimed = Vec::new();
    let mut props: Vec<Pending> = Vec::new();
    let mut created = false;
    for id in ids {
        let pending = s.groups[gi].pel.get(&Pending::probe(id)).cloned();
        let entry = s.get(id);
        if entry.is_none() {
            if let Some(p) = pending {
                s.groups[gi].ack(id);
                props.push(p);
            }
            continue;
        }
        let p = match pending {
            Some(p) => p,
            None if force => Pending {
                id,
                consumer: SmallBytes::default(),
                delivery_ms: now,
                delivery_count: 1,
            },
            None => continue,
        };
        let fresh = p.consumer.is_empty();
        if !fresh && min_idle > 0 && (now as i64 - p.delivery_ms as i64) < min_idle {
            continue;
        }
        let g = &mut s.groups[gi];
        let (c, made) = g.consumer_or_create(cname, now);
        c.seen_ms = now;
        created |= made;
        let mut p = p;
        if !fresh {
            g.ack(id);
        }
        p.delivery_ms = delivery;
        if let Some(r) = retry.filter(|r| *r >= 0) {
            p.delivery_count = r as u64;
        } else if !justid {
            p.delivery_count += 1;
        }
        p.consumer = SmallBytes::from_slice(cname);
        g.pel.insert(p.clone());
        g.consumer_mut(cname).expect("created").pel.insert(id);
        claimed.push(Claimed::Entry(id, (!justid).then_some(entry).flatten()));
        props.push(p);
    }
    let group_last = s.groups[gi].last_id;
    let read = s.groups[gi].entries_read;
    if created {
        emit(cx, nc::STREAM, "xgroup-createconsumer", key);
    }
    for p in &props {
        propagate_claim(cx, key, gname, group_last, p);
    }
    if moved && props.is_empty() {
        propagate_group_id(cx, key, gname, group_last, read);
    }
    if moved || !props.is_empty() || created {
        cx.db().modified(key);
    }
    out.array(claimed.len());
    for Claimed::Entry(id, e) in &claimed {
        match (justid, e) {
            (true, _) => reply_id(out, *id),
            (false, Some(e)) => reply_entry(out, e),
            (false, None) => out.null(),
        }
    }
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle start [COUNT count] [JUSTID].
pub(super) fn xautoclaim(cx: &mut Cx<'_>, args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let (key, gname, cname) = (args.get(1), args.get(2), args.get(3));
    let min_idle = parse_i64(args.get(4))
        .ok_or(Error::msg(
            "ERR Invalid min-idle-time argument for XAUTOCLAIM",
        ))?
        .max(0);
    let start = parse_range_bound(args.get(5), 0, true)?
        .ok_or(Error::msg("ERR invalid start ID for the interval"))?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"count") && more > 0 {
            let max = i64::MAX / 16;
            count = parse_i64(args.get(j + 1))
                .filter(|c| (1..=max).contains(c))
                .ok_or(Error::msg("ERR COUNT must be > 0"))?;
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    let now = cx.now_ms();
    let s = group_stream(cx, key, gname)?;
    let gi = s.group_pos(gname).expect("checked");
    let snapshot = s.groups[gi].pel.clone();
    let mut attempts = count.saturating_mul(10);
    let mut it = snapshot
        .iter_from(snapshot.count_less(&Pending::probe(start)))
        .peekable();
    let (mut claimed, mut deleted, mut props) = (Vec::new(), Vec::new(), Vec::new());
    let mut created = false;
    while attempts > 0 && count > 0 {
        attempts -= 1;
        let Some(p) = it.next() else { break };
        let id = p.id;
        let Some(entry) = s.get(id) else {
            s.groups[gi].ack(id);
            props.push(p.clone());
            deleted.push(id);
            count -= 1;
            continue;
        };
        if min_idle > 0 && (now as i64 - p.delivery_ms as i64) < min_idle {
            continue;
        }
        let g = &mut s.groups[gi];
        let (c, made) = g.consumer_or_create(cname, now);
        c.seen_ms = now;
        created |= made;
        g.ack(id);
        let mut p = p.clone();
        p.delivery_ms = now;
        if !justid {
            p.delivery_count += 1;
        }
        p.consumer = SmallBytes::from_slice(cname);
        g.pel.insert(p.clone());
        g.consumer_mut(cname).expect("created").pel.insert(id);
        claimed.push((id, entry));
        props.push(p);
        count -= 1;
    }
    let next = it.next().map_or(StreamId::MIN, |p| p.id);
    let group_last = s.groups[gi].last_id;
    if created {
        emit(cx, nc::STREAM, "xgroup-createconsumer", key);
    }
    for p in &props {
        propagate_claim(cx, key, gname, group_last, p);
    }
    if !props.is_empty() || created {
        cx.db().modified(key);
    }
    out.array(3);
    reply_id(out, next);
    out.array(claimed.len());
    for (id, e) in &claimed {
        if justid {
            reply_id(out, *id);
        } else {
            reply_entry(out, e);
        }
    }
    out.array(deleted.len());
    for id in deleted {
        reply_id(out, id);
    }
    Ok(())
}

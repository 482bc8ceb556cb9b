//! Reading streams from RDB files and DUMP payloads (`encode` writes them), as Redis 7.0 writes them (`RDB_TYPE_STREAM_LISTPACKS_2`,
//! type 19; type 15 of Redis 5 and 6 is read too).
//!
//! Body: the node count, then per node its 16-byte master ID (big-endian ms and seq) and its
//! listpack, both as strings; the length; the last ID, (type 19:) the first ID, the greatest
//! deleted ID and the entries-added counter; the groups, each with its name, last ID,
//! (type 19:) entries-read, its PEL (16-byte IDs raw, delivery time as 8 bytes LE, delivery
//! count) and its consumers (name, seen time, PEL as raw IDs).

use crate::read::Reader;
use crate::{types, Error, Result};
use alloc::boxed::Box;
use kayvee_engine::value::stream::{listpack, Consumer, Group, Node, Pending, Stream, StreamId};
use kayvee_engine::Value;
use kayvee_pds::SmallBytes;

fn read_id(r: &mut Reader<'_>) -> Result<StreamId> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn raw_id(r: &mut Reader<'_>) -> Result<StreamId> {
    let b: [u8; 16] = r.take(16)?.try_into().map_err(|_| Error::Truncated)?;
    Ok(StreamId::from_be_bytes(&b))
}

/// Reads a stream body of type 15 or 19.
pub fn read(r: &mut Reader<'_>, ty: u8) -> Result<Value> {
    let v2 = ty == types::STREAM_LISTPACKS_2;
    let mut s = Stream::new();
    let nodes = r.count()?;
    for _ in 0..nodes {
        let key = r.string()?;
        let key: [u8; 16] = key[..]
            .try_into()
            .map_err(|_| Error::Corrupt("stream node key"))?;
        let lp = r.string()?.into_owned();
        if listpack::validate(&lp).is_none() {
            return Err(Error::Corrupt("stream listpack"));
        }
        let node = Node::from_bytes(StreamId::from_be_bytes(&key), lp);
        if node.count() == 0 {
            return Err(Error::Corrupt("empty stream listpack"));
        }
        s.push_node(node);
    }
    s.length = r.len()?;
    s.last_id = read_id(r)?;
    if v2 {
        s.first_id = read_id(r)?;
        s.max_deleted = read_id(r)?;
        s.entries_added = r.len()?;
    } else {
        s.first_id = s.first_entry().map_or(StreamId::MIN, |e| e.id);
        s.entries_added = s.length;
    }
    let groups = r.count()?;
    for _ in 0..groups {
        let name = r.string()?;
        let last = read_id(r)?;
        let read = if v2 {
            r.len()? as i64
        } else {
            s.estimate_distance(last)
        };
        let mut g = Group::new(&name, last, read);
        let pel = r.count()?;
        for _ in 0..pel {
            let id = raw_id(r)?;
            let ms = r.u64_le()?;
            let count = r.len()?;
            g.pel.insert(Pending {
                id,
                consumer: SmallBytes::default(),
                delivery_ms: ms,
                delivery_count: count,
            });
        }
        let consumers = r.count()?;
        for _ in 0..consumers {
            let name = r.string()?;
            let mut c = Consumer::new(&name, r.u64_le()?);
            let n = r.count()?;
            for _ in 0..n {
                let id = raw_id(r)?;
                let mut p = g
                    .pel
                    .take(&Pending::probe(id))
                    .ok_or(Error::Corrupt("consumer PEL entry not in the group PEL"))?;
                p.consumer = c.name.clone();
                g.pel.insert(p);
                c.pel.insert(id);
            }
            let at = g
                .consumer_pos(&name)
                .err()
                .ok_or(Error::Corrupt("duplicate consumer"))?;
            g.consumers.insert(at, c);
        }
        if g.pel.iter().any(|p| p.consumer.is_empty()) {
            return Err(Error::Corrupt("group PEL entry without a consumer"));
        }
        let at = s
            .group_pos(&name)
            .err()
            .ok_or(Error::Corrupt("duplicate group"))?;
        s.groups.insert(at, g);
    }
    Ok(Value::Stream(Box::new(s)))
}

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
use kayvee_engine::value::stream::{Consumer, Group, Node, Pending, Stream, StreamId};
use kayvee_engine::Value;
use kayvee_pds::SmallBytes;

fn read_id(r: &mut Reader<'_>) -> Result<StreamId> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn raw_id(r: &mut Reader<'_>) -> Result<StreamId> {
    let b: [u8; 16] = r.take(16)?.try_into().map_err(|_| Error::Truncated)?;
    Ok(StreamId::from_be_bytes(&b))
}

/// Redis's checks of a stream node without deep sanitization: the header's total matches the
/// blob, which ends with the terminator and holds a first entry, whole (Redis asserts on one
/// that is not; Kayvee refuses it).
fn node_header_sound(lp: &[u8]) -> bool {
    let Ok(total) = Reader::new(lp).u32_le() else {
        return false;
    };
    total as usize == lp.len()
        && lp.len() >= 7
        && lp.last() == Some(&0xFF)
        && crate::listpack::first_entry_whole(lp)
}

/// Reads a stream body of type 15 or 19. With `deep`, every node must be a well-formed stream
/// node (Redis's deep sanitization); without, a node whose header is sound is kept even when
/// its entries are not ([`node_header_sound`]), as Redis keeps it, and the stream is marked
/// [`Stream::corrupt`]: Kayvee then answers an error to its commands where Redis may crash.
/// The master IDs must ascend either way.
pub fn read(r: &mut Reader<'_>, ty: u8, deep: bool) -> Result<Value> {
    const BAD_NODE: Error = Error::Integrity("Stream listpack integrity check failed.");
    let v2 = ty == types::STREAM_LISTPACKS_2;
    let mut s = Stream::new();
    let nodes = r.count()?;
    let (mut live, mut prev_last) = (0u64, None::<StreamId>);
    for _ in 0..nodes {
        let key = r.string()?;
        let key: [u8; 16] = key[..]
            .try_into()
            .map_err(|_| Error::Corrupt("stream node key"))?;
        let lp = r.string()?.into_owned();
        let node = Node::from_bytes(StreamId::from_be_bytes(&key), lp);
        // The node's listpack must pass the plain listpack checks (back-lengths, count, end)
        // before its stream layout is looked at.
        let well_formed = crate::listpack::listpack(&node.lp).is_ok() && node.is_well_formed();
        if prev_last.is_some_and(|p| p >= node.master) {
            return Err(BAD_NODE);
        }
        if well_formed && !s.corrupt {
            live += node.count();
            prev_last = Some(node.last_id());
        } else if !deep && node_header_sound(&node.lp) {
            // Only the master ID is known of a node that cannot be read.
            s.corrupt = true;
            prev_last = Some(node.master);
        } else {
            return Err(BAD_NODE);
        }
        s.push_node(node);
    }
    s.length = r.len()?;
    s.last_id = read_id(r)?;
    if !s.corrupt && (s.length != live || prev_last.is_some_and(|p| p > s.last_id)) {
        return Err(Error::Corrupt("stream length or last ID"));
    }
    if v2 {
        s.first_id = read_id(r)?;
        s.max_deleted = read_id(r)?;
        s.entries_added = r.len()?;
    } else {
        // The first entry of a stream that cannot be read: its first node's master ID (that
        // node's first entry, deleted or not).
        s.first_id = match s.corrupt {
            true => s.nodes().next().map_or(StreamId::MIN, |n| n.master),
            false => s.first_entry().map_or(StreamId::MIN, |e| e.id),
        };
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
                // Listed twice, by one consumer or two: refused.
                if !p.consumer.is_empty() {
                    return Err(Error::Integrity(
                        "Stream consumer PEL entry already has a consumer assigned",
                    ));
                }
                p.consumer = c.name.clone();
                g.pel.insert(p);
                c.pel.insert(id);
            }
            let at = g
                .consumer_pos(&name)
                .err()
                .ok_or(Error::Integrity("Duplicate stream consumer detected."))?;
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

#[cfg(test)]
mod tests {
    use kayvee_engine::value::stream::StreamId;
    use kayvee_engine::Value;

    /// `DUMP f` from redis-server 7.0.15 after `XADD f 1-1 a 1 b hello`, `XADD f 2-5 a 2 b
    /// world`, `XADD f 3-0 zz 300000`, `XDEL f 2-5`, `XGROUP CREATE f g 0`, `XCLAIM f g alice 0
    /// 1-1 TIME 1700000000000 RETRYCOUNT 3 FORCE JUSTID`.
    const REDIS_DUMP: &str = "13011000000000000000010000000000000001404b4b0000001900020101010201816102816202000102010001000101018568656c6c6f060501030101010401020185776f726c6406050100010201dfff020101827a7a03f2e09304040601ff0203000101020503010167000081ffffffffffffffff01000000000000000100000000000000010068e5cf8b010000030105616c696365399e4318a201000001000000000000000100000000000000010a0023ec26e48243cda9";

    #[test]
    fn redis_dump_restores_and_dumps_back_byte_for_byte() {
        let payload = crate::unhex(REDIS_DUMP);
        let v = crate::dump::restore(&payload, 1, false, true).expect("restores");
        let Value::Stream(s) = &v else {
            panic!("not a stream")
        };
        s.check_invariants();
        assert_eq!(s.length, 2);
        assert_eq!(s.last_id, StreamId::new(3, 0));
        assert_eq!(s.max_deleted, StreamId::new(2, 5));
        assert_eq!(s.entries_added, 3);
        let ids: alloc::vec::Vec<_> = s
            .collect(StreamId::MIN, StreamId::MAX, false, 0)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [StreamId::new(1, 1), StreamId::new(3, 0)]);
        let g = s.group(b"g").expect("group");
        let p = g.pel.first().expect("pending");
        assert_eq!(
            (&p.consumer[..], p.delivery_ms, p.delivery_count),
            (&b"alice"[..], 1_700_000_000_000, 3)
        );
        assert_eq!(crate::dump::dump(v.view(), true), payload);
    }

    /// REDIS_DUMP's node listpack starts at this payload offset (type, node count, key).
    const LP_AT: usize = 21;

    fn restore(p: &[u8], deep: bool) -> Result<Value, kayvee_engine::persist::RestoreError> {
        crate::dump::restore(p, 1, true, deep)
    }

    #[test]
    fn unsanitized_nodes_with_a_sound_header_are_kept_and_the_stream_marked_corrupt() {
        use kayvee_engine::persist::RestoreError;
        let integrity = Err(RestoreError::Integrity(
            "Stream listpack integrity check failed.",
        ));
        let good = crate::unhex(REDIS_DUMP);
        // The first entry's lp-count (5) made 86: still a listpack, no longer a stream node.
        let mut lp_count = good.clone();
        lp_count[LP_AT + 35] = 0x56;
        // That lp-count's back-length made 2: no longer a listpack past its first entry.
        let mut backlen = good.clone();
        backlen[LP_AT + 36] = 0x02;
        for bad in [&lp_count, &backlen] {
            assert_eq!(restore(bad, true), integrity);
            let Ok(Value::Stream(s)) = restore(bad, false) else {
                panic!("refused without deep checks")
            };
            assert!(s.corrupt);
            assert_eq!((s.length, s.last_id), (2, StreamId::new(3, 0)));
            assert_eq!(s.group(b"g").map(|g| g.pel.len()), Some(1));
            // Kept byte for byte: DUMP gives the payload back.
            let v = Value::Stream(s);
            assert_eq!(
                &crate::dump::dump(v.view(), true)[..bad.len() - 8],
                &bad[..bad.len() - 8]
            );
        }
        let Ok(Value::Stream(s)) = restore(&good, false) else {
            panic!("a good stream refused")
        };
        assert!(!s.corrupt);
    }

    #[test]
    fn unsanitized_nodes_need_a_sound_header_and_first_entry() {
        use kayvee_engine::persist::RestoreError;
        let good = crate::unhex(REDIS_DUMP);
        // The listpack's total bytes, its first entry's back-length, its terminator.
        for (at, byte) in [(LP_AT, 0x4c), (LP_AT + 7, 0x03), (LP_AT + 74, 0x00)] {
            let mut bad = good.clone();
            bad[at] = byte;
            assert_eq!(
                restore(&bad, false),
                Err(RestoreError::Integrity(
                    "Stream listpack integrity check failed."
                )),
                "byte {at}"
            );
        }
    }

    #[test]
    fn corrupt_stream_payloads_are_refused() {
        let payload = crate::unhex(REDIS_DUMP);
        // Every single-byte change in the body is refused or restores a well-formed stream;
        // none may panic.
        for i in 1..payload.len() - 10 {
            for delta in [1u8, 0x80] {
                let mut p = payload.clone();
                p[i] = p[i].wrapping_add(delta);
                // Fix nothing: the CRC fails first unless restore checks the body; use the
                // body reader directly.
                let mut r = crate::read::Reader::new(&p[1..p.len() - 10]);
                if let Ok(Value::Stream(s)) = super::read(&mut r, p[0], true) {
                    s.check_invariants();
                }
                // Without deep checks, a stream is either well formed or marked corrupt.
                let mut r = crate::read::Reader::new(&p[1..p.len() - 10]);
                if let Ok(Value::Stream(s)) = super::read(&mut r, p[0], false) {
                    if !s.corrupt {
                        s.check_invariants();
                    }
                }
            }
        }
    }
}

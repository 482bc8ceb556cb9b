//! Model-based property tests of the stream structure: random sequences of appends (with
//! small node limits, so nodes split often), deletions, exact and approximate trims by
//! length and by ID run on a `Stream` and on a `BTreeMap<id, fields>` model; after every step
//! the stream's invariants hold, its length, first entry and both range directions agree with
//! the model. Snapshots (clones) taken mid-sequence must still show their own state at the end.

use kayvee_engine::value::stream::{OwnedEntry, Stream, StreamId, TrimStrategy};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = BTreeMap<StreamId, Vec<Vec<u8>>>;

#[derive(Clone, Debug)]
enum Op {
    /// Append with an ID this far above the last (ms, seq) and these fields.
    Append(u8, u8, Vec<(u8, u8)>),
    /// Delete the entry of this rank (modulo the length).
    Delete(u8),
    MaxLen(u8, bool),
    MinId(u8, bool),
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u8..3, prop::collection::vec((0u8..4, any::<u8>()), 1..4))
            .prop_map(|(a, b, f)| Op::Append(a, b, f)),
        2 => any::<u8>().prop_map(Op::Delete),
        1 => (0u8..20, any::<bool>()).prop_map(|(n, a)| Op::MaxLen(n, a)),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(n, a)| Op::MinId(n, a)),
        1 => Just(Op::Snapshot),
    ]
}

fn all(s: &Stream, rev: bool) -> Vec<OwnedEntry> {
    s.collect(StreamId::MIN, StreamId::MAX, rev, 0)
}

fn as_model(s: &Stream) -> Model {
    all(s, false)
        .into_iter()
        .map(|e| (e.id, e.fields))
        .collect()
}

fn check(s: &Stream, m: &Model) {
    s.check_invariants();
    assert_eq!(s.length as usize, m.len());
    assert_eq!(as_model(s), *m);
    let mut back: Vec<StreamId> = all(s, true).into_iter().map(|e| e.id).collect();
    back.reverse();
    assert_eq!(back, m.keys().copied().collect::<Vec<_>>());
    assert_eq!(
        s.first_id,
        m.keys().next().copied().unwrap_or(StreamId::MIN)
    );
    // A bounded range from the middle, both ways.
    if let (Some(a), Some(b)) = (m.keys().nth(m.len() / 3), m.keys().nth(2 * m.len() / 3)) {
        let want: Vec<StreamId> = m.range(*a..=*b).map(|(k, _)| *k).collect();
        let got: Vec<StreamId> = s.collect(*a, *b, false, 0).iter().map(|e| e.id).collect();
        assert_eq!(got, want);
        let got: Vec<StreamId> = s.collect(*a, *b, true, 2).iter().map(|e| e.id).collect();
        assert_eq!(got, want.iter().rev().take(2).copied().collect::<Vec<_>>());
    }
}

/// Applies a trim to the model as the stream does: whole nodes are not visible to the model,
/// so an approximate trim is checked by bounds and the model follows the stream.
fn trim(s: &mut Stream, m: &mut Model, strategy: TrimStrategy, approx: bool) {
    let before = m.len();
    let removed = s.trim(strategy, approx, 0) as usize;
    match strategy {
        TrimStrategy::MaxLen(n) if !approx => {
            let n = n as usize;
            while m.len() > n {
                m.pop_first();
            }
        }
        TrimStrategy::MinId(id) if !approx => m.retain(|k, _| *k >= id),
        _ => {
            // Approximate: removes a prefix, never more than the exact trim would.
            for _ in 0..removed {
                let (id, _) = m.pop_first().expect("removed entries were there");
                if let TrimStrategy::MinId(min) = strategy {
                    assert!(id < min, "an approximate MINID trim removed {id}");
                }
            }
            if let TrimStrategy::MaxLen(n) = strategy {
                assert!(m.len() as u64 >= n.min(before as u64));
            }
        }
    }
    assert_eq!(before - m.len(), removed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn stream_matches_model(ops in prop::collection::vec(op(), 1..120), max_entries in 1u64..6) {
        let mut s = Stream::new();
        let mut m = Model::new();
        let mut snaps: Vec<(Stream, Model)> = Vec::new();
        for op in ops {
            match op {
                Op::Append(dms, dseq, fields) => {
                    let id = StreamId::new(s.last_id.ms + u64::from(dms), s.last_id.seq + u64::from(dseq) + 1);
                    let f: Vec<Vec<u8>> = fields
                        .iter()
                        .flat_map(|(k, v)| [vec![b'f', b'0' + k], v.to_string().into_bytes()])
                        .collect();
                    let refs: Vec<&[u8]> = f.iter().map(|v| v.as_slice()).collect();
                    s.append(id, &refs, 4096, max_entries);
                    m.insert(id, f);
                }
                Op::Delete(r) => {
                    if !m.is_empty() {
                        let id = *m.keys().nth(usize::from(r) % m.len()).unwrap();
                        prop_assert!(s.delete(id));
                        prop_assert!(!s.delete(id));
                        s.deleted_done();
                        m.remove(&id);
                    }
                }
                Op::MaxLen(n, approx) => trim(&mut s, &mut m, TrimStrategy::MaxLen(u64::from(n)), approx),
                Op::MinId(r, approx) => {
                    let id = m.keys().nth(usize::from(r) % (m.len() + 1)).copied().unwrap_or(s.last_id);
                    trim(&mut s, &mut m, TrimStrategy::MinId(id), approx);
                }
                Op::Snapshot => snaps.push((s.clone(), m.clone())),
            }
            check(&s, &m);
        }
        for (snap, model) in &snaps {
            check(snap, model);
        }
    }
}

//! Latency: the monitor behind LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR (events that
//! took at least `latency-monitor-threshold` ms, kept per event name as Redis keeps them: the
//! last 160 seconds that had one, the worst per second, and the all-time worst), and the
//! per-command latency histograms behind LATENCY HISTOGRAM and `INFO latencystats`
//! (`latency-tracking`).
//!
//! The histograms have HdrHistogram's layout with two significant digits, as Redis's: values
//! in nanoseconds from 1 to 1,000,000,000, in buckets of 128 sub-buckets per power of two, so
//! percentiles and bucket bounds come out as Redis prints them (`p50=7.007`). Kayvee times
//! commands to the microsecond, so recorded values are multiples of 1000 ns.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Samples an event keeps (Redis's `LATENCY_TS_LEN`).
pub const SAMPLES_MAX: usize = 160;

/// Smallest and largest value a histogram records, in ns (larger ones count as the largest).
const HIST_MIN_NS: u64 = 1;
const HIST_MAX_NS: u64 = 1_000_000_000;
/// log2 of the sub-buckets per power of two in the first bucket (256; later buckets use the
/// upper 128).
const SUB_BITS: u32 = 8;

/// One event's samples: (unix seconds, worst latency in ms that second), oldest first, and the
/// worst ever.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// At most [`SAMPLES_MAX`], oldest first.
    pub samples: alloc::collections::VecDeque<(u64, u64)>,
    /// The all-time worst latency, ms.
    pub max: u64,
}

impl Series {
    /// Adds a sample: one per second, the worst of that second.
    fn add(&mut self, now_s: u64, ms: u64) {
        self.max = self.max.max(ms);
        if let Some(last) = self.samples.back_mut() {
            if last.0 == now_s {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if self.samples.len() == SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back((now_s, ms));
    }
}

/// A command's latency histogram (HdrHistogram layout), its counts dense by bucket once the
/// first value is recorded: recording is an index computation and an increment, with no
/// search, since it runs after every command.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// Count per dense bucket index ([`dense_of`]); empty until the first record.
    counts: Vec<u64>,
    /// Values recorded.
    pub total: u64,
}

/// The bucket of a value in ns: the power of two above the first bucket's range, and the
/// sub-bucket inside it.
const fn index_of(v: u64) -> u32 {
    let bits = 63 - if v == 0 { 1u64 } else { v }.leading_zeros();
    let bucket = bits.saturating_sub(SUB_BITS - 1);
    (bucket << SUB_BITS) | (v >> bucket) as u32
}

/// The largest value of a bucket (HdrHistogram's "highest equivalent value").
fn highest_of(index: u32) -> u64 {
    let (bucket, sub) = (index >> SUB_BITS, u64::from(index & ((1 << SUB_BITS) - 1)));
    ((sub + 1) << bucket) - 1
}

/// Sub-buckets of the first bucket, and the (upper half) sub-buckets each later one uses.
const FIRST: usize = 1 << SUB_BITS;
const HALF: usize = FIRST / 2;
/// Dense buckets for values up to [`HIST_MAX_NS`].
const DENSE_LEN: usize =
    FIRST + (63 - HIST_MAX_NS.leading_zeros() as usize - (SUB_BITS as usize - 1)) * HALF;

/// The dense bucket of [`HIST_MIN_NS`] (and of every smaller value).
#[cfg(test)]
const MIN_DENSE: usize = dense_of(index_of(HIST_MIN_NS));

#[cfg(test)]
/// The dense position of a bucket index: the first bucket's 256 sub-buckets, then 128 for each
/// later power of two (their lower halves are never used).
const fn dense_of(index: u32) -> usize {
    let (bucket, sub) = ((index >> SUB_BITS) as usize, (index as usize) & (FIRST - 1));
    if bucket == 0 {
        sub
    } else {
        FIRST + (bucket - 1) * HALF + (sub - HALF)
    }
}

/// The dense bucket of a value in ns, clamped to the recordable range: [`dense_of`] of
/// [`index_of`] in one step, since bucket `b` (sub-bucket `v >> b`) starts at dense position
/// `b * HALF` (the first bucket's 256 sub-buckets, then the upper 128 of each later one).
#[inline]
const fn dense_at(ns: u64) -> usize {
    let v = if ns < HIST_MIN_NS {
        HIST_MIN_NS
    } else if ns > HIST_MAX_NS {
        HIST_MAX_NS
    } else {
        ns
    };
    let bucket = (63 - v.leading_zeros()).saturating_sub(SUB_BITS - 1);
    bucket as usize * HALF + (v >> bucket) as usize
}

/// The bucket index at a dense position (the inverse of [`dense_of`]).
fn index_at(dense: usize) -> u32 {
    if dense < FIRST {
        dense as u32
    } else {
        let (bucket, sub) = ((dense - FIRST) / HALF + 1, (dense - FIRST) % HALF + HALF);
        ((bucket as u32) << SUB_BITS) | sub as u32
    }
}

impl Histogram {
    /// Records one value in ns (clamped to the recordable range).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let d = dense_at(ns);
        match self.counts.get_mut(d) {
            Some(count) => *count += 1,
            None => self.first_record(d),
        }
        self.total += 1;
    }

    /// The first value recorded: the counts are allocated (out of line: once per command).
    #[cold]
    #[inline(never)]
    fn first_record(&mut self, d: usize) {
        self.counts = alloc::vec![0; DENSE_LEN];
        self.counts[d] += 1;
    }

    /// The non-empty buckets in value order: (bucket index, count).
    fn buckets(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(d, &c)| (index_at(d), c))
    }

    /// The value at a percentile (0..=100), in ns, as HdrHistogram computes it.
    pub fn percentile(&self, p: f64) -> u64 {
        let wanted = ((p.min(100.0) / 100.0) * self.total as f64 + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        for (i, c) in self.buckets() {
            seen += c;
            if seen >= wanted {
                return highest_of(i);
            }
        }
        0
    }

    /// The cumulative distribution LATENCY HISTOGRAM shows: at 1024 ns, then each power of
    /// two above, the bucket's highest value in µs and the values up to it, for each step
    /// where that count grew.
    pub fn cumulative(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut level: u64 = 1024;
        let (mut seen, mut last) = (0u64, 0u64);
        let mut it = self.buckets().peekable();
        while seen < self.total {
            let top = highest_of(index_of(level));
            while let Some(&(i, c)) = it.peek() {
                if highest_of(i) > top {
                    break;
                }
                seen += c;
                it.next();
            }
            if seen > last {
                out.push((top / 1000, seen));
                last = seen;
            }
            level = level.saturating_mul(2);
        }
        out
    }
}

/// The latency state the engine keeps.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    /// Monitor events by name.
    pub events: BTreeMap<String, Series>,
    /// Per command (by id), when `latency-tracking` recorded one.
    pub histograms: Histograms,
}

/// The per-command histograms, indexed by command id (an id without one has an empty slot).
#[derive(Clone, Debug, Default)]
pub struct Histograms {
    by_id: Vec<Histogram>,
}

impl Histograms {
    /// The histogram of command `id`, if it recorded anything.
    pub fn get(&self, id: u16) -> Option<&Histogram> {
        self.by_id.get(usize::from(id)).filter(|h| h.total > 0)
    }

    /// The commands with a histogram, by id.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &Histogram)> + '_ {
        self.by_id
            .iter()
            .enumerate()
            .filter(|(_, h)| h.total > 0)
            .map(|(id, h)| (id as u16, h))
    }

    /// Forgets every histogram.
    pub fn clear(&mut self) {
        self.by_id.clear();
    }

    /// Records a value in ns for command `id`.
    #[inline]
    fn record(&mut self, id: u16, ns: u64) {
        match self.by_id.get_mut(usize::from(id)) {
            Some(h) => h.record(ns),
            None => self.record_new(id, ns),
        }
    }

    /// [`Histograms::record`] for an id past the table (out of line: once per command).
    #[cold]
    #[inline(never)]
    fn record_new(&mut self, id: u16, ns: u64) {
        self.by_id
            .resize_with(usize::from(id) + 1, Histogram::default);
        self.by_id[usize::from(id)].record(ns);
    }
}

impl Latency {
    /// Records a command's duration (µs) in its histogram (`latency-tracking`).
    #[inline]
    pub fn record_command(&mut self, id: u16, usec: u64) {
        self.histograms.record(id, usec.saturating_mul(1000));
    }

    /// Records an event that took `ms` if the monitor is on and it reached the threshold
    /// (Redis's `latencyAddSampleIfNeeded`).
    pub fn add_sample_if_needed(&mut self, threshold_ms: u64, event: &str, ms: u64, now_s: u64) {
        if threshold_ms == 0 || ms < threshold_ms {
            return;
        }
        match self.events.get_mut(event) {
            Some(series) => series.add(now_s, ms),
            None => {
                let mut series = Series::default();
                series.add(now_s, ms);
                self.events.insert(event.into(), series);
            }
        }
    }
}

/// One line of `INFO latencystats` after its name: `p50=1.003,p99=...` at the percentiles
/// given as `latency-tracking-info-percentiles` shows them (`50 99 99.9`).
pub fn percentiles_text(h: &Histogram, percentiles: &str) -> String {
    let mut s = String::new();
    let words = percentiles.split(' ').filter(|w| !w.is_empty());
    for (i, w) in words.enumerate() {
        let Ok(p) = w.parse::<f64>() else {
            continue;
        };
        let sep = if i == 0 { "" } else { "," };
        let v = h.percentile(p) as f64 / 1000.0;
        let _ = write!(s, "{sep}p{w}={v:.3}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_hdr_histogram() {
        // Values Redis printed: 7.007 µs, 50331.647 µs.
        assert_eq!(highest_of(index_of(7_000)), 7_007);
        assert_eq!(highest_of(index_of(50_100_000)), 50_331_647);
        assert_eq!(highest_of(index_of(5)), 5);
        let mut h = Histogram::default();
        for _ in 0..9 {
            h.record(3_000);
        }
        h.record(7_000);
        assert_eq!(h.percentile(50.0), 3_007);
        assert_eq!(h.percentile(99.0), 7_007);
        assert_eq!(h.percentile(0.0), 3_007);
        assert_eq!(h.cumulative(), [(4, 9), (8, 10)]);
        let mut big = Histogram::default();
        big.record(67_000_000);
        assert_eq!(big.cumulative(), [(67_633, 1)]);
    }

    #[test]
    fn dense_at_is_dense_of_index_of_clamped() {
        assert_eq!(dense_at(0), MIN_DENSE);
        assert_eq!(dense_at(1), MIN_DENSE);
        assert_eq!(dense_at(u64::MAX), dense_of(index_of(HIST_MAX_NS)));
        let mut v = 1;
        while v <= HIST_MAX_NS {
            assert_eq!(dense_at(v), dense_of(index_of(v)), "{v} ns");
            v += 1 + v / 1000;
        }
        for shift in 0..30 {
            for v in [(1u64 << shift) - 1, 1 << shift, (1 << shift) + 1] {
                assert_eq!(dense_at(v), dense_of(index_of(v.clamp(1, HIST_MAX_NS))));
            }
        }
    }

    #[test]
    fn dense_positions_cover_every_bucket_once() {
        let mut v = HIST_MIN_NS;
        let mut last = None;
        while v <= HIST_MAX_NS {
            let i = index_of(v);
            let d = dense_of(i);
            assert!(d < DENSE_LEN, "{v} ns lands past the dense buckets");
            assert_eq!(index_at(d), i);
            if let Some(prev) = last {
                assert!(d >= prev, "dense order follows value order");
            }
            last = Some(d);
            v += 1 + v / 300;
        }
        // The largest value lands in the last power of two the dense buckets hold.
        assert!(DENSE_LEN - dense_of(index_of(HIST_MAX_NS)) <= HALF);
    }

    #[test]
    fn series_keep_the_worst_per_second() {
        let mut l = Latency::default();
        l.add_sample_if_needed(0, "command", 500, 1);
        assert!(l.events.is_empty());
        l.add_sample_if_needed(100, "command", 50, 1);
        assert!(l.events.is_empty());
        l.add_sample_if_needed(100, "command", 300, 1);
        l.add_sample_if_needed(100, "command", 200, 1);
        l.add_sample_if_needed(100, "command", 400, 2);
        let s = &l.events["command"];
        assert_eq!(s.samples, [(1, 300), (2, 400)]);
        assert_eq!(s.max, 400);
        for t in 0..200 {
            l.add_sample_if_needed(100, "command", 100, 10 + t);
        }
        assert_eq!(l.events["command"].samples.len(), SAMPLES_MAX);
    }
}

//! Results of `vm-compare`: parsing redis-benchmark's `--csv` output and `measurements.csv`,
//! the requests-per-second table with the ratios (c)/(a) and (b)/(a), its CSV form, the
//! boot and memory summary, and the machine-readable last line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The three systems, in the order (a), (b), (c) of bench/vm-compare/README.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum System {
    /// (a) Debian's redis-server 7.0 in the Linux guest.
    LinuxRedis,
    /// (b) the static kayvee-server in the Linux guest.
    LinuxKayvee,
    /// (c) the Kayvee unikernel.
    Unikernel,
}

impl System {
    /// Every system, in run and column order.
    pub const ALL: [System; 3] = [System::LinuxRedis, System::LinuxKayvee, System::Unikernel];

    /// The column / file label.
    pub fn label(self) -> &'static str {
        match self {
            System::LinuxRedis => "linux-redis",
            System::LinuxKayvee => "linux-kayvee",
            System::Unikernel => "unikernel",
        }
    }

    /// Parses a label.
    fn parse(s: &str) -> Option<System> {
        System::ALL.into_iter().find(|x| x.label() == s)
    }
}

/// The seeds' tests, in table order (redis-benchmark's names).
pub const TESTS: [&str; 13] = [
    "PING_INLINE",
    "PING_MBULK",
    "SET",
    "GET",
    "INCR",
    "LPUSH",
    "LPOP",
    "SADD",
    "SPOP",
    "LRANGE_100 (first 100 elements)",
    "LRANGE_300 (first 300 elements)",
    "LRANGE_500 (first 500 elements)",
    "LRANGE_600 (first 600 elements)",
];

/// `(test, requests/s)` rows of `redis-benchmark --csv` output, the seeds' tests only (the
/// LRANGE prefill, "LPUSH (needed to benchmark LRANGE)", is dropped).
pub fn parse_benchmark_csv(text: &str) -> Vec<(String, f64)> {
    text.split(['\r', '\n'])
        .filter_map(|line| {
            let mut fields = line.split("\",\"");
            let test = fields.next()?.trim_start_matches('"');
            let rps = fields.next()?.trim_end_matches('"').parse().ok()?;
            TESTS.contains(&test).then(|| (test.to_string(), rps))
        })
        .collect()
}

/// The short name of a test for keys and the table (`LRANGE_100 (first...)` -> `LRANGE_100`).
pub fn short(test: &str) -> &str {
    test.split(' ').next().unwrap_or(test)
}

/// The measurement key of a requests/s figure.
pub fn rps_key(pipeline: u32, test: &str) -> String {
    format!("rps_P{pipeline}_{}", short(test))
}

/// Every number of a run: `(system, key) -> value`.
#[derive(Debug, Default)]
pub struct Measurements(pub BTreeMap<(System, String), f64>);

impl Measurements {
    /// Parses `measurements.csv` (`system,key,value` lines; unknown lines are skipped).
    pub fn parse(text: &str) -> Measurements {
        let mut m = BTreeMap::new();
        for line in text.lines() {
            let mut f = line.split(',');
            let (Some(s), Some(k), Some(v)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if let (Some(s), Ok(v)) = (System::parse(s), v.parse::<f64>()) {
                m.insert((s, k.to_string()), v);
            }
        }
        Measurements(m)
    }

    /// One value.
    pub fn get(&self, s: System, key: &str) -> Option<f64> {
        self.0
            .get(&(s, key.to_string()))
            .copied()
            .filter(|v| !v.is_nan())
    }

    /// The table rows present: `(pipeline, short test name)` in table order.
    pub fn rows(&self) -> Vec<(u32, &'static str)> {
        let mut rows = Vec::new();
        for p in [1, 16] {
            for t in TESTS {
                let key = rps_key(p, t);
                if System::ALL.iter().any(|&s| self.get(s, &key).is_some()) {
                    rows.push((p, short(t)));
                }
            }
        }
        rows
    }

    /// `value(c) / value(a)` style ratio, when both exist.
    pub fn ratio(&self, num: System, den: System, key: &str) -> Option<f64> {
        Some(self.get(num, key)? / self.get(den, key)?)
    }
}

/// Formats an optional number with `prec` decimals, `-` when missing.
fn num(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

/// One row's figures for `key`: requests/s of (a), (b) and (c), then c/a and b/a with `prec`
/// decimals.
fn row_figures(m: &Measurements, key: &str, prec: usize) -> [String; 5] {
    let (a, b, c) = (System::LinuxRedis, System::LinuxKayvee, System::Unikernel);
    [
        num(m.get(a, key), 0),
        num(m.get(b, key), 0),
        num(m.get(c, key), 0),
        num(m.ratio(c, a, key), prec),
        num(m.ratio(b, a, key), prec),
    ]
}

/// The requests/s table as text.
pub fn table_text(m: &Measurements) -> String {
    let mut out = format!(
        "{:<4} {:<11} {:>14} {:>14} {:>14} {:>7} {:>7}\n",
        "-P", "test", "(a) lx-redis", "(b) lx-kayvee", "(c) unikernel", "c/a", "b/a"
    );
    for (p, t) in m.rows() {
        let [ra, rb, rc, ca, ba] = row_figures(m, &rps_key(p, t), 2);
        let _ = writeln!(
            out,
            "{p:<4} {t:<11} {ra:>14} {rb:>14} {rc:>14} {ca:>7} {ba:>7}"
        );
    }
    out
}

/// The same table as CSV.
pub fn table_csv(m: &Measurements) -> String {
    let mut out = String::from(
        "pipeline,test,linux_redis_rps,linux_kayvee_rps,unikernel_rps,ratio_c_a,ratio_b_a\n",
    );
    for (p, t) in m.rows() {
        let [ra, rb, rc, ca, ba] = row_figures(m, &rps_key(p, t), 3);
        let _ = writeln!(out, "{p},{t},{ra},{rb},{rc},{ca},{ba}");
    }
    out
}

/// Boot and memory lines, one per system.
pub fn summary_text(m: &Measurements) -> String {
    let mut out = format!(
        "{:<13} {:>8} {:>11} {:>11} {:>12} {:>12} {:>11} {:>11}\n",
        "system",
        "boot ms",
        "used idle",
        "used 100k",
        "unavail 100k",
        "srv used_mem",
        "srv RSS",
        "QEMU RSS"
    );
    for s in System::ALL {
        let kib = |k: &str| num(m.get(s, k).map(|v| v / 1024.0), 1) + " MiB";
        let _ = writeln!(
            out,
            "{:<13} {:>8} {:>11} {:>11} {:>12} {:>12} {:>11} {:>11}",
            s.label(),
            num(m.get(s, "boot_ms"), 0),
            kib("guest_used_idle_kib"),
            kib("guest_used_kib"),
            kib("guest_unavailable_kib"),
            kib("server_used_memory_kib"),
            kib("server_rss_kib"),
            kib("qemu_rss_kib"),
        );
    }
    out
}

/// The last line: the unikernel over Linux Redis on the -P 16 SET and GET rows.
pub fn last_line(m: &Measurements) -> String {
    let (a, c) = (System::LinuxRedis, System::Unikernel);
    format!(
        "ratio unikernel/linux-redis SET={} GET={}",
        num(m.ratio(c, a, "rps_P16_SET"), 2),
        num(m.ratio(c, a, "rps_P16_GET"), 2)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BENCH: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
\"SET\",\"12345.68\",\"3.1\",\"0.5\",\"3.0\",\"4.0\",\"5.0\",\"9.0\"\n\
\"LPUSH (needed to benchmark LRANGE)\",\"9000.00\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n\
\"LRANGE_100 (first 100 elements)\",\"2500.50\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n";

    #[test]
    fn benchmark_csv_keeps_the_seeds_tests() {
        let rows = parse_benchmark_csv(BENCH);
        assert_eq!(
            rows,
            vec![
                ("SET".to_string(), 12345.68),
                ("LRANGE_100 (first 100 elements)".to_string(), 2500.5)
            ]
        );
        assert_eq!(rps_key(16, &rows[1].0), "rps_P16_LRANGE_100");
    }

    fn sample() -> Measurements {
        Measurements::parse(
            "linux-redis,rps_P16_SET,100000\nlinux-kayvee,rps_P16_SET,150000\nunikernel,rps_P16_SET,200000\n\
             linux-redis,rps_P16_GET,80000\nunikernel,rps_P16_GET,140000\nunikernel,boot_ms,250.7\n\
             garbage line\nlinux-redis,guest_used_kib,NaN\n",
        )
    }

    #[test]
    fn ratios_table_and_last_line() {
        let m = sample();
        assert_eq!(m.rows(), vec![(16, "SET"), (16, "GET")]);
        assert_eq!(
            m.ratio(System::Unikernel, System::LinuxRedis, "rps_P16_SET"),
            Some(2.0)
        );
        assert_eq!(m.get(System::LinuxRedis, "guest_used_kib"), None);
        let text = table_text(&m);
        assert!(text.lines().nth(1).unwrap().contains("100000"));
        assert!(text.lines().nth(1).unwrap().ends_with("2.00    1.50"));
        assert!(text.lines().nth(2).unwrap().ends_with("1.75       -"));
        let csv = table_csv(&m);
        assert_eq!(csv.lines().nth(2), Some("16,GET,80000,-,140000,1.750,-"));
        assert_eq!(
            last_line(&m),
            "ratio unikernel/linux-redis SET=2.00 GET=1.75"
        );
        assert!(summary_text(&m).contains("251"));
    }
}

//! Civil-date arithmetic for the wall clock: the unikernel reads the CMOS RTC as a calendar
//! date and needs days since the unix epoch (Howard Hinnant's `days_from_civil` algorithm, on
//! unsigned numbers since the RTC never reads before 2000).

/// Days since 1970-01-01 of a proleptic Gregorian date: year `y` (from 1970), month `m`
/// (1-12), day `d` (1-31). Dates before 1970 underflow (the RTC's years are 2000-2099).
pub fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dates checked against Python's `datetime.date(...) - date(1970, 1, 1)`.
    #[test]
    fn known_dates() {
        for ((y, m, d), days) in [
            ((1970, 1, 1), 0),
            ((1970, 3, 1), 59),
            ((1972, 2, 29), 789),
            ((1972, 3, 1), 790),
            ((2000, 1, 1), 10_957),
            ((2000, 2, 29), 11_016), // 2000 is a leap year (divisible by 400)
            ((2000, 3, 1), 11_017),
            ((2026, 11, 21), 20_778),
            ((2038, 1, 19), 24_855),
            ((2099, 12, 31), 47_481),
            ((2100, 2, 28), 47_540),
            ((2100, 3, 1), 47_541), // 2100 is not (divisible by 100 only)
            ((2400, 2, 29), 157_113),
        ] {
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    /// Counting day by day from the epoch agrees with the formula across four centuries.
    #[test]
    fn agrees_with_counting_days() {
        let leap =
            |y: u64| y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
        let mut n = 0;
        for y in 1970..2400 {
            for m in 1..=12 {
                let len = match m {
                    2 if leap(y) => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                for d in 1..=len {
                    assert_eq!(days_from_civil(y, m, d), n, "{y}-{m}-{d}");
                    n += 1;
                }
            }
        }
    }
}

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

//! ISO-8601 text of an instant, as the transform variables `$timestamp` show it: UTC, millisecond
//! precision, a `Z` suffix (`2026-09-01T12:30:05.042Z`). Pure arithmetic, so the domain stays free
//! of a date library.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `instant` as `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC. An instant before 1970 renders its distance
/// before the epoch the same way the proleptic Gregorian calendar counts it.
pub fn iso_utc_millis(instant: SystemTime) -> String {
    let millis: i128 = match instant.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_millis() as i128,
        Err(before) => -(before.duration().as_millis() as i128),
    };
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days as i64);
    let (h, m, s, ms) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// `instant` given as milliseconds since the Unix epoch.
pub fn from_epoch_millis(millis: i64) -> SystemTime {
    let magnitude = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// Year, month (1-12) and day (1-31) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, which is exact over the whole `i64` range we can reach).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_epoch() {
        assert_eq!(iso_utc_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn renders_a_leap_day_with_millis() {
        // 2024-02-29T23:59:59.999Z
        let t = from_epoch_millis(1_709_251_199_999);
        assert_eq!(iso_utc_millis(t), "2024-02-29T23:59:59.999Z");
    }

    #[test]
    fn renders_a_date_after_2100_and_before_1970() {
        assert_eq!(
            iso_utc_millis(from_epoch_millis(4_107_542_400_000)),
            "2100-03-01T00:00:00.000Z"
        );
        assert_eq!(
            iso_utc_millis(from_epoch_millis(-1)),
            "1969-12-31T23:59:59.999Z"
        );
    }
}

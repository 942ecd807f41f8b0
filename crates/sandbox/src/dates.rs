//! The one calendar of the sandbox: every timestamp an emulator writes or reads goes through the
//! conversion here, so ARM's and GKE's millisecond RFC 3339, the Kubernetes API's second-precision
//! RFC 3339 and EKS's epoch seconds cannot drift apart. Days to civil dates and back follow Howard
//! Hinnant's public-domain algorithms, to avoid a date crate for three formats.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch: the clock of the world's operations.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `2024-02-29T23:59:59.123Z`, as ARM, GKE and Azure AD write times.
pub(crate) fn rfc3339_millis(ms: u64) -> String {
    format!("{}.{:03}Z", civil_time(ms / 1000), ms % 1000)
}

/// `2026-11-30T08:12:21Z`, as the Kubernetes API server writes times (seconds, no fraction).
pub(crate) fn rfc3339_secs(secs: u64) -> String {
    format!("{}Z", civil_time(secs))
}

/// Now as the Kubernetes API server writes it.
pub(crate) fn now_rfc3339_secs() -> String {
    rfc3339_secs(now_ms() / 1000)
}

/// Seconds since the epoch, fractional, as AWS restJson1 timestamps are.
pub(crate) fn epoch_secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Seconds since the epoch of an RFC 3339 `YYYY-MM-DDTHH:MM:SSZ` timestamp.
pub(crate) fn parse_rfc3339_secs(ts: &str) -> Option<i64> {
    let p = |a: usize, b: usize| ts.get(a..b).and_then(|x| x.parse::<i64>().ok());
    let (y, m, d) = (p(0, 4)?, p(5, 7)?, p(8, 10)?);
    let (hh, mm, ss) = (p(11, 13)?, p(14, 16)?, p(17, 19)?);
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// `YYYY-MM-DDTHH:MM:SS` of a time in seconds since the epoch, without zone or fraction.
fn civil_time(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_709_251_199_123),
            "2024-02-29T23:59:59.123Z"
        );
    }

    #[test]
    fn time_format() {
        assert_eq!(rfc3339_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_secs(1_796_026_341), "2026-11-30T08:12:21Z");
        assert_eq!(rfc3339_secs(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn parsing_inverts_formatting() {
        for secs in [0, 951_782_400, 1_709_251_199, 1_796_026_341] {
            assert_eq!(parse_rfc3339_secs(&rfc3339_secs(secs)), Some(secs as i64));
        }
        assert_eq!(parse_rfc3339_secs("not a time"), None);
    }
}

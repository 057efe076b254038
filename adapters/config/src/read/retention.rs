//! `retention.*`.

use super::{Case, choice, flag, positive, text};
use crate::catalog::Doc;
use crate::model::{RetentionKind, RetentionPolicy, RetentionSettings};
use crate::reader::{Block, Reader};
use serde_json::Value;
use std::time::Duration;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> RetentionSettings {
    let mut b = Block::open(r, value, "retention");
    let enabled = flag(r, &mut b, "enabled", false);
    let outbox = read_policy(r, &mut b, "outbox", true);
    let inbox = read_policy(r, &mut b, "inbox", false);
    b.finish(r);
    RetentionSettings {
        enabled,
        outbox,
        inbox,
    }
}

/// Parses `<n>s`, `<n>m`, `<n>h` or `<n>d` with `n` a whole number above 0.
pub(crate) fn parse_retention_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let unit = text.chars().last()?;
    let seconds_per_unit = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return None,
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok().filter(|n| *n > 0)?;
    n.checked_mul(seconds_per_unit).map(Duration::from_secs)
}

fn duration(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<Duration> {
    let path = b.path_of(key);
    r.describe(
        &path,
        Doc::ty("duration").allowed("`<n>s`, `<n>m`, `<n>h` or `<n>d`, n ≥ 1"),
    );
    let raw = text(r, b, key)?;
    let parsed = parse_retention_duration(&raw);
    if parsed.is_none() {
        r.problem(
            path,
            format!(
                "must be a whole number above 0 and one of s, m, h, d (for example 7d), got `{raw}`"
            ),
        );
    }
    parsed
}

fn read_policy(
    r: &mut Reader,
    parent: &mut Block<'_>,
    key: &'static str,
    count_allowed: bool,
) -> RetentionPolicy {
    let value = parent.get(key);
    let mut b = Block::open(r, value, &parent.path_of(key));
    let options: &[(&str, RetentionKind)] = if count_allowed {
        &[
            ("AGE", RetentionKind::Age),
            ("COUNT", RetentionKind::Count),
            ("DISABLED", RetentionKind::Disabled),
        ]
    } else {
        &[
            ("AGE", RetentionKind::Age),
            ("DISABLED", RetentionKind::Disabled),
        ]
    };
    let policy = choice(
        r,
        &mut b,
        "policy",
        options,
        Case::Exact,
        RetentionKind::Disabled,
    );
    let max_age = duration(r, &mut b, "maxAge");
    let max_count_path = b.path_of("maxCount");
    let max_count = super::opt_positive(r, &mut b, "maxCount").map(u64::from);
    if policy == RetentionKind::Age && max_age.is_none() && !b.has("maxAge") {
        r.problem(b.path_of("maxAge"), "is required by policy AGE");
    }
    if policy == RetentionKind::Count && max_count.is_none() && !b.has("maxCount") {
        r.problem(max_count_path, "is required by policy COUNT");
    }
    r.describe(
        &b.path_of("cleanupInterval"),
        Doc::default().default_value("1h"),
    );
    let cleanup_interval =
        duration(r, &mut b, "cleanupInterval").unwrap_or(Duration::from_secs(3_600));
    let batch_size = positive(r, &mut b, "batchSize", 1000);
    b.finish(r);
    RetentionPolicy {
        policy,
        max_age,
        max_count,
        cleanup_interval,
        batch_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_retention_duration("7d"),
            Some(Duration::from_secs(7 * 86_400))
        );
        assert_eq!(
            parse_retention_duration("1h"),
            Some(Duration::from_secs(3_600))
        );
        assert_eq!(
            parse_retention_duration("30s"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retention_duration("5m"),
            Some(Duration::from_secs(300))
        );
        for bad in ["7", "d", "0d", "1.5h", "-1d", "7D", "7 days", ""] {
            assert_eq!(parse_retention_duration(bad), None, "{bad}");
        }
    }
}

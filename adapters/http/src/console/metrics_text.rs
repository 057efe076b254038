//! Publish failures by kind over the last minutes, read from the process's own metrics text (the
//! counter `queuebox_outbox_publish_failures_total`), and capture's gauges.
//!
//! The counter only grows, so the failures of the last minutes are today's value minus the value
//! the console saw that many minutes ago. The console keeps its own samples (one per overview
//! render, at most one every few seconds), so a window starts at the console's first look.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The publish failure counter.
const FAILURES: &str = "queuebox_outbox_publish_failures_total";
/// The process uptime gauge.
const UPTIME: &str = "queuebox_uptime_seconds";
/// The window the overview shows.
pub(crate) const WINDOW: Duration = Duration::from_secs(5 * 60);

/// (destination, kind) -> failures.
pub(crate) type FailureCounts = BTreeMap<(String, String), f64>;

/// Samples of the failure counter.
#[derive(Default)]
pub(crate) struct FailureHistory {
    samples: Mutex<VecDeque<(Instant, FailureCounts)>>,
}

/// Failures of one (destination, kind).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FailureRow {
    pub(crate) destination: String,
    pub(crate) kind: String,
    /// In the window (or since the console's first sample when that is younger).
    pub(crate) recent: f64,
    /// Since the process started.
    pub(crate) total: f64,
}

impl FailureHistory {
    /// Records `text`'s counters and returns, per (destination, kind), the failures since the
    /// oldest sample in the window, and how long that covers.
    pub(crate) fn observe(&self, text: &str) -> (Vec<FailureRow>, Duration) {
        let now = Instant::now();
        let current = failure_counts(text);
        let Ok(mut samples) = self.samples.lock() else {
            return (Vec::new(), Duration::ZERO);
        };
        while samples
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > WINDOW)
        {
            samples.pop_front();
        }
        // Before the console's first sample: a process younger than the window had no failure
        // before it started, so all of them are recent; an older one's are unknown (shown as 0).
        let uptime = series(text, UPTIME)
            .first()
            .map(|(_, seconds)| Duration::from_secs_f64(seconds.max(0.0)))
            .filter(|uptime| *uptime <= WINDOW);
        let (since, base) = match samples.front() {
            Some((at, counts)) => (now.duration_since(*at), Some(counts.clone())),
            None => match uptime {
                Some(uptime) => (uptime, Some(FailureCounts::new())),
                None => (Duration::ZERO, None),
            },
        };
        // One sample every few seconds is plenty for a five-minute window.
        if samples
            .back()
            .is_none_or(|(at, _)| now.duration_since(*at) >= Duration::from_secs(2))
        {
            samples.push_back((now, current.clone()));
        }
        let rows = current
            .into_iter()
            .map(|((destination, kind), total)| {
                let before = match &base {
                    None => total,
                    Some(base) => base
                        .get(&(destination.clone(), kind.clone()))
                        .copied()
                        .unwrap_or(0.0),
                };
                FailureRow {
                    destination,
                    kind,
                    recent: (total - before).max(0.0),
                    total,
                }
            })
            .collect();
        (rows, since)
    }
}

/// The series of `name` in Prometheus text: (labels, value).
pub(crate) fn series(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = if let Some(inner) = rest.strip_prefix('{') {
                let end = inner.rfind('}')?;
                (labels(&inner[..end]), inner[end + 1..].trim())
            } else if rest.starts_with(' ') {
                (BTreeMap::new(), rest.trim())
            } else {
                return None;
            };
            let value = value.split_whitespace().next()?.parse::<f64>().ok()?;
            Some((labels, value))
        })
        .collect()
}

fn failure_counts(text: &str) -> FailureCounts {
    let mut counts = FailureCounts::new();
    for (labels, value) in series(text, FAILURES) {
        let destination = labels.get("destination").cloned().unwrap_or_default();
        let kind = labels.get("kind").cloned().unwrap_or_default();
        *counts.entry((destination, kind)).or_default() += value;
    }
    counts
}

/// `a="x",b="y\"z"` as a map.
fn labels(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars
            .by_ref()
            .skip_while(|c| *c == ',' || c.is_whitespace())
            .take_while(|c| *c != '=')
            .collect();
        if name.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                other => value.push(other),
            }
        }
        map.insert(name.trim().to_owned(), value);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE queuebox_outbox_publish_failures_total counter\n\
        queuebox_outbox_publish_failures_total{destination=\"billing\",destination_type=\"http\",kind=\"http_5xx\"} 3\n\
        queuebox_outbox_publish_failures_total{destination=\"a\\\"b\",destination_type=\"http\",kind=\"timeout\"} 1\n\
        queuebox_capture_status 1\n\
        queuebox_uptime_seconds 12\n";

    #[test]
    fn the_failure_series_are_read_with_their_labels() {
        let counts = failure_counts(TEXT);
        assert_eq!(
            counts.get(&("billing".into(), "http_5xx".into())),
            Some(&3.0)
        );
        assert_eq!(counts.get(&("a\"b".into(), "timeout".into())), Some(&1.0));
        assert_eq!(series(TEXT, "queuebox_capture_status")[0].1, 1.0);
    }

    #[test]
    fn the_first_look_counts_everything_then_only_the_growth() {
        // A process older than the window: the failures before the first look are not recent.
        let old = FailureHistory::default();
        let (rows, _) = old.observe(&TEXT.replace("uptime_seconds 12", "uptime_seconds 9000"));
        assert_eq!(rows.iter().map(|r| r.recent).sum::<f64>(), 0.0);
        let history = FailureHistory::default();
        let (rows, _) = history.observe(TEXT);
        assert_eq!(rows.iter().map(|r| r.recent).sum::<f64>(), 4.0);
        let (rows, _) = history.observe(&TEXT.replace("} 3", "} 5"));
        let billing = rows
            .iter()
            .find(|r| r.destination == "billing")
            .expect("row");
        assert_eq!((billing.recent, billing.total), (2.0, 5.0));
    }
}

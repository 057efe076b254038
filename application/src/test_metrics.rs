//! Reading back the metrics a unit test recorded with a local debugging recorder.

use metrics_util::debugging::{DebugValue, Snapshotter};

/// One metric sample: name, labels, value (a summary's value is its number of observations).
pub(crate) type Sample = (String, Vec<(String, String)>, f64);

/// Every sample recorded so far. A debugging snapshot resets what it reads, so take one per check.
pub(crate) fn samples(snapshotter: &Snapshotter) -> Vec<Sample> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let value = match value {
                DebugValue::Counter(count) => count as f64,
                DebugValue::Gauge(gauge) => gauge.into_inner(),
                DebugValue::Histogram(values) => values.len() as f64,
            };
            (key.key().name().to_owned(), labels, value)
        })
        .collect()
}

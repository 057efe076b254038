//! Worker settings and their checks.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{DefaultRetryPolicy, Error, RetryPolicy, Schema};

/// The settings of an [`crate::InboxWorker`]. Start from [`Options::new`] and change fields.
#[derive(Clone)]
pub struct Options {
    /// The `consumption: pull` source whose rows this worker takes.
    pub source: String,
    /// The most rows one claim takes (default 10). Rows beyond the free handler slots wait in
    /// the worker under their renewed lease, so one claim serves up to this many handler runs.
    pub batch_size: u32,
    /// How long a claim is valid without renewal (default 30 s). Renewed every third of it.
    pub lease: Duration,
    /// The most handlers running at once (default 1).
    pub max_concurrency: usize,
    /// The wait after a claim that found nothing, or failed (default 1 s).
    pub poll_interval: Duration,
    /// How long a stop waits for running handlers before cancelling them (default 30 s).
    pub shutdown_grace: Duration,
    /// What a failed handler's row becomes (default [`DefaultRetryPolicy`]).
    pub retry: Arc<dyn RetryPolicy>,
    /// Table and column names (default: the names of the bundled migrations).
    pub schema: Schema,
}

impl Options {
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            batch_size: 10,
            lease: Duration::from_secs(30),
            max_concurrency: 1,
            poll_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(30),
            retry: Arc::new(DefaultRetryPolicy::default()),
            schema: Schema::default(),
        }
    }

    /// The lease in whole milliseconds, as the statements bind it.
    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let fail = |why: &str| Err(Error::Config(why.to_owned()));
        if self.source.trim().is_empty() {
            return fail("source is required");
        }
        if self.source.len() > 255 {
            return fail("source is longer than the 255 characters of the source column");
        }
        if !(1..=1000).contains(&self.batch_size) {
            return fail("batch_size must be between 1 and 1000");
        }
        // Below this, a renewal every third of the lease races its own round trip.
        if self.lease < Duration::from_millis(100) {
            return fail("lease must be at least 100 ms");
        }
        if self.lease > Duration::from_secs(24 * 3600) {
            return fail("lease must be at most 24 hours");
        }
        if self.max_concurrency == 0 {
            return fail("max_concurrency must be at least 1");
        }
        if self.poll_interval.is_zero() {
            return fail("poll_interval must be above zero");
        }
        Ok(())
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("source", &self.source)
            .field("batch_size", &self.batch_size)
            .field("lease", &self.lease)
            .field("max_concurrency", &self.max_concurrency)
            .field("poll_interval", &self.poll_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_settings_that_cannot_work() {
        assert!(Options::new("orders").validate().is_ok());
        let mut o = Options::new(" ");
        assert!(o.validate().is_err());
        o = Options::new("orders");
        o.lease = Duration::from_millis(10);
        assert!(o.validate().is_err());
        o = Options::new("orders");
        o.max_concurrency = 0;
        assert!(o.validate().is_err());
        o = Options::new("orders");
        o.batch_size = 0;
        assert!(o.validate().is_err());
    }
}

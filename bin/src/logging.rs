//! Log output: human text by default, JSON lines when asked. Secrets never reach a log line because
//! every credential is a `Secret`, whose formatting prints a mask.

use crate::cli::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Logs go to stderr so `check-config` output stays clean on stdout.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second install (only possible in tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

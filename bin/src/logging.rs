//! Log output: human text by default, JSON lines when asked. Secrets never reach a log line because
//! every credential is a `Secret`, whose formatting prints a mask.

use crate::cli::LogFormat;
use std::ffi::OsString;
use std::io::IsTerminal as _;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Logs go to stderr so `check-config` output stays clean on stdout.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .with_target(false);
    // A second install (only possible in tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Colour only on a terminal, and never when `NO_COLOR` is set to a non-empty value
/// (no-color.org): a file, a pipe, a container's log or a service manager gets plain text.
fn colour(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}

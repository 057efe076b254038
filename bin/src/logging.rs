//! Log output: human text by default, JSON lines when asked. Secrets never reach a log line because
//! every credential is a `Secret`, whose formatting prints a mask.
//!
//! With trace export on (`telemetry.tracing.enabled`), the message path's spans (target
//! `queuebox::trace`) go to the OpenTelemetry layer only, and a log line written inside one of them
//! ends with its `trace_id` and `span_id` (two more fields in JSON). With export off no layer wants
//! those spans, so they cost nothing.

use crate::cli::LogFormat;
use crate::tracing_export::Tracing;
use queuebox_application::trace::{TARGET, current_ids};
use std::ffi::OsString;
use std::fmt;
use std::io::IsTerminal as _;
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{FilterExt as _, filter_fn};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Installs the global subscriber. Logs go to stderr so `check-config` output stays clean on stdout.
/// `tracer` is the trace export's, when it is on.
pub fn init(format: LogFormat, tracing: Option<Tracing>) {
    let with_ids = tracing.is_some();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        .and(filter_fn(|meta| meta.target() != TARGET));
    let ansi = colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    let fmt_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false);
    let fmt_layer = match format {
        LogFormat::Text => fmt_layer
            .event_format(WithTraceIds {
                inner: tracing_subscriber::fmt::format()
                    .with_ansi(ansi)
                    .with_target(false),
                json: false,
                on: with_ids,
            })
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => fmt_layer
            .json()
            .flatten_event(true)
            .map_event_format(|inner| WithTraceIds {
                inner,
                json: true,
                on: with_ids,
            })
            .with_filter(filter)
            .boxed(),
    };
    let (otel_layer, head_layer) = match tracing {
        Some(Tracing { tracer, head }) => {
            let otel = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_level(false)
                .with_target(false)
                // Nothing here reads OpenTelemetry's current context (the headers are written
                // from the span itself), so entering a span need not start and attach one: a
                // publish is entered at every poll.
                .with_context_activation(false)
                .with_filter(filter_fn(|meta| meta.target() == TARGET));
            // The head sampler only travels with the subscriber; its filter lets nothing in, so
            // it never makes a call site enabled.
            let head = head.with_filter(filter_fn(|_| false));
            (Some(otel), Some(head))
        }
        None => (None, None),
    };
    // A second install (only possible in tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(otel_layer)
        .with(head_layer)
        .with(fmt_layer)
        .try_init();
}

/// An event format that ends the line with the active span's `trace_id` and `span_id`.
struct WithTraceIds<F> {
    inner: F,
    json: bool,
    /// Export is on (otherwise there are never ids to add, and nothing is looked up).
    on: bool,
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ids = if self.on { current_ids() } else { None };
        let Some((trace_id, span_id)) = ids else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let body = line.strip_suffix('\n').unwrap_or(&line);
        if self.json
            && let Some(open) = body.strip_suffix('}')
        {
            writeln!(
                writer,
                "{open},\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}"
            )
        } else {
            writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
        }
    }
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
